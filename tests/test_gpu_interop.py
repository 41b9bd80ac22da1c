"""The DTensor and ``__partitioned__`` bridges on CUDA GPUs, without copies.

Marked ``gpu``: skipped (with the reason) where there is no CUDA GPU. DTensors
run in one process on a world-size-1 NCCL group (gloo where NCCL is missing).
"""

from __future__ import annotations

import socket

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import dlmg  # noqa: E402
from dlmg import Layout  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def mesh():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from torch.distributed.device_mesh import init_device_mesh

    owned = not dist.is_initialized()
    if owned:
        backend = "nccl" if dist.is_nccl_available() else "gloo"
        torch.cuda.set_device(0)
        dist.init_process_group(backend, rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{_free_port()}")
    try:
        yield init_device_mesh("cuda", (1,))
    finally:
        if owned:
            dist.destroy_process_group()


def test_cuda_dtensor_round_trip(mesh):
    from torch.distributed.tensor import Shard, distribute_tensor

    full = torch.arange(48, dtype=torch.float32, device="cuda").reshape(8, 6)
    x = distribute_tensor(full, mesh, [Shard(1)])
    t = dlmg.from_dtensor(x)
    assert str(t.devices[0]) == "cuda:0"
    assert t.fragments[0].array.data_ptr() == x.to_local().data_ptr()
    back = t.to_dtensor()
    assert back.to_local().data_ptr() == x.to_local().data_ptr()
    assert back.device_mesh.device_type == "cuda"
    torch.testing.assert_close(back.full_tensor(), full)


def test_cupy_and_jax_fragments_become_dtensors(mesh):
    cupy = pytest.importorskip("cupy")
    lay = Layout.single((4, 5), "cuda:0")
    t = dlmg.scatter(np.arange(20.0, dtype=np.float32).reshape(4, 5), lay, framework="cupy")
    dt = t.to_dtensor()
    assert dt.to_local().data_ptr() == t.fragments[0].array.data.ptr
    torch.testing.assert_close(dt.full_tensor().cpu(), torch.arange(20.0).reshape(4, 5))
    assert cupy is not None


def test_partitioned_on_gpus():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    n = torch.cuda.device_count()
    lay = Layout((8, 6), block=(2, 3), grid=(2, 2), devices=[f"cuda:{i % n}" for i in range(4)])
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    for framework in ("torch", "cupy", "jax"):
        if framework != "torch":
            pytest.importorskip(framework)
        t = dlmg.scatter(x, lay, framework=framework)
        d = t.__partitioned__
        part = d["partitions"][(1, 1)]
        assert part["location"] == [(0, (2, 3 % n))]  # fragment 3, (DLPack CUDA, ordinal)
        back = dlmg.from_partitioned(d)
        assert back.layout == lay
        assert [f.array is g.array for f, g in zip(back.fragments, t.fragments)] == [True] * 4
        np.testing.assert_array_equal(np.asarray(back.gather(framework="numpy")), x)
