"""Distributed linear algebra on a CUDA GPU: TSQR and blocked Cholesky over fragments of torch,
CuPy and JAX on cuda:0, each local factorization in its own framework (cuSOLVER), checked
against NumPy on the gathered data.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from test_gpu_ops import build, host

pytestmark = pytest.mark.gpu

ASSIGNMENTS = [("torch",), ("cupy",), ("jax",), ("torch", "cupy", "jax")]


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_tsqr_and_cholesky_on_cuda(frameworks):
    for name in frameworks:
        pytest.importorskip(name)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 6)).astype(np.float32)
    lay = Layout((300, 6), block=(16, 6), grid=(4, 1), devices=["cuda:0"] * 4)
    x = build(a, lay, frameworks)
    q, r = dlmg.linalg.qr(x)
    assert q.layout.same_distribution(lay)
    Q, R = host(q), host(r)
    # JAX multiplies float32 on GPUs in TF32 by default (10-bit mantissa): Q applied back to
    # its fragments is as exact as that
    tol = 5e-3 if "jax" in frameworks else 1e-4
    np.testing.assert_allclose(Q @ R, a, atol=tol)
    np.testing.assert_allclose(Q.T @ Q, np.eye(6), atol=tol)
    np.testing.assert_allclose(host(dlmg.linalg.svdvals(x)), np.linalg.svd(a, compute_uv=False), rtol=1e-4)
    m = rng.standard_normal((40, 40)).astype(np.float32)
    spd = m @ m.T + 40 * np.eye(40, dtype=np.float32)
    grid = Layout((40, 40), block=(8, 8), grid=(2, 2), devices=["cuda:0"] * 4)
    low = dlmg.linalg.cholesky(build(spd, grid, frameworks))
    np.testing.assert_allclose(host(low), np.linalg.cholesky(spd), rtol=1e-3, atol=1e-3)
