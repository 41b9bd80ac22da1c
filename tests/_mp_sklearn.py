"""Multi-process scenarios of scikit-learn on dlmg tensors (run by :mod:`tests._mp_worker`).

Every process draws the same ``X`` (and ``y``, class labels) from a fixed seed, holds only
its own row slab of it (NumPy fragments, which ``tracemalloc`` sees), and fits scikit-learn's
``PCA(svd_solver="full")``, ``Ridge(solver="svd")`` and ``LinearDiscriminantAnalysis`` with
``array_api_dispatch=True``; each fit equals scikit-learn's on the whole NumPy ``X``, and each
process's new memory during the fit stays within 1.5 x (its shares of ``X``, ``y`` and the
fitted attributes) plus one block. The launch sets ``SCIPY_ARRAY_API=1`` (scikit-learn's array
API mode needs SciPy's, set before SciPy is imported).
"""

from __future__ import annotations


import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from tests._memory import measured

#: Rows per process and columns of ``X``: a gather of ``X`` (``ROWS x world x COLS`` float64)
#: is well over the memory bound, so a fit that gathers fails the memory scenario.
ROWS, COLS = 20000, 8


def _data(world):
    rng = np.random.default_rng(0)
    m = ROWS * world
    X = rng.standard_normal((m, COLS)) * np.arange(1, COLS + 1)
    y = X @ rng.standard_normal(COLS) + 0.1 * rng.standard_normal(m)
    labels = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.5)
    return X, y, labels


def _mine(a):
    """This process's row slab of ``a`` (a copy, so that it owns its memory) as a tensor."""
    world, me = dd.world_size(), dd.rank()
    lay = Layout.slab(a.shape, 0, ["cpu"] * world, ranks=list(range(world)))
    rows = lay.owned_indices(me, 0)
    return dlmg.from_fragments({me: np.ascontiguousarray(a[rows])}, lay)


def _local_nbytes(t):
    return sum(f.array.nbytes for f in t.fragments if f.is_local)


def _values(t):
    return np.asarray(t.gather(framework="numpy") if isinstance(t, dlmg.DistributedTensor) else t)


def _fits():
    import sklearn
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge

    world = dd.world_size()
    X, y, labels = _data(world)
    with sklearn.config_context(array_api_dispatch=False):
        want = {
            "pca": PCA(n_components=3, svd_solver="full").fit(X),
            "ridge": Ridge(alpha=1.0, solver="svd").fit(X, y),
            "lda": LinearDiscriminantAnalysis().fit(X, labels),
        }
    dx, dy, dl = _mine(X), _mine(y), _mine(labels)
    del X, y, labels
    fits = {
        "pca": (lambda: PCA(n_components=3, svd_solver="full").fit(dx), _local_nbytes(dx)),
        "ridge": (lambda: Ridge(alpha=1.0, solver="svd").fit(dx, dy), _local_nbytes(dx) + _local_nbytes(dy)),
        "lda": (lambda: LinearDiscriminantAnalysis().fit(dx, dl), _local_nbytes(dx) + _local_nbytes(dl)),
    }
    return sklearn, want, fits, _local_nbytes(dx)


def _compare(name, got, want):
    if name == "pca":
        np.testing.assert_allclose(np.abs(_values(got.components_)), np.abs(want.components_), atol=1e-10)
        np.testing.assert_allclose(_values(got.explained_variance_), want.explained_variance_, rtol=1e-10)
        np.testing.assert_allclose(_values(got.mean_), want.mean_, atol=1e-12)
    elif name == "ridge":
        np.testing.assert_allclose(_values(got.coef_), want.coef_, atol=1e-10)
        np.testing.assert_allclose(float(_values(got.intercept_)), want.intercept_, atol=1e-10)
    else:
        np.testing.assert_allclose(_values(got.coef_), want.coef_, atol=1e-9)
        np.testing.assert_allclose(_values(got.intercept_), want.intercept_, atol=1e-9)
        np.testing.assert_allclose(_values(got.means_), want.means_, atol=1e-12)


def _fitted_nbytes(model):
    """This process's share of the fitted array attributes (all of the ones held whole)."""
    total = 0
    for value in vars(model).values():
        if isinstance(value, dlmg.DistributedTensor):
            total += _local_nbytes(value)
        elif isinstance(value, np.ndarray):
            total += value.nbytes
    return total


def sklearn_fits():
    """PCA, Ridge and LDA fitted on a row-split ``X`` equal scikit-learn's on the whole ``X``."""
    sklearn, want, fits, _ = _fits()
    with sklearn.config_context(array_api_dispatch=True):
        for name, (fit, _) in fits.items():
            _compare(name, fit(), want[name])
    return sorted(fits)


def _numpymeasured(sklearn, fit_on, X, y):
    """The peak of new memory of scikit-learn's own fit (``array_api_dispatch=True``, NumPy) on
    this process's rows alone: what scikit-learn itself allocates for that many rows."""
    with sklearn.config_context(array_api_dispatch=True):
        fit_on(X, y)
        return measured(lambda: fit_on(X, y))[1]


def sklearn_memory():
    """Each process's new memory during each fit stays within 1.5 x (its shares of ``X``, ``y``
    and the fitted attributes) plus one block (the slab's block: the process's rows of ``X``).
    The fitted attributes (``components_``, ``coef_``, ``means_``...) are held whole: their size
    does not grow with the number of rows.

    LinearDiscriminantAnalysis's SVD solver holds three copies of ``X``'s rows of its own at once
    (``Xc``, the concatenation of the per-class centred rows; ``Xc / std``; and
    ``sqrt(fac) * (Xc / std)``, the operand of its SVD), over that bound with NumPy arrays too:
    its fit is held to scikit-learn's own peak on the process's rows in NumPy plus one block,
    and whether it meets the bound is reported (``lda_within_bound``) for the test to pin."""
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    sklearn, want, fits, block = _fits()
    world, me = dd.world_size(), dd.rank()
    X, _, labels = _data(world)
    rows = slice(me * ROWS, (me + 1) * ROWS)
    X, labels = np.ascontiguousarray(X[rows]), np.ascontiguousarray(labels[rows])
    lda_numpy = _numpymeasured(sklearn, lambda a, b: LinearDiscriminantAnalysis().fit(a, b), X, labels)
    del X, labels
    within = {}
    with sklearn.config_context(array_api_dispatch=True):
        for name, (fit, share) in fits.items():
            fit()  # a first fit fills the caches of plans and layouts, kept for the next calls
            model, peak = measured(fit)
            _compare(name, model, want[name])
            bound = 1.5 * (share + _fitted_nbytes(model)) + block
            within[name] = peak <= bound
            if name == "lda":
                assert peak <= lda_numpy + block, (
                    f"lda: peak {peak} bytes > scikit-learn's own peak on NumPy {lda_numpy} + one block {block}")
            else:
                assert peak <= bound, f"{name}: peak {peak} bytes > bound {bound} (share {share})"
    return {"lda_within_bound": within["lda"]}


SCENARIOS = {"sklearn_fits": sklearn_fits, "sklearn_memory": sklearn_memory}
