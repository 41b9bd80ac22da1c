"""Contractions across 2 and 4 processes on both engines (torch.distributed gloo and MPI).

Each setup launches its processes once for the module and runs the scenarios of
:mod:`tests._mp_contract` in them; the tests read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, launched_per_setup

SCENARIOS = ["contract_property", "contract_pending", "contract_pending_extrema", "contract_moves", "contract_summa",
             "contract_mismatch"]
SETUPS = [("torch", 2), ("torch", 4), ("mpi", 2), ("mpi", 4)]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, SCENARIOS, timeout=400)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(run, scenario):
    values = check(run, scenario)
    assert len(values) == len(run["ranks"])
    assert all(v == values[0] for v in values)
