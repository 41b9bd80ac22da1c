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
