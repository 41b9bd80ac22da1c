"""Distributed linear algebra across 2 processes on both engines (torch.distributed gloo and
MPI): TSQR's factors, blocked Cholesky, norms and diagonals against NumPy, and each
process's memory bound.

Each setup launches its processes once for the module and runs the scenarios of
:mod:`tests._mp_linalg` in them; the tests read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

VALUES = ["linalg_tsqr", "linalg_grid", "linalg_cholesky", "linalg_full_svd_and_powers", "linalg_stacked"]
MEMORY = ["linalg_memory", "linalg_cholesky_memory", "linalg_full_svd_memory", "linalg_stacked_memory"]
SETUPS = [("torch", 2), ("mpi", 2)]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, with_memory(VALUES, MEMORY), timeout=400)


@pytest.mark.parametrize("scenario", VALUES + MEMORY)
def test_scenario(run, scenario):
    values = check_memory(run, scenario) if scenario in MEMORY else check(run, scenario)
    assert len(values) == len(run["ranks"])
    assert all(v == values[0] for v in values)
