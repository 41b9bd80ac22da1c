"""Distributed linear algebra against NumPy on the gathered operands, in one process.

TSQR (``qr``, ``svd``, ``svdvals``, ``pinv``, ``matrix_rank``, ``lstsq``) over
random row layouts (several blocks per fragment, uneven last blocks, several
fragments per device, mixed frameworks), short-fat matrices split along
columns, 2-D block-cyclic grids; norms, diagonals, ``trace``, ``cross`` and
``matrix_power`` on block-cyclic grids; the batch-local factorizations on
split batch modes. Reconstructions (``Q R``, ``U S Vh``), orthogonality and
values. The cases that once collected (integer and bool matrices, a ``solve`` of
two dtypes or of broadcast right-hand sides, a tensor ``rtol``, operands that
hold no elements) run with the collecting path made to raise.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from _memory import peak_of
from _ops_support import build, gathered, need

xp = dlmg.array_api
la = dlmg.linalg

#: float64 for NumPy and torch; JAX without x64 holds float32
TOL = {"float64": 1e-10, "float32": 2e-4}


@st.composite
def row_layouts(draw, m: int, n: int, max_grid: int = 4):
    """Layouts of an ``m x n`` matrix split along rows only: any block, grid up to ``max_grid``,
    devices drawn from four (so several fragments may share one)."""
    grid = draw(st.integers(1, max_grid))
    block = draw(st.integers(1, max(1, -(-m // grid) + 2)))
    devices = [f"cpu:{draw(st.integers(0, 3))}" for _ in range(grid)]
    return Layout((m, n), block=(block, n), grid=(grid, 1), devices=devices)


@st.composite
def grid_layouts(draw, m: int, n: int):
    """2-D block-cyclic layouts with uneven last blocks."""
    g0, g1 = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    b0, b1 = draw(st.integers(1, max(1, m // 2))), draw(st.integers(1, max(1, n // 2)))
    devices = [f"cpu:{draw(st.integers(0, 3))}" for _ in range(g0 * g1)]
    return Layout((m, n), block=(b0, b1), grid=(g0, g1), devices=devices)


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype)


ASSIGNMENTS = [("numpy", "float64"), ("torch", "float64"), ("numpy", "complex128"), ("mixed", "float32")]


def _need(assignment):
    need(*{"mixed": ("torch", "jax")}.get(assignment, (assignment,) if assignment != "numpy" else ()))


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_tsqr_qr_reconstructs_and_keeps_the_row_layout(assignment, dtype):
    _need(assignment)
    tol = TOL["float32" if dtype == "float32" else "float64"]

    @settings(max_examples=12 if assignment != "mixed" else 5, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 6))
        m = data.draw(st.integers(n, 40))
        lay = data.draw(row_layouts(m, n))
        a = _data((m, n), dtype, data.draw(st.integers(0, 99)))
        x = build(a, lay, assignment)
        q, r = la.qr(x)
        assert q.layout.same_distribution(lay) and q.dtype == x.dtype
        frameworks = [f.framework for f in q.fragments]
        assert frameworks == [f.framework for f in x.fragments]
        Q, R = gathered(q), gathered(r)
        assert np.allclose(np.tril(R, -1), 0)
        np.testing.assert_allclose(Q @ R, a, atol=tol * 10 * max(1, np.abs(a).max()))
        np.testing.assert_allclose(Q.conj().T @ Q, np.eye(n), atol=tol * 10)
        np.testing.assert_allclose(np.abs(np.diag(R)), np.abs(np.diag(np.linalg.qr(a)[1])), rtol=tol * 100, atol=tol)

    run()


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_tsqr_svd_svdvals_pinv_match_numpy(assignment, dtype):
    _need(assignment)
    tol = TOL["float32" if dtype == "float32" else "float64"]

    @settings(max_examples=10 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 5))
        m = data.draw(st.integers(n, 30))
        lay = data.draw(row_layouts(m, n))
        a = _data((m, n), dtype, data.draw(st.integers(0, 99)))
        x = build(a, lay, assignment)
        u, s, vh = la.svd(x, full_matrices=False)
        assert u.layout.same_distribution(lay)
        U, S, Vh = gathered(u), gathered(s), gathered(vh)
        want = np.linalg.svd(a, compute_uv=False)
        np.testing.assert_allclose(S, want, rtol=tol * 100, atol=tol * 10)
        np.testing.assert_allclose((U * S) @ Vh, a, atol=tol * 20 * max(1, np.abs(a).max()))
        np.testing.assert_allclose(U.conj().T @ U, np.eye(n), atol=tol * 20)
        np.testing.assert_allclose(gathered(la.svdvals(x)), want, rtol=tol * 100, atol=tol * 10)
        p = la.pinv(x)
        assert p.shape == (n, m) and p.layout.grid == (1, lay.grid[0])
        np.testing.assert_allclose(gathered(p), np.linalg.pinv(a), atol=tol * 1000)

    run()


@pytest.mark.parametrize("framework,dtype", [("numpy", "float64"), ("torch", "float64"), ("numpy", "complex128"),
                                             ("torch", "complex128")])
def test_tsqr_of_fragments_of_many_rows_goes_chunk_by_chunk(framework, dtype):
    """Fragments of many more rows than columns are factorised by a flat TSQR over their row
    chunks, written into one buffer: qr (reduced and complete), svd and pinv still equal NumPy's."""
    need(framework) if framework != "numpy" else None
    m, n = 203, 5
    lay = Layout((m, n), block=(37, n), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:0"])
    a = _data((m, n), dtype, 7)
    x = build(a, lay, framework)
    q, r = la.qr(x)
    assert q.layout.same_distribution(lay)
    Q, R = gathered(q), gathered(r)
    np.testing.assert_allclose(Q @ R, a, atol=1e-12)
    np.testing.assert_allclose(Q.conj().T @ Q, np.eye(n), atol=1e-12)
    u, s, vh = la.svd(x, full_matrices=False)
    np.testing.assert_allclose(gathered(s), np.linalg.svd(a, compute_uv=False), rtol=1e-12)
    np.testing.assert_allclose((gathered(u) * gathered(s)) @ gathered(vh), a, atol=1e-12)
    np.testing.assert_allclose(gathered(la.pinv(x)), np.linalg.pinv(a), atol=1e-12)
    qc, rc = la.qr(x, mode="complete")
    QC = gathered(qc)
    np.testing.assert_allclose(QC @ gathered(rc), a, atol=1e-12)
    np.testing.assert_allclose(QC.conj().T @ QC, np.eye(m), atol=1e-12)


def test_tsqr_holds_q_and_the_result_in_one_buffer():
    """qr and svd of a tall matrix: each fragment's Q is formed chunk by chunk into the buffer
    that becomes its part of the result, so the new memory is the result and one chunk's QR, not
    a copy of the operand beside Q beside the result (NumPy fragments, which tracemalloc sees)."""
    lay = Layout.slab((40000, 8), 0, ["cpu:0", "cpu:1"])
    a = _data(lay.shape, "float64", 8)
    x = build(a, lay)
    la.svd(x, full_matrices=False)  # a first call fills the caches of layouts and plans
    for name, fn in (("qr", lambda: la.qr(x)), ("svd", lambda: la.svd(x, full_matrices=False))):
        peak = peak_of(fn)
        assert peak <= 1.3 * a.nbytes, f"{name}: peak {peak} bytes for a {a.nbytes}-byte operand and result"


def test_short_fat_split_along_columns_goes_through_the_transpose():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((4, 23))
    lay = Layout((4, 23), block=(4, 3), grid=(1, 3), devices=["cpu:0", "cpu:1", "cpu:1"])
    x = build(a, lay)
    u, s, vh = la.svd(x, full_matrices=False)
    assert vh.layout.grid == (1, 3)  # Vh keeps the column split
    np.testing.assert_allclose((gathered(u) * gathered(s)) @ gathered(vh), a, atol=1e-12)
    np.testing.assert_allclose(gathered(vh) @ gathered(vh).T, np.eye(4), atol=1e-12)
    np.testing.assert_allclose(gathered(la.pinv(x)), np.linalg.pinv(a), atol=1e-12)
    np.testing.assert_allclose(gathered(la.svdvals(x)), np.linalg.svd(a, compute_uv=False), atol=1e-12)


def test_short_fat_qr_keeps_the_column_split_and_collects_nothing(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=12, deadline=None)
    @given(st.data())
    def run(data):
        m, n = data.draw(st.sampled_from([(4, 23), (5, 17), (1, 9), (7, 8), (3, 30)]))
        lay = data.draw(grid_layouts(m, n))
        a = _data((m, n), data.draw(st.sampled_from(["float64", "complex128"])), data.draw(st.integers(0, 99)))
        x = build(a, lay, data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy")
        mode = data.draw(st.sampled_from(["reduced", "complete"]))
        q, r = la.qr(x, mode=mode)
        Q, R = gathered(q), gathered(r)
        assert Q.shape == (m, m) and R.shape == (m, n)
        assert r.layout.grid[0] == 1 and r.layout.ngrid > 1 or lay.ngrid == 1  # R stays split by columns
        np.testing.assert_allclose(Q @ R, a, atol=1e-11)
        np.testing.assert_allclose(Q.conj().T @ Q, np.eye(m), atol=1e-11)
        assert np.array_equal(np.triu(R), R)  # exactly upper trapezoidal
        np.testing.assert_allclose(np.abs(R), np.abs(np.linalg.qr(a, mode=mode)[1]), atol=1e-10)

    run()


def test_block_cyclic_grids_are_redistributed_into_slabs_not_gathered():
    @settings(max_examples=10, deadline=None)
    @given(st.data())
    def run(data):
        m, n = data.draw(st.sampled_from([(17, 5), (5, 17), (9, 9), (30, 3)]))
        lay = data.draw(grid_layouts(m, n))
        a = _data((m, n), "float64", data.draw(st.integers(0, 99)))
        x = build(a, lay, data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy")
        u, s, vh = la.svd(x, full_matrices=False)
        np.testing.assert_allclose((gathered(u) * gathered(s)) @ gathered(vh), a, atol=1e-11)
        np.testing.assert_allclose(gathered(la.pinv(x)), np.linalg.pinv(a), atol=1e-9)
        if m >= n:
            q, r = la.qr(x)
            np.testing.assert_allclose(gathered(q) @ gathered(r), a, atol=1e-11)
        assert int(la.matrix_rank(x)) == np.linalg.matrix_rank(a)

    run()


def _refuse_collecting(monkeypatch):
    """Make the namespace's collecting path raise (every collected function goes through
    ``collect``): the calls must stay distributed."""
    import dlmg.array_api._collect as collect_module
    import dlmg.array_api._gathered as gathered_module

    def refuse(*args, **kwargs):
        raise AssertionError("collected")

    monkeypatch.setattr(gathered_module, "collect", refuse)
    monkeypatch.setattr(collect_module, "collect", refuse)


def test_full_svd_of_split_matrices_from_the_complete_tsqr(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=14, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 5))
        m = data.draw(st.integers(n + 1, 24))
        wide = data.draw(st.booleans())
        lay = data.draw(st.one_of(row_layouts(m, n), grid_layouts(m, n)))
        dtype = data.draw(st.sampled_from(["float64", "complex128"]))
        a = _data((m, n), dtype, data.draw(st.integers(0, 99)))
        if wide:  # short-fat: split along columns (or on a grid)
            a = np.ascontiguousarray(a.T)
            lay = Layout((n, m), block=lay.block[::-1], grid=lay.grid[::-1], devices=lay.devices)
        x = build(a, lay, data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy")
        u, s, vh = la.svd(x)
        rows, cols = a.shape
        assert u.shape == (rows, rows) and vh.shape == (cols, cols)
        big = vh if wide else u
        if lay.ngrid > 1:  # the long factor keeps the long mode's split
            assert big.layout.grid == ((1, lay.ngrid) if wide else (lay.ngrid, 1)), repr(big.layout)
        U, S, Vh = gathered(u), gathered(s), gathered(vh)
        np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), atol=1e-11)
        middle = np.zeros(a.shape, dtype=a.dtype)
        middle[: S.size, : S.size] = np.diag(S)
        np.testing.assert_allclose(U @ middle @ Vh, a, atol=1e-11)
        np.testing.assert_allclose(U.conj().T @ U, np.eye(rows), atol=1e-11)
        np.testing.assert_allclose(Vh @ Vh.conj().T, np.eye(cols), atol=1e-11)

    run()
    need("torch", "jax")  # JAX, whose arrays cannot be written: U assembled by concatenation
    a = _data((13, 3), "float32", 5)
    lay = Layout((13, 3), block=(2, 3), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    u, s, vh = la.svd(build(a, lay, "mixed"))
    U, S, Vh = gathered(u), gathered(s), gathered(vh)
    assert "jax" in {f.framework for f in u.fragments}
    np.testing.assert_allclose((U[:, :3] * S) @ Vh, a, atol=2e-5)
    np.testing.assert_allclose(U.T @ U, np.eye(13), atol=2e-5)


def test_matrix_power_of_zero_and_negative_powers_stays_on_the_grid(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=12, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 9))
        lay = data.draw(st.one_of(grid_layouts(n, n), row_layouts(n, n)))
        dtype = data.draw(st.sampled_from(["float64", "complex128"]))
        a = _data((n, n), dtype, data.draw(st.integers(0, 99))) + (n * np.eye(n)).astype(dtype)
        framework = data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy"
        x = build(a, lay, framework)
        k = data.draw(st.integers(-4, 0))
        got = la.matrix_power(x, k)
        assert got.dtype == x.dtype and got.shape == (n, n)
        assert set(got.layout.devices) <= set(lay.devices)
        if k == 0:  # the identity in x's layout, made where each fragment is
            assert got.layout.same_distribution(lay.dense)
            assert [f.framework for f in got.fragments] == [f.framework for f in x.fragments]
        elif k == -1 and sum(f.size > 0 for f in x.fragments) > 1:  # the inverse stays split (its
            # powers are matmuls, whose planner may put a product of tiny matrices on one of the devices)
            assert got.layout.ngrid > 1
        np.testing.assert_allclose(gathered(got), np.linalg.matrix_power(a, k), atol=1e-11)

    run()
    batch = _data((3, 4, 4), "float64", 1) + 4 * np.eye(4)
    xb = build(batch, Layout((3, 4, 4), block=(1, 4, 4), grid=(3, 1, 1), devices=["cpu:0", "cpu:1", "cpu:2"]))
    for k in (0, -1, -3):
        got = la.matrix_power(xb, k)
        assert got.layout.grid == (3, 1, 1)  # batch-local
        np.testing.assert_allclose(gathered(got), np.linalg.matrix_power(batch, k), atol=1e-12)
    ints = build(np.arange(16).reshape(4, 4), Layout.slab((4, 4), 0, ["cpu:0", "cpu:1"]))
    np.testing.assert_array_equal(gathered(la.matrix_power(ints, 0)), np.eye(4, dtype=int))
    with pytest.raises(dlmg.DtypeError, match="int64"):
        la.matrix_power(ints, -1)


@st.composite
def stacked_layouts(draw, shape):
    """Layouts of stacked matrices with a matrix mode split; the batch mode whole or split too."""
    g0, g1 = draw(st.sampled_from([(2, 1), (1, 2), (2, 2), (3, 1)]))
    gb = draw(st.integers(1, 2))
    block = (draw(st.integers(1, shape[0])), draw(st.integers(1, max(1, shape[1] // 2))),
             draw(st.integers(1, max(1, shape[2] // 2))))
    devices = [f"cpu:{draw(st.integers(0, 3))}" for _ in range(gb * g0 * g1)]
    return Layout(shape, block=block, grid=(gb, g0, g1), devices=devices)


def test_stacked_split_matrices_run_the_distributed_algorithm_per_entry(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=8, deadline=None)
    @given(st.data())
    def run(data):
        batch = data.draw(st.integers(1, 3))
        n = data.draw(st.integers(2, 6))
        m = data.draw(st.sampled_from([n, n + 3]))
        dtype = data.draw(st.sampled_from(["float64", "complex128"]))
        framework = data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy"
        a = _data((batch, m, n), dtype, data.draw(st.integers(0, 99)))
        lay = data.draw(stacked_layouts(a.shape))
        x = build(a, lay, framework)

        def check(got, want, atol=1e-10):
            for t in (got if isinstance(got, tuple) else (got,)):
                assert set(t.layout.devices) <= set(lay.devices)
            np.testing.assert_allclose(gathered(got), want, atol=atol)

        q, r = la.qr(x)
        assert q.layout.grid[0] == 1 and q.layout.ngrid > 1  # every entry split, none gathered
        check(q, gathered(q))
        np.testing.assert_allclose(gathered(q) @ gathered(r), a, atol=1e-11)
        for full in (False, True):
            u, s, vh = la.svd(x, full_matrices=full)
            U, S, Vh = gathered(u), gathered(s), gathered(vh)
            np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), atol=1e-11)
            np.testing.assert_allclose((U[..., :, :n] * S[..., None, :]) @ Vh[..., :n, :], a, atol=1e-11)
        check(la.svdvals(x), np.linalg.svd(a, compute_uv=False))
        check(la.pinv(x), np.linalg.pinv(a), atol=1e-9)
        check(la.matrix_rank(x), np.linalg.matrix_rank(a))
        if m != n:
            return
        sq = a + (n * np.eye(n)).astype(dtype)
        xs = build(sq, lay, framework)
        check(la.det(xs), np.linalg.det(sq), atol=1e-9 * np.abs(np.linalg.det(sq)).max())
        sign, logabs = la.slogdet(xs)
        check(sign, np.linalg.slogdet(sq)[0])
        check(logabs, np.linalg.slogdet(sq)[1])
        inverse = la.inv(xs)
        assert inverse.layout.grid[0] == 1 and inverse.layout.ngrid > 1
        check(inverse, np.linalg.inv(sq))
        rhs = _data((batch, n, 2), dtype, 3)
        y = build(rhs, Layout((batch, n, 2), block=(1, 2, 2), grid=(batch, 1, 1), devices=["cpu:1"] * batch),
                  framework)
        check(la.solve(xs, y), np.linalg.solve(sq, rhs))
        v = build(rhs[0, :, 0].copy(), Layout.slab((n,), 0, ["cpu:0", "cpu:2"]), framework)
        check(la.solve(xs, v), np.linalg.solve(sq, np.broadcast_to(rhs[0, :, :1], (batch, n, 1)))[..., 0])
        check(la.matrix_power(xs, -2), np.linalg.matrix_power(sq, -2))
        herm = (sq + np.swapaxes(sq, -1, -2).conj()) / 2 + n * np.eye(n)
        xh = build(herm, lay, framework)
        check(la.cholesky(xh), np.linalg.cholesky(herm))
        check(la.eigvalsh(xh), np.linalg.eigvalsh(herm))
        w, vecs = la.eigh(xh)
        V = gathered(vecs)
        np.testing.assert_allclose(herm @ V, V * gathered(w)[..., None, :], atol=1e-9)

    run()


def test_stacked_split_matrices_refuse_what_has_no_entry_by_entry_meaning():
    a = _data((2, 4, 4), "float64", 1) + 4 * np.eye(4)
    x = build(a, Layout((2, 4, 4), block=(2, 2, 4), grid=(1, 2, 1), devices=["cpu:0", "cpu:1"]))
    y = build(_data((3, 2, 4, 1), "float64", 2), Layout.single((3, 2, 4, 1)))
    with pytest.raises(dlmg.LayoutError, match="same batch shape"):
        la.solve(x, y)
    with pytest.raises(ValueError, match="rtol as a number"):
        la.pinv(x, rtol=build(np.array([0.1, 0.1]), Layout.single((2,))))


@st.composite
def any_layouts(draw, shape):
    """Block-cyclic layouts of ``shape``: any blocks, grids up to 2 a mode, devices drawn from four."""
    grid = tuple(draw(st.integers(1, 2)) if e > 1 else 1 for e in shape)
    block = tuple(draw(st.integers(1, max(1, e))) for e in shape)
    devices = [f"cpu:{draw(st.integers(0, 3))}" for _ in range(math.prod(grid))]
    return Layout(shape, block=block, grid=grid, devices=devices)


def test_cross_of_operands_that_broadcast(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=25, deadline=None)
    @given(st.data())
    def run(data):
        s1, s2, axis = data.draw(st.sampled_from([
            ((7, 3), (3,), -1), ((3,), (6, 3), -1), ((4, 1, 3), (5, 3), -1), ((3, 5), (3, 1), 0),
            ((2, 3, 4), (3, 4), 1), ((2, 3, 4), (3, 4), -2), ((1, 4, 3), (3, 1, 3), 2), ((5, 3), (5, 3), -1),
        ]))
        a, b = _data(s1, "float64", 1), _data(s2, "float64", 2)
        l1, l2 = data.draw(any_layouts(s1)), data.draw(any_layouts(s2))
        frameworks = st.sampled_from(["numpy", "torch"]) if _have_torch() else st.just("numpy")
        x1, x2 = build(a, l1, data.draw(frameworks)), build(b, l2, data.draw(frameworks))
        out = la.cross(x1, x2, axis=axis)
        shape = np.broadcast_shapes(s1, s2)
        want = np.cross(np.broadcast_to(a, shape), np.broadcast_to(b, shape), axis=axis)
        assert out.shape == shape
        assert set(out.layout.devices) <= set(l1.devices) | set(l2.devices)
        lead = l1 if s1 == shape else l2 if s2 == shape else None
        if lead is not None:
            assert set(out.layout.devices) <= set(lead.devices)  # on the lead operand's devices
        np.testing.assert_allclose(gathered(out), want, atol=1e-12)

    run()
    x = build(np.ones((4, 3)), Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"]))
    with pytest.raises(ValueError, match="extent 3 in both"):
        la.cross(x, build(np.ones((4, 1)), Layout.single((4, 1))))
    with pytest.raises(ValueError, match="out of range"):
        la.cross(x, x, axis=2)


def _have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def test_rank_deficient_matrix_rank_pinv_and_lstsq():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 6))  # rank 3
    b = rng.standard_normal((40, 2))
    lay = Layout((40, 6), block=(7, 6), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    lb = Layout((40, 2), block=(7, 2), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    x, y = build(a, lay), build(b, lb)
    assert int(la.matrix_rank(x)) == 3
    np.testing.assert_allclose(gathered(la.pinv(x)), np.linalg.pinv(a), atol=1e-10)
    np.testing.assert_allclose(gathered(la.lstsq(x, y)), np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-10)


def test_replicated_and_pending_operands():
    rng = np.random.default_rng(4)
    a = rng.standard_normal((24, 4))
    lay = Layout((24, 4), block=(5, 4), grid=(2, 1), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])  # 2 replicas
    q, r = la.qr(build(a, lay))
    assert q.layout.nreplicas == 1
    np.testing.assert_allclose(gathered(q) @ gathered(r), a, atol=1e-12)
    # a pending sum (a contraction over a split mode) is settled on entry
    left = rng.standard_normal((24, 6))
    right = rng.standard_normal((6, 4))
    lx = build(left, Layout((24, 6), block=(24, 3), grid=(1, 2), devices=["cpu:0", "cpu:1"]))
    ry = build(right, Layout((6, 4), block=(3, 4), grid=(2, 1), devices=["cpu:0", "cpu:1"]))
    pending = dlmg.matmul(lx, ry, pending=True)
    assert pending.layout.partial == "sum"
    np.testing.assert_allclose(gathered(la.svdvals(pending)), np.linalg.svd(left @ right, compute_uv=False),
                               atol=1e-11)


def test_both_namespaces_are_the_same_functions():
    for name in la.__all__:
        assert getattr(dlmg.linalg, name) is getattr(xp.linalg, name)


# -- norms, diagonals, products ---------------------------------------------------------------
@given(st.data())
@settings(max_examples=15, deadline=None)
def test_norms_diagonal_trace_on_block_cyclic_grids(data):
    m, n = data.draw(st.sampled_from([(7, 5), (5, 9), (8, 8), (1, 4)]))
    lay = data.draw(grid_layouts(m, n))
    dtype = data.draw(st.sampled_from(["float64", "complex128"]))
    a = _data((m, n), dtype, data.draw(st.integers(0, 99)))
    x = build(a, lay)
    offset = data.draw(st.integers(-m, n))
    d = la.diagonal(x, offset=offset)
    np.testing.assert_allclose(gathered(d), np.diagonal(a, offset=offset))
    np.testing.assert_allclose(complex(la.trace(x, offset=offset)), np.trace(a, offset=offset), atol=1e-12)
    for ord_ in ("fro", 1, -1, math.inf, -math.inf, 2, -2, "nuc"):
        np.testing.assert_allclose(float(la.matrix_norm(x, ord=ord_)), np.linalg.norm(a, ord=ord_), rtol=1e-10)
    for ord_ in (2, 1, math.inf, -math.inf, 0, 3):
        np.testing.assert_allclose(float(la.vector_norm(x, ord=ord_)), np.linalg.norm(a.ravel(), ord=ord_),
                                   rtol=1e-10)
    np.testing.assert_allclose(gathered(la.vector_norm(x, axis=0)), np.linalg.norm(a, axis=0), rtol=1e-10)


def test_diagonal_of_split_matrices_moves_no_operand():
    a = np.arange(63.0).reshape(9, 7)
    lay = Layout((9, 7), block=(2, 3), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    d = la.diagonal(build(a, lay))
    assert d.layout.grid == (2,) and d.layout.block == (2,)  # the rows' split, 7 long
    np.testing.assert_array_equal(gathered(d), np.diagonal(a))
    batch = np.arange(2 * 5 * 6.0).reshape(2, 5, 6)
    lb = Layout((2, 5, 6), block=(1, 2, 4), grid=(2, 2, 2), devices=[f"cpu:{i % 4}" for i in range(8)])
    np.testing.assert_array_equal(gathered(la.diagonal(build(batch, lb), offset=-1)), np.diagonal(batch, -1, -2, -1))


def test_cross_and_matrix_power():
    rng = np.random.default_rng(5)
    u, v = rng.standard_normal((10, 3)), rng.standard_normal((10, 3))
    lay = Layout((10, 3), block=(3, 2), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    slab = Layout.slab((10, 3), 0, ["cpu:0", "cpu:1"])
    out = la.cross(build(u, lay), build(v, slab))
    assert out.layout.grid[1] == 1 and out.layout.ngrid > 1
    np.testing.assert_allclose(gathered(out), np.cross(u, v))
    a = rng.standard_normal((9, 9)) / 3
    x = build(a, Layout((9, 9), block=(4, 4), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"]))
    for k in (1, 2, 5):
        got = la.matrix_power(x, k)
        assert got.layout.ngrid > 1
        np.testing.assert_allclose(gathered(got), np.linalg.matrix_power(a, k), atol=1e-12)


# -- batch-local factorizations ---------------------------------------------------------------
@pytest.mark.parametrize("assignment", ["numpy", "torch"])
def test_batch_local_factorizations_on_split_batch_modes(assignment):
    _need(assignment)
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 4, 4))
    spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
    b = rng.standard_normal((5, 4, 2))
    lay = Layout((5, 4, 4), block=(2, 4, 4), grid=(2, 1, 1), devices=["cpu:0", "cpu:1"])
    lb = Layout((5, 4, 2), block=(2, 4, 2), grid=(2, 1, 1), devices=["cpu:0", "cpu:1"])
    x, s, y = build(a, lay, assignment), build(spd, lay, assignment), build(b, lb, assignment)
    for got, want in (
        (la.det(x), np.linalg.det(a)), (la.inv(x), np.linalg.inv(a)), (la.solve(x, y), np.linalg.solve(a, b)),
        (la.slogdet(x).logabsdet, np.linalg.slogdet(a)[1]), (la.eigvalsh(s), np.linalg.eigvalsh(spd)),
        (la.cholesky(s), np.linalg.cholesky(spd)), (la.svdvals(x), np.linalg.svd(a, compute_uv=False)),
    ):
        assert got.layout.grid[0] == 2  # computed where the matrices are
        np.testing.assert_allclose(gathered(got), want, atol=1e-10)
    q, r = la.qr(x)
    np.testing.assert_allclose(gathered(q) @ gathered(r), a, atol=1e-12)
    w, v = la.eigh(s)
    np.testing.assert_allclose(gathered(v) @ (gathered(w)[..., None] * np.swapaxes(gathered(v), -1, -2)), spd,
                               atol=1e-10)


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_blocked_cholesky_on_block_cyclic_grids(assignment, dtype):
    _need(assignment)
    tol = TOL["float32" if dtype == "float32" else "float64"]

    @settings(max_examples=10 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 14))
        lay = data.draw(grid_layouts(n, n))
        a = _data((n, n), dtype, data.draw(st.integers(0, 99)))
        spd = (a @ a.conj().T + n * np.eye(n)).astype(dtype)
        x = build(spd, lay, assignment)
        low = la.cholesky(x)
        assert low.layout.grid == lay.grid and low.layout.devices == lay.devices
        if lay.block[0] == lay.block[1]:  # (otherwise redistributed into square blocks first)
            assert [f.framework for f in low.fragments] == [f.framework for f in x.fragments]
        L = gathered(low)
        assert np.allclose(np.triu(L, 1), 0)
        np.testing.assert_allclose(L @ L.conj().T, spd, atol=tol * 100 * n)
        np.testing.assert_allclose(L, np.linalg.cholesky(spd), atol=tol * 100)
        up = gathered(la.cholesky(x, upper=True))
        np.testing.assert_allclose(up, L.conj().T, atol=tol * 10)

    run()


def test_cholesky_of_a_matrix_that_is_not_positive_definite_names_the_panel():
    lay = Layout((6, 6), block=(2, 2), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    bad = np.eye(6)
    bad[4, 4] = -1.0
    with pytest.raises(dlmg.FragmentError, match="panel 2"):
        la.cholesky(build(bad, lay))


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_det_and_slogdet_by_blocked_lu_on_grids(assignment, dtype):
    _need(assignment)
    tol = TOL["float32" if dtype == "float32" else "float64"]

    @settings(max_examples=10 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 13))
        lay = data.draw(grid_layouts(n, n))
        a = _data((n, n), dtype, data.draw(st.integers(0, 99)))
        x = build(a, lay, assignment)
        sign, logabs = la.slogdet(x)
        want_sign, want_log = np.linalg.slogdet(a)
        np.testing.assert_allclose(complex(sign), want_sign, atol=tol * 100)
        np.testing.assert_allclose(float(logabs), want_log, atol=tol * 100 * n)
        np.testing.assert_allclose(complex(la.det(x)), np.linalg.det(a), rtol=tol * 100 * n)

    run()


@pytest.mark.parametrize("assignment,dtype", ASSIGNMENTS)
def test_solve_and_inv_by_blocked_gauss_jordan_on_grids(assignment, dtype):
    _need(assignment)
    tol = TOL["float32" if dtype == "float32" else "float64"]

    @settings(max_examples=8 if assignment != "mixed" else 4, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 12))
        lay = data.draw(grid_layouts(n, n))
        a = _data((n, n), dtype, data.draw(st.integers(0, 99))) + (n * np.eye(n)).astype(dtype)
        k = data.draw(st.integers(1, 3))
        b = _data((n, k), dtype, 7)
        x = build(a, lay, assignment)
        y = build(b, Layout.slab((n, k), 0, ["cpu:0", "cpu:2"]), assignment)
        got = la.solve(x, y)
        assert got.layout.grid == lay.grid  # solved on a's grid
        np.testing.assert_allclose(a @ gathered(got), b, atol=tol * 100 * n)
        inverse = la.inv(x)
        assert inverse.layout.same_distribution(lay.replace(devices=lay.devices[: lay.ngrid]))
        np.testing.assert_allclose(gathered(inverse) @ a, np.eye(n), atol=tol * 100 * n)
        v = build(b[:, 0].copy(), Layout.slab((n,), 0, ["cpu:1", "cpu:3"]), assignment)
        np.testing.assert_allclose(a @ gathered(la.solve(x, v)), b[:, 0], atol=tol * 100 * n)

    run()


def test_det_of_a_singular_split_matrix_is_zero():
    a = np.arange(36.0).reshape(6, 6)
    a[4] = a[1]
    lay = Layout((6, 6), block=(2, 2), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    assert abs(float(la.det(build(a, lay)))) < 1e-9


def test_det_beyond_the_largest_float_is_signed_infinity_as_numpys():
    a = 20 * np.eye(300)
    a[0, 0] = -20
    lay = Layout.slab((300, 300), 0, ["cpu:0", "cpu:1"])
    assert float(la.det(build(a, lay))) == -math.inf
    np.testing.assert_allclose(float(la.slogdet(build(a, lay)).logabsdet), 300 * math.log(20))


def test_what_is_not_distributed_still_answers():
    rng = np.random.default_rng(7)
    a = rng.standard_normal((6, 6)) + 6 * np.eye(6)
    lay = Layout((6, 6), block=(2, 2), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = build(a, lay)
    batch = np.stack([a, a.T])
    xb = build(batch, Layout((2, 6, 6), block=(1, 3, 3), grid=(1, 2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"]))
    np.testing.assert_allclose(gathered(la.inv(xb)), np.linalg.inv(batch), atol=1e-12)
    np.testing.assert_allclose(gathered(la.eigvalsh(build(a @ a.T, lay))), np.linalg.eigvalsh(a @ a.T), atol=1e-10)
    np.testing.assert_allclose(gathered(la.matrix_power(x, 0)), np.eye(6))
    q, r = la.qr(x, mode="complete")
    np.testing.assert_allclose(gathered(q) @ gathered(r), a, atol=1e-12)


def test_errors_name_the_problem():
    x = build(np.ones((4, 3), dtype="int64"), Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"]))
    with pytest.raises(dlmg.DtypeError, match="floating"):
        la.qr(x)
    with pytest.raises(TypeError, match="DistributedTensor"):
        la.svdvals(np.ones((3, 3)))
    with pytest.raises(ValueError, match="mode"):
        dlmg.ops.linalg.qr(build(np.ones((4, 3)), Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"])), mode="bogus")
    with pytest.raises(ValueError, match="extent 3"):
        la.cross(build(np.ones((4, 2)), Layout.single((4, 2))), build(np.ones((4, 2)), Layout.single((4, 2))))


# --------------------------------------------------------------------------
# nothing collects: integer matrices, mixed dtypes, broadcast right-hand sides, empty operands


def test_the_namespace_linalg_holds_no_collecting_function():
    import dlmg.array_api._gathered as gathered_module
    import dlmg.array_api.linalg as namespace_linalg

    assert not hasattr(namespace_linalg, "collected")
    assert not any(isinstance(v, gathered_module.CollectedFunction) for v in vars(namespace_linalg).values())


def _on_devices(result, lay):
    for t in result if isinstance(result, tuple) else (result,):
        assert set(t.layout.devices) <= set(lay.devices), (t.layout.devices, lay.devices)


def test_integer_and_bool_matrices_are_cast_fragment_by_fragment(monkeypatch):
    """``numpy.linalg`` casts integer and bool matrices to float64: the namespace casts each
    fragment to its framework's default float and runs the distributed algorithm."""
    _refuse_collecting(monkeypatch)

    @settings(max_examples=10, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(2, 7))
        dtype = data.draw(st.sampled_from(["int64", "int32", "uint8", "bool"]))
        seed = data.draw(st.integers(0, 99))
        rng = np.random.default_rng(seed)
        if dtype == "bool":
            a = np.eye(n, dtype=bool) | np.triu(rng.random((n, n)) < 0.3)  # determinant 1
        else:
            a = (rng.integers(0, 4, (n, n)) + 8 * n * np.eye(n, dtype=np.int64)).astype(dtype)
        lay = data.draw(st.one_of(grid_layouts(n, n), row_layouts(n, n)))
        framework = data.draw(st.sampled_from(["numpy", "torch"])) if _have_torch() else "numpy"
        x = build(a, lay, framework)
        got = la.det(x)
        assert got.dtype == "float64"
        np.testing.assert_allclose(float(got), np.linalg.det(a), rtol=1e-10)
        sign, logabs = la.slogdet(x)
        np.testing.assert_allclose((float(sign), float(logabs)), np.linalg.slogdet(a), rtol=1e-10)
        inverse = la.inv(x)
        assert inverse.dtype == "float64"
        _on_devices(inverse, lay)
        if sum(f.size > 0 for f in x.fragments) > 1:
            assert inverse.layout.ngrid > 1  # the inverse stays split
        np.testing.assert_allclose(gathered(inverse), np.linalg.inv(a), atol=1e-12)
        b = rng.integers(-5, 5, n)
        rhs = build(b, Layout.slab((n,), 0, ["cpu:1", "cpu:2"]), framework)
        np.testing.assert_allclose(gathered(la.solve(x, rhs)), np.linalg.solve(a, b), atol=1e-12)
        if dtype != "bool":
            sym = a.astype(np.int64) + a.astype(np.int64).T
            np.testing.assert_allclose(gathered(la.eigvalsh(build(sym, lay, framework))), np.linalg.eigvalsh(sym),
                                       atol=1e-9)

    run()
    stacked = np.stack([np.eye(4, dtype=np.int64) * 3 + 1, np.eye(4, dtype=np.int64) * 5 - 1])
    for lay in (Layout((2, 4, 4), block=(1, 2, 4), grid=(1, 2, 1), devices=["cpu:0", "cpu:1"]),  # split matrices
                Layout((2, 4, 4), block=(1, 4, 4), grid=(2, 1, 1), devices=["cpu:2", "cpu:3"])):  # batch-local
        xs = build(stacked, lay)
        np.testing.assert_allclose(gathered(la.det(xs)), np.linalg.det(stacked), rtol=1e-12)
        np.testing.assert_allclose(gathered(la.inv(xs)), np.linalg.inv(stacked), atol=1e-12)
        w, v = la.eigh(xs)
        np.testing.assert_allclose(gathered(w), np.linalg.eigvalsh(stacked), atol=1e-10)
    with pytest.raises(dlmg.DtypeError, match="int64"):  # the factorizations refuse them, as before
        la.cholesky(build(stacked[0], Layout.slab((4, 4), 0, ["cpu:0", "cpu:1"])))


def test_solve_of_operands_of_two_dtypes_promotes_them(monkeypatch):
    _refuse_collecting(monkeypatch)

    @settings(max_examples=14, deadline=None)
    @given(st.data())
    def run(data):
        n = data.draw(st.integers(1, 7))
        d1, d2 = data.draw(st.sampled_from([("float32", "float64"), ("float64", "float32"), ("int64", "float64"),
                                            ("float64", "complex128"), ("complex64", "float64"), ("int32", "int64")]))
        seed = data.draw(st.integers(0, 99))
        a = _data((n, n), "complex128" if "complex" in d1 else "float64", seed) + n * np.eye(n)
        a = np.round(a * 4) if d1.startswith("int") else a
        a = a.astype(d1)
        k = data.draw(st.sampled_from([None, 1, 3]))
        b = _data((n,) if k is None else (n, k), d2 if "complex" in d2 else "float64", seed + 1)
        b = np.round(b * 4).astype(d2) if d2.startswith("int") else b.astype(d2)
        lay = data.draw(st.one_of(grid_layouts(n, n), row_layouts(n, n)))
        rhs_lay = Layout.slab(b.shape, 0, ["cpu:3", "cpu:1"]) if n > 1 else Layout.single(b.shape, "cpu:3")
        x1, x2 = build(a, lay), build(b, rhs_lay)
        got = la.solve(x1, x2)
        want_dtype = np.result_type(a.dtype, b.dtype)
        want_dtype = want_dtype if want_dtype.kind in "fc" else np.dtype("float64")
        assert got.dtype == want_dtype.name
        _on_devices(got, lay)
        want = np.linalg.solve(a.astype(want_dtype), b.astype(want_dtype))
        np.testing.assert_allclose(gathered(got), want, atol=2e-4 if "float32" in (d1, d2) or "complex64" in (d1, d2)
                                   else 1e-11)

    run()


def test_solve_broadcasts_right_hand_sides(monkeypatch):
    """Right-hand sides of other batch modes than ``x1``'s: laid out as ``x1``'s batch (whole
    matrices in every fragment), or the columns of one right-hand side (one split ``x1``)."""
    _refuse_collecting(monkeypatch)
    rng = np.random.default_rng(11)
    devs = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    s = rng.standard_normal((4, 3, 3)) + 3 * np.eye(3)
    xs = build(s, Layout((4, 3, 3), block=(1, 3, 3), grid=(4, 1, 1), devices=devs))
    cases = [
        (rng.standard_normal(3), Layout.single((3,), "cpu:2")),  # one vector for every matrix
        (rng.standard_normal((1, 3, 2)), Layout.single((1, 3, 2), "cpu:1")),  # batch broadcast
        (rng.standard_normal((4, 3, 2)), Layout.slab((4, 3, 2), 1, devs[:3])),  # same batch, other layout
        (rng.standard_normal((2, 4, 3, 1)), Layout.slab((2, 4, 3, 1), 1, devs[:2])),  # more batch modes
    ]
    for b, lay in cases:
        got = la.solve(xs, build(b, lay))
        want = np.linalg.solve(s, b[None, :, None])[..., 0] if b.ndim == 1 else np.linalg.solve(s, b)
        assert got.shape == want.shape
        np.testing.assert_allclose(gathered(got), want, atol=1e-12)
    one = build(s[:1], Layout.single((1, 3, 3), "cpu:0"))  # x1 broadcast along the batch
    b = rng.standard_normal((4, 3, 2))
    np.testing.assert_allclose(gathered(la.solve(one, build(b, Layout.slab((4, 3, 2), 0, devs)))),
                               np.linalg.solve(s[:1], b), atol=1e-12)
    a = rng.standard_normal((5, 5)) + 5 * np.eye(5)
    lay = Layout((5, 5), block=(2, 3), grid=(2, 2), devices=devs)
    b = rng.standard_normal((3, 5, 2))
    got = la.solve(build(a, lay), build(b, Layout((3, 5, 2), block=(1, 3, 2), grid=(3, 2, 1), devices=devs[:3] * 2)))
    assert got.layout.ngrid > 1
    np.testing.assert_allclose(gathered(got), np.linalg.solve(a, b), atol=1e-12)
    with pytest.raises(ValueError, match="does not match"):
        la.solve(build(a, lay), build(b[:, :4], Layout.single((3, 4, 2), "cpu:0")))


def test_pinv_with_a_tensor_rtol(monkeypatch):
    _refuse_collecting(monkeypatch)
    rng = np.random.default_rng(12)
    devs = ["cpu:0", "cpu:1", "cpu:2"]
    t = rng.standard_normal((9, 3)) @ np.diag([1.0, 1e-3, 1e-9])
    x = build(t, Layout.slab((9, 3), 0, devs))
    for rtol, value in ((build(np.array(1e-4), Layout.single((), "cpu:1")), 1e-4), (np.array(1e-6), 1e-6)):
        np.testing.assert_allclose(gathered(la.pinv(x, rtol=rtol)), np.linalg.pinv(t, rtol=value), atol=1e-9)
    s = _data((2, 4, 3), "complex128", 3) * np.array([1.0, 1e-2, 1e-7])
    xs = build(s, Layout((2, 4, 3), block=(1, 4, 3), grid=(2, 1, 1), devices=devs[:2]))
    rtol = np.array([1e-1, 1e-9])
    got = la.pinv(xs, rtol=build(rtol, Layout.slab((2,), 0, devs[:2])))
    np.testing.assert_allclose(gathered(got), np.linalg.pinv(s, rtol=rtol), atol=1e-6)


EMPTY = [
    ((0, 0), Layout((0, 0), block=(1, 1), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])),
    ((5, 0), Layout((5, 0), block=(2, 1), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])),
    ((0, 3), Layout((0, 3), block=(1, 2), grid=(1, 2), devices=["cpu:1", "cpu:2"])),
    ((0, 0), Layout.single((0, 0), "cpu:3")),
    ((3, 0, 0), Layout((3, 0, 0), block=(1, 1, 1), grid=(3, 1, 1), devices=["cpu:0", "cpu:1", "cpu:2"])),
    ((0, 4, 4), Layout((0, 4, 4), block=(1, 2, 2), grid=(1, 2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])),
    ((2, 5, 0), Layout((2, 5, 0), block=(1, 3, 1), grid=(1, 2, 1), devices=["cpu:2", "cpu:3"])),
    ((0, 4, 3), Layout.slab((0, 4, 3), 1, ["cpu:0", "cpu:1"])),
]


@pytest.mark.parametrize("shape, lay", EMPTY, ids=[f"{s}-{l.grid}" for s, l in EMPTY])
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_operands_that_hold_no_elements_give_numpys_results_made_in_place(monkeypatch, shape, lay, dtype):
    _refuse_collecting(monkeypatch)
    a = np.zeros(shape, dtype)
    x = build(a, lay, "torch" if _have_torch() and dtype == "float32" else "numpy")

    def check(got, want):
        got_t = got if isinstance(got, tuple) else (got,)
        want_t = want if isinstance(want, tuple) else (want,)
        assert len(got_t) == len(want_t)
        for g, w in zip(got_t, want_t):
            w = np.asarray(w)
            _on_devices(g, lay)
            assert g.shape == w.shape and g.dtype == w.dtype.name, (g.shape, w.shape, g.dtype, w.dtype)
            np.testing.assert_array_equal(gathered(g), w)

    for mode in ("reduced", "complete"):
        check(tuple(la.qr(x, mode=mode)), tuple(np.linalg.qr(a, mode=mode)))
    for full in (True, False):
        check(tuple(la.svd(x, full_matrices=full)), tuple(np.linalg.svd(a, full_matrices=full)))
    check(la.svdvals(x), np.linalg.svd(a, compute_uv=False))
    check(la.pinv(x), np.linalg.pinv(a))
    if x.ndim == 2:
        assert int(la.matrix_rank(x)) == 0
    if shape[-1] != shape[-2]:
        return
    check(la.det(x), np.linalg.det(a))
    check(tuple(la.slogdet(x)), tuple(np.linalg.slogdet(a)))
    check(la.inv(x), np.linalg.inv(a))
    check(la.cholesky(x), np.linalg.cholesky(a))
    check(la.eigvalsh(x), np.linalg.eigvalsh(a))
    check(tuple(la.eigh(x)), tuple(np.linalg.eigh(a)))
    b = np.zeros(shape[:-1] + (2,), dtype)
    check(la.solve(x, build(b, Layout.single(b.shape, "cpu:1"))), np.linalg.solve(a, b))
    v = np.zeros(shape[-1:], dtype)
    check(la.solve(x, build(v, Layout.single(v.shape, "cpu:0"))), np.linalg.solve(a, v[..., None])[..., 0])
    ints = build(np.zeros(shape, "int64"), lay)
    check(la.det(ints), np.linalg.det(np.zeros(shape, "int64")))
    check(la.inv(ints), np.linalg.inv(np.zeros(shape, "int64")))
