"""Matrices in distributed tensors: how a matrix is laid out, the batch-local maps, stacked
split matrices, diagonals, and what the distributed algorithms share.

Three ways a matrix can be laid out (:func:`matrix_split`): whole matrices in every
fragment (:data:`LOCAL`: each fragment's framework works on the matrices it holds,
:func:`batch_local`, nothing moves), split along rows (:data:`TALL`) or along columns
(:data:`WIDE`). Stacked matrices split along a matrix mode run the distributed
algorithm per batch entry (:func:`stack_entries`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...distributed.state import current
from ...distributed.agree import describe, prepare
from ...layout import Layout
from .._dtypes import INEXACT, require
from .._executor import Executor, array_device, executor, fail, move_array
from ..contract.pending import settled
from ..dispatch import is_distributed, new_tensor
from ..shape import permute_dims

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["REAL_OF", "TALL", "WIDE", "LOCAL", "check_matrix", "matrix_split", "slabs_of_long_mode", "as_tall", "batch_local_layout", "batch_local", "batch_whole", "stack_entries", "identity_like", "agreed", "diagonal", "positions"]


#: the real dtype of each inexact dtype (singular values, norms)
REAL_OF = {"complex64": "float32", "complex128": "float64"}

#: :func:`matrix_split`'s answers: whole matrices in every fragment, split along rows (tall),
#: split along columns (short-fat); anything else is ``None``
LOCAL, TALL, WIDE = "local", "tall", "wide"


def check_matrix(name: str, x: Any) -> "DistributedTensor":
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


def slabs_of_long_mode(x: "DistributedTensor") -> "DistributedTensor":
    """``x`` (2-D) redistributed into slabs of its longer mode over its replica-0 devices."""
    lay = x.layout
    axis = 0 if x.shape[0] >= x.shape[1] else 1
    target = Layout.slab(x.shape, axis, lay.devices[: lay.ngrid], ranks=lay.ranks[: lay.ngrid])
    return x.redistribute(target)


def as_tall(x: "DistributedTensor") -> tuple["DistributedTensor", bool]:
    """A tall tensor split along rows for TSQR, and whether it is ``x``'s transpose."""
    split = matrix_split(x)
    if split is None:
        x = slabs_of_long_mode(x)
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


def agreed(what: str, work: Callable[[], Any], **fields: Any) -> Any:
    """``work()``, and across processes an agreement on it, so that a failure on the one process
    that computes raises on every process instead of leaving the others waiting."""
    engine = current()
    if engine is None:
        return work()
    return prepare(engine, describe(what, **fields), work)


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
    sources: list[int] = []
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
        li, ok_r = positions(rows, want_r)
        lj, ok_c = positions(cols, want_c)
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


def positions(rows: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where the global indices ``wanted`` sit among a fragment's sorted owned ``rows``, and which
    of them it owns: the one search that the pivot rows, the interchanges and the pivot block of
    the LU and Gauss-Jordan eliminations all make."""
    at = np.searchsorted(rows, wanted)
    if not rows.size:
        return at, np.zeros(wanted.size, dtype=bool)
    return at, (at < rows.size) & (rows[np.minimum(at, rows.size - 1)] == wanted)
