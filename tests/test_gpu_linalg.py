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


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_full_svd_stacked_inverses_and_powers_on_cuda(frameworks):
    for name in frameworks:
        pytest.importorskip(name)
    rng = np.random.default_rng(1)
    tol = 5e-3 if "jax" in frameworks else 1e-4
    a = rng.standard_normal((70, 5)).astype(np.float32)
    u, s, vh = dlmg.linalg.svd(build(a, Layout((70, 5), block=(8, 5), grid=(4, 1), devices=["cuda:0"] * 4),
                                     frameworks))
    U, S, Vh = host(u), host(s), host(vh)
    assert u.shape == (70, 70) and u.layout.grid == (4, 1)
    np.testing.assert_allclose((U[:, :5] * S) @ Vh, a, atol=tol)
    np.testing.assert_allclose(U.T @ U, np.eye(70), atol=tol)
    b = (rng.standard_normal((3, 12, 12)) + 6 * np.eye(12)).astype(np.float32)
    stacked = build(b, Layout((3, 12, 12), block=(3, 4, 6), grid=(1, 2, 2), devices=["cuda:0"] * 4), frameworks)
    inverse = dlmg.linalg.inv(stacked)
    assert inverse.layout.grid[0] == 1 and inverse.layout.ngrid > 1
    assert all(f.device.kind == "cuda" for f in inverse.fragments)
    np.testing.assert_allclose(host(inverse), np.linalg.inv(b), atol=10 * tol)
    np.testing.assert_allclose(host(dlmg.linalg.matrix_power(stacked, -2)), np.linalg.matrix_power(b, -2),
                               atol=10 * tol)
    np.testing.assert_allclose(host(dlmg.linalg.matrix_power(stacked, 0)), np.broadcast_to(np.eye(12), b.shape))
