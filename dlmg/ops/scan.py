"""Scans along one mode: ``cumulative_sum``, ``cumulative_prod`` and ``diff``.

The parallel prefix of a distributed array (Blelloch, "Prefix sums and their
applications", 1990; the blocked scan of dask's ``cumreduction`` and Heat's
``cumsum``): each block is scanned where it lies, in its fragment's framework, the
blocks' totals are scanned exclusively in global block order, and each block adds
(multiplies) its offset, in place. Along a mode that is one block, the scan is local
to each fragment. Nothing is redistributed, whatever the layout.

A fragment's work does not grow with its number of blocks in Python steps: its ``k``
full blocks along the mode are viewed as one ``(.., k, b, ..)`` array and scanned
along the ``b`` mode by one call of the framework's scan, the block totals are one
slice of that scan, and the offsets are added by one broadcast operation (the short
last block, where a fragment holds it, on its own). The totals of the fragments that
share the other grid coordinates are dealt back into global block order (block ``j``
lies on grid coordinate ``j % grid``) by one stack and scanned by one call: in one
process on the devices where they lie (once where all lie on one executor, else on
each fragment's executor with the others' totals moved to it, so a GPU's scan makes
no host round trip), across processes after one small
:func:`~dlmg.ops.pieces.share` of one slice per block. JAX's immutable arrays are
offset out of place, the others in place.

Measured: with blocks of 256 dealt out cyclically (256 blocks per fragment, two
fragments per process, 2 and 4 MPI processes; ``sorting_memory_many_blocks`` in
``tests/_mp_sorting.py``) each process's peak of new memory is 1.1 *S* (*S* its
share of the operand), 1.5 *S* with ``include_initial``, against the bound 3 *S*
plus one block; in one process, 16 NumPy fragments of 256 blocks of 256 float64
scan in 5.4-5.9 ms (best of 7), against 13-21 ms when the tensor moved into the slab
and back and about 55 ms with a Python step per block (the command is in
``docs/array-api.md``).

``diff`` takes one slice from the next fragment along the mode (a halo, one
:func:`~dlmg.ops.pieces.alltoall` of one slice per fragment) and differences
locally; ``n > 1`` repeats it. With more than :data:`BLOCKS_IN_PLACE` blocks per
fragment along the mode it first moves the tensor into the slab of its grid.
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
from .pieces import across_processes, alltoall, host, members, share

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
    n = layout.shape[a]
    b, g = max(layout.block[a], 1), layout.grid[a]
    out_layout = _grown(layout.dense, a, 1 if include_initial else 0)
    identity = 0 if name == "cumulative_sum" else 1
    frags = x.fragments
    scanned: dict[int, tuple[Any, Any]] = {}
    for f in frags:
        if f.is_local:
            ex = executor(f.framework, f.device)
            try:
                scanned[f.index] = ex.run(_blocks_scanned, f.array, name, a, b, ex.dtype(out_dtype), include_initial)
            except Exception as exc:
                raise fail(f"dlmg.{name}", f.index, ex, exc) from exc
    split = g > 1 or layout.nblocks[a] > 1
    prefixes = _prefixes(x, scanned, name, a, out_dtype) if split else {}
    end = (n // b) % g  # the grid coordinate holding index n of the grown mode
    arrays: list[Any] = [None] * out_layout.nfragments
    for f in frags:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        scans = list(scanned.pop(f.index))  # handed over: the finished scan may replace them
        offsets, grand = prefixes.pop(f.index, (None, None))
        try:
            arrays[f.index] = ex.run(_offset, f.array, scans, offsets, grand, a, identity,
                                     include_initial and f.layout.coords[a] == end, include_initial,
                                     ex.dtype(out_dtype))
        except Exception as exc:
            raise fail(f"dlmg.{name} (adding the offsets)", f.index, ex, exc) from exc
    return new_tensor(arrays, out_layout, out_dtype)


def _grown(layout: Layout, axis: int, by: int) -> Layout:
    shape = list(layout.shape)
    shape[axis] += by
    block = list(layout.block)
    if layout.grid[axis] == 1:
        block[axis] = max(shape[axis], 1)
    return layout.replace(shape=tuple(shape), block=tuple(block))


#: Most blocks per fragment along the mode that :func:`diff` and
#: :func:`~dlmg.ops.search.searchsorted` handle where they lie (a Python step per block: one
#: halo, one search range); beyond, the operand first moves into the slab of its grid
#: (:func:`slab_along`). The scans take any number of blocks where they lie.
BLOCKS_IN_PLACE = 64


def _pieces(fl: Any, a: int) -> list[tuple[int, slice]]:
    """Fragment ``fl``'s blocks along mode ``a``: (global block, local slice), in order."""
    out, start = [], 0
    for j, (lo, hi) in zip(fl.blocks[a], fl.ranges[a]):
        out.append((j, slice(start, start + hi - lo)))
        start += hi - lo
    return out


def _along(a: int, index: Any) -> tuple[Any, ...]:
    """The index ``index`` on mode ``a``, every mode before it whole."""
    return (slice(None),) * a + (index,)


def _blocks_scanned(xp: Any, arr: Any, name: str, a: int, b: int, dt: Any,
                    include_initial: bool) -> tuple[Any, Any]:
    """Each block of the fragment ``arr`` along mode ``a`` scanned on its own, by whole-array
    operations: its ``k`` full blocks viewed as a ``(.., k, b, ..)`` array and scanned along
    the ``b`` mode (one call), the short last block (where it holds it) on its own. A
    fragment of one block (a slab) is scanned as it is, as a short block, unless
    ``include_initial`` (whose exclusive form of a block that is not the mode's last
    differs from a short block's): the views that fold it into blocks and back, three
    framework calls per fragment, cost more host time than its scan on a GPU.

    Returns
    -------
    tuple
        ``(full, short)``: the full blocks' scans, shape ``(.., k, b, ..)``, and the short
        block's, shape ``(.., r, ..)``; ``None`` where there is none.
    """
    length = arr.shape[a]
    k = length // b
    r = length - k * b
    if k == 1 and r == 0 and not include_initial:
        k, r = 0, length
    fn = getattr(xp, name)
    full = short = None
    if k:
        head = arr[_along(a, slice(0, k * b))] if r else arr
        full = fn(xp.reshape(head, (*arr.shape[:a], k, b, *arr.shape[a + 1:])), axis=a + 1, dtype=dt)
    if r:
        short = fn(arr[_along(a, slice(k * b, length))], axis=a, dtype=dt)
    return full, short


def _totals(xp: Any, arr: Any, full: Any, short: Any, a: int, dt: Any) -> Any:
    """The fragment's block totals along mode ``a`` in local block order, shape ``(.., blocks, ..)``:
    a copy, as the scans are offset in place afterwards."""
    parts = []
    if full is not None:
        parts.append(full[_along(a + 1, -1)])
    if short is not None:
        parts.append(short[_along(a, slice(-1, None))])
    if not parts:
        return xp.zeros((*arr.shape[:a], 0, *arr.shape[a + 1:]), dtype=dt, device=array_device(arr))
    return xp.concat(parts, axis=a) if len(parts) > 1 else xp.asarray(parts[0], copy=True)


def _prefixes(x: "DistributedTensor", scanned: dict[int, tuple[Any, Any]], name: str, a: int,
              out_dtype: str) -> dict[int, tuple[Any, Any]]:
    """The exclusive scan of the blocks' totals along mode ``a``: for each local fragment,
    ``(offsets, grand)``, arrays of its framework on its device: the sum (product) of the
    totals of the blocks before each of its blocks, shape ``(.., blocks, ..)``, and of all
    blocks, shape ``(.., 1, ..)`` (for ``include_initial``).

    The totals of the fragments that share the other grid coordinates are dealt back into
    global block order (block ``j`` lies on grid coordinate ``j % grid``) by one stack and
    scanned by one call (:func:`_dealt_scan`). In one process the totals stay arrays of their
    fragments' frameworks: where they all lie on one executor the scan runs there once, else
    on each fragment's executor, with the others' totals moved to it, so a GPU's scan makes
    no host round trip. Across processes each fragment's totals (one slice per block) are
    shared through the host (:func:`~dlmg.ops.pieces.share`)."""
    layout = x.layout
    g = layout.grid[a]
    groups: dict[tuple[int, ...], list[Any]] = {}

    def local() -> dict[int, Any]:
        found: dict[int, Any] = {}
        for f in x.fragments:
            if f.is_local and f.replica == 0:
                ex = executor(f.framework, f.device)
                full, short = scanned[f.index]
                totals = ex.run(_totals, f.array, full, short, a, ex.dtype(out_dtype))
                found[f.index] = (totals, ex) if across_processes() is None else np.array(host(totals, ex), copy=True)
        return found

    if across_processes() is None:
        totals = local()
    else:
        on_host = executor("numpy", Device("cpu", 0))
        shared = share(f"dlmg.{name} (block totals)", local, layout=layout, axis=a, dtype=out_dtype)
        totals = {i: (t, on_host) for i, t in shared.items()}
    for i, found in totals.items():
        groups.setdefault(_others(layout, i, a), [None] * g)[layout.fragments[i].coords[a]] = found
    done: dict[tuple[tuple[int, ...], Any], tuple[Any, Any]] = {}
    out: dict[int, tuple[Any, Any]] = {}
    for f in x.fragments:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        others = _others(layout, f.index, a)
        group = groups[others]
        home = group[0][1] if all(t[1] is group[0][1] for t in group) else ex
        key = (others, home)
        if key not in done:
            done[key] = (home.run(_dealt_scan, [_at(t, home) for t in group], name, a, home.dtype(out_dtype)), home)
        scan, _ = done[key]
        c, k = f.layout.coords[a], f.layout.nblocks[a]
        offsets, grand = home.run(lambda xp, s: (s[_along(a, slice(c, c + k * g, g))],
                                                 s[_along(a, slice(-1, None))]), scan)
        out[f.index] = (_at((offsets, home), ex), _at((grand, home), ex))
    return out


def _dealt_scan(xp: Any, totals: list[Any], name: str, a: int, dt: Any) -> Any:
    """The exclusive scan of blocks dealt cyclically: ``totals[c]`` holds, along mode ``a``, the
    totals of blocks ``c, c + g, c + 2g, ...`` (``g = len(totals)``). Returns the scan in
    global block order, shape ``(.., 1 + K * g, ..)`` (``K`` the most blocks of one
    coordinate): the identity, then the running total after each block (blocks past the
    last count as the identity), so block ``j``'s offset is at ``j`` and the whole total last."""
    identity = 0 if name == "cumulative_sum" else 1
    shape = tuple(totals[0].shape)
    most = max(t.shape[a] for t in totals)
    device = array_device(totals[0])

    def filled(blocks: int) -> Any:
        return xp.full((*shape[:a], blocks, *shape[a + 1:]), identity, dtype=dt, device=device)

    padded = [t if t.shape[a] == most else xp.concat([t, filled(most - t.shape[a])], axis=a) for t in totals]
    dealt = xp.stack(padded, axis=a + 1)
    del padded
    flat = xp.reshape(dealt, (*shape[:a], most * len(totals), *shape[a + 1:]))
    running = getattr(xp, name)(flat, axis=a, dtype=dt) if most else flat
    return xp.concat([filled(1), running], axis=a)


def _others(layout: Layout, index: int, a: int) -> tuple[int, ...]:
    """Fragment ``index``'s grid coordinates on the modes other than ``a``."""
    c = layout.fragments[index].coords
    return tuple(c[m] for m in range(layout.ndim) if m != a)


def _at(value: tuple[Any, Any] | None, ex: Any) -> Any:
    """``value``'s array as an array of ``ex``'s framework on its device (``None`` stays)."""
    if value is None:
        return None
    array, source = value
    return array if source is ex else move_array(array, ex, source.adapter)


def _offset(xp: Any, arr: Any, scans: list[Any], offsets: Any, grand: Any, a: int, identity: int,
            holds_end: bool, include_initial: bool, dt: Any) -> Any:
    """One fragment's result from its blocks' scans ``scans``, ``[full, short]`` of
    :func:`_blocks_scanned` (handed over: emptied here, so that a scan replaced by its
    exclusive form is freed): each block's offset added (multiplied) by one broadcast
    operation, in place where the framework allows (the scans are this call's own arrays);
    with ``include_initial`` the exclusive scan of each block (its offset first), and the
    whole total after the last element where the fragment holds index ``n`` of the grown
    mode. ``offsets``: ``None`` where the mode is one block (the scan is local)."""
    full, short = scans
    scans.clear()
    k = 0 if full is None else full.shape[a]
    shape = tuple(arr.shape)

    def first(lo: int, hi: int) -> Any:
        if offsets is not None:
            return offsets[_along(a, slice(lo, hi))]
        return xp.full((*shape[:a], hi - lo, *shape[a + 1:]), identity, dtype=dt, device=array_device(arr))

    if offsets is not None and full is not None:
        if identity == 0:
            full += xp.expand_dims(offsets[_along(a, slice(0, k))], axis=a + 1)
        else:
            full *= xp.expand_dims(offsets[_along(a, slice(0, k))], axis=a + 1)
    if offsets is not None and short is not None:
        if identity == 0:
            short += offsets[_along(a, slice(k, k + 1))]
        else:
            short *= offsets[_along(a, slice(k, k + 1))]
    parts = []
    if full is not None:
        if include_initial:
            if grand is None and short is None and holds_end:  # one block, the mode's last
                grand = xp.asarray(full[_along(a + 1, -1)][_along(a, slice(-1, None))], copy=True)
            full = xp.concat([xp.expand_dims(first(0, k), axis=a + 1), full[_along(a + 1, slice(0, -1))]],
                             axis=a + 1)
        parts.append(xp.reshape(full, (*shape[:a], full.shape[a] * full.shape[a + 1], *shape[a + 1:])))
        del full
    if short is not None:
        parts.append(xp.concat([first(k, k + 1), short], axis=a) if include_initial else short)
    elif holds_end:
        parts.append(grand if grand is not None else first(0, 1))
    if not parts:
        return xp.astype(arr, dt)
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
