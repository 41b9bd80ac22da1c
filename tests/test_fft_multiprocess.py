"""FFTs across 2 processes on both engines (torch.distributed on gloo, MPI): transforms
over split modes against numpy.fft, and each process's memory within the bound."""

from __future__ import annotations

import pytest

from _multiproc import check, check_memory, launched_per_setup, with_memory

SETUPS = [("torch", 2), ("mpi", 2)]

pytestmark = pytest.mark.slow

run = launched_per_setup(SETUPS, with_memory(["fft_processes"], ["fft_memory"]), timeout=400)


def test_transforms_across_processes(run):
    values = check(run, "fft_processes")
    assert len(values) == 2 and values[0] == values[1] > 0


def test_memory_within_the_bound(run):
    values = check_memory(run, "fft_memory")  # per case: peak / (share + result), peak / bound
    assert len(values) == 2 and all(of_bound <= 1 for v in values for _, of_bound in v.values())
