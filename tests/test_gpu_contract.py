"""Contractions on a CUDA GPU: 8 fragments of torch, CuPy and JAX on cuda:0, the local
products in each fragment's framework on the GPU, checked against NumPy.

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


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_row_slabs_at_replicated_stays_on_the_gpu(framework):
    A, B = RNG.standard_normal((256, 64)), RNG.standard_normal((64, 32))
    a = _gpu(A, Layout.slab(A.shape, 0, EIGHT), framework)
    b = _gpu(B, Layout.replicated(B.shape, EIGHT), framework)
    assert dlmg.einsum_plan("ik,kj->ij", a, b).strategy == "local"
    c = a @ b
    assert set(c.frameworks) == {framework}
    assert all(not d.is_host for d in c.devices)
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_pending_sum_on_the_gpu_resolves(framework):
    A, B = RNG.standard_normal((64, 128)), RNG.standard_normal((128, 48))
    a = _gpu(A, Layout.slab(A.shape, 1, EIGHT), framework)
    b = _gpu(B, Layout.slab(B.shape, 0, EIGHT), framework)
    c = a @ b
    assert c.layout.partial == "sum"
    rows = c.redistribute(Layout.slab(c.shape, 0, EIGHT))
    np.testing.assert_allclose(rows.gather(framework="numpy"), A @ B, rtol=1e-4, atol=1e-3)


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
