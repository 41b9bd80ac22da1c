"""Distributed tensors across 2 and 4 processes on each engine (torch.distributed on
gloo, MPI through mpi4py): every collective equals the single-process answer.

Each (engine, process count) pair launches its processes once for the module
and runs every scenario of :mod:`tests._mp_scenarios` in them; the tests below
read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launch, launched_per_setup, skip_without, with_memory

SCENARIOS = [
    "allgather", "gather_out", "root_gather", "scatter", "redistribute_pairs", "reductions", "nan_reductions",
    "pointwise", "mixed_frameworks", "device_collectives", "mismatch", "raising", "remote_fragment",
]
SETUPS = [("torch", 2), ("torch", 4), ("mpi", 2), ("mpi", 4)]

pytestmark = pytest.mark.slow


run = launched_per_setup(SETUPS, with_memory(SCENARIOS, ["redistribute_many_blocks"]), needs=("jax",))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(run, scenario):
    values = check(run, scenario)
    if scenario == "redistribute_pairs":
        assert all(v["pairs"] >= 50 for v in values)


def test_many_blocks_per_fragment_within_the_memory_bound(run):
    peaks = check_memory(run, "redistribute_many_blocks")  # each process asserts its own peaks
    assert all(len(p) == 3 for p in peaks)


@pytest.mark.parametrize("engine", ["torch", "mpi"])
def test_a_process_that_does_not_arrive_ends_the_collective(engine):
    """Rank 1 skips a gather: the others raise CollectiveError instead of waiting forever."""
    skip_without(engine, "jax")
    result = launch(engine, 2, ["timeout"], collective_timeout=3.0)
    values = check(result, "timeout")
    assert values[1] == "skipped"
    assert "rank 0" in values[0]


def test_a_process_that_dies_ends_the_collective():
    """Rank 1 exits in the middle of a redistribution: the others raise CollectiveError."""
    skip_without("torch", "jax")
    result = launch("torch", 2, ["dies"], collective_timeout=10.0)
    assert result["returncodes"][1] == 3 and result["ranks"][1] is None
    (value,) = check(result, "dies", ranks=[0])
    assert "rank 0" in value
