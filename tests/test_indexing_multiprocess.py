"""Owner-routed indexing across 2 and 4 processes on the torch (gloo) and MPI engines, with a
per-process memory bound measured by ``tracemalloc`` on NumPy fragments."""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

pytestmark = pytest.mark.slow

SETUPS = [("torch", 2), ("mpi", 2), ("torch", 4), ("mpi", 4)]

run = launched_per_setup(SETUPS, with_memory(["indexing_routed"], ["indexing_memory"]))


def test_routed_indexing_values(run):
    assert check(run, "indexing_routed") == [True] * len(run["ranks"])


def test_routed_take_memory_bound(run):
    for figures in check_memory(run, "indexing_memory"):
        for name, (peak, bound) in figures.items():
            assert peak <= bound, (name, peak, bound)
