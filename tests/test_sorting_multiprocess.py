"""Scans, sorting, searching, unique values and ``nonzero`` across 2 and 4 processes on
both engines (torch.distributed gloo and MPI), with the per-process memory bound.

Each setup launches its processes once for the module and runs the scenarios of
:mod:`tests._mp_sorting` in them; the tests read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

SETUPS = [("torch", 2), ("torch", 4), ("mpi", 2), ("mpi", 4)]

pytestmark = pytest.mark.slow

run = launched_per_setup(SETUPS, with_memory(["sorting_across"], ["sorting_memory", "sorting_memory_cyclic",
                                                            "sorting_memory_many_blocks"]),
                         timeout=500)


def test_results_equal_numpy(run):
    values = check(run, "sorting_across")
    assert values == [values[0]] * len(values) and values[0] == 6


def test_memory_within_the_bound(run):
    peaks = check_memory(run, "sorting_memory")  # each process asserts its own peaks
    assert len(peaks) == len(run["ranks"])


def test_memory_of_cyclic_blocks(run):
    peaks = check_memory(run, "sorting_memory_cyclic")  # each process asserts every function's peak
    assert len(peaks) == len(run["ranks"])
    assert all(set(p) >= {"sort", "argsort", "unique_values", "nonzero", "searchsorted", "take", "diff"}
               for p in peaks)
    assert all(p["cumulative_sum"] < 2 and p["diff"] < 2 for p in peaks)  # each block where it lies


def test_memory_of_many_blocks_per_fragment(run):
    peaks = check_memory(run, "sorting_memory_many_blocks")  # each process asserts every function's peak
    assert len(peaks) == len(run["ranks"])
    assert all(p["cumulative_sum"] < 2 and p["cumulative_prod"] < 2 for p in peaks)  # each block where it lies
