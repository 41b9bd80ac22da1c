"""The namespace's shape, joining and reordering functions across processes on both engines
(torch.distributed gloo and MPI): values against NumPy over random layouts on 2 and 4
processes, and on 2 and 4 processes each process's peak of new memory during each call (NumPy
fragments, seen by ``tracemalloc``) within 1.5 x (its share of the operands + its share of the
result) plus one block."""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory


pytestmark = pytest.mark.slow

run = launched_per_setup([("torch", 2), ("mpi", 2)], with_memory(["manipulation_values"], ["manipulation_memory"]),
                         timeout=400)
run4 = launched_per_setup([("torch", 4), ("mpi", 4)], with_memory(["manipulation_values"], ["manipulation_memory"]),
                          timeout=400)


def test_values_equal_numpy_and_stay_on_the_processes(run):
    values = check(run, "manipulation_values")
    assert len(values) == len(run["ranks"]) and all(v == values[0] and v > 0 for v in values)


def test_values_on_four_processes(run4):
    values = check(run4, "manipulation_values")
    assert len(values) == 4 and all(v == values[0] and v > 0 for v in values)


def test_peak_memory_within_the_bound(run):
    peaks = check_memory(run, "manipulation_memory")
    assert all(set(p) == set(peaks[0]) for p in peaks)


def test_peak_memory_within_the_bound_on_four_processes(run4):
    """The moving reshape and roll included: a redistribution's new memory is its new fragments,
    its send buffer and its receive buffer, each allocated once."""
    peaks = check_memory(run4, "manipulation_memory")
    assert all(set(p) == set(peaks[0]) for p in peaks)
