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

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import LayoutError
from ..layout import Layout
from ._batch import require_whole
from ._dtypes import INEXACT, require
from ._executor import Executor, executor, fail, move_array
from .contract.pending import settled
from .dispatch import is_distributed, map_fragments, new_tensor
from .shape import permute_dims

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = [
    "cholesky", "batch_local", "matrix_split", "tsqr", "qr", "svd", "svdvals", "pinv", "REAL_OF", "TALL", "WIDE",
    "LOCAL", "diagonal", "batch_local_layout",
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
    """The layout of a batch-local result: ``layout``'s batch modes (all but the last ``drop``) followed by whole modes of extents ``tail``."""
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
        Hermitian positive-definite matrices in the last two modes (square,
        whole in every fragment); leading batch modes may be distributed.
    upper : bool
        Return the upper factor ``U`` (``x = U^H U``) instead of the lower ``L``.

    Returns
    -------
    DistributedTensor
        The factors, in ``x``'s layout (dense; replicas kept).

    Raises
    ------
    LayoutError
        When a matrix mode is distributed (the message suggests a layout).
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
    require_whole("dlmg.linalg.cholesky", x.layout, (nd - 2, nd - 1))

    def per_fragment(xp: Any, a: Any) -> Any:
        return xp.linalg.cholesky(a, upper=upper)

    out = map_fragments(per_fragment, (x,), name="dlmg.linalg.cholesky", out_layout=x.layout.dense)
    assert out is not None
    return out


# --------------------------------------------------------------------------
# TSQR


class _Piece:
    """One local fragment's QR: its executor, ``Q_f`` and how many of ``Q_s``'s rows it takes."""

    __slots__ = ("ex", "q", "k")

    def __init__(self, ex: Executor, q: Any, k: int) -> None:
        self.ex, self.q, self.k = ex, q, k


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


def _local_qr(xp: Any, a: Any, n: int, want_q: bool = True, chunk: int = 0) -> tuple[Any, Any]:
    """``Q_f`` (``m_f x min(m_f, n)``; ``None`` unless ``want_q``) and ``R_f`` padded with zero
    rows to ``n x n``; without ``Q``, ``R`` comes from ``chunk`` rows at a time."""
    if a.shape[0] == 0:  # an empty fragment: no rows of Q, a zero R
        return a[:, :0], xp.matmul(xp.matrix_transpose(a), a)
    if want_q:
        q, r = xp.linalg.qr(a)
    else:
        q, r = None, _r_only(xp, a, max(chunk, 2 * n, 1))
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
    apply: Callable[[Any, Any, Any], Any] | None = None,
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
        ``apply(xp, Q_f, W_f)`` makes a fragment of the distributed result (default ``Q_f W_f``).
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
            q, r = ex.run(_local_qr, frag.array, n, keep_q, lay.block[0])
        except Exception as exc:
            raise fail(f"{name} (local QR)", i, ex, exc) from exc
        blocks[j] = r
        if keep_q:
            pieces[j] = _Piece(ex, q, min(rows[i], n))
    home_dev, home_rank = devices[0], ranks[0]
    gathered = new_tensor(blocks, stacked, x.dtype).redistribute(Layout.single((p * n, n), home_dev, ranks=home_rank))
    del blocks
    home = gathered.fragments[0]
    outs: tuple[Any, ...] = (None,) * (1 + len(smalls))
    if home.is_local:
        ex = executor(home.framework, home.device)
        try:
            outs = ex.run(small, home.array)
        except Exception as exc:
            raise fail(f"{name} (the stacked factors)", 0, ex, exc) from exc
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
    run = apply if apply is not None else (lambda xp, q, wf: xp.matmul(q, wf))
    for j, piece in pieces.items():
        i = order[j]
        ex = piece.ex
        try:
            wf = move_array(w.fragments[j].array, ex)[: piece.k]
            arrays[i] = ex.run(run, piece.q, wf)
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
        ``"complete"`` only for whole matrices in every fragment.

    Returns
    -------
    (DistributedTensor, DistributedTensor)
        ``Q`` (``m x n``, ``x``'s row distribution, orthonormal columns) and
        ``R`` (``n x n``, upper triangular, one fragment on the first
        fragment's device).

    Raises
    ------
    LayoutError
        For a short-fat matrix split along columns, ``mode="complete"`` of a
        split matrix, or split matrix modes with batch modes.
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
    if x.ndim != 2 or m < n or mode != "reduced":
        raise LayoutError(
            f"{name}: distributed QR is TSQR of one tall matrix (m >= n, mode 'reduced'); got shape "
            f"{x.shape}, mode {mode!r}, layout {x.layout!r}. Make the matrices whole in every fragment "
            "first (redistribute) for the other cases"
        )
    if split is None:
        x = _slabs_of_long_mode(x)

    def small(xp: Any, s: Any) -> tuple[Any, Any]:
        qs, r = xp.linalg.qr(s)
        return qs, r

    q, (r,) = tsqr(name, x, small, [((n, n), x.dtype)], n)
    assert q is not None
    return q, r


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

    def apply(xp: Any, q: Any, wf: Any) -> Any:
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
        li = np.searchsorted(rows, want_r)
        lj = np.searchsorted(cols, want_c)
        ok = (li < rows.size) & (lj < cols.size)
        ok &= rows[np.minimum(li, max(rows.size - 1, 0))] == want_r if rows.size else False
        ok &= cols[np.minimum(lj, max(cols.size - 1, 0))] == want_c if cols.size else False
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
