"""``eigh``/``eigvalsh`` of one split Hermitian matrix (one-sided block Jacobi) and
``qr(mode="complete")`` of a split tall matrix (from TSQR), in one process over several
devices and frameworks, against NumPy on the gathered operands.

Eigenvectors are compared through the residual ``A V - V diag(w)`` and orthogonality, not
their signs; eigenvalues ascending as ``numpy.linalg.eigh``'s.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.ops.jacobi import ring_rounds
from _memory import measured
from _ops_support import build, gathered, need

la = dlmg.linalg

TOL = {"float64": 1e-10, "float32": 2e-4, "complex128": 1e-10}
ASSIGNMENTS = [("numpy", "float64"), ("torch", "float64"), ("numpy", "complex128"), ("torch", "complex128"),
               ("mixed", "float32")]


def _need(assignment):
    need(*{"mixed": ("torch", "jax")}.get(assignment, (assignment,) if assignment != "numpy" else ()))


def _hermitian(n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n))
    return ((a + a.conj().T) / 2).astype(dtype)


@st.composite
def split_layouts(draw, n: int):
    """Row slabs, column slabs and 2-D block-cyclic grids (uneven last blocks) of an ``n x n``
    matrix over up to four devices (several fragments may share one), at least two fragments."""
    g0, g1 = draw(st.sampled_from([(2, 1), (3, 1), (4, 1), (1, 2), (1, 3), (2, 2), (3, 2)]))
    b0, b1 = draw(st.integers(1, max(1, n // 2))), draw(st.integers(1, max(1, n // 2)))
    if g1 == 1:
        b1 = n
    if g0 == 1:
        b0 = n
    devices = [f"cpu:{draw(st.integers(0, 3))}" for _ in range(g0 * g1)]
    return Layout((n, n), block=(b0, b1), grid=(g0, g1), devices=devices)


def _check_eigh(a, w, v, tol):
    n = a.shape[0]
    scale = max(1.0, np.abs(a).max()) * n
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol * 10 * scale)
    assert np.all(np.diff(w) >= -tol * scale), w
    np.testing.assert_allclose(a @ v - v * w, 0, atol=tol * 10 * scale)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=tol * 10 * n)


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_eigh_of_a_split_matrix_by_jacobi(assignment, dtype):
    _need(assignment)
    tol = TOL[dtype]

    @settings(max_examples=8 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 14))
        lay = data.draw(split_layouts(n))
        a = _hermitian(n, dtype, data.draw(st.integers(0, 99)))
        x = build(a, lay, assignment)
        w, v = la.eigh(x)
        dense = lay.replace(devices=lay.devices[: lay.ngrid])
        assert v.layout.same_distribution(dense), (v.layout, lay)
        assert v.dtype == x.dtype and w.dtype == {"complex128": "float64"}.get(dtype, dtype)
        assert w.layout.devices == lay.devices[: lay.ngrid] or set(w.layout.devices) <= set(lay.devices)
        W, V = gathered(w), gathered(v)
        _check_eigh(a, W, V, tol)
        np.testing.assert_allclose(gathered(la.eigvalsh(x)), W, atol=tol * 10 * n)

    run()


@pytest.mark.parametrize("case", ["identity", "repeated", "zero", "rank_one_negative", "diagonal_unsorted"])
def test_eigh_of_degenerate_and_special_spectra(case):
    n = 9
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    a = {
        "identity": np.eye(n),
        "repeated": q @ np.diag([1.0, 1, 1, 2, 2, 2, -3, -3, 5]) @ q.T,
        "zero": np.zeros((n, n)),
        "rank_one_negative": -np.outer(q[:, 0], q[:, 0]) * 7,
        "diagonal_unsorted": np.diag(np.arange(n, 0, -1.0)),
    }[case]
    a = (a + a.T) / 2
    lay = Layout((n, n), block=(2, n), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    w, v = la.eigh(build(a, lay))
    _check_eigh(a, gathered(w), gathered(v), 1e-10)


def test_eigh_of_a_replicated_split_matrix_reads_replica_0():
    a = _hermitian(9, "float64", 4)
    lay = Layout((9, 9), block=(3, 9), grid=(2, 1), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    w, v = la.eigh(build(a, lay))
    assert v.layout.devices == lay.devices[:2]
    _check_eigh(a, gathered(w), gathered(v), 1e-10)


def test_eigh_does_not_collect(monkeypatch):
    """The split case never reaches the collecting fallback, and each fragment's framework does
    the work where it is."""
    import dlmg.array_api._collect as collect_module
    import dlmg.array_api._gathered as gathered_module

    def refuse(*args, **kwargs):
        raise AssertionError("collected")

    monkeypatch.setattr(gathered_module, "collect", refuse)
    monkeypatch.setattr(collect_module, "collect", refuse)
    a = _hermitian(12, "float64", 5)
    lay = Layout((12, 12), block=(3, 3), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = build(a, lay)
    w, v = la.eigh(x)
    _check_eigh(a, gathered(w), gathered(v), 1e-10)
    la.eigvalsh(x)
    tall = build(np.ones((12, 3)) + np.eye(12, 3), Layout.slab((12, 3), 0, ["cpu:0", "cpu:1"]))
    la.qr(tall, mode="complete")


def test_eigh_errors():
    lay = Layout((4, 4), block=(2, 4), grid=(2, 1), devices=["cpu:0", "cpu:1"])
    bad = np.eye(4)
    bad[1, 2] = bad[2, 1] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        la.eigh(build(bad, lay))
    with pytest.raises(ValueError, match="square"):
        la.eigh(build(np.ones((4, 3)), Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"])))


@pytest.mark.parametrize("nblocks", [2, 4, 6, 8, 16])
def test_ring_ordering_pairs_every_two_blocks_once(nblocks):
    rounds = ring_rounds(nblocks)
    assert len(rounds) == nblocks - 1
    seen = set()
    for pairs in rounds:
        flat = [b for pair in pairs for b in pair]
        assert sorted(flat) == list(range(nblocks))  # each round a perfect matching
        seen.update(frozenset(p) for p in pairs)
    assert seen == {frozenset(p) for p in itertools.combinations(range(nblocks), 2)}
    # round 0 holds blocks k and k + P on slot k (a row block-cyclic matrix with two blocks per fragment)
    half = nblocks // 2
    assert sorted(map(sorted, rounds[0])) == [[k, k + half] for k in range(half)]


def test_eigh_memory_in_one_process():
    """New memory during eigh of a row block-cyclic matrix (two blocks per fragment, NumPy): within
    1.5 x (the operand and the eigenvectors) plus one block and the small Gram matrices."""
    n, p = 256, 4
    b = n // (2 * p)
    lay = Layout((n, n), block=(b, n), grid=(p, 1), devices=[f"cpu:{i}" for i in range(p)])
    a = _hermitian(n, "float64", 1)
    x = build(a, lay)
    del a
    share = n * n * 8
    (w, v), peak = measured(lambda: la.eigh(x))
    bound = 1.5 * (share + share) + b * n * 8 + p * 3 * (2 * b) ** 2 * 16
    assert peak <= bound, f"peak {peak} > bound {bound} (share {share})"


@pytest.mark.parametrize("assignment,dtype", [("numpy", "float64"), ("torch", "float64"), ("numpy", "complex128"),
                                              ("mixed", "float32")])
def test_complete_qr_of_a_split_tall_matrix(assignment, dtype):
    _need(assignment)
    tol = TOL[dtype]

    @settings(max_examples=10 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 6))
        m = data.draw(st.integers(n, 30))
        grid = data.draw(st.integers(2, 4))
        block = data.draw(st.integers(1, max(1, -(-m // grid) + 2)))
        lay = Layout((m, n), block=(block, n), grid=(grid, 1),
                     devices=[f"cpu:{data.draw(st.integers(0, 3))}" for _ in range(grid)])
        rng = np.random.default_rng(data.draw(st.integers(0, 99)))
        a = rng.standard_normal((m, n))
        if dtype == "complex128":
            a = a + 1j * rng.standard_normal((m, n))
        a = a.astype(dtype)
        q, r = la.qr(build(a, lay, assignment), mode="complete")
        assert q.shape == (m, m) and r.shape == (m, n)
        assert q.layout.grid == lay.grid and q.layout.block[0] == lay.block[0]
        assert r.layout.same_distribution(lay)
        Q, R = gathered(q), gathered(r)
        assert np.allclose(np.tril(R, -1), 0)
        np.testing.assert_allclose(Q @ R, a, atol=tol * 10 * max(1, np.abs(a).max()))
        np.testing.assert_allclose(Q.conj().T @ Q, np.eye(m), atol=tol * 10)
        np.testing.assert_allclose(np.abs(np.diag(R)), np.abs(np.diag(np.linalg.qr(a)[1])), rtol=tol * 100,
                                   atol=tol)

    run()


@pytest.mark.gpu
def test_eigh_and_complete_qr_on_cuda_fragments():
    """The Gram matrices, rotations and local QRs run on the GPU in torch; results as on the host."""
    need("torch")
    n = 40
    a = _hermitian(n, "float64", 8)
    lay = Layout((n, n), block=(5, n), grid=(4, 1), devices=["cuda:0"] * 4)
    x = dlmg.scatter(a, lay, framework="torch")
    w, v = la.eigh(x)
    assert all(f.framework == "torch" and f.device.kind == "cuda" for f in v.fragments)
    _check_eigh(a, gathered(w), gathered(v), 1e-10)
    tall = np.random.default_rng(9).standard_normal((30, 4))
    q, r = la.qr(dlmg.scatter(tall, Layout((30, 4), block=(4, 4), grid=(3, 1), devices=["cuda:0"] * 3),
                              framework="torch"), mode="complete")
    Q, R = gathered(q), gathered(r)
    np.testing.assert_allclose(Q @ R, tall, atol=1e-12)
    np.testing.assert_allclose(Q.T @ Q, np.eye(30), atol=1e-12)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_eigh_is_refused_naming_the_dtype_as_the_frameworks_do(dtype):
    need("torch")
    import torch

    a = _hermitian(6, "float32", 9) + 6 * np.eye(6, dtype="float32")
    half = torch.tensor(a).to(getattr(torch, dtype))
    layouts = [Layout.slab((6, 6), 0, ["cpu:0", "cpu:1"]), Layout.single((6, 6)),
               Layout((2, 6, 6), block=(1, 6, 6), grid=(2, 1, 1), devices=["cpu:0", "cpu:1"]),
               Layout((2, 6, 6), block=(2, 3, 6), grid=(1, 2, 1), devices=["cpu:0", "cpu:1"])]
    for lay in layouts:
        data = half if lay.ndim == 2 else torch.stack([half, half])
        x = dlmg.scatter(data, lay, framework="torch")
        for fn in (la.eigh, la.eigvalsh):
            with pytest.raises(dlmg.DtypeError, match=f"got {dtype}") as info:
                fn(x)
            assert isinstance(info.value, TypeError)  # NumPy's class for it
            assert "astype(x, 'float32')" in str(info.value)
        # the way the message names: float32, and back
        w = dlmg.astype(la.eigvalsh(dlmg.astype(x, "float32")), dtype)
        assert w.dtype == dtype
        want = np.linalg.eigvalsh(data.to(torch.float32).numpy())
        np.testing.assert_allclose(gathered(dlmg.astype(w, "float32")), want, rtol=1e-2, atol=1e-1)
