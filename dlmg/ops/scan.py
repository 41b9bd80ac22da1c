"""Scans along one mode: ``cumulative_sum``, ``cumulative_prod`` and ``diff``.

The parallel prefix of a distributed array (Blelloch, "Prefix sums and their
applications", 1990; the blocked scan of dask's ``cumreduction`` and Heat's
``cumsum``): each fragment scans what it holds in its own framework, the
fragments' totals are scanned exclusively along the split mode (in one process on
the devices where they lie, as a running total carried from block to block; across
processes one small :func:`~dlmg.ops.pieces.share` of one slice per fragment), and each
fragment adds (multiplies) its offset. Along a mode that is not split, the scan is
local to each fragment.

A fragment holding several blocks along the mode scans each block where it
lies, and the totals are those of the blocks, in global block order. With more
than :data:`BLOCKS_IN_PLACE` blocks per fragment (a cyclic deal), the tensor is
first redistributed into the slab of the same grid and devices, and the result
back into its own layout: two redistributions, each moving at most the tensor's
bytes.

``diff`` takes one slice from the next fragment along the mode (a halo, one
:func:`~dlmg.ops.pieces.alltoall` of one slice per fragment) and differences
locally; ``n > 1`` repeats it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..dtypes import canonical
from ..errors import DtypeError
from ..layout import Layout
from ._dtypes import kind_of, narrow_for, sum_dtype
from .contract.pending import settled
from .dispatch import executor, is_distributed, new_tensor
from ._executor import array_device, fail, move_array
from .pieces import across_processes, alltoall, host, members, on, share

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["cumulative_sum", "cumulative_prod", "diff", "slab_along", "is_slab_along", "BLOCKS_IN_PLACE"]



def is_slab_along(layout: Layout, axis: int) -> bool:
    """Whether every fragment holds at most one block (one contiguous run) along ``axis``."""
    return layout.block[axis] * layout.grid[axis] >= layout.shape[axis]


def slab_along(layout: Layout, axis: int) -> Layout:
    """``layout`` (dense) with one contiguous run per grid coordinate along ``axis``."""
    block = list(layout.block)
    block[axis] = max(-(-layout.shape[axis] // layout.grid[axis]), 1)
    return layout.dense.replace(block=tuple(block))


def _axis(x: "DistributedTensor", axis: int | None, name: str) -> int:
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"dlmg.{name}: axis is required for a tensor of {x.ndim} modes (shape {x.shape})")
        axis = 0
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"dlmg.{name}: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"dlmg.{name}: axis {axis} is out of bounds for shape {x.shape}")
    return axis % x.ndim


def _scan_dtype(x: "DistributedTensor", dtype: Any) -> str:
    if dtype is not None:
        return canonical(dtype)
    return narrow_for(sum_dtype(x.dtype), x.frameworks)


def cumulative_sum(x: "DistributedTensor", /, *, axis: int | None = None, dtype: Any = None,
                   include_initial: bool = False) -> "DistributedTensor":
    """The cumulative sum along ``axis`` by a parallel prefix (see the module).

    Parameters
    ----------
    x : DistributedTensor
    axis : int, optional
        Required unless ``x`` is 1-D.
    dtype : dtype, optional
        Accumulation and result type; by default NumPy's (bool and signed integers in
        int64, unsigned ones in uint64, others their own).
    include_initial : bool
        Start with the sum of nothing (0): the mode grows by one.

    Returns
    -------
    DistributedTensor
        In ``x``'s layout (the mode one longer with ``include_initial``), on its
        devices and processes.
    """
    return _scan(x, "cumulative_sum", axis, dtype, include_initial)


def cumulative_prod(x: "DistributedTensor", /, *, axis: int | None = None, dtype: Any = None,
                    include_initial: bool = False) -> "DistributedTensor":
    """The cumulative product along ``axis`` (as :func:`cumulative_sum`, starting from 1)."""
    return _scan(x, "cumulative_prod", axis, dtype, include_initial)


def _scan(x: "DistributedTensor", name: str, axis: int | None, dtype: Any,
          include_initial: bool) -> "DistributedTensor":
    x = settled(x)
    a = _axis(x, axis, name)
    out_dtype = _scan_dtype(x, dtype)
    if kind_of(out_dtype) == "b":
        raise DtypeError(f"dlmg.{name}: dtype bool cannot accumulate; pass an integer or floating dtype")
    layout = x.layout
    in_place = max((f.nblocks[a] for f in layout.fragments), default=0) <= BLOCKS_IN_PLACE
    work = x if in_place else x.redistribute(slab_along(layout, a))
    out = _slab_scan(work, name, a, out_dtype, include_initial)
    if work is x:
        return out
    del work
    return out.redistribute(_grown(layout.dense, a, 1 if include_initial else 0))


def _grown(layout: Layout, axis: int, by: int) -> Layout:
    shape = list(layout.shape)
    shape[axis] += by
    block = list(layout.block)
    if layout.grid[axis] == 1:
        block[axis] = max(shape[axis], 1)
    return layout.replace(shape=tuple(shape), block=tuple(block))


#: most blocks per fragment along the scanned mode for which each block is scanned where it
#: lies (a Python step per block, one total per block shared); beyond, the tensor moves to the slab
BLOCKS_IN_PLACE = 64


def _pieces(fl: Any, a: int) -> list[tuple[int, slice]]:
    """Fragment ``fl``'s blocks along mode ``a``: (global block, local slice), in order."""
    out, start = [], 0
    for j, (lo, hi) in zip(fl.blocks[a], fl.ranges[a]):
        out.append((j, slice(start, start + hi - lo)))
        start += hi - lo
    return out


def _slab_scan(x: "DistributedTensor", name: str, a: int, out_dtype: str,
               include_initial: bool) -> "DistributedTensor":
    """The scan of a tensor along mode ``a``, each block scanned where it lies (see the module)."""
    layout = x.layout
    n = layout.shape[a]
    b, g = layout.block[a], layout.grid[a]
    out_layout = _grown(layout.dense, a, 1 if include_initial else 0)
    fn = "cumulative_sum" if name == "cumulative_sum" else "cumulative_prod"
    identity = 0 if fn == "cumulative_sum" else 1
    frags = x.fragments
    scanned: dict[int, list[Any]] = {}
    for f in frags:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        try:
            scanned[f.index] = [ex.run(
                lambda xp, arr: getattr(xp, fn)(arr, axis=a, dtype=ex.dtype(out_dtype)) if arr.shape[a]
                else xp.astype(arr, ex.dtype(out_dtype)), f.array[(slice(None),) * a + (cut,)])
                for _, cut in _pieces(f.layout, a)] or [ex.run(lambda xp, arr: xp.astype(arr, ex.dtype(out_dtype)),
                                                               f.array)]
        except Exception as exc:
            raise fail(f"dlmg.{name}", f.index, ex, exc) from exc
    split = layout.grid[a] > 1 or layout.nblocks[a] > 1
    prefix = _prefixes(x, scanned, name, a, out_dtype, identity) if split else {}
    end_block = n // max(b, 1)
    arrays: list[Any] = [None] * out_layout.nfragments
    for f in frags:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        coords = f.layout.coords
        others = _others(layout, f.index, a)
        blocks = [j for j, _ in _pieces(f.layout, a)]
        # index n of the grown mode starts a block of its own where n is a multiple of the block
        extra = include_initial and n % max(b, 1) == 0 and end_block % g == coords[a] and (split or n == 0)
        parts = []
        try:
            for k, j in enumerate(blocks):
                owns_end = include_initial and j == end_block
                offset = _at(prefix.get((j, others)), ex)
                grand = _at(prefix.get((layout.nblocks[a], others)), ex) if owns_end else None
                parts.append(ex.run(_finish, scanned[f.index][k], offset, grand, a, include_initial,
                                    owns_end or (not split and include_initial), identity, ex, out_dtype))
                scanned[f.index][k] = None
            if extra or (not blocks and include_initial and coords[a] == end_block % g):
                whole = _at(prefix.get((layout.nblocks[a], others)), ex)
                cshape = tuple(1 if m == a else s for m, s in enumerate(f.layout.shape))
                parts.append(ex.run(lambda xp, t: xp.astype(t, ex.dtype(out_dtype)), whole) if whole is not None
                             else on(np.full(cshape, identity, dtype=np.dtype(out_dtype)), ex))
            if not parts:
                parts.append(ex.run(lambda xp, arr: xp.astype(arr, ex.dtype(out_dtype)), f.array))
            arrays[f.index] = parts[0] if len(parts) == 1 else ex.run(lambda xp, ps: xp.concat(ps, axis=a), parts)
        except Exception as exc:
            raise fail(f"dlmg.{name} (adding the offsets)", f.index, ex, exc) from exc
        del parts
        scanned.pop(f.index)
    return new_tensor(arrays, out_layout, out_dtype)


def _others(layout: Layout, index: int, a: int) -> tuple[int, ...]:
    """Fragment ``index``'s grid coordinates on the modes other than ``a``."""
    c = layout.fragments[index].coords
    return tuple(c[m] for m in range(layout.ndim) if m != a)


def _prefixes(x: "DistributedTensor", scanned: dict[int, list[Any]], name: str, a: int, out_dtype: str,
              identity: int) -> dict[tuple[int, tuple[int, ...]], tuple[Any, Any]]:
    """The exclusive scan of the blocks' totals: for ``(j, others)`` (global block ``j`` along
    ``a``, the other grid coordinates), the sum (product) of the totals of blocks ``0..j-1``,
    as ``(array, executor)``; absent where nothing precedes.

    In one process the totals stay where they were computed, as arrays of their fragment's
    framework, and each running total is combined on the device of the block it adds, so a
    GPU's scan makes no host round trip. Across processes each block's total (one slice) is
    shared through the host (:func:`~dlmg.ops.pieces.share`)."""
    layout = x.layout
    totals: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}
    last = (slice(None),) * a + (slice(-1, None),)
    if across_processes() is None:
        for f in x.fragments:
            if f.is_local and f.replica == 0:
                ex = executor(f.framework, f.device)
                for (j, _), s in zip(_pieces(f.layout, a), scanned[f.index]):
                    # a copy: the scan itself is offset in place afterwards
                    totals[(j, _others(layout, f.index, a))] = (ex.run(lambda xp, arr: xp.asarray(arr[last], copy=True),
                                                                       s), ex)
    else:
        def local() -> dict[Any, Any]:
            found = {}
            for f in x.fragments:
                if f.is_local and f.replica == 0:
                    ex = executor(f.framework, f.device)
                    for (j, _), s in zip(_pieces(f.layout, a), scanned[f.index]):
                        found[(j, f.index)] = np.array(host(ex.run(lambda xp, arr: arr[last], s), ex), copy=True)
            return found

        shared = share(f"dlmg.{name} (block totals)", local, layout=layout, axis=a, dtype=out_dtype)
        on_host = executor("numpy", Device("cpu", 0))
        totals = {(j, _others(layout, i, a)): (t, on_host) for (j, i), t in shared.items()}
    combine = (lambda xp, p, q: p + q) if identity == 0 else (lambda xp, p, q: p * q)
    prefix: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}
    for others in {key[1] for key in totals}:
        running = None
        for j in range(layout.nblocks[a] + 1):
            if running is not None:
                prefix[(j, others)] = running
            found = totals.get((j, others))
            if found is not None:
                total, ex = found
                running = found if running is None else (ex.run(combine, _at(running, ex), total), ex)
    return prefix


def _at(value: tuple[Any, Any] | None, ex: Any) -> Any:
    """``value``'s array as an array of ``ex``'s framework on its device (``None`` stays)."""
    if value is None:
        return None
    array, source = value
    return array if source is ex else move_array(array, ex, source.adapter)


def _finish(xp: Any, s: Any, offset: Any, grand: Any, a: int, include_initial: bool, owns_end: bool, identity: int,
            ex: Any, out_dtype: str) -> Any:
    """One fragment's result: its local scan with the offset applied; with
    ``include_initial`` the exclusive scan, and the whole total where it holds the end."""
    dt = ex.dtype(out_dtype)
    off = offset
    # in place where the framework allows: ``s`` is this call's own fresh scan (one pass, no new array)
    if off is not None and s.shape[a] and identity == 0:
        s += off
    elif off is not None and s.shape[a]:
        s *= off
    if not include_initial:
        return s
    cut = [slice(None)] * s.ndim
    cut[a] = slice(0, max(s.shape[a] - 1, 0))
    first_shape = tuple(1 if m == a else n for m, n in enumerate(s.shape))
    first = xp.full(first_shape, identity, dtype=dt, device=array_device(s)) if off is None else xp.astype(off, dt)
    parts = [first, s[tuple(cut)]] if s.shape[a] else []
    if owns_end:
        if grand is not None:
            parts.append(xp.astype(grand, dt))
        elif s.shape[a]:
            last = [slice(None)] * s.ndim
            last[a] = slice(s.shape[a] - 1, None)
            parts.append(s[tuple(last)])
        else:
            parts.append(first)
    if not parts:
        return xp.astype(s, dt)
    return xp.concat(parts, axis=a) if len(parts) > 1 else parts[0]


# --------------------------------------------------------------------------
# diff: a halo of one slice


def diff(x: "DistributedTensor", /, *, axis: int = -1, n: int = 1) -> "DistributedTensor":
    """The ``n``-th forward difference along ``axis``, with a halo of one slice per block from
    the next block per round (see the module).

    Returns
    -------
    DistributedTensor
        The mode ``n`` shorter, on ``x``'s devices and processes, in ``x``'s layout (the
        slab of its grid along ``axis`` where a fragment holds more than
        :data:`BLOCKS_IN_PLACE` blocks there).
    """
    x = settled(x)
    a = _axis(x, axis, "diff")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"dlmg.diff: n must be a non-negative int, got {n!r}")
    if kind_of(x.dtype) == "b":
        raise DtypeError("dlmg.diff is not defined for bool tensors (subtraction); use xp.not_equal")
    in_place = max((f.nblocks[a] for f in x.layout.fragments), default=0) <= BLOCKS_IN_PLACE
    out = x if in_place else x.redistribute(slab_along(x.layout, a))
    for _ in range(n):
        if out.shape[a] == 0:
            break
        out = _diff_once(out, a)
    return out


def _heads_wanted(layout: Layout, a: int) -> dict[int, list[tuple[int, int]]]:
    """Per fragment, the halos its blocks along mode ``a`` need, in block order: for each of
    its blocks but the last global one, ``(fragment holding the next block, that block's
    first local position)`` (same other grid coordinates and replica)."""
    b, g, nb = layout.block[a], layout.grid[a], layout.nblocks[a]
    wanted: dict[int, list[tuple[int, int]]] = {}
    for fl in layout.fragments:
        need = []
        for j in fl.blocks[a]:
            if j + 1 < nb:
                coords = list(fl.coords)
                coords[a] = (j + 1) % g
                need.append((layout.fragment_index(coords, fl.replica), (j + 1) // g * b))
        wanted[fl.index] = need
    return wanted


def _diff_once(x: "DistributedTensor", a: int) -> "DistributedTensor":
    """One forward difference: every block gets the first slice of the next block (one
    all-to-all of those slices) and each fragment subtracts itself from its shifted self."""
    layout = x.layout
    shape = list(layout.shape)
    shape[a] = max(shape[a] - 1, 0)
    out_layout = layout.dense.replace(shape=tuple(shape))
    frags = x.fragments
    wanted = _heads_wanted(layout, a)
    sources = members(x)
    by_index = {m.index: k for k, m in enumerate(sources)}
    last_block = layout.nblocks[a] - 1

    def at(lo: int, hi: int) -> tuple[slice, ...]:
        return (slice(None),) * a + (slice(lo, hi),)

    def send(m: Any) -> list[Any]:
        pieces: list[Any] = [None] * len(sources)
        arr = frags[m.index].array
        for dst, need in wanted.items():
            starts = [start for src, start in need if src == m.index]
            if starts:
                pieces[by_index[dst]] = m.executor.run(
                    lambda xp, v: xp.concat([xp.reshape(v[at(s, s + 1)], (-1,)) for s in starts]), arr)
        return pieces

    halos = alltoall("dlmg.diff (halo)", sources, sources, send, x.dtype, layout=layout, axis=a)
    arrays: list[Any] = [None] * out_layout.nfragments
    for f in frags:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        got = halos.pop(f.index, [])
        hshape = tuple(1 if m == a else s for m, s in enumerate(f.layout.shape))
        per = math.prod(hshape)
        used = {src: 0 for src, _ in wanted[f.index]}  # halos taken so far from each source
        want = out_layout.fragments[f.index].shape

        def one(xp: Any, arr: Any) -> Any:
            parts = []
            need = iter(wanted[f.index])
            for (j, cut) in _pieces(f.layout, a):
                parts.append(arr[at(cut.start + 1, cut.stop)])
                if j < last_block:
                    src, _ = next(need)
                    k = used[src]
                    used[src] = k + 1
                    parts.append(xp.reshape(got[by_index[src]][k * per:(k + 1) * per], hshape))
            if not parts:
                return xp.reshape(arr, want)
            base = arr[at(0, want[a])]  # the last global block loses its last slice
            if len(parts) == 1:  # a view of the operand: not to be written
                return parts[0] - base
            shifted = xp.concat(parts, axis=a)
            del parts
            shifted -= base  # in place where the framework allows: the shifted copy is this call's own
            return shifted

        try:
            arrays[f.index] = ex.run(one, f.array)
        except Exception as exc:
            raise fail("dlmg.diff", f.index, ex, exc) from exc
    return new_tensor(arrays, out_layout, x.dtype)
