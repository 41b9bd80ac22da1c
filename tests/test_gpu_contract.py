"""Contractions on a CUDA GPU: 8 fragments of torch, CuPy and JAX on cuda:0, the local
products in each fragment's framework on the GPU, checked against NumPy in float64
within each framework's default GPU precision.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout

pytestmark = pytest.mark.gpu

GPU_FRAMEWORKS = ("torch", "cupy", "jax")
EIGHT = ["cuda:0"] * 8
RNG = np.random.default_rng(11)


def _gpu(x: np.ndarray, layout: Layout, framework: str):
    pytest.importorskip(framework)
    return dlmg.scatter(x.astype(np.float32), layout, framework=framework)


def _check_product(framework: str, got: np.ndarray, A: np.ndarray, B: np.ndarray) -> None:
    """dlmg's float32 product equals the float64 one within the framework's own GPU
    precision: JAX's default GPU matmul rounds its inputs to TF32 (10-bit mantissa),
    torch and CuPy multiply in full float32 (summation error up to about k * 2**-24
    for k terms). A missing or doubled block is off by far
    more than this bound."""
    scale = np.abs(A) @ np.abs(B)
    rounding = 2.0**-10 if framework == "jax" else 2.0**-16
    np.testing.assert_array_less(np.abs(got - A @ B), 4 * rounding * scale + 1e-5)


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_row_slabs_at_replicated_stays_on_the_gpu(framework):
    A, B = RNG.standard_normal((256, 64)), RNG.standard_normal((64, 32))
    a = _gpu(A, Layout.slab(A.shape, 0, EIGHT), framework)
    b = _gpu(B, Layout.replicated(B.shape, EIGHT), framework)
    assert dlmg.einsum_plan("ik,kj->ij", a, b).strategy == "local"
    c = a @ b
    assert set(c.frameworks) == {framework}
    assert all(not d.is_host for d in c.devices)
    _check_product(framework, c.gather(framework="numpy"), A, B)


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_pending_sum_on_the_gpu_resolves(framework):
    A, B = RNG.standard_normal((64, 128)), RNG.standard_normal((128, 48))
    a = _gpu(A, Layout.slab(A.shape, 1, EIGHT), framework)
    b = _gpu(B, Layout.slab(B.shape, 0, EIGHT), framework)
    c = dlmg.matmul(a, b, pending=True)
    assert c.layout.partial == "sum"
    rows = c.redistribute(Layout.slab(c.shape, 0, EIGHT))
    _check_product(framework, rows.gather(framework="numpy"), A, B)


def test_mixed_gpu_frameworks_and_summa():
    pytest.importorskip("cupy")
    pytest.importorskip("torch")
    n = 512
    lay = Layout((n, n), block=(64, 64), grid=(2, 2), devices=["cuda:0"] * 4)
    A, B = RNG.standard_normal((n, n)), RNG.standard_normal((n, n))
    a, b = _gpu(A, lay, "cupy"), _gpu(B, lay, "torch")
    assert dlmg.einsum_plan("ik,kj->ij", a, b).strategy == "summa"
    c = a @ b
    assert set(c.frameworks) == {"cupy"}
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B, rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_reads_of_a_pending_sum_on_the_gpu_see_its_value(framework):
    A, B = RNG.standard_normal((16, 64)), RNG.standard_normal((64, 8))
    a = _gpu(A, Layout.slab(A.shape, 1, EIGHT), framework)
    b = _gpu(B, Layout.slab(B.shape, 0, EIGHT), framework)
    c = dlmg.matmul(a, b, pending=True)
    assert c.layout.partial == "sum"
    want = A @ B
    tol = dict(rtol=1e-2, atol=1e-2 * np.sqrt(64))
    np.testing.assert_allclose(c[1].gather(framework="numpy"), want[1], **tol)
    np.testing.assert_allclose(c.T.gather(framework="numpy"), want.T, **tol)
    np.testing.assert_allclose(c.copy().gather(framework="numpy"), want, **tol)
    np.testing.assert_allclose(float(dlmg.sum(c)), want.sum(), **tol)
    np.testing.assert_allclose(float(c[0:1, 0:1]), want[0, 0], **tol)
    assert "(shown resolved)" in repr(c)
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        c[0, 0] = 1.0
