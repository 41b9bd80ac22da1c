"""Shape changes, joining and reordering of distributed tensors, without collecting them.

Every function here returns a tensor on the devices and processes of its lead
operand (the first tensor), and each process allocates at most its own share
of the result plus what one redistribution needs. The algorithms, each named
where it is written:

* **views** (``expand_dims``, ``squeeze``, ``moveaxis``, ``unstack``): a new
  layout over the same fragments -- a mode of extent 1 and grid 1 inserted or
  removed, modes permuted, one index taken along a mode -- and each fragment
  viewed through its own framework; no element moves;
* **reshape into the nearest layout** (``reshape`` where the fragments do not
  survive as pieces): one redistribution into the balanced slab whose pieces
  do survive (merging or splitting modes inside fragments), then a view --
  dask's ``reshape_rechunk`` (rechunk so that the reshape is blockwise);
* **block renumbering** (``flip``): reversing a mode whose blocks are all
  full maps block ``j`` to block ``nblocks - 1 - j``, so each fragment flips
  locally and the fragments trade grid coordinates (devices renumbered); a
  partial last block is first removed by one redistribution into blocks that
  divide the extent (Heat's ``manipulations.flip``: a local flip and the
  processes' pieces taken in reverse order);
* **shift placement** (``concat``, ``stack``, ``roll``, ``tile`` and
  ``repeat`` with per-element counts): the result is a list of pieces, each a
  run ``[start, stop)`` of an operand placed at an offset along one mode. In a
  block-cyclic layout whose block ``d`` divides every start, length and
  offset, a run of blocks is a local slice of every fragment, and placing it
  at another offset only rotates the grid coordinates its blocks belong to;
  so each operand is redistributed (once, where its layout differs) into the
  rotation its pieces need, and every result fragment is the local
  concatenation of the pieces' fragments at its grid coordinate. Along a mode
  each fragment holds whole, the rotation is trivial and everything is
  local. The result's rotation is chosen so that the largest piece moves
  nothing (a shift of whole blocks is a renumbering, as for ``flip``). The
  moves are block-cyclic redistributions (Walker and Otto 1996,
  "Redistribution of block-cyclic data distributions using MPI"); the pieces
  are dask's ``concatenate`` and ``roll`` (slices joined block by block), and
  where every operand is a slab of one block size ``concat`` keeps the
  operands' fragments as the result's, as dask keeps their chunks.

Every function takes and returns :class:`~dlmg.DistributedTensor` objects;
per-fragment work runs in each fragment's framework (through its array-API
namespace) on its device. Pending sums are resolved on entry
(:func:`~dlmg.ops.contract.pending.settled`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..errors import DtypeError, LayoutError
from ..fragment import process_rank
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK
from . import shape as _shape
from ._executor import executor, fail, move_array
from .contract.pending import relabel, settled
from .dispatch import is_distributed, new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = [
    "expand_dims", "squeeze", "moveaxis", "unstack", "reshape", "concat", "stack", "flip", "roll", "repeat",
    "tile", "nearest_reshape_layout", "balanced_layout",
]


# --------------------------------------------------------------------------
# helpers: operands, per-fragment work, layouts


def _operand(x: Any, name: str, *, settle: bool = True) -> "DistributedTensor":
    """``x`` with every fragment a plain array, and settled (pending sums resolved) unless
    ``settle`` is false: a view of every addend is the addends of the view."""
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__module__}.{type(x).__qualname__}")
    if settle:
        x = settled(x)
    if x.layout.element_strides is not None:  # padded fragments have no single array view
        x = x.redistribute(x.layout.dense)
    return x


def _axis(axis: Any, ndim: int, name: str, what: str = "axis") -> int:
    a = int(axis)
    if not -ndim <= a < ndim:
        raise IndexError(f"dlmg.{name}: {what} {a} is out of range for a tensor of {ndim} modes")
    return a % ndim


def _each(x: "DistributedTensor", layout: Layout, order: Sequence[int], fn: Callable[..., Any], name: str,
          dtype: str | None = None, fresh: bool = False) -> "DistributedTensor":
    """A tensor of ``layout`` whose fragment ``i`` is ``fn(xp, a)`` of ``x``'s fragment ``order[i]``,
    run in that fragment's framework on its device; with ``fresh``, a result sharing the
    fragment's memory (NumPy's flip is a view) is copied."""
    arrays: list[Any] = [None] * layout.nfragments
    for i, f in enumerate(order):
        frag = x.fragments[f]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            out = ex.run(fn, frag.array)
            if fresh and ex.traits.mutable and ex.adapter.shares_memory(out, frag.array):
                out = ex.run(_copy, out)
            arrays[i] = out
        except Exception as exc:
            raise fail(f"dlmg.{name}", f, ex, exc) from exc
    return new_tensor(arrays, layout, dtype or x.dtype)


def _copy(xp: Any, a: Any) -> Any:
    return xp.asarray(a, copy=True)


def _moved(layout: Layout, axis: int, extent: int, block: int, shift: int) -> Layout:
    """``layout`` with mode ``axis`` of ``extent`` elements in blocks of ``block`` over the same
    grid, the fragment at grid coordinate ``c`` along ``axis`` placed where ``layout``'s fragment
    at coordinate ``(c + shift) % grid[axis]`` is (same device, same process)."""
    g = layout.grid[axis]
    shape = list(layout.shape)
    shape[axis] = extent
    blocks = list(layout.block)
    blocks[axis] = max(block, 1)
    if shift % g == 0:
        return Layout(shape, block=blocks, grid=layout.grid, devices=layout.devices, ranks=layout.ranks)
    devices, ranks = [], []
    for f in range(layout.nfragments):
        coords, replica = layout.coords_of(f)
        moved = list(coords)
        moved[axis] = (moved[axis] + shift) % g
        src = layout.fragment_index(moved, replica)
        devices.append(layout.devices[src])
        ranks.append(layout.ranks[src])
    return Layout(shape, block=blocks, grid=layout.grid, devices=devices, ranks=ranks)


def balanced_layout(shape: Sequence[int], like: Layout, mode: int, multiple: int = 1) -> Layout:
    """A balanced slab of ``shape`` along ``mode`` on ``like``'s devices and processes.

    The grid along ``mode`` is ``like.ngrid`` (replicas stay replicas); the
    block is the smallest multiple of ``multiple`` that deals the extent out in
    ``like.ngrid`` pieces.
    """
    shape = tuple(int(n) for n in shape)
    p = like.ngrid
    block = [max(n, 1) for n in shape]
    n = shape[mode]
    block[mode] = max(multiple * math.ceil(n / (multiple * p)), 1) if n else 1
    grid = [1] * len(shape)
    grid[mode] = p
    return Layout(shape, block=block, grid=grid, devices=like.devices, ranks=like.ranks)


def _largest_mode(shape: Sequence[int], avoid: Sequence[int] = ()) -> int | None:
    modes = [m for m in range(len(shape)) if m not in avoid and shape[m] > 1]
    return max(modes, key=lambda m: (shape[m], -m)) if modes else None


def _into(x: "DistributedTensor", layout: Layout) -> "DistributedTensor":
    """``x`` redistributed into ``layout`` (its own fragments, relabelled, when they already are)."""
    if x.layout == layout:
        return x
    if x.layout.same_distribution(layout) and layout.element_strides is None:
        return relabel(x, layout)  # (block sizes along modes of grid 1 differ: nothing to move)
    return x.redistribute(layout)


def _normal_shape(x: "DistributedTensor", shape: Sequence[int] | int, name: str) -> tuple[int, ...]:
    shape = (int(shape),) if isinstance(shape, int) else tuple(int(n) for n in shape)
    return _shape.complete_shape(x.shape, shape, name)


# --------------------------------------------------------------------------
# views: expand_dims, squeeze, moveaxis, unstack


def expand_dims(x: "DistributedTensor", /, axis: int | Sequence[int] = 0) -> "DistributedTensor":
    """``x`` with new modes of extent 1 at ``axis`` (array API ``expand_dims``): a view.

    Algorithm: each new mode has extent 1, block 1 and grid 1, so the grid
    coordinates, devices and processes of every fragment stay as they are and
    each fragment is viewed with the mode inserted (``xp.expand_dims``). No
    element moves, and a pending sum stays pending (each addend gets the mode).

    Parameters
    ----------
    axis : int or sequence of int
        Positions of the new modes in the result (``-x.ndim - 1 <= axis <= x.ndim``).
    """
    x = _operand(x, "expand_dims", settle=False)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out_ndim = x.ndim + len(axes)
    new = sorted(_axis(a, out_ndim, "expand_dims") for a in axes)
    if len(set(new)) != len(new):
        raise ValueError(f"dlmg.expand_dims: axis {axis!r} names a position twice")
    shape, block, grid = list(x.shape), list(x.layout.block), list(x.layout.grid)
    for a in new:
        shape.insert(a, 1)
        block.insert(a, 1)
        grid.insert(a, 1)
    layout = Layout(shape, block=block, grid=grid, devices=x.layout.devices, ranks=x.layout.ranks,
                    partial=x.layout.partial)  # a pending sum stays pending: each addend gets the mode
    return _reshape_each(x, layout, "expand_dims")


def _reshape_each(x: "DistributedTensor", layout: Layout, name: str) -> "DistributedTensor":
    """Fragment ``i`` of ``x`` viewed in the local shape of ``layout``'s fragment ``i``."""
    arrays: list[Any] = [None] * layout.nfragments
    for frag, target in zip(x.fragments, layout.fragments):
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            arrays[frag.index] = ex.run(lambda xp, a, shape=target.shape: xp.reshape(a, shape), frag.array)
        except Exception as exc:
            raise fail(f"dlmg.{name}", frag.index, ex, exc) from exc
    return new_tensor(arrays, layout, x.dtype)


def squeeze(x: "DistributedTensor", /, axis: int | Sequence[int]) -> "DistributedTensor":
    """``x`` without its modes ``axis`` of extent 1 (array API ``squeeze``).

    Algorithm: a mode of extent 1 and grid 1 is dropped from the layout and
    from each fragment's view; nothing moves. A mode of extent 1 split over
    several grid coordinates leaves every fragment but those at coordinate 0
    empty: those hold the data, and one redistribution spreads it into a
    balanced slab over the same devices again.

    A pending sum stays pending where nothing moves (each addend viewed without
    the modes); a split mode of extent 1 resolves it first.
    """
    x = _operand(x, "squeeze", settle=False)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    drop = sorted({_axis(a, x.ndim, "squeeze") for a in axes})
    for a in drop:
        if x.shape[a] != 1:
            raise ValueError(f"dlmg.squeeze: mode {a} has extent {x.shape[a]}, not 1, in shape {x.shape}")
    if not drop:
        return x
    if any(x.layout.grid[a] > 1 for a in drop):  # the data moves: the value's, not the addends'
        x = settled(x)
    layout = x.layout.drop_modes(drop)
    if x.layout.partial is not None:  # replicas stay replicas: the addends of the result
        layout = layout.replace(partial=x.layout.partial)
    kept = [f for f in range(x.layout.nfragments) if all(x.layout.coords_of(f)[0][m] == 0 for m in drop)]
    out = _each(x, layout, kept, lambda xp, a: xp.reshape(a, tuple(n for m, n in enumerate(a.shape) if m not in drop)),
                "squeeze")
    if len(kept) == x.layout.nfragments or layout.ndim == 0:
        return out
    mode = _largest_mode(layout.shape)
    return out if mode is None else _into(out, balanced_layout(layout.shape, x.layout, mode))


def moveaxis(x: "DistributedTensor", /, source: int | Sequence[int], destination: int | Sequence[int]
             ) -> "DistributedTensor":
    """``x`` with modes ``source`` moved to ``destination`` (array API ``moveaxis``).

    Algorithm: a permutation of the modes, :func:`dlmg.ops.shape.permute_dims`
    (each fragment a transposed view; no element moves).
    """
    x = _operand(x, "moveaxis", settle=False)  # permute_dims keeps a pending sum
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise ValueError(f"dlmg.moveaxis: source {source!r} and destination {destination!r} differ in length")
    src = tuple(_axis(a, x.ndim, "moveaxis", "source") for a in src)
    dst = tuple(_axis(a, x.ndim, "moveaxis", "destination") for a in dst)
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"dlmg.moveaxis: repeated modes in source {source!r} or destination {destination!r}")
    order = [m for m in range(x.ndim) if m not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _shape.permute_dims(x, tuple(order))


def unstack(x: "DistributedTensor", /, *, axis: int = 0) -> tuple["DistributedTensor", ...]:
    """The slices of ``x`` along ``axis``, as a tuple (array API ``unstack``): views.

    Algorithm: views. Along a mode each fragment holds whole, slice ``i`` is
    each fragment indexed at ``i`` (a view in its framework), on every device
    of ``x``. Along a split mode, ``x`` is first redistributed once into the
    balanced slab along the first other mode (so the slices stay spread over
    the same devices rather than each sitting on one); a 1-D tensor's
    elements stay where they are: element ``i`` in the fragment at grid
    coordinate ``(i // block) % grid``, at local index
    ``(i // block) // grid * block + i % block``.

    A pending sum stays pending where the slices are views (every slice is each
    addend's slice); where the split moves to another mode it is resolved first.
    """
    x = _operand(x, "unstack", settle=False)
    if x.ndim == 0:
        raise ValueError("dlmg.unstack needs a tensor of at least one mode")
    a = _axis(axis, x.ndim, "unstack")
    if x.layout.grid[a] > 1:
        other = next((m for m in range(x.ndim) if m != a), None)
        if other is not None:  # the split moves to the first other mode: every slice a view on all devices
            x = settled(x)  # the value moves, not the addends
            x = _into(x, balanced_layout(x.shape, x.layout, other))
    lay = x.layout
    b, g = lay.block[a], lay.grid[a]
    layouts: dict[int, tuple[Layout, list[int]]] = {}
    out = []
    for i in range(x.shape[a]):
        c = (i // b) % g
        if c not in layouts:
            kept = [f for f in range(lay.nfragments) if lay.coords_of(f)[0][a] == c]
            keep = [m for m in range(x.ndim) if m != a]
            layouts[c] = (Layout([lay.shape[m] for m in keep], block=[lay.block[m] for m in keep],
                                 grid=[lay.grid[m] for m in keep], devices=[lay.devices[f] for f in kept],
                                 ranks=[lay.ranks[f] for f in kept], partial=lay.partial), kept)
        layout, kept = layouts[c]
        local = (i // b) // g * b + i % b
        key = (slice(None),) * a + (local, Ellipsis)  # (Ellipsis: a 0-d view, not a scalar)
        out.append(_each(x, layout, kept, lambda xp, arr, key=key: arr[key], "unstack"))
    return tuple(out)


# --------------------------------------------------------------------------
# reshape into the nearest layout


def _suffix_products(shape: Sequence[int]) -> list[int]:
    out, p = [1], 1
    for n in reversed(shape):
        p *= n
        out.append(p)
    return out


def nearest_reshape_layout(layout: Layout, shape: tuple[int, ...]) -> tuple[Layout, int] | None:
    """The balanced slab of ``layout``'s shape on its devices from which ``reshape`` into
    ``shape`` is a view, with its largest fragment (elements); ``None`` when none is.

    Candidates: a slab along each mode ``m`` whose block is a multiple of
    ``q = S / gcd(inner_m, S)`` for a suffix product ``S`` of ``shape``
    (``inner_m``: the elements of one index of mode ``m``), so each block
    holds whole rows of the new trailing modes; the one with the smallest
    largest fragment wins, the mode ``layout`` already splits on a tie.
    """
    old = layout.shape
    size = math.prod(old)
    best: tuple[tuple[int, int, int], Layout, int] | None = None
    for m in range(len(old)):
        if old[m] <= 1:
            continue
        inner = math.prod(old[m + 1:])
        for s in sorted(set(_suffix_products(shape))):
            q = s // math.gcd(inner, s)
            cand = balanced_layout(old, layout, m, q)
            if isinstance(_shape.reshaped_layout(cand, shape), str):
                continue
            largest = cand.block[m] * (size // old[m])
            key = (largest, 0 if layout.grid[m] > 1 else 1, m)
            if best is None or key < best[0]:
                best = (key, cand, largest)
    return None if best is None else (best[1], best[2])


def reshape(x: "DistributedTensor", /, shape: Sequence[int] | int, *, copy: bool | None = None) -> "DistributedTensor":
    """``x`` in ``shape``: a view where every fragment stays one piece
    (:func:`dlmg.ops.shape.reshape`), else one redistribution into the nearest layout.

    Algorithm: reshape into the nearest layout -- among balanced slabs of
    ``x``'s shape on its devices, the one from which the reshape is a view
    (:func:`nearest_reshape_layout`); when the best such slab would put more
    than twice a balanced share on one device, the tensor goes through its
    flat form instead (a balanced 1-D slab, then a slab whose blocks hold
    whole rows of the new shape): two redistributions, each of one share.
    ``copy=False`` refuses any move (:class:`~dlmg.errors.LayoutError`).
    """
    x = settled(x)
    try:
        return _shape.reshape(x, shape, copy=copy)
    except LayoutError:
        if copy is False:
            raise
    x = _operand(x, "reshape")
    shape = _normal_shape(x, shape, "reshape")
    if x.size == 0:
        return _empty(x, balanced_layout(shape, x.layout, _largest_mode(shape) or 0) if shape else
                      Layout((), devices=x.layout.devices, ranks=x.layout.ranks), "reshape")
    if not shape:  # one element, into a 0-d tensor: a copy of it on each of the devices
        return _shape.reshape(_into(x, _copies(x.shape, x.layout)), shape)
    p = x.layout.ngrid
    found = nearest_reshape_layout(x.layout, shape)
    if found is not None and found[1] * p <= 2 * x.size + found[0].block[0]:
        return _shape.reshape(_into(x, found[0]), shape)
    flat = nearest_reshape_layout(x.layout, (x.size,))
    if flat is None:  # every mode of extent 1: the one element, a copy on each of the devices
        return _shape.reshape(_into(x, _copies(x.shape, x.layout)), shape)
    line = _shape.reshape(_into(x, flat[0]), (x.size,))
    rows = math.prod(shape[1:])
    return _shape.reshape(_into(line, balanced_layout((x.size,), x.layout, 0, rows)), shape)


def _copies(shape: tuple[int, ...], like: Layout) -> Layout:
    """``shape`` whole on each device (and process) of ``like``, once per device: for a tensor
    of one element, the layout that keeps it on the same devices."""
    places = list(dict.fromkeys(zip(like.devices, like.ranks)))
    return Layout(shape, devices=[d for d, _ in places], ranks=[r for _, r in places])


def _empty(x: "DistributedTensor", layout: Layout, name: str) -> "DistributedTensor":
    """An empty tensor of ``layout`` in the framework of ``x``'s first local fragment."""
    frameworks = x.frameworks
    arrays: list[Any] = [None] * layout.nfragments
    me = process_rank()
    for frag in layout.fragments:
        if layout.ranks[frag.index] != me:
            continue
        ex = executor(frameworks[0] if frameworks else DEFAULT_FRAMEWORK, frag.device)
        arrays[frag.index] = ex.adapter.empty(frag.shape, x.dtype, frag.device)
    return new_tensor(arrays, layout, x.dtype)


# --------------------------------------------------------------------------
# shift placement: concat, stack, roll, tile, repeat


class _Piece:
    """Elements ``[start, stop)`` of ``tensor`` along the mode, placed at ``offset`` of the result."""

    __slots__ = ("tensor", "start", "stop", "offset")

    def __init__(self, tensor: "DistributedTensor", start: int, stop: int, offset: int) -> None:
        self.tensor, self.start, self.stop, self.offset = tensor, start, stop, offset

    @property
    def length(self) -> int:
        return self.stop - self.start


def _block_for(pieces: Sequence[_Piece], lead: Layout, axis: int, extent: int) -> int:
    """The block ``d`` of the placement: it divides every start, length, offset and extent, and
    deals the result out over the grid; the lead's own block where it does."""
    step = extent
    for p in pieces:
        step = math.gcd(step, math.gcd(p.start, math.gcd(p.length, p.offset)))
        step = math.gcd(step, p.tensor.shape[axis])
    if step == 0:
        return 1
    g = lead.grid[axis]
    if g == 1:
        return step
    cap = max(1, math.ceil(extent / g))
    own = lead.block[axis]
    if step % own == 0 and own <= cap:
        return own
    best = 1
    for d in range(1, math.isqrt(step) + 1):
        if step % d == 0:
            for e in (d, step // d):
                if best < e <= cap:
                    best = e
    return best


def _rotation(t: "DistributedTensor", lead: Layout, axis: int, block: int) -> int | None:
    """The rotation ``r`` for which ``t`` is already laid out as ``_moved(lead, ..., r)``."""
    g = lead.grid[axis]
    if t.layout.shape[:axis] + t.layout.shape[axis + 1:] != lead.shape[:axis] + lead.shape[axis + 1:]:
        return None
    for r in range(g):
        if t.layout.same_distribution(_moved(lead, axis, t.shape[axis], block, r)):
            return r
    return None


def _shifted(layout: Layout, axis: int, shift: int) -> list[int]:
    """For each fragment of ``layout``, the fragment at grid coordinate ``c + shift`` along
    ``axis`` (modulo the grid), same coordinates elsewhere, same replica."""
    g = layout.grid[axis]
    out = []
    for f in range(layout.nfragments):
        coords, replica = layout.coords_of(f)
        moved = list(coords)
        moved[axis] = (moved[axis] + shift) % g
        out.append(layout.fragment_index(moved, replica))
    return out


def _before(index: int, coord: int, block: int, grid: int) -> int:
    """How many elements of global index below ``index`` grid coordinate ``coord`` holds along a
    mode dealt in blocks of ``block`` over ``grid`` coordinates (its local position of ``index``)."""
    q, r = divmod(index, block)
    whole = max(0, (q - coord + grid - 1) // grid)
    return whole * block + (r if q % grid == coord else 0)


def _local_run(t: "DistributedTensor", axis: int, start: int, stop: int, block: int) -> list[Any]:
    """The run ``[start, stop)`` of ``t`` (block-cyclic along ``axis`` with a block dividing
    ``start``) as fragments: run fragment ``c`` is the local slice of ``t``'s fragment at grid
    coordinate ``c + start // block`` holding the run's elements."""
    arrays: list[Any] = []
    for f in _shifted(t.layout, axis, start // block):
        frag = t.fragments[f]
        if not frag.is_local:
            arrays.append(None)
            continue
        c = t.layout.coords_of(f)[0][axis]
        key = (slice(None),) * axis + (slice(_before(start, c, block, t.layout.grid[axis]),
                                              _before(stop, c, block, t.layout.grid[axis])),)
        arrays.append(frag.array[key])
    return arrays


def place(pieces: Sequence[_Piece], lead: Layout, axis: int, extent: int, name: str) -> "DistributedTensor":
    """The tensor of extent ``extent`` along ``axis`` made of ``pieces`` (shift placement).

    Algorithm (see the module): a block ``d`` dividing every start, length
    and offset; each operand in the block-cyclic layout of block ``d`` over
    the lead's grid, rotated so that its largest piece lands without moving
    (one redistribution where its layout is another); each piece, a local
    slice of every fragment, redistributed only if its rotation differs from
    the one its offset needs; each result fragment the local concatenation of
    the pieces' fragments at its grid coordinate, in the framework of the
    lead's fragment there.

    ``place`` consumes its pieces: their tensors are dropped as they are
    placed, so moved copies are freed fragment by fragment while the result
    is made (the caller's own tensors are untouched).
    """
    g = lead.grid[axis]
    d = _block_for(pieces, lead, axis, extent)
    operands: list[Any] = []  # each operand once, by identity (tensors compare elementwise)
    for p in pieces:
        if all(p.tensor is not t for t in operands):
            operands.append(p.tensor)

    def index(t: Any) -> int:
        return next(i for i, u in enumerate(operands) if u is t)

    rotation: dict[int, int] = {}
    for i, t in enumerate(operands):
        r = _rotation(t, lead, axis, d)
        if r is not None:
            rotation[i] = r
    # the result's rotation: the largest piece of an operand already in place moves nothing
    placed = [p for p in pieces if index(p.tensor) in rotation]
    anchor = max(placed or pieces, key=lambda p: p.length)
    result_rotation = (rotation.get(index(anchor.tensor), 0) + (anchor.start - anchor.offset) // d) % g
    for i in range(len(operands)):
        if i in rotation:
            continue
        t = operands[i]
        own = max((p for p in pieces if p.tensor is t), key=lambda p: p.length)
        rotation[i] = (result_rotation + (own.offset - own.start) // d) % g
        operands[i] = t.redistribute(_moved(lead, axis, t.shape[axis], d, rotation[i]))
        for p in pieces:  # the pieces now name the moved tensor, so a run made for them is freed
            if p.tensor is t:
                p.tensor = operands[i]
        del t, own
    dtype = operands[0].dtype
    out_layout = _moved(lead, axis, extent, d, result_rotation)
    parts: list[tuple[int, "DistributedTensor"]] = []
    for p in sorted(pieces, key=lambda p: p.offset):
        if p.length == 0:
            continue
        i = index(p.tensor)
        t = operands[i]
        have = (rotation[i] + p.start // d) % g
        want = (result_rotation + p.offset // d) % g
        if p.start == 0 and p.stop == t.shape[axis]:
            run = t
        else:
            run = new_tensor(_local_run(t, axis, p.start, p.stop, d), _moved(lead, axis, p.length, d, have), t.dtype)
        if have != want:
            run = run.redistribute(_moved(lead, axis, p.length, d, want))
        parts.append((p.offset // d, run))
        del t, run
    for p in pieces:
        p.tensor = None  # type: ignore[assignment]  # (consumed: see the docstring)
    operands.clear()
    return _joined(parts, out_layout, axis, name, dtype)


def _joined(parts: list[tuple[int, "DistributedTensor"]], layout: Layout, axis: int, name: str,
            dtype: str) -> "DistributedTensor":
    """Each fragment of ``layout`` (grid coordinate ``c`` along ``axis``): the local concatenation
    along ``axis`` of each part's fragment at coordinate ``c - shift`` (``shift``: the part's
    offset in blocks), which lies on the same device by construction. ``parts`` is emptied: each
    part's fragment is let go once joined, so moved copies are freed as the result grows."""
    maps = [_shifted(layout, axis, -shift) for shift, _ in parts]
    tables: list[list[Any]] = [list(t.fragments) for _, t in parts]
    parts.clear()
    arrays: list[Any] = [None] * layout.nfragments
    for i in range(layout.nfragments):
        frags = [table[where[i]] for where, table in zip(maps, tables)]
        for where, table in zip(maps, tables):
            table[where[i]] = None
        if not frags or not frags[0].is_local:
            continue
        ex = executor(frags[0].framework, frags[0].device)
        try:
            items = [f.array if f.framework == ex.framework else move_array(f.array, ex, f.adapter) for f in frags]
            if len(items) == 1:
                arrays[i] = ex.run(_copy, items[0])
            else:
                arrays[i] = ex.run(lambda xp, *a: xp.concat(a, axis=axis), *items)
        except Exception as exc:
            raise fail(f"dlmg.{name}", i, ex, exc) from exc
    return new_tensor(arrays, layout, dtype)


def _same_but(shapes: Sequence[tuple[int, ...]], axis: int, name: str) -> None:
    first = shapes[0]
    for s in shapes[1:]:
        if len(s) != len(first) or s[:axis] + s[axis + 1:] != first[:axis] + first[axis + 1:]:
            raise ValueError(f"dlmg.{name}: shapes {first} and {s} differ outside mode {axis}")


def concat(arrays: Sequence["DistributedTensor"], /, *, axis: int | None = 0) -> "DistributedTensor":
    """The tensors joined along ``axis`` (array API ``concat``), on the first one's devices.

    Algorithm: where the first tensor splits ``axis`` and every operand is a
    slab there of one block size (every extent but the last a whole number
    of rounds of the grid), the result's fragments are the operands' own: its
    layout deals the blocks over the operands' grids one after the other, so
    nothing is copied and the result shares the operands' memory. Otherwise
    shift placement (see the module) of each operand at the sum of the
    extents before it. Along a mode the first tensor holds whole in
    every fragment, the operands are first aligned with it on the other modes
    (one redistribution each, only where their layouts differ) and each
    fragment concatenates locally; along a split mode where every operand's
    extent is a multiple of the blocks dealt to one round of the grid, the
    same holds; otherwise each operand moves once into the rotation its
    offset needs. ``axis=None`` joins the flattened tensors.

    Pending sums laid out alike (the same layout but for their extents along
    ``axis``, which every fragment holds whole) stay pending: each addend of
    the result joins the operands' addends on its device. Any other pending
    operand is resolved first.
    """
    alike = _pending_alike(arrays, axis)
    if alike is not None:
        return alike
    tensors = [_operand(t, "concat") for t in arrays]
    if not tensors:
        raise ValueError("dlmg.concat needs at least one tensor")
    dtypes = {t.dtype for t in tensors}
    if len(dtypes) > 1:
        raise TypeError(f"dlmg.concat: the tensors have different dtypes {sorted(dtypes)}; cast them first")
    if axis is None:
        tensors = [reshape(t, (t.size,)) for t in tensors]
        axis = 0
    if any(t.ndim == 0 for t in tensors):
        raise ValueError("dlmg.concat: 0-d tensors cannot be joined")
    if len({t.ndim for t in tensors}) > 1:
        raise ValueError(f"dlmg.concat: the tensors have different ranks {[t.ndim for t in tensors]}")
    a = _axis(axis, tensors[0].ndim, "concat")
    _same_but([t.shape for t in tensors], a, "concat")
    side = _side_by_side(tensors, a)
    if side is not None:
        return side
    pieces, offset = [], 0
    for t in tensors:
        pieces.append(_Piece(t, 0, t.shape[a], offset))
        offset += t.shape[a]
    return _placed(pieces, tensors[0], a, offset, "concat")


def _pending_alike(arrays: Sequence[Any], axis: int | None) -> "DistributedTensor | None":
    """:func:`concat` of pending sums laid out alike along a mode each fragment holds whole,
    addend by addend (the sum of the joined addends is the join of the sums); ``None`` when
    the operands are not such."""
    if axis is None or len(arrays) < 2 or not all(is_distributed(t) and t.layout.partial for t in arrays):
        return None
    lead = arrays[0].layout
    if not all(t.ndim == lead.ndim for t in arrays) or lead.ndim == 0:
        return None
    a = _axis(axis, lead.ndim, "concat")
    if lead.element_strides is not None or lead.grid[a] != 1 or len({t.dtype for t in arrays}) > 1:
        return None
    total = sum(t.shape[a] for t in arrays)
    for t in arrays:
        lay = t.layout
        if lay.element_strides is not None or lay.replace(shape=lead.shape, block=lead.block) != lead:
            return None
    shape = list(lead.shape)
    shape[a] = total
    block = list(lead.block)
    block[a] = max(total, 1)
    layout = lead.replace(shape=tuple(shape), block=tuple(block))
    parts = [None] * lead.nfragments
    for f in range(lead.nfragments):
        frags = [t.fragments[f] for t in arrays]
        if not frags[0].is_local:
            continue
        ex = executor(frags[0].framework, frags[0].device)
        arrays_here = [move_array(g.array, ex) for g in frags]
        try:
            parts[f] = ex.run(lambda xp, *xs: xp.concat(list(xs), axis=a), *arrays_here)
        except Exception as exc:
            raise fail("dlmg.concat", f, ex, exc) from exc
    return new_tensor(parts, layout, arrays[0].dtype)


def _side_by_side(tensors: Sequence["DistributedTensor"], axis: int) -> "DistributedTensor | None":
    """The concatenation whose fragments are the operands' own (no copy), where a layout says so.

    That is when the first operand splits ``axis`` and every operand is a slab there of one
    block size ``b`` (each grid coordinate one block, every extent but the last ``b`` times its
    grid), distributed like the first on the other modes, on the first one's devices and
    processes: the result deals its blocks over the operands' grids one after the other.
    ``None`` otherwise.
    """
    lead = tensors[0].layout
    if lead.grid[axis] == 1 or len(tensors) < 2:
        return None
    b = lead.block[axis]
    places = set(zip(lead.devices, lead.ranks))
    others = [m for m in range(lead.ndim) if m != axis]
    for i, t in enumerate(tensors):
        lay = t.layout
        last = i == len(tensors) - 1
        if lay.nreplicas != lead.nreplicas or lay.block[axis] != b or not set(zip(lay.devices, lay.ranks)) <= places:
            return None
        if any(lay.grid[m] != lead.grid[m] or (lay.grid[m] > 1 and lay.block[m] != lead.block[m]) for m in others):
            return None
        if (lay.shape[axis] != b * lay.grid[axis]) if not last else (lay.nblocks[axis] > lay.grid[axis]):
            return None
    starts, total = [], 0
    for t in tensors:
        starts.append(total)
        total += t.layout.grid[axis]
    shape = list(lead.shape)
    shape[axis] = sum(t.shape[axis] for t in tensors)
    grid = list(lead.grid)
    grid[axis] = total
    draft = Layout(shape, block=lead.block, grid=grid, devices=["cpu"] * (math.prod(grid) * lead.nreplicas))
    devices, ranks, arrays = [], [], []
    for f in range(draft.nfragments):
        coords, replica = draft.coords_of(f)
        i = max(k for k, s0 in enumerate(starts) if s0 <= coords[axis])
        own = list(coords)
        own[axis] -= starts[i]
        lay = tensors[i].layout
        src = lay.fragment_index(own, replica)
        frag = tensors[i].fragments[src]
        devices.append(lay.devices[src])
        ranks.append(lay.ranks[src])
        arrays.append(frag.array if frag.is_local else None)
    layout = Layout(shape, block=lead.block, grid=grid, devices=devices, ranks=ranks)
    return new_tensor(arrays, layout, tensors[0].dtype)


def _placed(pieces: list[_Piece], lead: "DistributedTensor", axis: int, extent: int, name: str) -> "DistributedTensor":
    """:func:`place`, with an empty result made directly."""
    if extent == 0 or any(n == 0 for m, n in enumerate(lead.shape) if m != axis):
        return _empty(lead, _moved(lead.layout, axis, extent, 1, 0), name)
    return place([p for p in pieces if p.length], lead.layout, axis, extent, name)


def stack(arrays: Sequence["DistributedTensor"], /, *, axis: int = 0) -> "DistributedTensor":
    """The tensors stacked along a new mode ``axis`` (array API ``stack``).

    Algorithm: each tensor viewed with a unit mode at ``axis``
    (:func:`expand_dims`: no move), then :func:`concat` along it, whole in
    every fragment: fragment by fragment, after aligning every operand with
    the first on the other modes (one redistribution each where they differ).
    """
    tensors = [_operand(t, "stack", settle=False) for t in arrays]  # concat settles what it cannot keep
    if not tensors:
        raise ValueError("dlmg.stack needs at least one tensor")
    shapes = {t.shape for t in tensors}
    if len(shapes) > 1:
        raise ValueError(f"dlmg.stack: the tensors have different shapes {sorted(shapes)}")
    a = _axis(axis, tensors[0].ndim + 1, "stack")
    return concat([expand_dims(t, axis=a) for t in tensors], axis=a)


def roll(x: "DistributedTensor", /, shift: int | Sequence[int], *, axis: int | Sequence[int] | None = None
         ) -> "DistributedTensor":
    """``x`` rolled by ``shift`` along ``axis`` (array API ``roll``).

    Algorithm: along modes each fragment holds whole, a local roll; along a
    split mode a shift plan -- two pieces, ``[n - s, n)`` placed at 0 and
    ``[0, n - s)`` at ``s``, by shift placement (see the module): a shift of
    whole blocks by a multiple of the grid's round is a renumbering of the
    fragments and moves nothing. ``axis=None`` rolls the flattened tensor.
    """
    x = _operand(x, "roll")
    if axis is None:
        if x.ndim == 0:
            return _each(x, x.layout, range(x.layout.nfragments), _copy, "roll")
        flat = reshape(x, (x.size,))
        s = int(shift) if isinstance(shift, (int, np.integer)) else int(sum(shift))
        return reshape(roll(flat, s, axis=0), x.shape)
    shifts = (shift,) if isinstance(shift, (int, np.integer)) else tuple(shift)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    if len(shifts) != len(axes):
        raise ValueError(f"dlmg.roll: shift {shift!r} and axis {axis!r} differ in length")
    total: dict[int, int] = {}
    for s, a in zip(shifts, axes):
        m = _axis(a, x.ndim, "roll")
        total[m] = total.get(m, 0) + int(s)
    whole = {m: s for m, s in total.items() if x.layout.grid[m] == 1}
    out = x
    if whole:
        ms = tuple(whole)
        out = _each(x, x.layout.dense, range(x.layout.nfragments),
                    lambda xp, a: xp.roll(a, tuple(whole[m] for m in ms), axis=ms), "roll")
    for m, s in total.items():
        if m in whole:
            continue
        n = out.shape[m]
        s = s % n if n else 0
        if s == 0:
            if out is x:
                out = _each(x, x.layout.dense, range(x.layout.nfragments), _copy, "roll")
            continue
        out = _placed([_Piece(out, n - s, n, 0), _Piece(out, 0, n - s, s)], out, m, n, "roll")
    return out


def tile(x: "DistributedTensor", /, repetitions: Sequence[int]) -> "DistributedTensor":
    """``x`` repeated ``repetitions`` times along each mode (array API ``tile``).

    Algorithm: along modes each fragment holds whole, a local tile; along a
    split mode, shift placement of ``k`` pieces (the whole tensor at offsets
    ``0, n, 2n...``), local when ``n`` is a multiple of the grid's round of
    blocks. Extra leading repetitions add leading unit modes first (views).
    """
    x = _operand(x, "tile")
    reps = tuple(int(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"dlmg.tile: repetitions {reps} must be non-negative")
    if len(reps) > x.ndim:
        x = expand_dims(x, axis=tuple(range(len(reps) - x.ndim)))
    reps = (1,) * (x.ndim - len(reps)) + reps
    local = tuple(r if x.layout.grid[m] == 1 else 1 for m, r in enumerate(reps))
    out = x
    if any(r != 1 for r in local) or all(r == 1 for r in reps):
        shape = tuple(n * r for n, r in zip(x.shape, local))
        block = tuple(max(s, 1) if g == 1 else b for s, b, g in zip(shape, x.layout.block, x.layout.grid))
        layout = Layout(shape, block=block, grid=x.layout.grid, devices=x.layout.devices, ranks=x.layout.ranks)
        out = _each(x, layout, range(layout.nfragments), lambda xp, a: xp.tile(a, local), "tile")
    for m, r in enumerate(reps):
        if local[m] == r:
            continue
        n = out.shape[m]
        out = _placed([_Piece(out, 0, n, k * n) for k in range(r)], out, m, n * r, "tile")
    return out


def repeat(x: "DistributedTensor", /, repeats: Any, *, axis: int | None = None) -> "DistributedTensor":
    """Each element of ``x`` repeated along ``axis`` (array API ``repeat``).

    Algorithm: with one count ``r``, block ``b`` of the mode becomes block
    ``b * r`` of the result, dealt to the same grid coordinate, so every
    fragment repeats locally under a layout of blocks ``r`` times larger, for
    any layout; nothing moves. With one count per element, a mode each
    fragment holds whole repeats locally; along a split mode each fragment of
    a balanced slab repeats its own elements, and shift placement puts each
    fragment's run at the sum of the counts before it. ``axis=None`` repeats
    the flattened tensor.

    Parameters
    ----------
    repeats : int, sequence of int, array or DistributedTensor
        Counts: one for all elements, or one per element along ``axis`` (a
        distributed tensor of counts is gathered: it is one index per element
        of one mode).
    """
    x = _operand(x, "repeat")
    if axis is None:
        x = reshape(x, (x.size,))
        axis = 0
    a = _axis(axis, x.ndim, "repeat")
    n = x.shape[a]
    if is_distributed(repeats):
        counts = np.asarray(repeats.gather(framework="numpy")).astype(np.int64).reshape(-1)
    elif isinstance(repeats, (int, np.integer)):
        counts = np.asarray([int(repeats)], dtype=np.int64)
    else:
        counts = np.asarray(_host(repeats), dtype=np.int64).reshape(-1)
    if np.any(counts < 0):
        raise ValueError("dlmg.repeat: repeats must be non-negative")
    if counts.size == 1:
        r = int(counts[0])
        lay = x.layout
        shape = list(lay.shape)
        shape[a] = n * r
        block = list(lay.block)
        block[a] = max(lay.block[a] * r, 1) if lay.grid[a] > 1 else max(n * r, 1)
        layout = Layout(shape, block=block, grid=lay.grid, devices=lay.devices, ranks=lay.ranks)
        return _each(x, layout, range(layout.nfragments), lambda xp, arr: xp.repeat(arr, r, axis=a), "repeat")
    if counts.size != n:
        raise ValueError(f"dlmg.repeat: {counts.size} repeats for a mode of extent {n}")
    total = int(counts.sum())
    if x.layout.grid[a] == 1:
        lay = x.layout
        shape = list(lay.shape)
        shape[a] = total
        block = list(lay.block)
        block[a] = max(total, 1)
        layout = Layout(shape, block=block, grid=lay.grid, devices=lay.devices, ranks=lay.ranks)
        return _repeat_whole(x, layout, counts, a)
    # along a split mode: a balanced slab, each fragment's run, then shift placement
    slab = _into(x, _moved(x.layout, a, n, math.ceil(n / x.layout.grid[a]), 0))
    g, b = slab.layout.grid[a], slab.layout.block[a]
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    pieces = []
    for c in range(g):
        lo, hi = min(c * b, n), min((c + 1) * b, n)
        length = int(starts[hi] - starts[lo])
        kept = [f for f in range(slab.layout.nfragments) if slab.layout.coords_of(f)[0][a] == c]
        mine = new_tensor([slab.fragments[f].array if slab.fragments[f].is_local else None for f in kept],
                          _sub_layout(slab.layout, kept, a, hi - lo), slab.dtype)
        part = _repeat_whole(mine, _sub_layout(slab.layout, kept, a, length), counts[lo:hi], a)
        pieces.append(_Piece(part, 0, length, int(starts[lo])))
        del mine, part
    if total == 0:
        return _empty(slab, _moved(slab.layout, a, 0, 1, 0), "repeat")
    lead = slab.layout
    del slab  # the runs are new arrays: the slab's copy is freed before they move
    return place([p for p in pieces if p.length], lead, a, total, "repeat")


def _sub_layout(layout: Layout, kept: Sequence[int], axis: int, extent: int) -> Layout:
    """The fragments ``kept`` of ``layout`` (one grid coordinate along ``axis``) as a layout of
    their own, ``axis`` whole with ``extent`` elements."""
    shape = list(layout.shape)
    shape[axis] = extent
    block = list(layout.block)
    block[axis] = max(extent, 1)
    grid = list(layout.grid)
    grid[axis] = 1
    return Layout(shape, block=block, grid=grid, devices=[layout.devices[f] for f in kept],
                  ranks=[layout.ranks[f] for f in kept])


def _repeat_whole(x: "DistributedTensor", layout: Layout, counts: np.ndarray, axis: int) -> "DistributedTensor":
    """Each fragment of ``x`` (``axis`` whole in it) repeated by ``counts`` along ``axis``."""
    arrays: list[Any] = [None] * layout.nfragments
    for frag in x.fragments:
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            try:
                reps = move_array(counts, ex)
            except DtypeError:  # a framework without 64-bit integers takes the counts as int32
                reps = move_array(counts.astype(np.int32), ex)
            arrays[frag.index] = ex.run(lambda xp, arr, reps=reps: xp.repeat(arr, reps, axis=axis), frag.array)
        except Exception as exc:
            raise fail("dlmg.repeat", frag.index, ex, exc) from exc
    return new_tensor(arrays, layout, x.dtype)


def _host(values: Any) -> Any:
    """A sequence or any framework's array of counts as something NumPy reads."""
    if isinstance(values, (list, tuple)):
        return values
    try:
        return np.from_dlpack(values)
    except Exception:
        return np.asarray(values)


# --------------------------------------------------------------------------
# flip: block renumbering


def _divisor_block(n: int, g: int) -> int:
    """The block that divides ``n`` and spreads it over ``g`` grid coordinates most evenly
    (the largest such on a tie; 1, cyclic, always qualifies)."""
    best, best_load = 1, math.ceil(n / g)
    for d in range(1, math.isqrt(n) + 1):
        if n % d:
            continue
        for e in (d, n // d):
            load = math.ceil((n // e) / g) * e
            if load < best_load or (load == best_load and e > best):
                best, best_load = e, load
    return best


def flip(x: "DistributedTensor", /, *, axis: int | Sequence[int] | None = None) -> "DistributedTensor":
    """``x`` with the order of its elements along ``axis`` reversed (array API ``flip``).

    Algorithm: block renumbering. Along a mode whose blocks are all full
    (the extent a multiple of the block), reversing maps block ``j`` to block
    ``nblocks - 1 - j``, held by grid coordinate ``(nblocks - 1 - c) % grid``
    of the block that was at ``c``; so every fragment flips locally in its
    framework (torch copies: it has no negative strides) and the fragments
    trade grid coordinates, keeping their devices and processes. A split mode
    with a partial last block is first redistributed (once, for all such
    modes) into the block that divides its extent and spreads it most evenly.
    """
    x = _operand(x, "flip")
    axes = tuple(range(x.ndim)) if axis is None else (
        (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    modes = tuple(sorted({_axis(a, x.ndim, "flip") for a in axes}))
    lay = x.layout
    uneven = [m for m in modes if lay.grid[m] > 1 and lay.shape[m] % lay.block[m]]
    if uneven:
        block = list(lay.block)
        for m in uneven:
            block[m] = _divisor_block(lay.shape[m], lay.grid[m])
        x = x.redistribute(Layout(lay.shape, block=block, grid=lay.grid, devices=lay.devices, ranks=lay.ranks))
        lay = x.layout
    split = [m for m in modes if lay.grid[m] > 1]
    nblocks = lay.nblocks
    order, devices, ranks = [], [], []
    for f in range(lay.nfragments):
        coords, replica = lay.coords_of(f)
        src = list(coords)
        for m in split:
            src[m] = (nblocks[m] - 1 - coords[m]) % lay.grid[m]
        s = lay.fragment_index(src, replica)
        order.append(s)
        devices.append(lay.devices[s])
        ranks.append(lay.ranks[s])
    layout = Layout(lay.shape, block=lay.block, grid=lay.grid, devices=devices, ranks=ranks)
    return _each(x, layout, order, lambda xp, a: xp.flip(a, axis=modes) if modes else a, "flip", fresh=True)
