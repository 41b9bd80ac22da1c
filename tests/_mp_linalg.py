"""Multi-process scenarios of distributed linear algebra (run by :mod:`tests._mp_worker`).

Every process draws the same matrices from fixed seeds, holds only its own
fragments (NumPy and torch), and checks TSQR's factors, norms and diagonals
against NumPy on the whole matrices; one scenario bounds each process's new
memory with ``tracemalloc`` (NumPy fragments, whose buffers it sees).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from tests._memory import peak_of

la = dlmg.linalg


def _scatter(x, layout, framework="numpy"):
    return dlmg.scatter(x if dd.rank() == 0 else None, layout, framework=framework)


def _rows(m, n, per_process, block):
    """``m x n`` split along rows into ``per_process`` fragments on every process, block-cyclic."""
    world = dd.world_size()
    p = world * per_process
    ranks = [i % world for i in range(p)]
    return Layout((m, n), block=(block, n), grid=(p, 1), devices=["cpu"] * p, ranks=ranks)


def linalg_tsqr():
    """qr, svd, svdvals, pinv, matrix_rank and lstsq of row-split matrices (uneven last blocks,
    two fragments per process, NumPy and torch) equal NumPy's on the whole matrix."""
    rng = np.random.default_rng(11)
    checked = 0
    for framework in ("numpy", "torch"):
        for m, n, block in ((53, 4, 5), (40, 7, 9), (9, 3, 2)):
            a = rng.standard_normal((m, n))
            lay = _rows(m, n, 2, block)
            x = _scatter(a, lay, framework)
            q, r = la.qr(x)
            assert q.layout.same_distribution(lay), repr(q.layout)
            assert all(f.framework == framework for f in q.fragments if f.is_local)
            Q, R = q.gather(framework="numpy"), r.gather(framework="numpy")
            np.testing.assert_allclose(Q @ R, a, atol=1e-12)
            np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=1e-12)
            u, s, vh = la.svd(x, full_matrices=False)
            U, S, Vh = (t.gather(framework="numpy") for t in (u, s, vh))
            np.testing.assert_allclose(S, np.linalg.svd(a, compute_uv=False), atol=1e-12)
            np.testing.assert_allclose((U * S) @ Vh, a, atol=1e-12)
            np.testing.assert_allclose(la.svdvals(x).gather(framework="numpy"), S, atol=1e-12)
            np.testing.assert_allclose(la.pinv(x).gather(framework="numpy"), np.linalg.pinv(a), atol=1e-10)
            assert int(la.matrix_rank(x)) == n
            b = rng.standard_normal((m, 2))
            y = _scatter(b, Layout((m, 2), block=(block, 2), grid=lay.grid, devices=lay.devices, ranks=lay.ranks),
                         framework)
            np.testing.assert_allclose(la.lstsq(x, y).gather(framework="numpy"),
                                       np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-10)
            # short-fat, split along columns: through the transpose
            wide = _scatter(a.T.copy(), Layout((n, m), block=(n, block), grid=(1, lay.ngrid),
                                               devices=lay.devices, ranks=lay.ranks), framework)
            u, s, vh = la.svd(wide, full_matrices=False)
            np.testing.assert_allclose((u.gather(framework="numpy") * s.gather(framework="numpy"))
                                       @ vh.gather(framework="numpy"), a.T, atol=1e-12)
            q, r = la.qr(wide)  # the short-fat QR: R keeps the column split
            assert r.layout.same_distribution(wide.layout), repr(r.layout)
            np.testing.assert_allclose(q.gather(framework="numpy") @ r.gather(framework="numpy"), a.T, atol=1e-12)
            checked += 1
    return checked


def linalg_grid():
    """Norms, diagonal, trace, matrix_power and TSQR of a matrix on a 2-D block-cyclic grid
    spread over the processes; cross of operands that broadcast."""
    world = dd.world_size()
    rng = np.random.default_rng(12)
    a = rng.standard_normal((11, 7))
    lay = Layout((11, 7), block=(3, 2), grid=(2, world), devices=["cpu"] * (2 * world),
                 ranks=[(i // 2) % world for i in range(2 * world)])
    x = _scatter(a, lay)
    for offset in (-3, 0, 2):
        np.testing.assert_allclose(la.diagonal(x, offset=offset).gather(), np.diagonal(a, offset))
        np.testing.assert_allclose(float(la.trace(x, offset=offset)), np.trace(a, offset))
    for ord_ in ("fro", 1, -1, math.inf, -math.inf, 2, -2, "nuc"):
        np.testing.assert_allclose(float(la.matrix_norm(x, ord=ord_)), np.linalg.norm(a, ord_), rtol=1e-12)
    np.testing.assert_allclose(float(la.vector_norm(x, ord=3)), np.linalg.norm(a.ravel(), 3), rtol=1e-12)
    u, s, vh = la.svd(x, full_matrices=False)
    np.testing.assert_allclose((u.gather() * s.gather()) @ vh.gather(), a, atol=1e-12)
    sq = rng.standard_normal((8, 8)) / 3
    ls = Layout((8, 8), block=(3, 3), grid=(2, world), devices=["cpu"] * (2 * world),
                ranks=[(i // 2) % world for i in range(2 * world)])
    np.testing.assert_allclose(la.matrix_power(_scatter(sq, ls), 3).gather(), np.linalg.matrix_power(sq, 3),
                               atol=1e-12)
    # cross of operands that broadcast: a row-split stack of vectors and one vector on process 0;
    # a stack split along the product mode over the processes
    u, v = rng.standard_normal((11, 3)), rng.standard_normal(3)
    rows = Layout((11, 3), block=(3, 3), grid=(2 * world, 1), devices=["cpu"] * (2 * world),
                  ranks=[i % world for i in range(2 * world)])
    out = la.cross(_scatter(u, rows), _scatter(v, Layout.single((3,), ranks=0)))
    assert out.layout.grid == rows.grid, repr(out.layout)
    np.testing.assert_allclose(out.gather(), np.cross(u, v), atol=1e-12)
    w, z = rng.standard_normal((2, 3, 5)), rng.standard_normal((3, 1))
    split = Layout((2, 3, 5), block=(2, 2, 5), grid=(1, world, 1), devices=["cpu"] * world, ranks=list(range(world)))
    np.testing.assert_allclose(la.cross(_scatter(w, split), _scatter(z, Layout.single((3, 1), ranks=world - 1)),
                                        axis=1).gather(), np.cross(w, np.broadcast_to(z, (2, 3, 5)), axis=1),
                               atol=1e-12)
    return round(float(np.linalg.norm(a)), 9)


def _tall(m: int, n: int, block: int) -> tuple[Any, int]:
    """An ``m x n`` random matrix in row blocks of ``block``, one fragment per process, and this
    process's share of it in bytes."""
    world = dd.world_size()
    lay = Layout((m, n), block=(block, n), grid=(world, 1), devices=["cpu"] * world, ranks=list(range(world)))
    rng = np.random.default_rng(dd.rank())
    mine = lay.fragments_of(dd.rank())
    arrays = [rng.standard_normal(lay.fragment(i).shape) if i in mine else None for i in range(world)]
    return dlmg.from_fragments(arrays, lay), sum(a.nbytes for a in arrays if a is not None)


def linalg_memory():
    """Each process's new memory during qr, svd, svdvals and pinv of a tall matrix it holds a
    share of stays within 1.5 x (its shares of operand and result) plus one block."""
    world = dd.world_size()
    m, n = 2 ** 14 * world, 16
    block = 2 ** 12
    x, share = _tall(m, n, block)
    small = n * n * 8 * world * 4  # the stacked factors and their products (size independent of m)
    one_block = block * n * 8
    peaks = {}
    for name, fn, result_share in (
        ("qr", lambda: la.qr(x), share), ("svd", lambda: la.svd(x, full_matrices=False), share),
        ("svdvals", lambda: la.svdvals(x), 0), ("pinv", lambda: la.pinv(x), share),
    ):
        peak = peak_of(fn)
        bound = 1.5 * (share + result_share) + one_block + small
        assert peak <= bound, f"{name}: peak {peak} bytes > bound {bound} (share {share})"
        peaks[name] = round(peak / share, 3)
    return sorted(peaks)


def linalg_full_svd_and_powers():
    """svd(full_matrices=True) of row-split (tall) and column-split (short-fat) matrices from the
    complete TSQR, U (tall) or Vh (short-fat) in the long mode's split; matrix_power with n <= 0
    (the identity made in place, the blocked inverse's powers) on a 2 x world grid."""
    world = dd.world_size()
    rng = np.random.default_rng(16)
    checked = 0
    for framework in ("numpy", "torch"):
        for m, n, block in ((23, 4, 3), (9, 3, 2)):
            a = rng.standard_normal((m, n))
            lay = _rows(m, n, 2, block)
            u, s, vh = la.svd(_scatter(a, lay, framework))
            assert u.shape == (m, m) and u.layout.grid == lay.grid, repr(u.layout)
            assert all(f.framework == framework for f in u.fragments if f.is_local)
            U, S, Vh = (t.gather(framework="numpy") for t in (u, s, vh))
            middle = np.zeros((m, n))
            middle[:n, :n] = np.diag(S)
            np.testing.assert_allclose(U @ middle @ Vh, a, atol=1e-12)
            np.testing.assert_allclose(U.T @ U, np.eye(m), atol=1e-12)
            wide = _scatter(a.T.copy(), Layout((n, m), block=(n, block), grid=(1, lay.ngrid), devices=lay.devices,
                                               ranks=lay.ranks), framework)
            u, s, vh = la.svd(wide)
            assert vh.shape == (m, m) and vh.layout.grid == (1, lay.ngrid), repr(vh.layout)
            U, S, Vh = (t.gather(framework="numpy") for t in (u, s, vh))
            np.testing.assert_allclose(U @ middle.T @ Vh, a.T, atol=1e-12)
            np.testing.assert_allclose(Vh @ Vh.T, np.eye(m), atol=1e-12)
            checked += 1
        g = rng.standard_normal((10, 10)) + 4 * np.eye(10)
        x = _scatter(g, _grid(10, (3, 2), world), framework)
        for k in (0, -1, -2, -3):
            got = la.matrix_power(x, k)
            assert got.layout.ngrid > 1 and all(f.framework == framework for f in got.fragments if f.is_local)
            np.testing.assert_allclose(got.gather(framework="numpy"), np.linalg.matrix_power(g, k), atol=1e-11)
            checked += 1
    return checked


def linalg_full_svd_memory():
    """Each process's new memory during svd(full_matrices=True) of a tall matrix it holds a share of
    stays within 1.5 x (its shares of the operand and of U) plus one block and the small factors."""
    world = dd.world_size()
    m, n, block = 1024 * world, 8, 256
    x, share = _tall(m, n, block)
    u_share = share // n * m
    small = (world * n) ** 2 * 8 * 4
    la.svd(x)  # the plans' caches filled once, as the memory of a call is measured once they exist
    peak = peak_of(lambda: la.svd(x))
    bound = 1.5 * (share + u_share) + block * n * 8 + small
    assert peak <= bound, f"svd(full_matrices=True): peak {peak} bytes > bound {bound} (share {share})"
    return True


def _stacked(batch, n, world, batch_grid=1):
    """``batch`` stacked ``n x n`` matrices, each on a 2 x world grid (grid column ``c`` on process
    ``c``), the batch mode split in ``batch_grid``."""
    count = batch_grid * 2 * world
    return Layout((batch, n, n), block=(-(-batch // batch_grid), 3, 2), grid=(batch_grid, 2, world),
                  devices=["cpu"] * count, ranks=[i // (2 * batch_grid) for i in range(count)])


def linalg_stacked():
    """Stacked matrices split along their matrix modes (the batch mode whole, or split as well)
    over the processes: qr, svd, det, inv, solve, cholesky and eigvalsh run the distributed
    algorithm per batch entry and equal NumPy's; eigh of a float16 matrix is refused on every
    process."""
    world = dd.world_size()
    rng = np.random.default_rng(17)
    checked = 0
    for framework, batch_grid in (("numpy", 1), ("torch", 2)):
        a = rng.standard_normal((3, 9, 9)) + 4 * np.eye(9)
        lay = _stacked(3, 9, world, batch_grid)
        x = _scatter(a, lay, framework)
        q, r = la.qr(x)
        assert q.layout.grid[0] == 1 and q.layout.ngrid > 1, repr(q.layout)
        np.testing.assert_allclose(q.gather(framework="numpy") @ r.gather(framework="numpy"), a, atol=1e-12)
        u, s, vh = la.svd(x)
        np.testing.assert_allclose(s.gather(framework="numpy"), np.linalg.svd(a, compute_uv=False), atol=1e-12)
        np.testing.assert_allclose((u.gather(framework="numpy") * s.gather(framework="numpy")[:, None, :])
                                   @ vh.gather(framework="numpy"), a, atol=1e-12)
        np.testing.assert_allclose(la.det(x).gather(framework="numpy"), np.linalg.det(a), rtol=1e-11)
        inverse = la.inv(x)
        assert inverse.layout.ngrid > 1 and all(f.framework == framework for f in inverse.fragments if f.is_local)
        np.testing.assert_allclose(inverse.gather(framework="numpy"), np.linalg.inv(a), atol=1e-12)
        rhs = rng.standard_normal((3, 9, 2))
        y = _scatter(rhs, Layout((3, 9, 2), block=(3, 5, 2), grid=(1, world, 1), devices=["cpu"] * world,
                                 ranks=list(range(world))), framework)
        np.testing.assert_allclose(la.solve(x, y).gather(framework="numpy"), np.linalg.solve(a, rhs), atol=1e-12)
        spd = a @ np.swapaxes(a, -1, -2) + 9 * np.eye(9)
        xs = _scatter(spd, lay, framework)
        np.testing.assert_allclose(la.cholesky(xs).gather(framework="numpy"), np.linalg.cholesky(spd), atol=1e-12)
        np.testing.assert_allclose(la.eigvalsh(xs).gather(framework="numpy"), np.linalg.eigvalsh(spd), atol=1e-9)
        checked += 1
    import torch

    half = _scatter(torch.eye(6, dtype=torch.float16) if dd.rank() == 0 else None, _grid(6, (3, 3), world), "torch")
    try:  # refused on every process, before anything moves
        la.eigh(half)
    except dlmg.DtypeError as exc:
        assert "float16" in str(exc), str(exc)
    else:
        raise AssertionError("eigh took a float16 matrix")
    return checked


def linalg_stacked_memory():
    """Each process's new memory during inv of stacked matrices split along their matrix modes
    stays within 1.5 x (its shares of the operand and the result) plus one block and the panel
    rows of one entry: each entry's inverse is written into the stacked result as it comes."""
    world = dd.world_size()
    batch, n, b = 4, 256, 32
    lay = Layout((batch, n, n), block=(batch, b, b), grid=(1, 2, world), devices=["cpu"] * (2 * world),
                 ranks=[i // 2 for i in range(2 * world)])
    rng = np.random.default_rng(18)
    a = rng.standard_normal((batch, n, n)) + n * np.eye(n)
    mine = lay.fragments_of(dd.rank())
    arrays = [np.ascontiguousarray(a[np.ix_(range(batch), lay.owned_indices(i, 1), lay.owned_indices(i, 2))])
              if i in mine else None for i in range(lay.nfragments)]
    x = dlmg.from_fragments(arrays, lay)
    del a
    share = sum(arr.nbytes for arr in arrays if arr is not None)
    panels = 2 * n * b * 8 * len(mine) * 2 * 2  # one entry's Gauss-Jordan panels (as the 2-D inv's bound)
    la.inv(x)  # the plans' caches filled once, as the memory of a call is measured once they exist
    peak = peak_of(lambda: la.inv(x))
    bound = 1.5 * (2 * share) + b * b * 8 + panels
    assert peak <= bound, f"stacked inv: peak {peak} bytes > bound {bound} (share {share})"
    return True


def _grid(n, block, world):
    """An ``n x n`` layout on a 2 x world grid, grid column ``c`` on process ``c``."""
    return Layout((n, n), block=block, grid=(2, world), devices=["cpu"] * (2 * world),
                  ranks=[i // 2 for i in range(2 * world)])


def linalg_cholesky():
    """Blocked right-looking Cholesky on a 2 x world grid over the processes (uneven last blocks,
    NumPy and torch) equals NumPy's, and so do determinants by blocked LU and solve and inv by
    blocked Gauss-Jordan; a matrix that is not positive definite raises on every process."""
    world = dd.world_size()
    rng = np.random.default_rng(14)
    for framework in ("numpy", "torch"):
        for n, block in ((13, (3, 3)), (10, (4, 2))):
            a = rng.standard_normal((n, n))
            spd = a @ a.T + n * np.eye(n)
            low = la.cholesky(_scatter(spd, _grid(n, block, world), framework))
            assert all(f.framework == framework for f in low.fragments if f.is_local)
            np.testing.assert_allclose(low.gather(framework="numpy"), np.linalg.cholesky(spd), atol=1e-12)
    for n, block in ((12, (3, 2)), (9, (2, 4))):  # determinants by blocked LU with partial pivoting
        g = rng.standard_normal((n, n))
        sign, logabs = la.slogdet(_scatter(g, _grid(n, block, world)))
        want = np.linalg.slogdet(g)
        assert float(sign) == want[0], (float(sign), want)
        np.testing.assert_allclose(float(logabs), want[1], rtol=1e-12)
    for framework in ("numpy", "torch"):  # solve and inv by blocked Gauss-Jordan
        g = rng.standard_normal((11, 11)) + 4 * np.eye(11)
        rhs = rng.standard_normal((11, 3))
        x = _scatter(g, _grid(11, (3, 2), world), framework)
        y = _scatter(rhs, Layout.slab((11, 3), 0, ["cpu"] * world, ranks=list(range(world))), framework)
        np.testing.assert_allclose(la.solve(x, y).gather(framework="numpy"), np.linalg.solve(g, rhs), atol=1e-11)
        np.testing.assert_allclose(la.inv(x).gather(framework="numpy"), np.linalg.inv(g), atol=1e-11)
    _nothing_collects(world, rng)
    bad = np.eye(8)
    bad[5, 5] = -1.0
    try:
        la.cholesky(_scatter(bad, _grid(8, (2, 2), world)))
    except (dlmg.FragmentError, dlmg.CollectiveError) as exc:
        assert "panel 2" in str(exc), str(exc)
    else:
        raise AssertionError("a matrix that is not positive definite was factorised")
    return world


def _nothing_collects(world, rng):
    """Integer matrices (cast fragment by fragment), a solve of two dtypes (promoted) and operands
    that hold no elements (results made where they are) stay distributed with the collecting
    path made to raise."""
    import dlmg.array_api._collect as collect_module
    import dlmg.array_api._gathered as gathered_module

    def refuse(*args, **kwargs):
        raise AssertionError("collected")

    saved = gathered_module.collect, collect_module.collect
    gathered_module.collect = collect_module.collect = refuse
    try:
        ints = rng.integers(-3, 4, (9, 9)) + 12 * np.eye(9, dtype=np.int64)
        x = _scatter(ints, _grid(9, (2, 3), world))
        np.testing.assert_allclose(float(la.det(x)), np.linalg.det(ints), rtol=1e-12)
        np.testing.assert_allclose(la.inv(x).gather(framework="numpy"), np.linalg.inv(ints), atol=1e-12)
        rhs = rng.standard_normal(9).astype(np.float32)
        got = la.solve(x, _scatter(rhs, Layout.slab((9,), 0, ["cpu"] * world, ranks=list(range(world)))))
        assert got.dtype == "float64"
        np.testing.assert_allclose(got.gather(framework="numpy"), np.linalg.solve(ints, rhs.astype(np.float64)),
                                   atol=1e-12)
        empty = _scatter(np.zeros((0, 0)), _grid(0, (1, 1), world))
        assert float(la.det(empty)) == 1.0 and la.inv(empty).shape == (0, 0)
        tall = _scatter(np.zeros((5, 0)), Layout((5, 0), block=(3, 1), grid=(world, 1), devices=["cpu"] * world,
                                                 ranks=list(range(world))))
        q, r = la.qr(tall, mode="complete")
        assert set(q.layout.ranks) == set(range(world))
        np.testing.assert_array_equal(q.gather(framework="numpy"), np.eye(5))
        assert r.shape == (5, 0)
    finally:
        gathered_module.collect, collect_module.collect = saved


def linalg_cholesky_memory():
    """Each process's new memory during a blocked Cholesky (a blocked LU for slogdet, Gauss-Jordan
    for inv) stays
    within 1.5 x (its shares of the operand and the result) plus one block and the panel rows of
    its rows and columns."""
    world = dd.world_size()
    n, b = 1024, 64
    lay = _grid(n, (b, b), world)
    rng = np.random.default_rng(15)
    a = rng.standard_normal((n, n))
    spd = a @ a.T + n * np.eye(n)
    mine = lay.fragments_of(dd.rank())
    arrays = [np.ascontiguousarray(spd[np.ix_(lay.owned_indices(i, 0), lay.owned_indices(i, 1))]) if i in mine
              else None for i in range(lay.nfragments)]
    x = dlmg.from_fragments(arrays, lay)
    del a, spd
    share = sum(arr.nbytes for arr in arrays if arr is not None)
    panels = 2 * n * b * 8 * len(mine) * 2  # the panel rows of its rows and of its columns, and their copies
    peak = peak_of(lambda: la.cholesky(x))
    bound = 1.5 * (2 * share) + b * b * 8 + panels
    assert peak <= bound, f"cholesky: peak {peak} bytes > bound {bound} (share {share})"
    peak = peak_of(lambda: la.slogdet(x))
    bound = 1.5 * share + b * b * 8 + panels  # the result is two numbers
    assert peak <= bound, f"slogdet: peak {peak} bytes > bound {bound} (share {share})"
    peak = peak_of(lambda: la.inv(x))
    bound = 1.5 * (2 * share) + b * b * 8 + 2 * panels  # the identity's working copy is the result's share
    assert peak <= bound, f"inv: peak {peak} bytes > bound {bound} (share {share})"
    return True


def _hermitian(n, seed, dtype="float64"):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))
    if dtype.startswith("complex"):
        a = a + 1j * rng.standard_normal((n, n))
    return ((a + a.conj().T) / 2).astype(dtype)


def _check_eigh(a, w, v, tol=1e-10):
    n = a.shape[0]
    scale = max(1.0, np.abs(a).max()) * n
    np.testing.assert_allclose(w, np.linalg.eigvalsh(a), atol=tol * scale)
    assert np.all(np.diff(w) >= -tol * scale)
    np.testing.assert_allclose(a @ v - v * w, 0, atol=tol * scale)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(n), atol=tol * n)


def linalg_eigh():
    """eigh and eigvalsh of a Hermitian matrix split over the processes (row block-cyclic, column
    slabs, a 2 x world grid; NumPy and torch; real and complex) by one-sided block Jacobi, and the
    complete QR of a tall row-split matrix, against NumPy on the whole matrices."""
    world = dd.world_size()
    layouts = [
        _rows(13, 13, 2, 3),
        Layout((10, 10), block=(10, 3), grid=(1, world), devices=["cpu"] * world, ranks=list(range(world))),
        _grid(11, (3, 2), world),
    ]
    checked = 0
    for framework, dtype in (("numpy", "float64"), ("torch", "float64"), ("numpy", "complex128")):
        for k, lay in enumerate(layouts):
            a = _hermitian(lay.shape[0], 20 + k, dtype)
            x = _scatter(a, lay, framework)
            w, v = la.eigh(x)
            assert v.layout.same_distribution(lay.replace(devices=lay.devices[: lay.ngrid],
                                                          ranks=lay.ranks[: lay.ngrid])), repr(v.layout)
            assert all(f.framework == framework for f in v.fragments if f.is_local)
            W, V = w.gather(framework="numpy"), v.gather(framework="numpy")
            _check_eigh(a, W, V)
            np.testing.assert_allclose(la.eigvalsh(x).gather(framework="numpy"), W, atol=1e-10)
            checked += 1
    rng = np.random.default_rng(21)
    for framework in ("numpy", "torch"):
        for m, n, block in ((17, 4, 3), (9, 3, 2), (6, 5, 4)):
            a = rng.standard_normal((m, n))
            lay = _rows(m, n, 2, block)
            q, r = la.qr(_scatter(a, lay, framework), mode="complete")
            assert q.shape == (m, m) and r.layout.same_distribution(lay)
            Q, R = q.gather(framework="numpy"), r.gather(framework="numpy")
            np.testing.assert_allclose(Q @ R, a, atol=1e-12)
            np.testing.assert_allclose(Q.T @ Q, np.eye(m), atol=1e-12)
            assert np.allclose(np.tril(R, -1), 0)
            checked += 1
    return checked


def linalg_eigh_memory():
    """Each process's new memory during eigh of a row block-cyclic matrix (two blocks of ``b`` rows
    per process) stays within 1.5 x (its shares of the operand and the eigenvectors) plus one block
    and the small Gram matrices."""
    world = dd.world_size()
    n = 192 * world
    b = n // (2 * world)
    lay = Layout((n, n), block=(b, n), grid=(world, 1), devices=["cpu"] * world, ranks=list(range(world)))
    a = _hermitian(n, 22)
    mine = lay.fragments_of(dd.rank())
    arrays = [np.ascontiguousarray(a[lay.owned_indices(i, 0)]) if i in mine else None for i in range(world)]
    x = dlmg.from_fragments(arrays, lay)
    del a
    share = sum(arr.nbytes for arr in arrays if arr is not None)
    gram = 3 * (2 * b) ** 2 * 8
    # a first call fills the caches of the rounds' redistribution plans (kept for the next
    # call, not memory of one call), as the memory of a call is measured once they exist
    la.eigvalsh(x)
    peak = peak_of(lambda: la.eigh(x))
    bound = 1.5 * (2 * share) + b * n * 8 + gram
    assert peak <= bound, f"eigh: peak {peak} bytes > bound {bound} (share {share})"
    return True


SCENARIOS = {"linalg_tsqr": linalg_tsqr, "linalg_grid": linalg_grid, "linalg_memory": linalg_memory,
             "linalg_cholesky": linalg_cholesky, "linalg_cholesky_memory": linalg_cholesky_memory,
             "linalg_eigh": linalg_eigh, "linalg_eigh_memory": linalg_eigh_memory,
             "linalg_full_svd_and_powers": linalg_full_svd_and_powers,
             "linalg_full_svd_memory": linalg_full_svd_memory, "linalg_stacked": linalg_stacked,
             "linalg_stacked_memory": linalg_stacked_memory}

