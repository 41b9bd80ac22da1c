"""Fault injection across processes, on both engines: for each collective (all-gather,
gather to a root, scatter, redistribution, every reduction), rank 1 fails before the
agreement, after it, or in the middle of the exchange; it arrives late; it dies.
Every rank raises (rank 1 its own error, the others CollectiveError) within the
timeout, no rank returns a value, and after a failure of the local kind the next
collective is right on every rank.

One launch per engine and process count runs the three failing stages and, last,
the late arrival (which leaves the engine refusing collectives); a process dying
gets a launch of its own.
"""

from __future__ import annotations

import pytest

from _multiproc import check, launch, launched_per_setup, skip_without

SETUPS = [("torch", 2), ("torch", 3), ("mpi", 2), ("mpi", 3)]
STAGES = ["fault_before", "fault_after", "fault_mid"]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, [*STAGES, "fault_between", "fault_late"], timeout=180.0, collective_timeout=20.0)


@pytest.mark.parametrize("stage", STAGES)
def test_a_failing_rank_makes_every_rank_raise(run, stage):
    values = check(run, stage)
    for rank, outcomes in enumerate(values):
        assert len(outcomes) == 23
        for collective, outcome in outcomes.items():
            want = "Injected" if rank == 1 else "CollectiveError"
            assert outcome.startswith(want), (rank, collective, outcome)
            if rank != 1:
                assert outcome.startswith("CollectiveError naming rank 1"), (collective, outcome)


def test_a_failure_between_a_reductions_all_reduces_makes_every_rank_raise_at_once(run):
    values = check(run, "fault_between")
    for rank, outcomes in enumerate(values):
        assert len(outcomes) == 8
        for collective, (outcome, seconds) in outcomes.items():
            want = "Injected" if rank == 1 else "CollectiveError naming rank 1"
            assert outcome.startswith(want), (rank, collective, outcome)
            assert seconds < 10.0, (rank, collective, seconds)  # at once, not at the 20 s timeout


def test_a_late_rank_makes_every_rank_raise_then_refuse(run):
    for first, second in check(run, "fault_late"):
        assert first.startswith("CollectiveError")
        assert "cannot run collectives any more" in second


@pytest.mark.parametrize("engine", ["torch", "mpi"])
def test_a_rank_that_dies_ends_the_collective_everywhere(engine):
    skip_without(engine)
    result = launch(engine, 2, ["fault_dies"], timeout=90.0, collective_timeout=5.0)
    assert result["ranks"][1] is None  # it died before writing anything
    if engine == "torch":
        (value,) = check(result, "fault_dies", ranks=[0])
        assert value.startswith("CollectiveError")
    else:  # mpiexec ends the survivors itself; what matters is that nothing hangs or returns
        survivor = result["ranks"][0]
        assert survivor is None or survivor["fault_dies"]["value"].startswith("CollectiveError")
    assert None not in result["returncodes"]  # the launch ended before its own timeout


_SURVIVOR = """
import os, sys
import numpy as np
import dlmg, dlmg.distributed as dd
dd.init("mpi")
dd.current_engine().timeout = 2.0
full = np.arange(64.0).reshape(8, 8)
layout = dd.slab(full.shape, 0)
t = dlmg.from_fragments({dd.rank(): np.ascontiguousarray(full[layout.owned_indices(dd.rank(), 0)])}, layout)
if dd.rank() == 1:
    os._exit(3)
try:
    t.redistribute(dd.slab(full.shape, 1))
except dlmg.CollectiveError:
    print("raised", flush=True)
dd.finalize()
print("finalized", flush=True)
"""


def test_a_survivor_of_a_dead_peer_exits_instead_of_hanging_in_mpi_finalize(tmp_path):
    """MPICH's mpiexec without its clean-up leaves the survivor alone: after the failed
    collective, finalize returns and the process ends (through MPI_Abort) instead of
    waiting in MPI_Finalize for the dead peer."""
    import subprocess
    import sys

    from dlmg.testing import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip("needs an MPI (pip install mpich)")
    version = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    if "HYDRA" not in version:
        pytest.skip("needs MPICH's mpiexec (Hydra), whose -disable-auto-cleanup keeps a survivor running")
    script = tmp_path / "survivor.py"
    script.write_text(_SURVIVOR)
    done = subprocess.run([mpiexec, "-disable-auto-cleanup", "-n", "2", sys.executable, str(script)],
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["raised", "finalized"], (done.stdout, done.stderr)
    assert done.returncode != 0  # the job failed, and says so
