"""Linear algebra on distributed tensors: TSQR and what is built on it, and the batch-local maps.

Three ways a matrix can be laid out, three ways to work on it:

* **whole matrices in every fragment** (the last two modes have grid 1; leading
  batch modes may be split any way): each fragment's framework factorises the
  matrices it holds, on its device, through its array-API namespace
  (:func:`batch_local`). Nothing moves.
* **tall-skinny, split along rows** (``m >= n``, only the row mode split, any
  blocks, several fragments per device, mixed frameworks): TSQR (Demmel,
  Grigori, Hoemmen and Langou 2012; Benson, Gleich and Demmel 2013; dask's
  ``array/linalg.py`` ``tsqr``), :func:`tsqr`. Each fragment's framework
  computes the QR of its rows, ``A_f = Q_f R_f``; the small ``n x n`` factors
  ``R_f`` are stacked into one ``(p n) x n`` matrix by a redistribution onto
  the first fragment's device (across processes through the engine), where one
  QR ``[R_1; ...; R_p] = Q_s R`` gives ``R``; the blocks of ``Q_s`` (with the
  small SVD or pseudo-inverse factors folded in) return to their fragments by
  a second redistribution and ``Q_f Q_s[f]`` is the fragment's part of ``Q``,
  in the input's layout. The tree has one level: what moves is ``p`` small
  factors each way, whose size does not grow with ``m``.
* **short-fat, split along columns** (``m < n``): the same on the transposed
  view, ``A^T = U' S V'^H`` giving ``A = (V'^H)^T S U'^T``.

Other layouts of a single matrix (both modes split, or the long mode whole and
the short one split) are redistributed first into slabs of the long mode over
the same devices; that is a move of the operand, never a gather.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..distributed.state import current
from ..distributed.agree import describe, prepare
from ..errors import LayoutError
from ..layout import Layout
from ._batch import require_whole
from ._dtypes import INEXACT, require
from ._executor import Executor, array_device, executor, fail, move_array
from .contract.pending import settled
from .dispatch import is_distributed, map_fragments, new_tensor
from .shape import permute_dims

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = [
    "cholesky", "batch_local", "matrix_split", "tsqr", "qr", "svd", "svdvals", "pinv", "REAL_OF", "TALL", "WIDE",
    "LOCAL", "diagonal", "batch_local_layout", "cholesky_grid", "slogdet_grid", "solve_grid", "inv_grid",
    "solve_layout", "qr_complete", "svd_complete", "identity_like", "batch_whole", "stack_entries",
]

#: the real dtype of each inexact dtype (singular values, norms)
REAL_OF = {"complex64": "float32", "complex128": "float64"}

#: :func:`matrix_split`'s answers: whole matrices in every fragment, split along rows (tall),
#: split along columns (short-fat); anything else is ``None``
LOCAL, TALL, WIDE = "local", "tall", "wide"


def _check(name: str, x: Any) -> "DistributedTensor":
    """``x`` settled (a pending sum resolved), checked to hold inexact matrices."""
    if not is_distributed(x):
        raise TypeError(f"{name} takes a DistributedTensor, got {type(x).__name__}")
    x = settled(x)
    if x.ndim < 2:
        raise ValueError(f"{name} needs matrices in the last two modes, got shape {x.shape}")
    require(name, (x.dtype,), INEXACT, "cast to a floating type with astype first")
    return x


def matrix_split(x: "DistributedTensor") -> str | None:
    """How ``x``'s matrices (its last two modes) are split: :data:`LOCAL` (whole in every
    fragment), :data:`TALL` (a 2-D tensor split along rows only, ``m >= n``), :data:`WIDE`
    (split along columns only, ``m < n``), or ``None`` (any other split)."""
    g = x.layout.grid
    if g[-1] == 1 and g[-2] == 1:
        return LOCAL
    if x.ndim != 2:
        return None
    m, n = x.shape
    if g[1] == 1 and m >= n:
        return TALL
    if g[0] == 1 and m < n:
        return WIDE
    return None


def _slabs_of_long_mode(x: "DistributedTensor") -> "DistributedTensor":
    """``x`` (2-D) redistributed into slabs of its longer mode over its replica-0 devices."""
    lay = x.layout
    axis = 0 if x.shape[0] >= x.shape[1] else 1
    target = Layout.slab(x.shape, axis, lay.devices[: lay.ngrid], ranks=lay.ranks[: lay.ngrid])
    return x.redistribute(target)


def _tall(x: "DistributedTensor") -> tuple["DistributedTensor", bool]:
    """A tall tensor split along rows for TSQR, and whether it is ``x``'s transpose."""
    split = matrix_split(x)
    if split is None:
        x = _slabs_of_long_mode(x)
        split = matrix_split(x)
    if split == WIDE:
        return permute_dims(x, (1, 0)), True
    return x, False


# --------------------------------------------------------------------------
# batch-local work: whole matrices in every fragment


def batch_local_layout(layout: Layout, tail: tuple[int, ...], drop: int = 2) -> Layout:
    """The layout of a batch-local result: ``layout``'s batch modes (all but the last ``drop``)
    followed by whole modes of extents ``tail``."""
    nb = layout.ndim - drop
    return Layout(
        layout.shape[:nb] + tail,
        block=layout.block[:nb] + tuple(max(t, 1) for t in tail),
        grid=layout.grid[:nb] + (1,) * len(tail),
        devices=layout.devices,
        ranks=layout.ranks,
    )


def batch_local(
    name: str, x: "DistributedTensor", fn: Callable[..., Any], outs: Sequence[tuple[tuple[int, ...], str]],
    drop: int = 2,
) -> tuple["DistributedTensor", ...]:
    """``fn(xp, matrices)`` on every fragment of ``x`` (whole matrices in each), one tensor per
    result.

    Parameters
    ----------
    name : str
        The operation, for error messages.
    x : DistributedTensor
        Its last ``drop`` modes whole in every fragment.
    fn : callable
        ``fn(xp, array)`` returns a tuple of arrays, one per entry of ``outs``.
    outs : sequence of (tuple of int, str)
        The trailing extents (after the batch modes) and the dtype of each result.
    drop : int
        How many trailing modes of ``x`` the results replace.

    Returns
    -------
    tuple of DistributedTensor
        In ``x``'s batch distribution, replicas kept; nothing is communicated.
    """
    layouts = [batch_local_layout(x.layout, tail, drop) for tail, _ in outs]
    arrays: list[list[Any]] = [[None] * x.layout.nfragments for _ in outs]
    for frag in x.fragments:
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            got = ex.run(fn, frag.array)
        except Exception as exc:
            raise fail(name, frag.index, ex, exc) from exc
        for k, a in enumerate(got):
            arrays[k][frag.index] = a if hasattr(a, "__dlpack__") else ex.xp.asarray(a)
    return tuple(new_tensor(a, lay, dtype) for a, lay, (_, dtype) in zip(arrays, layouts, outs))


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
        up = map_fragments(lambda xp, a: xp.conj(a), (up,), name="dlmg.linalg.cholesky") if x.dtype in REAL_OF else up
        return up.redistribute(out.layout)
    require_whole("dlmg.linalg.cholesky", x.layout, (nd - 2, nd - 1))

    def per_fragment(xp: Any, a: Any) -> Any:
        return xp.linalg.cholesky(a, upper=upper)

    out = map_fragments(per_fragment, (x,), name="dlmg.linalg.cholesky", out_layout=x.layout.dense)
    assert out is not None
    return out


# --------------------------------------------------------------------------
# stacked split matrices: the distributed algorithm per batch entry


def batch_whole(x: "DistributedTensor") -> "DistributedTensor":
    """``x`` (batch modes, matrix modes split) with its batch modes whole in every fragment.

    Where a batch mode is split, ``x`` is redistributed over the same replica-0 devices into a
    layout whose row mode takes the batch modes' grid on top of its own (row blocks of
    ``ceil(m / grid)``), the columns keeping theirs: a move of the operand, whose shares stay the
    same size, never a gather. Each batch entry ``x[b]`` is then one split matrix on every device.
    """
    lay = x.layout
    nb = x.ndim - 2
    if all(g == 1 for g in lay.grid[:nb]):
        return x
    m = x.shape[-2]
    rows = lay.ngrid // lay.grid[-1]
    target = Layout(x.shape, block=tuple(max(e, 1) for e in x.shape[:nb]) + (max(-(-m // rows), 1), lay.block[-1]),
                    grid=(1,) * nb + (rows, lay.grid[-1]), devices=lay.devices[: lay.ngrid],
                    ranks=lay.ranks[: lay.ngrid])
    return x.redistribute(target)


def stack_entries(name: str, entries: Iterable[tuple["DistributedTensor", ...]],
                  batch: tuple[int, ...]) -> tuple["DistributedTensor", ...]:
    """The results of one matrix function over the batch entries, stacked into tensors of leading
    shape ``batch``, fragment by fragment where each entry's result lies (nothing moves).

    ``entries`` yields, in C order over ``batch``, one tuple of results per entry; the first
    entry's layouts are the pattern (a later result laid out another way is redistributed to
    it). Each local fragment's entries are written into one new array as they come where the
    framework's arrays can be written (an entry's result is freed once written), else stacked
    at the end. The results have the batch modes whole (grid 1) before the pattern's modes.
    """
    count = math.prod(batch)
    pattern: list[Layout] = []
    dtypes: list[str] = []
    held: list[dict[int, tuple[Executor, Any]]] = []
    for j, results in enumerate(entries):
        if not pattern:
            pattern = [r.layout.dense for r in results]
            dtypes = [r.dtype for r in results]
            held = [{} for _ in results]
        for k, r in enumerate(results):
            if not r.layout.same_distribution(pattern[k]):
                r = r.redistribute(pattern[k])
            for frag in r.fragments:
                if not frag.is_local:
                    continue
                if j == 0:
                    ex = executor(frag.framework, frag.device)
                    a = frag.array
                    store = (ex.run(lambda xp, a: xp.empty((count, *a.shape), dtype=a.dtype, device=array_device(a)),
                                    a) if ex.traits.mutable else [])
                    held[k][frag.index] = (ex, store)
                ex, store = held[k][frag.index]
                a = move_array(frag.array, ex)
                if isinstance(store, list):
                    store.append(a)
                else:
                    store[j] = a
    assert pattern, f"{name}: no batch entries"
    outs = []
    for k, lay in enumerate(pattern):
        stacked = Layout(batch + lay.shape, block=tuple(max(e, 1) for e in batch) + lay.block,
                         grid=(1,) * len(batch) + lay.grid, devices=lay.devices, ranks=lay.ranks)
        arrays: list[Any] = [None] * stacked.nfragments
        for i, (ex, store) in held[k].items():
            shape = tuple(stacked.fragments[i].shape)
            arrays[i] = ex.run(lambda xp, a: xp.reshape(xp.stack(a) if isinstance(a, list) else a, shape), store)
        outs.append(new_tensor(arrays, stacked, dtypes[k]))
    return tuple(outs)


def identity_like(x: "DistributedTensor", /) -> "DistributedTensor":
    """Identity matrices of ``x``'s shape, dtype and layout (dense, replicas kept; square last two
    modes, batch modes broadcast): each fragment makes its entries where it is, in its framework,
    from the global row and column indices it owns. Nothing is communicated."""
    lay = x.layout.dense
    nd = x.ndim
    arrays: list[Any] = [None] * lay.nfragments
    for frag in x.fragments:
        if not frag.is_local:
            continue
        geometry = lay.fragments[frag.index]
        rows, cols = geometry.owned_indices(nd - 2), geometry.owned_indices(nd - 1)
        ones = np.array(np.broadcast_to(rows[:, None] == cols[None, :], geometry.shape))  # writable
        ex = executor(frag.framework, frag.device)
        arrays[frag.index] = ex.run(lambda xp, a, m: xp.astype(xp.asarray(m, device=a.device), a.dtype),
                                    frag.array, ones)
    return new_tensor(arrays, lay, x.dtype)


def _agreed(what: str, work: Callable[[], Any], **fields: Any) -> Any:
    """``work()``, and across processes an agreement on it, so that a failure on the one process
    that computes raises on every process instead of leaving the others waiting."""
    engine = current()
    if engine is None:
        return work()
    return prepare(engine, describe(what, **fields), work)


# --------------------------------------------------------------------------
# TSQR


class _Piece:
    """One local fragment's QR: its executor, ``Q_f`` and how many of ``Q_s``'s rows it takes."""

    __slots__ = ("ex", "q", "k")

    def __init__(self, ex: Executor, q: Any, k: int) -> None:
        self.ex, self.q, self.k = ex, q, k


class _ChunkedQ:
    """A fragment's ``Q_f = diag(Q_1, ..., Q_c) Q_2`` from a flat TSQR over its row chunks: ``buf``
    (``m_f x n``) holds each chunk's own ``Q_i`` in the chunk's rows, ``small`` is ``Q_2``
    (``c n x n``, the QR of the stacked chunk factors) and ``bounds`` the chunks' row spans."""

    __slots__ = ("buf", "small", "bounds")

    def __init__(self, buf: Any, small: Any, bounds: list[tuple[int, int]]) -> None:
        self.buf, self.small, self.bounds = buf, small, bounds


#: at most this many row chunks per fragment in the local QR (its new memory beyond ``Q_f``
#: is then one chunk's QR, an eighth of a copy of the fragment)
_CHUNKS = 8


def _chunk_rows(m: int, n: int) -> int:
    """Rows per chunk of an ``m x n`` fragment's local QR: at most :data:`_CHUNKS` chunks, each of
    at least ``2 n`` rows (so that every chunk's ``Q_i`` is ``rows x n``)."""
    return max(2 * n, -(-m // _CHUNKS), 1)


def _spans(m: int, chunk: int) -> list[tuple[int, int]]:
    """Row spans of ``chunk`` rows covering ``m``; a short last one joins the one before."""
    starts = list(range(0, m, chunk))
    if len(starts) > 1 and m - starts[-1] < chunk:
        starts.pop()
    return [(a, b) for a, b in zip(starts, starts[1:] + [m])]


def _r_only(xp: Any, a: Any, chunk: int) -> Any:
    """``R`` of ``a`` without forming its ``Q``: sequential TSQR over ``chunk`` rows at a time
    (``R = qr([R; next rows])``), so the new memory is one chunk, not a copy of ``a``."""
    r = None
    for start in range(0, a.shape[0], chunk):
        piece = a[start:start + chunk]
        if r is not None:
            piece = xp.concat([r, piece], axis=0)
        r = xp.linalg.qr(piece)[1]
    return r


def _chunked_qr(xp: Any, a: Any, spans: list[tuple[int, int]]) -> tuple[_ChunkedQ, Any]:
    """The flat TSQR of ``a``'s row chunks into one buffer written in place: each chunk's
    ``Q_i R_i``, ``Q_i`` stored in ``buf``'s rows of the chunk, then ``[R_1; ...; R_c] = Q_2 R``.
    The new memory is ``Q_f``'s buffer and one chunk's QR, not a copy of ``a`` beside ``Q_f``."""
    buf = xp.empty(a.shape, dtype=a.dtype, device=a.device)
    rs = []
    for start, stop in spans:
        q, r = xp.linalg.qr(a[start:stop])
        buf[start:stop] = q
        rs.append(r)
        del q
    small, r = xp.linalg.qr(xp.concat(rs, axis=0))
    return _ChunkedQ(buf, small, spans), r


def _chunked_apply(xp: Any, q: _ChunkedQ, wf: Any) -> Any:
    """``Q_f W_f = diag(Q_i) (Q_2 W_f)`` (``W_f``: ``n x n``) written over ``Q_f``'s buffer, chunk
    by chunk: the result is the buffer, the new memory one chunk's product."""
    n = wf.shape[0]
    folded = xp.matmul(q.small, wf)
    for c, (start, stop) in enumerate(q.bounds):
        q.buf[start:stop] = xp.matmul(q.buf[start:stop], folded[c * n:(c + 1) * n])
    return q.buf


def _explicit_q(xp: Any, q: _ChunkedQ) -> Any:
    """``Q_f`` itself, formed in its buffer (``Q_i Q_2[i]`` chunk by chunk)."""
    return _chunked_apply(xp, q, xp.eye(q.small.shape[1], dtype=q.small.dtype, device=q.small.device))


def _local_qr(xp: Any, a: Any, n: int, want_q: bool = True, in_place: bool = False) -> tuple[Any, Any]:
    """``Q_f`` (``m_f x min(m_f, n)``; ``None`` unless ``want_q``) and ``R_f`` padded with zero
    rows to ``n x n``. ``R`` alone comes from a chunk of rows at a time; with ``in_place`` (the
    framework's arrays can be written) and rows for two chunks, ``Q_f`` is a :class:`_ChunkedQ`."""
    m = a.shape[0]
    if m == 0:  # an empty fragment: no rows of Q, a zero R
        return a[:, :0], xp.matmul(xp.matrix_transpose(a), a)
    chunk = _chunk_rows(m, n)
    if not want_q:
        q, r = None, _r_only(xp, a, chunk)
    elif in_place and m >= 2 * chunk:
        q, r = _chunked_qr(xp, a, _spans(m, chunk))
    else:
        q, r = xp.linalg.qr(a)
    short = n - r.shape[0]
    if short > 0:
        r = xp.concat([r, xp.zeros_like(xp.broadcast_to(r[:1], (short, n)))], axis=0)
    return q, r


def tsqr(
    name: str,
    x: "DistributedTensor",
    small: Callable[..., tuple[Any, ...]],
    smalls: Sequence[tuple[tuple[int, ...], str]],
    width: int | None,
    apply: Callable[[Any, Any, Any, int], Any] | None = None,
    out_layout: Layout | None = None,
) -> tuple["DistributedTensor | None", tuple["DistributedTensor", ...]]:
    """TSQR of a tall matrix split along rows (see the module), with a small step on the stacked factors.

    Parameters
    ----------
    name : str
        The operation, for error messages.
    x : DistributedTensor
        2-D, ``m >= n``, only the row mode split (replicas: replica 0 is read).
    small : callable
        ``small(xp, S)`` on the stacked ``(p n) x n`` factors, on the first fragment's device:
        returns ``(W, *results)``, ``W`` of shape ``(p n) x width`` (or ``None`` when ``width``
        is ``None``) and the small results of ``smalls``.
    smalls : sequence of (shape, dtype)
        The small results, each returned as one fragment on the first fragment's device.
    width : int or None
        The columns of ``W``; ``None``: no distributed result (``Q_f`` are dropped).
    apply : callable, optional
        ``apply(xp, Q_f, W_f, f)`` makes fragment ``f`` of the distributed result (default ``Q_f W_f``).
    out_layout : Layout, optional
        The distributed result's layout (default: ``x``'s, ``width`` columns, no replicas).

    Returns
    -------
    (DistributedTensor or None, tuple of DistributedTensor)
        The distributed result and the small results.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    rows = [lay.fragment(i).shape[0] for i in range(p)]
    # full fragments first: a padded block never supplies a pivot row of the stacked QR
    order = sorted(range(p), key=lambda i: (rows[i] < n, i))
    devices = [lay.devices[i] for i in order]
    ranks = [lay.ranks[i] for i in order]
    stacked = Layout((p * n, n), block=(n, n), grid=(p, 1), devices=devices, ranks=ranks)
    pieces: dict[int, _Piece] = {}
    blocks: list[Any] = [None] * p
    keep_q = width is not None
    for j, i in enumerate(order):
        frag = x.fragments[i]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            q, r = ex.run(_local_qr, frag.array, n, keep_q, ex.traits.mutable)
        except Exception as exc:
            raise fail(f"{name} (local QR)", i, ex, exc) from exc
        blocks[j] = r
        if keep_q:
            pieces[j] = _Piece(ex, q, min(rows[i], n))
    home_dev, home_rank = devices[0], ranks[0]
    gathered = new_tensor(blocks, stacked, x.dtype).redistribute(Layout.single((p * n, n), home_dev, ranks=home_rank))
    del blocks
    home = gathered.fragments[0]

    def on_home() -> tuple[Any, ...]:
        if not home.is_local:
            return (None,) * (1 + len(smalls))
        ex = executor(home.framework, home.device)
        try:
            return ex.run(small, home.array)
        except Exception as exc:
            raise fail(f"{name} (the stacked factors)", 0, ex, exc) from exc

    outs = _agreed(name, on_home, stacked=(p * n, n))
    results = tuple(
        new_tensor([o], Layout.single(shape, home_dev, ranks=home_rank), dtype)
        for o, (shape, dtype) in zip(outs[1:], smalls)
    )
    if not keep_q:
        return None, results
    assert width is not None
    w_single = Layout.single((p * n, width), home_dev, ranks=home_rank)
    w_stacked = Layout((p * n, width), block=(n, max(width, 1)), grid=(p, 1), devices=devices, ranks=ranks)
    w = new_tensor([outs[0]], w_single, x.dtype).redistribute(w_stacked)
    if out_layout is None:
        out_layout = Layout((m, width), block=(lay.block[0], max(width, 1)), grid=(p, 1),
                            devices=lay.devices[:p], ranks=lay.ranks[:p])
    arrays: list[Any] = [None] * out_layout.nfragments
    run = apply if apply is not None else (lambda xp, q, wf, _f: xp.matmul(q, wf))
    for j, piece in pieces.items():
        i = order[j]
        ex = piece.ex
        try:
            wf = move_array(w.fragments[j].array, ex)[: piece.k]
            q = piece.q
            if not isinstance(q, _ChunkedQ):
                arrays[i] = ex.run(run, q, wf, i)
            elif apply is None and width == n:  # Q_f W_f written over Q_f's buffer
                arrays[i] = ex.run(_chunked_apply, q, wf)
            else:
                arrays[i] = ex.run(run, ex.run(_explicit_q, q), wf, i)
            del q
        except Exception as exc:
            raise fail(f"{name} (applying Q)", i, ex, exc) from exc
        piece.q = None  # each local Q_f freed once used
    return new_tensor(arrays, out_layout, x.dtype), results


# --------------------------------------------------------------------------
# the factorizations


def qr(x: "DistributedTensor", /, *, mode: str = "reduced") -> tuple["DistributedTensor", "DistributedTensor"]:
    """QR factorization ``x = Q R``: batch-local, or TSQR for a tall matrix split along rows.

    Parameters
    ----------
    x : DistributedTensor
        Matrices in the last two modes, whole in every fragment; or one tall
        (``m >= n``) matrix split in any way (redistributed into row slabs
        first when its columns are split).
    mode : {"reduced", "complete"}
        ``"complete"``: ``Q`` is ``m x m``, ``R`` ``m x n`` (for a split
        matrix both in its row distribution, :func:`qr_complete`).

    Returns
    -------
    (DistributedTensor, DistributedTensor)
        ``Q`` (``m x n``, ``x``'s row distribution, orthonormal columns) and
        ``R`` (``n x n``, upper triangular, one fragment on the first
        fragment's device).

    Raises
    ------
    LayoutError
        For split matrix modes with batch modes.

    Notes
    -----
    A short-fat (``m < n``) split matrix is factorised by :func:`qr_wide`:
    ``Q`` is ``m x m``, ``R`` (``m x n``) keeps the column distribution.
    """
    name = "dlmg.linalg.qr"
    x = _check(name, x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"{name}: mode must be 'reduced' or 'complete', got {mode!r}")
    split = matrix_split(x)
    m, n = x.shape[-2:]
    if split == LOCAL:
        k = m if mode == "complete" else min(m, n)
        q, r = batch_local(name, x, lambda xp, a: tuple(xp.linalg.qr(a, mode=mode)),
                           [((m, k), x.dtype), ((k, n), x.dtype)])
        return q, r
    if x.ndim == 2 and m < n:
        return qr_wide(x)
    if x.ndim != 2:
        raise LayoutError(
            f"{name}: distributed QR is TSQR of one tall matrix (m >= n); got shape "
            f"{x.shape}, mode {mode!r}, layout {x.layout!r}. Make the matrices whole in every fragment "
            "first (redistribute) for the other cases"
        )
    if split is None:
        x = _slabs_of_long_mode(x)
    if mode == "complete":
        return qr_complete(x)

    def small(xp: Any, s: Any) -> tuple[Any, Any]:
        qs, r = xp.linalg.qr(s)
        return qs, r

    q, (r,) = tsqr(name, x, small, [((n, n), x.dtype)], n)
    assert q is not None
    return q, r


def qr_wide(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor"]:
    """The QR ``x = Q R`` of one short-fat matrix (``m < n``), split in any way.

    For ``m < n`` write ``A = [A_1 A_2]`` with ``A_1`` the leading ``m x m``
    block: its QR ``A_1 = Q R_1`` gives ``R = Q^H A = [R_1  Q^H A_2]``, upper
    trapezoidal, and the reduced and complete factorizations are the same
    (``Q`` is ``m x m``). This is the order of LAPACK's ``xGEQRF`` for
    ``m < n`` (Golub & Van Loan, *Matrix Computations*, 4th ed., sec. 5.2):
    the first ``m`` Householder reflections are those of ``A_1`` alone.

    What moves: the matrix into column slabs over its replica-0 devices when
    it is split another way (one redistribution); ``A_1`` (``m x m``, whose
    size does not grow with the distributed extent ``n``) to the first
    fragment's device, where it is factorised; ``Q`` back to every fragment's
    device. Each fragment then computes its columns of ``R = Q^H A_f`` where
    it is, and the first ``m`` columns are made exactly upper triangular.
    ``R`` keeps the column-slab layout; ``Q`` is one fragment on the first
    fragment's device.
    """
    name = "dlmg.linalg.qr"
    m, n = x.shape
    if matrix_split(x) != WIDE or x.layout.nreplicas > 1:
        x = _slabs_of_long_mode(x)
    lay = x.layout
    p = lay.ngrid
    devices, ranks = lay.devices[:p], lay.ranks[:p]
    lead = x[:, :m].redistribute(Layout.single((m, m), devices[0], ranks=ranks[0]))
    q, _ = qr(lead)
    q_all = q.redistribute(Layout.replicated((m, m), devices, ranks=ranks))
    arrays: list[Any] = [None] * p
    for i in range(p):
        frag = x.fragments[i]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        qf = move_array(q_all.fragments[i].array, ex)
        below = np.arange(m)[:, None] > lay.owned_indices(i, 1)[None, :]  # zero in R's leading block

        def columns(xp: Any, a: Any, qq: Any) -> Any:
            r = xp.matmul(xp.conj(xp.permute_dims(qq, (1, 0))), a)
            return xp.where(xp.asarray(below, device=a.device), xp.zeros_like(r), r)

        try:
            arrays[i] = ex.run(columns, frag.array, qf)
        except Exception as exc:
            raise fail(name, i, ex, exc) from exc
    return q, new_tensor(arrays, lay, x.dtype)


def _reflectors(xp: Any, q: Any) -> list[Any]:
    """Householder vectors ``v_j`` (unit norm, zero above row ``j``) with ``H_1 ... H_k [D; 0] = q``
    for ``q`` of orthonormal columns (``H_j = I - 2 v_j v_j^H``, ``D`` diagonal of unit modulus):
    LAPACK's ``xGEQRF`` on ``q`` (Golub & Van Loan, sec. 5.1), one column at a time. Each column,
    reflected by the earlier ones, has unit norm below its row, so no vector degenerates."""
    mf, kf = q.shape
    vs: list[Any] = []
    for j in range(kf):
        c = q[:, j]
        for v in vs:
            c = c - 2 * v * xp.sum(xp.conj(v) * c)
        below = c[j:]
        size = xp.abs(below[:1])
        phase = xp.where(size > 0, below[:1] / xp.where(size > 0, size, xp.ones_like(size)), xp.ones_like(below[:1]))
        v = xp.concat([xp.zeros((j,), dtype=q.dtype, device=q.device), below[:1] + phase * xp.linalg.vector_norm(below),
                       below[1:]])
        vs.append(v / xp.linalg.vector_norm(v))
    return vs


def _complement_columns(xp: Any, q: Any, start: int, stop: int, vs: list[Any]) -> Any:
    """Columns ``start:stop`` (``start >= k``) of ``H_1 ... H_k``: orthonormal, orthogonal to ``q``'s."""
    mf = q.shape[0]
    e = xp.eye(mf, stop - start, k=-start, dtype=q.dtype, device=q.device)
    for v in reversed(vs):
        e = e - 2 * v[:, None] * xp.matmul(xp.conj(v)[None, :], e)
    return e


def _complete_rows(xp: Any, q: Any, wf: Any, m: int, offset: int, mutable: bool) -> Any:
    """Fragment rows of the complete ``Q``: ``Q_f W_f`` in the first columns, an orthonormal
    complement of ``Q_f``'s columns (the trailing columns of ``Q_f``'s Householder product,
    made a panel of columns at a time, never ``m_f x m_f`` at once) at ``offset``, zeros
    elsewhere; written into one new array where the framework's arrays can be written, else
    assembled by concatenation."""
    mf, kf = q.shape
    vs = _reflectors(xp, q)
    width = max(kf, 64)
    spans = [(a, min(a + width, mf)) for a in range(kf, mf, width)]
    if mutable:
        out = xp.zeros((mf, m), dtype=q.dtype, device=q.device)
        for a, b in spans:
            out[:, offset + a - kf: offset + b - kf] = _complement_columns(xp, q, a, b, vs)
        out[:, : wf.shape[1]] = xp.matmul(q, wf)
        return out
    parts = [xp.matmul(q, wf)]
    if mf > kf:
        parts.append(xp.zeros((mf, offset - wf.shape[1]), dtype=q.dtype, device=q.device))
        parts += [_complement_columns(xp, q, a, b, vs) for a, b in spans]
    end = sum(part.shape[1] for part in parts)
    parts.append(xp.zeros((mf, m - end), dtype=q.dtype, device=q.device))
    return xp.concat(parts, axis=1)


def _tsqr_complete(name: str, x: "DistributedTensor", with_svd: bool) -> tuple["DistributedTensor",
                                                                                 tuple["DistributedTensor", ...]]:
    """The complete ``Q`` (``m x m``) of a tall matrix split along rows, from TSQR, and the small results.

    Each fragment's QR ``A_f = Q_f R_f`` (``Q_f``: ``m_f x k_f``, ``k_f = min(m_f, n)``) and the
    complete QR of the stacked ``R_f`` (``K = sum k_f`` rows), ``[R_1; ...; R_p] = Q_s R_s``,
    give ``Q = diag(Q_f) [E Q_s | 0] + diag(Q_f^perp) F``: fragment ``f``'s rows of ``Q`` are
    ``Q_f Q_s[f]`` in the first ``K`` columns and the orthonormal complement ``Q_f^perp`` of
    ``Q_f``'s columns (``m_f - k_f`` of them, from a local complete QR of ``Q_f``) in a column
    span of its own after them. ``with_svd``: the SVD ``R = U_R S V^H`` of the small ``R``
    (``n x n``, ``K >= n``) is folded into the first ``n`` columns, ``Q diag(U_R, I)``, and the
    small results are ``S`` and ``V^H``; else the small result is ``R``.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    rows = [lay.fragment(i).shape[0] for i in range(p)]
    kept = [min(r, n) for r in rows]
    total = sum(kept)
    offsets, start = [], total
    for r, k in zip(rows, kept):
        offsets.append(start)
        start += r - k
    order = sorted(range(p), key=lambda i: (rows[i] < n, i))  # tsqr's stacking order
    valid = np.concatenate([np.arange(kept[i]) + n * j for j, i in enumerate(order)]) if total else \
        np.zeros(0, dtype=np.int64)
    mapping = np.full(p * n, total, dtype=np.int64)
    mapping[valid] = np.arange(total)

    def small(xp: Any, s: Any) -> tuple[Any, ...]:
        qs, r = xp.linalg.qr(xp.take(s, xp.asarray(valid, device=s.device), axis=0), mode="complete")
        extra: tuple[Any, ...] = (r[:n],)
        if with_svd:
            u, sv, vh = xp.linalg.svd(r[:n], full_matrices=False)
            qs = xp.concat([xp.matmul(qs[:, :n], u), qs[:, n:]], axis=1)
            extra = (sv, vh)
        padded = xp.concat([qs, xp.zeros((1, total), dtype=qs.dtype, device=qs.device)], axis=0)
        return (xp.take(padded, xp.asarray(mapping, device=s.device), axis=0), *extra)

    smalls = [((n,), REAL_OF.get(x.dtype, x.dtype)), ((n, n), x.dtype)] if with_svd else [((n, n), x.dtype)]
    out_layout = Layout((m, m), block=(lay.block[0], max(m, 1)), grid=(p, 1), devices=lay.devices[:p],
                        ranks=lay.ranks[:p])
    mutable = [executor(f.framework, f.device).traits.mutable if f.is_local else False for f in x.fragments]
    q, results = tsqr(name, x, small, smalls, total,
                      lambda xp, qf, wf, f: _complete_rows(xp, qf, wf, m, offsets[f], mutable[f]), out_layout)
    assert q is not None
    return q, results


def qr_complete(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor"]:
    """The complete QR ``x = Q R`` (``Q`` is ``m x m``) of a tall matrix split along rows, from TSQR.

    ``Q`` as :func:`_tsqr_complete` makes it. What moves is TSQR's (the small factors, ``K x K``
    on the way back); ``Q`` and ``R`` (``m x n``, zero below row ``n``) keep ``x``'s row
    distribution, and each fragment makes its rows of them where it is.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    q, (r_small,) = _tsqr_complete("dlmg.linalg.qr", x, False)
    dense = Layout((m, n), block=(lay.block[0], max(n, 1)), grid=(p, 1), devices=lay.devices[:p],
                   ranks=lay.ranks[:p])
    r_all = r_small.redistribute(Layout.replicated((n, n), lay.devices[:p], ranks=lay.ranks[:p]))
    arrays: list[Any] = [None] * p
    for i in range(p):
        frag = r_all.fragments[i]
        if not frag.is_local:
            continue
        idx = lay.owned_indices(i, 0)
        top = idx[idx < n]
        ex = executor(frag.framework, frag.device)
        arrays[i] = ex.run(lambda xp, a: xp.concat([xp.take(a, xp.asarray(top, device=a.device), axis=0),
                                                    xp.zeros((idx.size - top.size, n), dtype=a.dtype,
                                                             device=a.device)], axis=0), frag.array)
    return q, new_tensor(arrays, dense, x.dtype)


def svd_complete(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor", "DistributedTensor"]:
    """The full SVD ``x = U diag(S) Vh`` (``full_matrices=True``) of one split matrix, from the complete TSQR.

    For a tall matrix (``m >= n``) the complete ``Q`` of TSQR and the SVD
    ``R = U_R S V^H`` of its small ``R`` give ``x = Q [R; 0] = (Q diag(U_R, I)) [S; 0] V^H``, so
    ``U = Q diag(U_R, I)`` (``m x m``; ``U_R`` folded into the stacked factors on the first
    fragment's device, nothing else moves than TSQR's small factors) keeps ``x``'s row
    distribution; ``S`` and ``Vh`` (``n x n``) are one fragment on the first fragment's
    device. A short-fat matrix goes through its transpose: ``Vh`` (``n x n``) keeps the
    column distribution and ``U`` (``m x m``) is small. Other splits are redistributed into
    slabs of the long mode first.
    """
    name = "dlmg.linalg.svd"
    x = _check(name, x)
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = _tall(x)
    u, (sv, vh) = _tsqr_complete(name, t, True)
    if transposed:  # x = t^T = (U' S V'h)^T = V'h^T S U'^T
        return permute_dims(vh, (1, 0)), sv, permute_dims(u, (1, 0))
    return u, sv, vh


def svd(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor", "DistributedTensor"]:
    """Thin SVD ``x = U diag(S) Vh`` (``full_matrices=False``): batch-local, or the SVD of TSQR's ``R``.

    For a tall matrix split along rows ``U = Q (Q_s U_R)`` keeps ``x``'s row
    distribution, ``S`` and ``Vh`` are small; for a short-fat matrix split
    along columns ``Vh`` keeps the column distribution (a transposed view of
    the TSQR factor of ``x^T``) and ``U`` is small.
    """
    name = "dlmg.linalg.svd"
    x = _check(name, x)
    m, n = x.shape[-2:]
    k = min(m, n)
    real = REAL_OF.get(x.dtype, x.dtype)
    if matrix_split(x) == LOCAL:
        return batch_local(name, x, lambda xp, a: tuple(xp.linalg.svd(a, full_matrices=False)),
                           [((m, k), x.dtype), ((k,), real), ((k, n), x.dtype)])
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = _tall(x)

    def small(xp: Any, s: Any) -> tuple[Any, Any, Any]:
        qs, r = xp.linalg.qr(s)
        u, sv, vh = xp.linalg.svd(r, full_matrices=False)
        return xp.matmul(qs, u), sv, vh

    u, (sv, vh) = tsqr(name, t, small, [((k,), real), ((k, k), x.dtype)], k)
    assert u is not None
    if transposed:  # x = t^T = (U' S V'h)^T = V'h^T S U'^T
        return permute_dims(vh, (1, 0)), sv, permute_dims(u, (1, 0))
    return u, sv, vh


def svdvals(x: "DistributedTensor", /) -> "DistributedTensor":
    """The singular values, descending: batch-local, or those of TSQR's ``R`` (no ``Q`` is formed)."""
    name = "dlmg.linalg.svdvals"
    x = _check(name, x)
    m, n = x.shape[-2:]
    real = REAL_OF.get(x.dtype, x.dtype)
    if matrix_split(x) == LOCAL:
        (s,) = batch_local(name, x, lambda xp, a: (xp.linalg.svdvals(a),), [((min(m, n),), real)])
        return s
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, _ = _tall(x)
    k = min(m, n)

    def small(xp: Any, s: Any) -> tuple[None, Any]:
        _, r = xp.linalg.qr(s)
        return None, xp.linalg.svdvals(r)

    _, (sv,) = tsqr(name, t, small, [((k,), real)], None)
    return sv


def _cutoff(xp: Any, s: Any, rtol: float | None, m: int, n: int) -> Any:
    """The singular values above ``rtol * max(s)`` (the array API's default ``rtol``: ``max(m, n) eps``)."""
    if rtol is None:
        rtol = max(m, n) * float(xp.finfo(s.dtype).eps)
    return s > rtol * xp.max(s) if s.shape[-1] else s > 0


def pinv(x: "DistributedTensor", /, *, rtol: float | None = None) -> "DistributedTensor":
    """The Moore-Penrose pseudo-inverse: batch-local, or ``V S^+ U^H`` from TSQR's ``R``.

    For a tall matrix split along rows the result (``n x m``) is split along
    columns as ``x`` is along rows; each fragment computes
    ``(Q_f W_f)^H`` with ``W = Q_s U_R S^+ Vh`` folded on the first fragment's
    device. A short-fat matrix goes through its transpose.
    """
    name = "dlmg.linalg.pinv"
    x = _check(name, x)
    m, n = x.shape[-2:]
    if matrix_split(x) == LOCAL:
        def local(xp: Any, a: Any) -> tuple[Any]:
            return (xp.linalg.pinv(a) if rtol is None else xp.linalg.pinv(a, rtol=rtol),)

        (out,) = batch_local(name, x, local, [((n, m), x.dtype)])
        return out
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = _tall(x)
    tm, tn = t.shape
    complex_ = x.dtype in REAL_OF

    def small(xp: Any, s: Any) -> tuple[Any]:
        qs, r = xp.linalg.qr(s)
        u, sv, vh = xp.linalg.svd(r, full_matrices=False)
        keep = _cutoff(xp, sv, rtol, tm, tn)
        inv = xp.where(keep, 1 / xp.where(keep, sv, xp.ones_like(sv)), xp.zeros_like(sv))
        return (xp.matmul(xp.matmul(qs, u) * xp.astype(inv, u.dtype)[None, :], vh),)

    def apply(xp: Any, q: Any, wf: Any, _f: int) -> Any:
        left, right = xp.matrix_transpose(wf), xp.matrix_transpose(q)
        if complex_:
            left, right = xp.conj(left), xp.conj(right)
        return xp.matmul(left, right)

    lay = t.layout
    p = lay.ngrid
    out_layout = Layout((tn, tm), block=(max(tn, 1), lay.block[0]), grid=(1, p), devices=lay.devices[:p],
                        ranks=lay.ranks[:p])
    out, _ = tsqr(name, t, small, [], tn, apply, out_layout)
    assert out is not None
    if transposed:  # pinv(x) = pinv(x^T)^T
        return permute_dims(out, (1, 0))
    return out


def _batch_split(name: str, x: "DistributedTensor") -> LayoutError:
    return LayoutError(
        f"{name}: with batch modes, the matrix modes must be whole in every fragment; got shape {x.shape}, "
        f"layout {x.layout!r}. Redistribute them whole, or take one matrix at a time"
    )


# --------------------------------------------------------------------------
# diagonals: each fragment its owned entries, summed over the other matrix mode's grid


def _diagonal_layout(lay: Layout, along: int, length: int, partial: str) -> tuple[Layout, list[int]]:
    """The pending layout of a diagonal that follows matrix mode ``along`` (the other matrix mode's
    grid coordinates become replicas, holding addends), and the source fragment of each of its
    fragments."""
    nd = lay.ndim
    other = 2 * nd - 3 - along
    nb = nd - 2
    batch = 1
    for g in lay.grid[:nb]:
        batch *= g
    ga, go = lay.grid[along], lay.grid[other]
    gr = lay.grid[nd - 2]
    sources = []
    for o in range(go):
        for a in range(ga):
            r, c = (a, o) if along == nd - 2 else (o, a)
            sources.extend(b + batch * (r + gr * c) for b in range(batch))
    out = Layout(
        lay.shape[:nb] + (length,),
        block=lay.block[:nb] + (lay.block[along],),
        grid=lay.grid[:nb] + (ga,),
        devices=[lay.devices[s] for s in sources],
        ranks=[lay.ranks[s] for s in sources],
        partial=partial if go > 1 else None,
    )
    return out, sources


def diagonal(x: "DistributedTensor", /, *, offset: int = 0) -> "DistributedTensor":
    """The diagonal ``offset`` above the main one of every matrix (the last two modes), in any layout.

    Whole matrices in every fragment: each fragment's framework takes its diagonals. Split
    matrices: the diagonal follows the rows' distribution (``offset >= 0``) or the columns'
    (``offset < 0``); each fragment contributes the entries it owns and zeros elsewhere, a pending
    sum over the other mode's grid that one reduction resolves. Nothing else moves.
    """
    if not is_distributed(x):
        raise TypeError(f"dlmg.linalg.diagonal takes a DistributedTensor, got {type(x).__name__}")
    x = settled(x)
    if x.ndim < 2:
        raise ValueError(f"dlmg.linalg.diagonal needs at least 2 modes, got shape {x.shape}")
    offset = int(offset)
    nd = x.ndim
    m, n = x.shape[-2:]
    length = max(0, min(m, n - offset)) if offset >= 0 else max(0, min(m + offset, n))
    if matrix_split(x) == LOCAL:
        (out,) = batch_local("dlmg.linalg.diagonal", x, lambda xp, a: (xp.linalg.diagonal(a, offset=offset),),
                             [((length,), x.dtype)])
        return out
    lay = x.layout
    along = nd - 2 if offset >= 0 else nd - 1
    partial = "max" if x.dtype == "bool" else "sum"
    out_layout, sources = _diagonal_layout(lay, along, length, partial)
    arrays: list[Any] = [None] * out_layout.nfragments
    for j, s in enumerate(sources):
        frag = x.fragments[s]
        if not frag.is_local:
            continue
        rows, cols = lay.owned_indices(s, nd - 2), lay.owned_indices(s, nd - 1)
        idx = lay.owned_indices(s, along)
        idx = idx[idx < length]
        want_r, want_c = (idx, idx + offset) if offset >= 0 else (idx - offset, idx)
        li, ok_r = _positions(rows, want_r)
        lj, ok_c = _positions(cols, want_c)
        ok = ok_r & ok_c
        ex = executor(frag.framework, frag.device)

        def take(xp: Any, a: Any) -> Any:
            shape = a.shape[:-2] + (idx.size,)
            if not ok.any():
                return xp.zeros(shape, dtype=a.dtype, device=a.device)
            i = xp.asarray(np.where(ok, li, 0), device=a.device)
            k = xp.asarray(np.where(ok, lj, 0), device=a.device)
            vals = a[..., i, k]
            if ok.all():
                return vals
            return xp.where(xp.asarray(ok, device=a.device), vals, xp.zeros_like(vals))

        try:
            arrays[j] = ex.run(take, frag.array)
        except Exception as exc:
            raise fail("dlmg.linalg.diagonal", s, ex, exc) from exc
    return settled(new_tensor(arrays, out_layout, x.dtype))


# --------------------------------------------------------------------------
# blocked right-looking Cholesky on a 2-D block-cyclic grid


def _positions(rows: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the global indices ``wanted`` sit among a fragment's sorted owned ``rows``, and which
    of them it owns: the one search that the pivot rows, the interchanges and the pivot block of
    the LU and Gauss-Jordan eliminations all make."""
    at = np.searchsorted(rows, wanted)
    if not rows.size:
        return at, np.zeros(wanted.size, dtype=bool)
    return at, (at < rows.size) & (rows[np.minimum(at, rows.size - 1)] == wanted)


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

    factored = new_tensor([_agreed(name, factor, panel=k, shape=x.shape)], single, x.dtype)
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

        def factor() -> tuple[Any, Any]:
            if not home.is_local:
                return None, None
            ex = executor(home.framework, home.device)
            try:
                return ex.run(_panel_lu, home.array, rem, size, w)
            except Exception as exc:
                raise fail(f"{name} (panel {k})", diag, ex, exc) from exc

        full, record = _agreed(name, factor, panel=k, shape=x.shape)
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
        at, owned = _positions(lay.owned_indices(f, 0), wanted)

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

        def factor() -> tuple[Any, Any]:
            if not home.is_local:
                return None, None
            ex = executor(home.framework, home.device)
            try:
                return ex.run(_gj_panel, home.array, k0, w, size)
            except Exception as exc:
                raise fail(f"{name} (panel {k})", diag, ex, exc) from exc

        mult, record = _agreed(name, factor, panel=k, shape=a.shape)
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
        at, held = _positions(rows[f], moved)
        pos, pivot_here = _positions(rows[f], diagonal)
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
