"""``eigh``/``eigvalsh`` by one-sided block Jacobi and ``qr(mode="complete")`` from TSQR across
2 and 4 processes on both engines (torch.distributed gloo and MPI), against NumPy, and each
process's memory bound during ``eigh`` (under MPI).

Each setup launches its processes once for the module and runs the scenarios of
:mod:`tests._mp_linalg` in them; the tests read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

VALUES = ["linalg_eigh"]
MEMORY = ["linalg_eigh_memory"]
SETUPS = [("torch", 2), ("mpi", 2), ("torch", 4), ("mpi", 4)]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, with_memory(VALUES, MEMORY), timeout=600)


@pytest.mark.parametrize("scenario", VALUES + MEMORY)
def test_scenario(run, scenario):
    values = check_memory(run, scenario) if scenario in MEMORY else check(run, scenario)
    assert len(values) == len(run["ranks"])
    assert all(v == values[0] for v in values)
