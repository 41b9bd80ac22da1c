"""Pending tensors across 2 processes on both engines (torch.distributed gloo and MPI).

Each setup launches its processes once for the module and runs the scenarios of
:mod:`tests._mp_pending` in them: every process reads a pending sum's value
(``repr``, ``item``, copies, saving), basic indexing keeps it pending (each
addend indexed alike), a write into it is refused on every process, and ``@``
is the namespace's ``matmul``.
"""

from __future__ import annotations

import tempfile

import pytest

from _multiproc import check, launched_per_setup

SCENARIOS = ["pending_reads", "pending_products", "pending_save", "pending_views", "pending_all_reduce"]
SETUPS = [("torch", 2), ("mpi", 2)]

pytestmark = pytest.mark.slow

def _scenarios(engine: str) -> list[str]:
    return SCENARIOS + (["pending_dcp"] if engine == "torch" else [])  # DCP needs a torch.distributed group


run = launched_per_setup(SETUPS, _scenarios, timeout=300,
                         extra_env={"DLMG_TEST_PENDING_DIR": tempfile.mkdtemp(prefix="dlmg-pending-")})


@pytest.mark.parametrize("scenario", SCENARIOS + ["pending_dcp"])
def test_scenario(run, scenario):
    if scenario == "pending_dcp" and scenario not in (run["ranks"][0] or {scenario: None}):
        pytest.skip("DCP needs a torch.distributed group: the torch engine only")
    values = check(run, scenario)
    assert len(values) == len(run["ranks"])
    assert all(v == values[0] for v in values)
