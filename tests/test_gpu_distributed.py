"""The collectives on CUDA fragments of torch, CuPy and JAX with one process:
NCCL through torch.distributed (world size 1), and MPI staging CUDA memory
through host memory (an MPI that is not CUDA-aware). Several GPUs follow the
same scenarios with more processes."""

from __future__ import annotations

import pytest

from _multiproc import check, have_mpi, launch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

_GPU_ENV = {"JAX_PLATFORMS": None, "DLMG_TEST_DEVICE": "cuda:0", "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def test_nccl_world_size_one():
    pytest.importorskip("torch")
    pytest.importorskip("cupy")
    pytest.importorskip("jax")
    result = launch("torch", 1, ["engine", "device_collectives"], extra_env=_GPU_ENV)
    (value,) = check(result, "device_collectives")
    assert value["transport"] == "nccl" and value["layouts"] == 4
    check(result, "engine")


def test_mpi_on_cuda_fragments():
    if not have_mpi():
        pytest.skip("needs mpi4py and an MPI (pip install mpi4py mpich)")
    pytest.importorskip("cupy")
    result = launch("mpi", 1, ["device_collectives"], extra_env=_GPU_ENV)
    (value,) = check(result, "device_collectives")
    assert value["transport"] in ("mpi", "mpi, staged through host memory")
