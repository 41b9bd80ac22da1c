"""Square matrices on 2-D block-cyclic grids: blocked right-looking Cholesky, LU with
partial pivoting (determinants) and Gauss-Jordan elimination (``solve``, ``inv``), the
layouts ScaLAPACK's ``p?potrf``/``p?getrf`` work on; and ``cholesky``'s entry point.

Each step factorises one panel where it lies, sends it along the grid's rows and
columns (one redistribution, across processes through the engine) and updates the
trailing matrix fragment by fragment in each fragment's framework.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ...device import Device
from ...errors import LayoutError
from ...layout import Layout
from .._batch import require_whole
from .._dtypes import INEXACT, require
from .._executor import Executor, executor, fail, move_array
from ..contract.pending import settled
from ..dispatch import is_distributed, map_fragments, new_tensor
from ..shape import permute_dims
from .matrices import LOCAL, REAL_OF, agreed, matrix_split, positions

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["cholesky", "cholesky_grid", "slogdet_grid", "solve_grid", "inv_grid", "solve_layout"]


def cholesky(x: "DistributedTensor", /, *, upper: bool = False) -> "DistributedTensor":
    """Cholesky factor of every matrix in the batch, fragment by fragment.

    Parameters
    ----------
    x : DistributedTensor
        Hermitian positive-definite matrices in the last two modes (square):
        whole in every fragment, leading batch modes distributed any way
        (batch-local); or one matrix split in any way (``cholesky_grid``).
    upper : bool
        Return the upper factor ``U`` (``x = U^H U``) instead of the lower ``L``.

    Returns
    -------
    DistributedTensor
        The factors, in ``x``'s layout (dense; batch-local: replicas kept; a split
        matrix: replica 0's devices).

    Raises
    ------
    LayoutError
        When a matrix mode is distributed with batch modes (the message suggests a layout).
    DtypeError
        For bool and integer tensors (cast to a floating type first).
    ValueError
        For a rank below 2 or non-square matrices.
    FragmentError
        When a fragment's framework rejects its matrices (NumPy and torch
        raise for matrices that are not positive definite; JAX returns NaN).
    """
    if not is_distributed(x):
        raise TypeError(f"dlmg.linalg.cholesky takes a DistributedTensor, got {type(x).__name__}")
    x = settled(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"dlmg.linalg.cholesky needs square matrices in the last two modes, got shape {x.shape}")
    require("dlmg.linalg.cholesky", (x.dtype,), INEXACT, "cast to a floating type with astype first")
    nd = x.ndim
    if nd == 2 and matrix_split(x) != LOCAL and x.shape[0]:
        out = cholesky_grid(x)
        if not upper:
            return out
        up = permute_dims(out, (1, 0))
        if x.dtype in REAL_OF:  # complex: the conjugate transpose
            conjugated = map_fragments(lambda xp, a: xp.conj(a), (up,), name="dlmg.linalg.cholesky")
            assert conjugated is not None
            up = conjugated
        return up.redistribute(out.layout)
    require_whole("dlmg.linalg.cholesky", x.layout, (nd - 2, nd - 1))

    def per_fragment(xp: Any, a: Any) -> Any:
        return xp.linalg.cholesky(a, upper=upper)

    local = map_fragments(per_fragment, (x,), name="dlmg.linalg.cholesky", out_layout=x.layout.dense)
    assert local is not None
    return local


# --------------------------------------------------------------------------
# blocked right-looking Cholesky on a 2-D block-cyclic grid


def _working_copies(x: "DistributedTensor", cells: int,
                    execs: dict[int, Executor] | None = None) -> tuple[dict[int, Any], dict[int, Executor]]:
    """Copies of ``x``'s local fragments among the first ``cells`` (replica 0), to be worked on in
    place, and their executors (``execs`` when given: ``x``'s arrays moved onto them)."""
    work: dict[int, Any] = {}
    execs = {} if execs is None else execs
    for f in range(cells):
        frag = x.fragments[f]
        if not frag.is_local:
            continue
        ex = execs.setdefault(f, executor(frag.framework, frag.device))
        work[f] = ex.run(lambda xp, a: xp.asarray(a, copy=True), move_array(frag.array, ex))
    return work, execs


def _replaced(ex: Executor, a: Any, r0: int, c0: int, block: Any, subtract: bool) -> Any:
    """``a`` with its sub-block at ``(r0, c0)`` (of ``block``'s shape) replaced by ``block``, or
    lowered by it with ``subtract``: in place where the framework's arrays can be written, else a
    new array assembled around the block."""
    xp = ex.xp
    r1, c1 = r0 + block.shape[0], c0 + block.shape[1]
    if ex.traits.mutable:
        if subtract:
            a[r0:r1, c0:c1] -= block
        else:
            a[r0:r1, c0:c1] = block
        return a
    if subtract:
        block = a[r0:r1, c0:c1] - block
    middle = xp.concat([a[r0:r1, :c0], block, a[r0:r1, c1:]], axis=1)
    return xp.concat([a[:r0], middle, a[r1:]], axis=0)


def _lower_spans(rows: np.ndarray, cols: np.ndarray, r1: int, c1: int, b: int,
                 by_block: bool) -> list[tuple[int, int, int]]:
    """The parts of a fragment's trailing part (local rows from ``r1``, columns from ``c1``) that
    reach the lower triangle, as ``(first local row, first local column, end column)``: one per
    local block column, from the first row at or below that block's diagonal; or, unless
    ``by_block``, the whole trailing part at once (one new array per step where arrays cannot
    be written in place)."""
    if not by_block:
        return [(r1, c1, cols.size)]
    spans = []
    start = c1
    while start < cols.size:
        block = int(cols[start]) // b
        end = int(np.searchsorted(cols, (block + 1) * b))
        first = max(r1, int(np.searchsorted(rows, block * b)))
        if first < rows.size:
            spans.append((first, start, end))
        start = end
    return spans


def _column_spans(cols: np.ndarray, c1: int, b: int, by_block: bool) -> list[tuple[int, int]]:
    """A fragment's local columns from ``c1`` on, one span per local block column (or, unless
    ``by_block``, one span)."""
    if not by_block:
        return [(c1, cols.size)]
    spans = []
    while c1 < cols.size:
        end = int(np.searchsorted(cols, (int(cols[c1]) // b + 1) * b))
        spans.append((c1, end))
        c1 = end
    return spans


def _factor_panel(xp: Any, p: Any, w: int, complex_: bool) -> Any:
    """The panel ``[A_kk; A_below]`` factorised: ``[L_kk; A_below L_kk^{-H}]``."""
    lkk = xp.linalg.cholesky(p[:w])
    if p.shape[0] == w:
        return lkk
    below = xp.matrix_transpose(p[w:])
    if complex_:
        below = xp.conj(below)
    solved = xp.matrix_transpose(xp.linalg.solve(lkk, below))
    return xp.concat([lkk, xp.conj(solved) if complex_ else solved], axis=0)


def cholesky_grid(x: "DistributedTensor", /) -> "DistributedTensor":
    """The lower Cholesky factor of one Hermitian positive-definite matrix on a 2-D block-cyclic grid.

    Blocked right-looking Cholesky as ScaLAPACK's ``p?potrf`` and cuSOLVERMp
    run it, over the layout's own blocks (square blocks: the smaller of the two
    block sizes is taken, by a redistribution, when they differ). For each
    block column ``k``:

    1. the panel (block column ``k`` from the diagonal down, held by one grid
       column) moves to the owner of the diagonal block, which factorises it:
       ``L_kk = chol(A_kk)``, ``L_ik = A_ik L_kk^{-H}``;
    2. the factorised panel is broadcast along the grid rows and the grid
       columns (two redistributions into layouts replicated over the other
       grid mode), so that every fragment holds the panel rows of its rows and
       of its columns;
    3. every fragment lowers its trailing part by ``L_i L_j^H`` in its own
       framework (in place where the framework's arrays can be written), and
       the owners of block column ``k`` store the panel.

    What moves per step is one panel (``n x b``), never the matrix; each
    process holds its share of the result plus the panel rows of its rows and
    columns. The trailing update skips the fragment's blocks above the
    diagonal where arrays are written in place (one product per local block
    column); where they cannot be (JAX), it covers the whole trailing part in
    one product. The strict upper triangle is zeroed at the end.
    """
    name = "dlmg.linalg.cholesky"
    lay = x.layout
    if lay.block[0] != lay.block[1]:
        b = min(lay.block)
        lay = Layout(x.shape, block=(b, b), grid=lay.grid, devices=lay.devices[: lay.ngrid],
                     ranks=lay.ranks[: lay.ngrid])
        x = x.redistribute(lay)
    size = x.shape[0]
    b = lay.block[0]
    dense = Layout(x.shape, block=lay.block, grid=lay.grid, devices=lay.devices[: lay.ngrid],
                   ranks=lay.ranks[: lay.ngrid])
    rows = {f: lay.owned_indices(f, 0) for f in range(lay.ngrid)}
    cols = {f: lay.owned_indices(f, 1) for f in range(lay.ngrid)}
    work, execs = _working_copies(x, lay.ngrid)
    for k in range(-(-size // b)):
        row_panel, col_panel = _cholesky_panel(name, x, work, execs, lay, (rows, cols), k)
        _cholesky_update(name, work, execs, lay, (rows, cols), k, row_panel, col_panel, x.dtype in REAL_OF)
    arrays: list[Any] = [None] * dense.nfragments
    for f, a in work.items():
        lower = np.greater_equal.outer(rows[f], cols[f])
        arrays[f] = execs[f].run(
            lambda xp, m: xp.where(xp.asarray(lower, device=m.device), m, xp.zeros_like(m)), a)
    return new_tensor(arrays, dense, x.dtype)


def _cholesky_panel(name: str, x: "DistributedTensor", work: dict[int, Any], execs: dict[int, Executor],
                    lay: Layout, owned: tuple[dict[int, np.ndarray], dict[int, np.ndarray]],
                    k: int) -> tuple["DistributedTensor", "DistributedTensor"]:
    """Steps 1 and 2 of :func:`cholesky_grid` for block column ``k``: the panel to the diagonal
    block's owner, factorised there, and broadcast along grid rows and grid columns."""
    rows, cols = owned
    gr, gc = lay.grid
    b, size = lay.block[0], x.shape[0]
    k0 = k * b
    w, rest = min(b, size - k0), size - k0
    ck = k % gc
    devices, ranks = lay.devices, lay.ranks
    owners = [(c + k) % gr + gr * ck for c in range(gr)]
    panel_layout = Layout((rest, w), block=(b, w), grid=(gr, 1), devices=[devices[f] for f in owners],
                          ranks=[ranks[f] for f in owners])
    pieces: list[Any] = [None] * gr
    for c, f in enumerate(owners):
        if f in work:
            lr0 = int(np.searchsorted(rows[f], k0))
            lc = int(np.searchsorted(cols[f], k0))
            pieces[c] = execs[f].run(lambda xp, a: xp.concat([a[lr0:, lc:lc + w]], axis=0), work[f])
    diag = k % gr + gr * ck
    single = Layout.single((rest, w), devices[diag], ranks=ranks[diag])
    home = new_tensor(pieces, panel_layout, x.dtype).redistribute(single).fragments[0]
    complex_ = x.dtype in REAL_OF

    def factor() -> Any:
        if not home.is_local:
            return None
        ex = executor(home.framework, home.device)
        try:
            return ex.run(_factor_panel, home.array, w, complex_)
        except Exception as exc:
            raise fail(f"{name} (panel {k})", diag, ex, exc) from exc

    factored = new_tensor([agreed(name, factor, panel=k, shape=x.shape)], single, x.dtype)
    by_rows = [(c + k) % gr + gr * cc for cc in range(gc) for c in range(gr)]
    by_cols = [rr + gr * ((c + k) % gc) for rr in range(gr) for c in range(gc)]
    row_panel = factored.redistribute(Layout((rest, w), block=(b, w), grid=(gr, 1),
                                             devices=[devices[f] for f in by_rows], ranks=[ranks[f] for f in by_rows]))
    col_panel = factored.redistribute(Layout((rest, w), block=(b, w), grid=(gc, 1),
                                             devices=[devices[f] for f in by_cols], ranks=[ranks[f] for f in by_cols]))
    return row_panel, col_panel


def _cholesky_update(name: str, work: dict[int, Any], execs: dict[int, Executor], lay: Layout,
                     owned: tuple[dict[int, np.ndarray], dict[int, np.ndarray]], k: int,
                     row_panel: "DistributedTensor", col_panel: "DistributedTensor", complex_: bool) -> None:
    """Step 3 of :func:`cholesky_grid`: every fragment lowers its trailing part by ``L_i L_j^H``
    and the owners of block column ``k`` store the panel (``work`` updated)."""
    rows, cols = owned
    gr, gc = lay.grid
    b, size = lay.block[0], lay.shape[0]
    k0 = k * b
    w = min(b, size - k0)
    for f, a in list(work.items()):
        r, c = f % gr, f // gr
        ex = execs[f]
        lr0, lr1 = (int(v) for v in np.searchsorted(rows[f], [k0, k0 + w]))
        lc0, lc1 = (int(v) for v in np.searchsorted(cols[f], [k0, k0 + w]))
        mine_r = move_array(row_panel.fragments[(r - k) % gr + gr * c].array, ex)
        mine_c = move_array(col_panel.fragments[(c - k) % gc + gc * r].array, ex)
        try:
            if lr1 < rows[f].size and lc1 < cols[f].size:
                right = ex.xp.matrix_transpose(mine_c[lc1 - lc0:])
                if complex_:
                    right = ex.xp.conj(right)
                for r0, c0, c1 in _lower_spans(rows[f], cols[f], lr1, lc1, b, ex.traits.mutable):
                    update = ex.xp.matmul(mine_r[r0 - lr0:], right[:, c0 - lc1:c1 - lc1])
                    a = _replaced(ex, a, r0, c0, update, True)
            if c == k % gc and lr0 < rows[f].size:
                a = _replaced(ex, a, lr0, lc0, mine_r, False)
        except Exception as exc:
            raise fail(f"{name} (trailing update {k})", f, ex, exc) from exc
        work[f] = a


# --------------------------------------------------------------------------
# determinants: blocked right-looking LU with partial pivoting on the grid, rows left in place


def _at_home(what: str, home: Any, index: int, fn: Callable[..., tuple[Any, Any]], *args: Any) -> tuple[Any, Any]:
    """``fn(xp, panel, *args)`` on the process holding a gathered panel (``home``, named as
    fragment ``index`` in errors); ``(None, None)`` elsewhere."""
    if not home.is_local:
        return None, None
    ex = executor(home.framework, home.device)
    try:
        return ex.run(fn, home.array, *args)
    except Exception as exc:
        raise fail(what, index, ex, exc) from exc


def _panel_lu(xp: Any, p: Any, rem: np.ndarray, size: int, w: int) -> tuple[Any, Any]:
    """Partial-pivoting LU of the panel's rows ``rem`` (global indices not yet pivoted).

    Returns the multipliers of every global row (``size x w``; zero for rows already pivoted and
    for this panel's pivot rows) and a ``w x (w + 2)`` record: the unit lower factor among the
    pivot rows, each pivot's global row and each pivot's value.
    """
    sub = xp.take(p, xp.asarray(rem, device=p.device), axis=0)
    nr = rem.size
    used = np.zeros(nr, dtype=bool)
    cols, pivots, values = [], [], []
    for j in range(min(w, nr)):
        magnitude = np.asarray(_host(xp.abs(sub[:, j])), dtype=np.float64)
        magnitude[used] = -1.0
        i = int(np.argmax(magnitude))
        v = sub[i, j]
        keep = ~used
        keep[i] = False
        if magnitude[i] > 0:
            ratio = sub[:, j] / v
            ratio = xp.where(xp.asarray(keep, device=p.device), ratio, xp.zeros_like(ratio))
            sub = sub - ratio[:, None] * sub[i, :][None, :]
        else:  # a zero pivot: the matrix is singular, nothing to eliminate
            ratio = xp.zeros_like(sub[:, j])
        cols.append(ratio)
        pivots.append(i)
        values.append(v)
        used[i] = True
    mult = xp.stack(cols, axis=1) if cols else sub[:, :0]
    order = np.asarray(pivots, dtype=np.int64)
    unit = xp.take(mult, xp.asarray(order, device=p.device), axis=0)  # L among the pivot rows
    unit = unit + xp.eye(len(pivots), dtype=unit.dtype, device=p.device)
    rows = np.zeros(size, dtype=np.int64)  # 0: a zero row; k + 1: row k of ``mult``
    rows[rem] = np.arange(1, nr + 1)
    rows[rem[order]] = 0
    padded = xp.concat([xp.zeros_like(mult[:1]), mult], axis=0) if nr else xp.zeros((1, w), dtype=p.dtype,
                                                                                   device=p.device)
    full = xp.take(padded, xp.asarray(rows, device=p.device), axis=0)
    where = xp.asarray(rem[order].astype(np.float64), device=p.device)
    record = xp.concat([unit, xp.astype(where, unit.dtype)[:, None], xp.stack(values)[:, None]], axis=1)
    return full, record


def _host(a: Any) -> np.ndarray:
    """A small array as NumPy on the host (through DLPack where the framework allows)."""
    return np.asarray(move_array(a, executor("numpy", Device.parse("cpu"))))


def slogdet_grid(x: "DistributedTensor", /) -> tuple[complex | float, float]:
    """Sign and log-magnitude of the determinant of one square matrix split on a 2-D grid.

    Blocked right-looking LU with partial pivoting, as ScaLAPACK's ``p?getrf``
    orders it, except that rows stay where they are (the pivot order is kept as
    a list, not applied by row swaps across fragments). For each block column
    ``k``: the column panel moves to the diagonal block's owner, which chooses
    the pivots among the rows not yet pivoted and computes the multipliers; the
    multipliers are broadcast along grid rows, the pivot rows are assembled
    from their owners (a pending sum over grid rows, each row held by one) and
    broadcast along grid columns; each fragment solves for its part of ``U``
    and lowers its trailing columns. The determinant is the product of the
    pivots and the sign of the pivot order. What moves per step: one column
    panel, one row panel; memory: the result's share as working copy plus the
    panels.
    """
    name = "dlmg.linalg.slogdet"
    lay = x.layout
    size, b = x.shape[0], lay.block[1]
    cells = lay.ngrid
    devices, ranks = lay.devices[:cells], lay.ranks[:cells]
    cols = {f: lay.owned_indices(f, 1) for f in range(cells)}
    work, execs = _working_copies(x, cells)
    if not work:
        raise LayoutError(f"{name}: this process holds no fragment of {lay!r}; every process must hold one")
    remaining = np.ones(size, dtype=bool)
    order: list[int] = []
    values: list[complex] = []
    for k in range(-(-size // b)):
        w = min(b, size - k * b)
        panel, diag = _column_panel(work, execs, lay, cols, k, w, x.dtype)
        home = panel.fragments[0]
        rem = np.flatnonzero(remaining)

        full, record = agreed(name, lambda: _at_home(f"{name} (panel {k})", home, diag, _panel_lu, rem, size, w),
                              panel=k, shape=x.shape)
        nw = min(w, rem.size)
        mult = new_tensor([full], Layout.single((size, w), devices[diag], ranks=ranks[diag]), x.dtype)
        rec = new_tensor([record], Layout.single((nw, nw + 2), devices[diag], ranks=ranks[diag]), x.dtype)
        mult = mult.redistribute(_multiplier_layout(lay, w))
        rec = rec.redistribute(Layout.replicated((nw, nw + 2), devices, ranks=ranks))
        got = _host(next(f.array for f in rec.fragments if f.is_local))
        pivots = got[:, nw].real.round().astype(np.int64)
        order.extend(int(v) for v in pivots)
        values.extend(got[:, nw + 1].tolist())
        # the pivot rows, each from the fragments of its grid row: a pending sum over grid rows
        pivot_rows = _rows_everywhere(work, execs, lay, pivots, x.dtype)
        remaining[pivots] = False
        _lu_update(name, work, execs, lay, cols, k, (rec, pivot_rows, mult), nw)
    return _sign_and_log(order, values, size)


def _multiplier_layout(lay: Layout, w: int) -> Layout:
    """Multipliers of every row (``w`` columns) split along ``lay``'s rows, replicated along its
    grid columns: fragment ``(r, c)`` is ``r + gr c``."""
    gr, gc = lay.grid
    cells = [r + gr * c for c in range(gc) for r in range(gr)]
    return Layout((lay.shape[0], w), block=(lay.block[0], w), grid=(gr, 1), devices=[lay.devices[f] for f in cells],
                  ranks=[lay.ranks[f] for f in cells])


def _column_panel(work: dict[int, Any], execs: dict[int, Executor], lay: Layout, cols: dict[int, np.ndarray],
                  k: int, w: int, dtype: str) -> tuple["DistributedTensor", int]:
    """Block column ``k`` (``w`` columns, every row) of the working copies moved to the diagonal
    block's owner, and that owner's fragment index."""
    gr, gc = lay.grid
    size, k0, ck = lay.shape[0], k * lay.block[1], k % gc
    diag = k % gr + gr * ck
    owners = [r + gr * ck for r in range(gr)]
    panel_layout = Layout((size, w), block=(lay.block[0], w), grid=(gr, 1), devices=[lay.devices[f] for f in owners],
                          ranks=[lay.ranks[f] for f in owners])
    pieces: list[Any] = [None] * gr
    for r, f in enumerate(owners):
        if f in work:
            lc = int(np.searchsorted(cols[f], k0))
            pieces[r] = execs[f].run(lambda xp, a: xp.concat([a[:, lc:lc + w]], axis=0), work[f])
    single = Layout.single((size, w), lay.devices[diag], ranks=lay.ranks[diag])
    return new_tensor(pieces, panel_layout, dtype).redistribute(single), diag


def _lu_update(name: str, work: dict[int, Any], execs: dict[int, Executor], lay: Layout,
               cols: dict[int, np.ndarray], k: int, panels: tuple[Any, Any, Any], nw: int) -> None:
    """The LU's trailing update of block column ``k``: each fragment solves for its part of ``U``
    with the unit lower factor among the pivot rows (``panels``: that record, the pivot rows and
    the multipliers) and lowers its trailing columns, one local block column at a time."""
    rec, pivot_rows, mult = panels
    gr, gc = lay.grid
    b = lay.block[1]
    end = min(k * b + b, lay.shape[0])
    for f, a in list(work.items()):
        r, c = f % gr, f // gr
        ex = execs[f]
        lc1 = int(np.searchsorted(cols[f], end))
        if lc1 >= cols[f].size or not a.shape[0]:
            continue
        unit = move_array(rec.fragments[f].array, ex)[:, :nw]
        prow = move_array(pivot_rows.fragments[c + gc * r].array, ex)
        lrows = move_array(mult.fragments[r + gr * c].array, ex)[:, :nw]
        try:
            upper = ex.xp.linalg.solve(unit, prow[:, lc1:])
            # one local block column at a time where arrays are written in place: the
            # product never needs more than one block column of new memory
            for c0, c1 in _column_spans(cols[f], lc1, b, ex.traits.mutable):
                a = _replaced(ex, a, 0, c0, ex.xp.matmul(lrows, upper[:, c0 - lc1:c1 - lc1]), True)
            work[f] = a
        except Exception as exc:
            raise fail(f"{name} (trailing update {k})", f, ex, exc) from exc


def _sign_and_log(order: list[int], values: list[complex], size: int) -> tuple[complex | float, float]:
    """The determinant's sign and log-magnitude from the pivots' values and the pivot order."""
    vals = np.asarray(values)
    magnitude = np.abs(vals)
    if np.any(magnitude == 0):
        return 0.0, float("-inf")
    perm = np.asarray(order, dtype=np.int64)
    seen = np.zeros(size, dtype=bool)
    swaps = 0
    for start in range(size):  # the pivot order's parity, cycle by cycle
        length = 0
        j = start
        while not seen[j]:
            seen[j] = True
            j = int(perm[j])
            length += 1
        swaps += max(length - 1, 0)
    sign = (-1.0) ** swaps * np.prod(vals / magnitude)
    return (complex(sign) if np.iscomplexobj(vals) else float(np.real(sign))), float(np.sum(np.log(magnitude)))


# --------------------------------------------------------------------------
# solve and inv: blocked Gauss-Jordan elimination with partial pivoting on the grid


def _rows_everywhere(work: dict[int, Any], execs: dict[int, Executor], lay: Layout, wanted: np.ndarray,
                     dtype: str) -> "DistributedTensor":
    """The global rows ``wanted`` of a tensor of ``lay`` (fragments ``work``), each fragment's local
    columns, gathered along grid rows: a pending sum over grid rows (each row held by one) resolved
    into a layout replicated along grid rows; fragment ``(r, c)`` reads fragment ``c + gc r``."""
    gr, gc = lay.grid
    q = wanted.size
    order = [r + gr * c for r in range(gr) for c in range(gc)]
    pending = Layout((q, lay.shape[1]), block=(max(q, 1), lay.block[1]), grid=(1, gc),
                     devices=[lay.devices[f] for f in order], ranks=[lay.ranks[f] for f in order],
                     partial="sum" if gr > 1 else None)
    arrays: list[Any] = [None] * pending.nfragments
    for f, a in work.items():
        r, c = f % gr, f // gr
        at, owned = positions(lay.owned_indices(f, 0), wanted)

        def pick(xp: Any, m: Any) -> Any:
            if not owned.any():
                return xp.zeros((q, m.shape[1]), dtype=m.dtype, device=m.device)
            taken = xp.take(m, xp.asarray(np.where(owned, at, 0), device=m.device), axis=0)
            return xp.where(xp.asarray(owned[:, None], device=m.device), taken, xp.zeros_like(taken))

        arrays[c + gc * r] = execs[f].run(pick, a)
    return new_tensor(arrays, pending, dtype).redistribute(pending.replace(partial=None))


def _set_rows(ex: Executor, a: Any, local: np.ndarray, values: Any) -> Any:
    """``a`` with its local rows ``local`` set to ``values`` (in place where arrays can be written)."""
    if not local.size:
        return a
    xp = ex.xp
    index = xp.asarray(local, device=a.device)
    if ex.traits.mutable:
        a[index] = values
        return a
    mapping = np.arange(a.shape[0])
    mapping[local] = a.shape[0] + np.arange(local.size)
    return xp.take(xp.concat([a, values], axis=0), xp.asarray(mapping, device=a.device), axis=0)


def _gj_panel(xp: Any, p: Any, k0: int, w: int, size: int) -> tuple[Any, Any]:
    """The pivots of the panel's rows from ``k0`` down (partial pivoting), and, with those rows
    swapped into place, the multipliers of every row (zero for the pivot rows) and a record
    ``[D^-1 | pivot rows]`` of the ``w x w`` pivot block ``D``."""
    _, record = _panel_lu(xp, p, np.arange(k0, size), size, w)
    pivots = np.asarray(_host(record[:, w]).real.round(), dtype=np.int64)
    cur = _swapped(pivots, k0, size)
    after = xp.take(p, xp.asarray(cur, device=p.device), axis=0)
    dinv = xp.linalg.inv(after[k0:k0 + w])
    keep = np.ones(size, dtype=bool)
    keep[k0:k0 + w] = False
    mult = xp.where(xp.asarray(keep[:, None], device=p.device), after, xp.zeros_like(after))
    where = xp.astype(xp.asarray(pivots.astype(np.float64), device=p.device), dinv.dtype)
    return mult, xp.concat([dinv, where[:, None]], axis=1)


def _swapped(pivots: np.ndarray, k0: int, size: int) -> np.ndarray:
    """``cur[g]``: the row that holds position ``g`` after swapping row ``k0 + j`` with the row
    holding ``pivots[j]`` (LAPACK's order of interchanges)."""
    cur = np.arange(size)
    where = np.arange(size)  # where[row] = its position
    for j, p in enumerate(pivots):
        t, s = k0 + j, int(where[p])
        rt, rs = cur[t], cur[s]
        cur[t], cur[s] = rs, rt
        where[rs], where[rt] = t, s
    return cur


def solve_grid(a: "DistributedTensor", b: "DistributedTensor", /) -> "DistributedTensor":
    """``X`` with ``a @ X = b`` for one square matrix ``a`` split on a 2-D grid and ``b`` laid out on
    the same grid (rows as ``a``'s, its own column blocks): blocked Gauss-Jordan elimination with
    partial pivoting.

    For each block column ``k``: the column panel moves to one owner, which picks the pivots
    (partial pivoting among the rows from the diagonal down), and returns ``D^-1`` of the pivot
    block and the multipliers of every row; the rows that the interchanges move are assembled
    from their owners and broadcast along grid rows (a pending sum over grid rows, resolved into a
    layout replicated along them), every fragment writes its moved rows, scales the pivot rows by
    ``D^-1`` and lowers every other row (above the diagonal too) in its trailing columns of ``a``
    and all its columns of ``b``. At the end ``b``'s working copy holds ``X`` in ``b``'s layout.
    What moves per step: one column panel, at most ``2 b`` rows, the multipliers; memory: working
    copies of both shares plus those panels.
    """
    name = "dlmg.linalg.solve"
    lay, blay = a.layout, b.layout
    size, bw = a.shape[0], lay.block[1]
    cells = lay.ngrid
    work_a, execs = _working_copies(a, cells)
    work_b, _ = _working_copies(b, cells, execs)
    works = [work_a, work_b]
    rows = {f: lay.owned_indices(f, 0) for f in range(cells)}
    cols = {f: lay.owned_indices(f, 1) for f in range(cells)}
    everywhere = Layout.replicated((1, 1), lay.devices[:cells], ranks=lay.ranks[:cells])
    for k in range(-(-size // bw)):
        k0, w = k * bw, min(bw, size - k * bw)
        panel, diag = _column_panel(works[0], execs, lay, cols, k, w, a.dtype)
        home = panel.fragments[0]

        mult, record = agreed(name, lambda: _at_home(f"{name} (panel {k})", home, diag, _gj_panel, k0, w, size),
                              panel=k, shape=a.shape)
        here = Layout.single((size, w), lay.devices[diag], ranks=lay.ranks[diag])
        mult = new_tensor([mult], here, a.dtype).redistribute(_multiplier_layout(lay, w))
        rec = new_tensor([record], Layout.single((w, w + 1), lay.devices[diag], ranks=lay.ranks[diag]), a.dtype)
        rec = rec.redistribute(everywhere.replace(shape=(w, w + 1), block=(w, w + 1)))
        pivots = np.asarray(_host(next(f.array for f in rec.fragments if f.is_local))[:, w].real.round(),
                            dtype=np.int64)
        _gj_update(name, works, execs, (lay, blay), (rows, cols), k, (rec, mult), pivots, a.dtype)
    out = Layout(b.shape, block=blay.block, grid=blay.grid, devices=blay.devices[:cells], ranks=blay.ranks[:cells])
    return new_tensor([works[1].get(f) for f in range(cells)], out, b.dtype)


def _gj_update(name: str, works: list[dict[int, Any]], execs: dict[int, Executor], layouts: tuple[Layout, Layout],
               owned: tuple[dict[int, np.ndarray], dict[int, np.ndarray]], k: int, panels: tuple[Any, Any],
               pivots: np.ndarray, dtype: str) -> None:
    """The Gauss-Jordan step of block column ``k`` on the working copies of ``a`` and ``b``
    (``works``): the rows the interchanges move, gathered along grid rows, are written; the pivot
    rows are scaled by ``D^-1`` (``panels``: that record and the multipliers) and every other row
    lowered, in ``a``'s trailing columns and all of ``b``'s."""
    rec, mult = panels
    lay = layouts[0]
    rows, cols = owned
    gr, gc = lay.grid
    size = lay.shape[0]
    k0, w = k * lay.block[1], pivots.size
    cur = _swapped(pivots, k0, size)
    moved = np.flatnonzero(cur != np.arange(size))
    sources = np.unique(np.concatenate([cur[moved], pivots]))
    gathered = [_rows_everywhere(works[i], execs, layouts[i], sources, dtype) for i in (0, 1)]
    diagonal = np.arange(k0, k0 + w)
    for f in list(works[0]):
        r, c = f % gr, f // gr
        ex = execs[f]
        xp = ex.xp
        at, held = positions(rows[f], moved)
        pos, pivot_here = positions(rows[f], diagonal)
        dinv = move_array(rec.fragments[f].array, ex)[:, :w]
        lrows = move_array(mult.fragments[r + gr * c].array, ex)
        try:
            for i in (0, 1):
                m = works[i][f]
                panel_rows = move_array(gathered[i].fragments[c + gc * r].array, ex)
                # the interchanges: position g takes the row cur[g]
                src = np.searchsorted(sources, cur[moved[held]])
                m = _set_rows(ex, m, at[held], xp.take(panel_rows, xp.asarray(src, device=m.device), axis=0))
                start = int(np.searchsorted(cols[f], k0 + w)) if i == 0 else 0
                scaled = xp.matmul(dinv, xp.take(panel_rows, xp.asarray(np.searchsorted(sources, pivots),
                                                                        device=m.device), axis=0)[:, start:])
                if start < m.shape[1] and m.shape[0]:
                    m = _replaced(ex, m, 0, start, xp.matmul(lrows, scaled), True)
                    own = xp.asarray(np.flatnonzero(pivot_here), device=m.device)
                    m = _set_rows_from(ex, m, pos[pivot_here], start, xp.take(scaled, own, axis=0))
                works[i][f] = m
        except Exception as exc:
            raise fail(f"{name} (elimination {k})", f, ex, exc) from exc


def _set_rows_from(ex: Executor, a: Any, local: np.ndarray, start: int, values: Any) -> Any:
    """``a`` with its local rows ``local``, from column ``start`` on, set to ``values``."""
    if not local.size:
        return a
    if start == 0:
        return _set_rows(ex, a, local, values)
    left = ex.xp.take(a, ex.xp.asarray(local, device=a.device), axis=0)[:, :start]
    return _set_rows(ex, a, local, ex.xp.concat([left, values], axis=1))


def inv_grid(a: "DistributedTensor", /) -> "DistributedTensor":
    """The inverse of one square matrix split on a 2-D grid: :func:`solve_grid` with the identity
    laid out as ``a`` (each fragment makes its own piece of it), the result in ``a``'s layout."""
    lay = a.layout
    cells = lay.ngrid
    dense = Layout(a.shape, block=lay.block, grid=lay.grid, devices=lay.devices[:cells], ranks=lay.ranks[:cells])
    arrays: list[Any] = [None] * cells
    for f in range(cells):
        frag = a.fragments[f]
        if frag.is_local:
            eye = np.equal.outer(lay.owned_indices(f, 0), lay.owned_indices(f, 1))
            ex = executor(frag.framework, frag.device)
            arrays[f] = ex.run(lambda xp, m: xp.astype(xp.asarray(eye, device=m.device), m.dtype), frag.array)
    return solve_grid(a, new_tensor(arrays, dense, a.dtype))


def solve_layout(a: Layout, nrhs: int) -> Layout:
    """The layout :func:`solve_grid` wants for right-hand sides of ``nrhs`` columns: ``a``'s rows and
    grid, the columns in blocks over the grid columns."""
    gr, gc = a.grid
    return Layout((a.shape[0], nrhs), block=(a.block[0], max(1, -(-nrhs // gc))), grid=(gr, gc),
                  devices=a.devices[: a.ngrid], ranks=a.ranks[: a.ngrid])
