"""scikit-learn with ``array_api_dispatch=True`` on an ``X`` split in rows over 4 processes, on
both engines (torch.distributed gloo and MPI): ``PCA(svd_solver="full")``, ``Ridge(solver="svd")``
and ``LinearDiscriminantAnalysis`` equal scikit-learn's fits on the whole NumPy ``X``, and each
process's new memory during a fit stays within the bound (:mod:`tests._mp_sklearn`).

Each setup launches its processes once for the module (with ``SCIPY_ARRAY_API=1``, which
scikit-learn's array API mode needs before SciPy is imported) and runs the scenarios in them.
"""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

SETUPS = [("torch", 4), ("mpi", 4)]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, with_memory(["sklearn_fits"], ["sklearn_memory"]), needs=("sklearn",),
                         timeout=400, extra_env={"SCIPY_ARRAY_API": "1"})


def test_fits_equal_numpys(run):
    values = check(run, "sklearn_fits")
    assert values == [["lda", "pca", "ridge"]] * 4


def test_memory_of_each_fit(run):
    check_memory(run, "sklearn_memory")


@pytest.mark.xfail(strict=True, reason=(
    "LinearDiscriminantAnalysis._solve_svd holds Xc = concat(X[y == g] - means_[g]), Xc / std and "
    "sqrt(fac) * (Xc / std) at once: three copies of the process's rows of X of scikit-learn's own, "
    "over 1.5 x (shares of X and y) + one block with NumPy arrays too"))
def test_lda_within_the_bound_of_its_operands(run):
    values = check_memory(run, "sklearn_memory")
    assert all(v["lda_within_bound"] for v in values)
