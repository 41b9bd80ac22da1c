"""dlmg.fuse on a CUDA GPU: torch (torch.compile), CuPy (cupy.fuse) and JAX
(jax.jit) fragments on cuda:0, compiled once per signature, checked against
NumPy on the gathered data.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from test_gpu_ops import GPU_FRAMEWORKS, build, host, rand

pytestmark = pytest.mark.gpu

LAYOUT = Layout((64, 48), block=(8, 48), grid=(8, 1), devices=["cuda:0"] * 8)
EXPECTED_COMPILER = {"torch": ("torch.compile", "eager ("), "cupy": ("cupy.fuse",), "jax": ("jax.jit",)}


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_fused_axpy_on_cuda_compiles_once(framework):
    a, b, c = (rand(LAYOUT.shape, seed=s) for s in range(3))
    da, db, dc = (build(x, LAYOUT, framework) for x in (a, b, c))
    f = dlmg.fuse(lambda x, y, z: x * y + z)
    first = f(da, db, dc)
    second = f(dc, da, db)
    np.testing.assert_allclose(host(first), a * b + c, rtol=1e-6)
    np.testing.assert_allclose(host(second), c * a + b, rtol=1e-6)
    assert first.frameworks == (framework,)
    assert {str(d) for d in first.devices} == {"cuda:0"}
    assert f.cache_size == 1  # 8 fragments of one shape, dtype and device: one kernel
    (compiler,) = set(f.compilers.values())
    assert compiler.startswith(EXPECTED_COMPILER[framework]), compiler


@pytest.mark.parametrize("framework", GPU_FRAMEWORKS)
def test_fused_namespace_functions_and_out_on_cuda(framework):
    x = rand(LAYOUT.shape, seed=4, low=-2, high=2)
    dx = build(x, LAYOUT, framework)
    out = build(np.zeros(LAYOUT.shape, np.float32), LAYOUT, framework)

    @dlmg.fuse(namespace=True)
    def soft(xp, v, scale):
        return xp.tanh(v) * scale + xp.exp(v)

    assert soft(dx, 0.5, out=out) is out
    # float32 transcendental functions on a GPU: a few ulp from NumPy's, near 0 too
    np.testing.assert_allclose(host(out), np.tanh(x) * 0.5 + np.exp(x), rtol=1e-5, atol=1e-6)


def test_fused_mixed_frameworks_on_cuda():
    a, b = rand(LAYOUT.shape, seed=1), rand(LAYOUT.shape, seed=2)
    da = build(a, LAYOUT, GPU_FRAMEWORKS)
    db = build(b, LAYOUT, ("cupy", "jax", "torch"))
    got = dlmg.fuse(lambda x, y: x * 2 - y)(da, db)
    np.testing.assert_allclose(host(got), a * 2 - b, rtol=1e-6)
    assert [f.framework for f in got.fragments] == [f.framework for f in da.fragments]
