"""Distributed tensors on CUDA: torch, CuPy and JAX fragments (several on one
GPU), zero-copy wrapping and export, gather into every framework, strided
destinations, redistribution on the GPU and between host and GPU.

Marked ``gpu``: skipped without a CUDA GPU; ``python3 -m pytest -m gpu`` runs
them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout

from _strategies import check_fragments, reference, to_numpy

pytestmark = pytest.mark.gpu

GPU = "cuda:0"
GPU_FRAMEWORKS = ("torch", "cupy", "jax")


def _need(name):
    mod = pytest.importorskip(name)
    if name == "torch" and not mod.cuda.is_available():
        pytest.skip("torch has no CUDA")
    if name == "jax":
        try:
            mod.devices("gpu")
        except RuntimeError:
            pytest.skip("JAX has no GPU")
    return mod


def _on_gpu(x: np.ndarray, framework: str):
    if framework == "torch":
        torch = _need("torch")
        return torch.from_numpy(np.require(x, requirements="C")).to("cuda:0")
    if framework == "cupy":
        return _need("cupy").asarray(x)
    if framework == "jax":
        jax = _need("jax")
        return jax.device_put(x, jax.devices("gpu")[0])
    raise ValueError(framework)


def _ptr(a) -> int:
    return dlmg.adapter_for(a).data_ptr(a)


LAYOUT = Layout((13, 10), block=(3, 4), grid=(2, 2), devices=[GPU] * 4)  # 4 fragments, one GPU


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_scatter_on_gpu_and_gather_everywhere(framework):
    _need(framework)
    x = reference(LAYOUT.shape, "float32")
    dt = dlmg.scatter(x, LAYOUT, framework=framework)  # host source, GPU fragments
    for f in dt.fragments:
        assert f.adapter.device_of(f.array) == dlmg.Device("cuda", 0)
    check_fragments(dt, x)
    for out in GPU_FRAMEWORKS:
        _need(out)
        got = dt.gather(framework=out)
        assert dlmg.adapter_for(got).device_of(got) == dlmg.Device("cuda", 0)
        np.testing.assert_array_equal(to_numpy(got), x)
    np.testing.assert_array_equal(dt.gather(framework="numpy", device="cpu"), x)


@pytest.mark.parametrize("src", GPU_FRAMEWORKS)
@pytest.mark.parametrize("dst", GPU_FRAMEWORKS)
def test_gpu_framework_pairs(src, dst):
    _need(src), _need(dst)
    x = reference(LAYOUT.shape, "float32", seed=2)
    dt = dlmg.scatter(_on_gpu(x, src), LAYOUT, framework=dst)
    check_fragments(dt, x)
    np.testing.assert_array_equal(to_numpy(dt.gather()), x)


@pytest.mark.parametrize("dtype", ["bool", "bfloat16", "complex64", "int32"])
def test_gpu_dtypes(dtype):
    torch = _need("torch")
    x = reference(LAYOUT.shape, dtype)
    t = torch.from_numpy(np.require(x, requirements="C")).to("cuda:0")
    if dtype == "bfloat16":
        t = t.to(torch.bfloat16)
    dt = dlmg.scatter(t, LAYOUT)
    check_fragments(dt, x)
    for out in GPU_FRAMEWORKS:
        _need(out)
        np.testing.assert_array_equal(to_numpy(dt.gather(framework=out)), x)


def test_wrap_and_export_zero_copy_whatever_device_is_current():
    torch, cupy, jax = _need("torch"), _need("cupy"), _need("jax")
    import jax.numpy as jnp

    layout = Layout.slab((6, 64), 0, [GPU] * 3)
    x = reference(layout.shape, "float32")
    arrays = [
        torch.from_numpy(x[0:2].copy()).to("cuda:0"),
        cupy.asarray(x[2:4]),
        jax.device_put(x[4:6], jax.devices("gpu")[0]),
    ]
    dt = dlmg.from_fragments(arrays, layout)
    assert dt.frameworks == ("torch", "cupy", "jax")
    assert all(f.array is a for f, a in zip(dt.fragments, arrays))
    for frag in dt.fragments:
        ptr = _ptr(frag.array)
        assert frag.__dlpack_device__() == (2, 0)
        with torch.cuda.device(0), cupy.cuda.Device(0):
            assert torch.from_dlpack(frag).data_ptr() == ptr
            assert cupy.from_dlpack(frag).data.ptr == ptr
            assert jnp.from_dlpack(frag).unsafe_buffer_pointer() == ptr
    np.testing.assert_array_equal(to_numpy(dt.gather(framework="cupy")), x)


@pytest.mark.parametrize("src,dst", [("torch", "cupy"), ("cupy", "torch"), ("torch", "jax"), ("cupy", "jax"),
                                     ("jax", "torch")])
def test_to_on_gpu_is_zero_copy(src, dst):
    _need(src), _need(dst)
    layout = Layout.slab((8, 64), 0, [GPU] * 2)
    dt = dlmg.full(layout=layout, fill_value=3.0, dtype="float32", framework=src)
    moved = dt.to(dst, copy=False)
    for a, b in zip(dt.fragments, moved.fragments):
        assert _ptr(a.array) == _ptr(b.array)
    np.testing.assert_array_equal(to_numpy(moved.gather()), np.full((8, 64), 3.0, np.float32))


def test_gather_into_strided_gpu_destinations():
    torch, cupy = _need("torch"), _need("cupy")
    x = reference(LAYOUT.shape, "float32", seed=4)
    dt = dlmg.scatter(_on_gpu(x, "cupy"), LAYOUT)
    out = torch.empty(10, 13, device="cuda:0").T
    dt.gather(out=out)
    np.testing.assert_array_equal(out.cpu().numpy(), x)
    cout = cupy.zeros((26, 10), cupy.float32)[::2]
    dt.gather(out=cout)
    np.testing.assert_array_equal(cout.get(), x)
    host = np.empty((10, 13), np.float32).T  # GPU fragments into a host destination
    dt.gather(out=host)
    np.testing.assert_array_equal(host, x)


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_redistribution_on_gpu_and_between_host_and_gpu(framework):
    _need(framework)
    x = reference((12, 9), "float32", seed=6)
    host = Layout((12, 9), block=(2, 3), grid=(3, 2), devices=["cpu"] * 6)
    cyclic = Layout((12, 9), block=(1, 2), grid=(4, 1), devices=[GPU] * 4)
    slabs = Layout.slab((12, 9), 1, [GPU] * 3)
    dt = dlmg.scatter(x, host)
    on_gpu = dt.redistribute(cyclic, framework=framework)
    assert on_gpu.frameworks == (framework,)
    check_fragments(on_gpu, x)
    plan = on_gpu.plan_redistribution(slabs)
    assert plan.total_bytes == x.nbytes and plan.cross_device_bytes == 0
    moved = on_gpu.redistribute(slabs)
    check_fragments(moved, x)
    assert moved.redistribute(slabs).fragments[0].array is moved.fragments[0].array  # reused
    back = moved.redistribute(host, framework="numpy")
    check_fragments(back, x)


def test_from_pointers_on_gpu():
    cupy = _need("cupy")
    torch = _need("torch")
    import gc
    import weakref

    layout = Layout((10, 7), block=(3, 2), grid=(2, 2), devices=[GPU] * 4,
                    element_strides=(4, 1), block_strides=(16, 6))
    x = reference(layout.shape, "float32")
    host = dlmg.scatter(x, layout.replace(devices=["cpu"] * 4))  # padded host fragments
    mems = [cupy.asarray(f.memory) for f in host.fragments]

    class Owner:
        pass

    owner, released = Owner(), []
    owner.mems = mems
    weakref.finalize(owner, released.append, 1)
    for fw in ("cupy", "torch"):
        dt = dlmg.from_pointers(layout, [m.data.ptr for m in mems], "float32", owner=owner, framework=fw)
        assert all(f.is_padded for f in dt.fragments)
        np.testing.assert_array_equal(to_numpy(dt.gather()), x)
        check_fragments(dt, x)
        del dt
    del owner, mems, host
    gc.collect()
    torch.cuda.synchronize()
    assert released == [1]
