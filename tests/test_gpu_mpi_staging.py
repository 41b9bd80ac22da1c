"""MPI staging of GPU memory through the adapters: a CuPy-only program moves CuPy
fragments through an MPI that is not CUDA-aware without importing torch."""

from __future__ import annotations

import pytest

from _multiproc import check, have_mpi, launch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

_GPU_ENV = {"JAX_PLATFORMS": None, "DLMG_TEST_DEVICE": "cuda:0", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


@pytest.mark.parametrize("nprocs", [1, 2])
def test_cupy_memory_through_mpi_never_needs_torch(nprocs):
    if not have_mpi():
        pytest.skip("needs mpi4py and an MPI (pip install mpi4py mpich)")
    pytest.importorskip("cupy")
    result = launch("mpi", nprocs, ["mpi_cupy_only"], extra_env=_GPU_ENV)
    for transport in check(result, "mpi_cupy_only"):
        assert transport in ("mpi", "mpi, staged through host memory")
