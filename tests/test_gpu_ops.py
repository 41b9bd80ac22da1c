"""dlmg.ops on a CUDA GPU: fragments of torch, CuPy and JAX on cuda:0, computed
in their own framework on the GPU, checked against NumPy on the gathered data.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout

pytestmark = pytest.mark.gpu

GPU_FRAMEWORKS = ("torch", "cupy", "jax")


def on_gpu(piece: np.ndarray, framework: str):
    """A copy of ``piece`` as an array of ``framework`` on cuda:0."""
    piece = np.ascontiguousarray(piece)
    if framework == "torch":
        import torch

        return torch.as_tensor(piece, device="cuda:0")
    if framework == "cupy":
        import cupy

        with cupy.cuda.Device(0):
            return cupy.asarray(piece)
    if framework == "jax":
        import jax

        return jax.device_put(piece, jax.devices("gpu")[0])
    raise ValueError(framework)


def fragment_piece(x: np.ndarray, layout: Layout, index: int) -> np.ndarray:
    owned = [layout.owned_indices(index, m) for m in range(layout.ndim)]
    return x[np.ix_(*owned)]


def build(x: np.ndarray, layout: Layout, frameworks) -> dlmg.DistributedTensor:
    """``x`` in ``layout``, fragment ``i`` of ``frameworks[i % len(frameworks)]`` on cuda:0."""
    if isinstance(frameworks, str):
        frameworks = (frameworks,)
    arrays = [on_gpu(fragment_piece(x, layout, f.index), frameworks[f.index % len(frameworks)])
              for f in layout.fragments]
    return dlmg.from_fragments(arrays, layout)


def host(a) -> np.ndarray:
    if isinstance(a, dlmg.DistributedTensor):
        return np.asarray(a.gather(framework="numpy", device="cpu"))
    mod = type(a).__module__.partition(".")[0]
    if mod == "torch":
        return a.detach().cpu().numpy()
    if mod == "cupy":
        return a.get()
    return np.asarray(a)


def rand(shape, seed=0, low=0.0, high=1.0, dtype=np.float32):
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(dtype)


LAYOUT = Layout((9, 8), block=(3, 8), grid=(3, 1), devices=["cuda:0"] * 3)
ASSIGNMENTS = [("torch",), ("cupy",), ("jax",), GPU_FRAMEWORKS]


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_pointwise_on_cuda(frameworks):
    x, y = rand(LAYOUT.shape, 1, 0.5, 2), rand(LAYOUT.shape, 2, 0.5, 2)
    a, b = build(x, LAYOUT, frameworks), build(y, LAYOUT, GPU_FRAMEWORKS[::-1])
    out = dlmg.exp(a * b - 1) / (a + 2)
    assert [f.framework for f in out.fragments] == [f.framework for f in a.fragments]
    assert all(str(f.adapter.device_of(f.array)) == "cuda:0" for f in out.fragments)
    dlmg.synchronize()
    np.testing.assert_allclose(host(out), np.exp(x * y - 1) / (x + 2), rtol=1e-5)
    np.testing.assert_array_equal(host(a > b), x > y)
    np.testing.assert_allclose(host(dlmg.where(a > 1, a, 0.0)), np.where(x > 1, x, 0), rtol=1e-6)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_in_place_on_cuda_keeps_the_memory(framework):
    x = rand(LAYOUT.shape, 3)
    a = build(x, LAYOUT, framework)
    ptrs = [f.adapter.data_ptr(f.array) for f in a.fragments]
    a += build(x, LAYOUT, GPU_FRAMEWORKS)
    a *= 3
    a.synchronize()
    assert [f.adapter.data_ptr(f.array) for f in a.fragments] == ptrs
    np.testing.assert_allclose(host(a), x * 6, rtol=1e-6)


def test_cross_framework_handover_on_cuda_is_zero_copy():
    x = rand(LAYOUT.shape, 4)
    a = build(x, LAYOUT, "torch")
    b = build(x, LAYOUT, GPU_FRAMEWORKS)  # torch, cupy, jax
    seen = []

    def record(p, q):
        seen.append(int(q.data_ptr()))
        return p + q

    out = dlmg.map_fragments(record, a, b)
    out.synchronize()
    assert seen == [f.adapter.data_ptr(f.array) for f in b.fragments]
    np.testing.assert_allclose(host(out), 2 * x, rtol=1e-6)


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_reductions_on_cuda(frameworks):
    layout = Layout((9, 8), block=(2, 3), grid=(3, 2), devices=["cuda:0"] * 6)
    x = rand(layout.shape, 5)
    a = build(x, layout, frameworks)
    total = dlmg.sum(a)  # a 0-d tensor on a's device, held in the framework of a's first fragment there
    assert total.device == a.device and [f.framework for f in total.fragments] == [a.fragments[0].framework]
    np.testing.assert_allclose(host(total), x.sum(), rtol=1e-5)
    np.testing.assert_allclose(host(dlmg.mean(a, axis=0)), x.mean(axis=0), rtol=1e-5)
    np.testing.assert_array_equal(host(dlmg.max(a, axis=1)), x.max(axis=1))
    assert int(host(dlmg.argmax(a))) == int(np.argmax(x))
    np.testing.assert_array_equal(host(dlmg.argmax(a, axis=0)), np.argmax(x, axis=0))
    np.testing.assert_array_equal(host(dlmg.any(a > 0.99, axis=1)), (x > 0.99).any(axis=1))


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_matmul_cholesky_and_fft_on_cuda(frameworks):
    la = Layout((6, 4, 5), block=(2, 4, 5), grid=(3, 1, 1), devices=["cuda:0"] * 3)
    lb = Layout((6, 5, 3), block=(2, 5, 3), grid=(3, 1, 1), devices=["cuda:0"] * 3)
    xa, xb = rand(la.shape, 6), rand(lb.shape, 7)
    a, b = build(xa, la, frameworks), build(xb, lb, GPU_FRAMEWORKS)
    np.testing.assert_allclose(host(a @ b), xa @ xb, rtol=1e-4, atol=1e-5)
    m = rand((6, 4, 4), 8, -1, 1)
    spd = m @ np.swapaxes(m, -1, -2) + 4 * np.eye(4, dtype=np.float32)
    ls = Layout((6, 4, 4), block=(2, 4, 4), grid=(3, 1, 1), devices=["cuda:0"] * 3)
    np.testing.assert_allclose(host(dlmg.linalg.cholesky(build(spd, ls, frameworks))), np.linalg.cholesky(spd),
                               rtol=1e-4, atol=1e-5)
    lf = Layout((6, 16), block=(2, 16), grid=(3, 1), devices=["cuda:0"] * 3)
    xf = rand(lf.shape, 9)
    f = build(xf, lf, frameworks)
    np.testing.assert_allclose(host(dlmg.fft.fft(f)), np.fft.fft(xf), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(host(dlmg.fft.rfft(f, norm="ortho")), np.fft.rfft(xf, norm="ortho"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(host(dlmg.fft.irfft(dlmg.fft.rfft(f), n=16)), xf, rtol=1e-4, atol=1e-5)
    dlmg.synchronize()
