"""Sharded JAX arrays on CUDA GPUs to torch and CuPy fragments, without copies.

Marked ``gpu``: skipped (with the reason) where there is no CUDA GPU. On a
single-GPU machine the sharded arrays are a one-device mesh and a replicated
one-device sharding; with several GPUs the array is also split over all of them.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

jax = pytest.importorskip("jax")
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import dlmg  # noqa: E402


def _gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


def _cuda(device):
    hw = getattr(device, "local_hardware_id", None)
    return dlmg.Device("cuda", int(device.id if hw is None else hw))


def _pointers(x):
    return {_cuda(s.device): s.data.unsafe_buffer_pointer() for s in x.addressable_shards}


def _torch_ptr(t):
    return t.data_ptr()


def _cupy_ptr(a):
    return a.data.ptr


SPECS = {"mesh-of-one": P("x"), "replicated-one": P()}


@pytest.fixture
def gpu():
    gpus = _gpus()
    if not gpus:
        pytest.skip("JAX has no GPU backend here")
    return gpus[0]


@pytest.mark.parametrize("spec", list(SPECS.values()), ids=list(SPECS))
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_single_gpu_sharded_array_to_framework(gpu, spec, framework):
    pytest.importorskip(framework)
    mesh = jax.sharding.Mesh(np.array([gpu]), ("x",))
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = jax.device_put(host, NamedSharding(mesh, spec))
    before = _pointers(x)
    dt = dlmg.from_jax(x)
    assert dt.layout == dlmg.Layout.single((8, 8), _cuda(gpu))
    out = dt.to(framework)
    ptr = _torch_ptr if framework == "torch" else _cupy_ptr
    assert {out.layout.devices[f.index]: ptr(f.array) for f in out.fragments} == before
    y = out.to_jax(mesh=mesh)
    assert _pointers(y) == before
    np.testing.assert_array_equal(np.asarray(y), host)


@pytest.mark.parametrize("dtype", ["bfloat16", "bool", "complex64"])
def test_single_gpu_dtypes_to_torch(gpu, dtype):
    pytest.importorskip("torch")
    import jax.numpy as jnp

    mesh = jax.sharding.Mesh(np.array([gpu]), ("x",))
    x = jax.device_put(jnp.ones((4, 4), dtype=dtype), NamedSharding(mesh, P("x")))
    tt = dlmg.from_jax(x).to("torch")
    assert tt.fragments[0].array.data_ptr() == x.addressable_shards[0].data.unsafe_buffer_pointer()


def test_all_gpus_sharded_to_torch():
    torch = pytest.importorskip("torch")
    gpus = _gpus()
    if len(gpus) < 2:
        pytest.skip("needs at least 2 GPUs")
    n = len(gpus)
    mesh = jax.sharding.Mesh(np.array(gpus), ("x",))
    host = np.arange(n * 4 * 3, dtype=np.float32).reshape(n * 4, 3)
    x = jax.device_put(host, NamedSharding(mesh, P("x")))
    before = _pointers(x)
    tt = dlmg.from_jax(x).to("torch")
    got = {tt.layout.devices[f.index]: f.array.data_ptr() for f in tt.fragments}
    assert got == before
    assert all(f.array.device == torch.device("cuda", tt.layout.devices[f.index].index) for f in tt.fragments)
    y = tt.to_jax(mesh=mesh)
    assert _pointers(y) == before
    np.testing.assert_array_equal(np.asarray(y), host)
