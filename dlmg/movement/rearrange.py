"""Gathers and scatters that a framework without views makes itself.

JAX arrays cannot be written, so a gather into JAX otherwise writes a staging
array of another framework and hands it over (an import per fragment, a wait,
an import of the result). Where every fragment is an array of the target
framework on one device, two shapes of gather are one call of that framework
instead, and the matching scatters too:

* slabs: the fragments' parts of the tensor follow one another in C order, so
  the gather is a concatenation of ranges (:meth:`Rearranging.assemble`) and the
  scatter cuts ranges (:meth:`Rearranging.split`); the slabs may be uneven;
* a regular grid: every mode's extent is a whole number of blocks and every
  fragment holds the same number of them (block-cyclic, cyclic, blocks), so the
  gather stacks the fragments in grid order, permutes block axes and reshapes
  (:meth:`Rearranging.compose`); the scatter undoes it (:meth:`Rearranging.decompose`).

A redistribution between two layouts on that one device is one call too where
every new fragment is a tiling of plain slices of the old fragments, cut axis
by axis (slabs to slabs along any axes, and the blocks of regular grids):
:meth:`Rearranging.retile` writes every new fragment in one pass over the bytes,
where a gather followed by a scatter makes two.

Where both apply (even slabs are a regular grid with one block per fragment),
the grid comes first: in one H200 run, XLA's stack-and-transpose gathered 8
cyclic or block-cyclic fragments of 256 MiB in all at 0.91-0.93 of the copy
rate, where its concatenation of 8 slabs of the same size ran at 0.74 (and
`jnp.concatenate` itself at 0.59). What was worked out is kept per tensor
(gathers) or per plan and layout (scatters). Everything else keeps the copy
plans. All of it is asked of a framework that declares the capability
:class:`~dlmg.adapters.capabilities.Rearranging`.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable

from .._shapes import c_strides
from ..adapters.capabilities import Concat, Cut, Rearranging, Retiling, Slice, Span, Tiling
from ..device import Device, as_device
from ..fragment import Fragment
from ..base import TensorBase
from ..plans.plan import Copy, RedistributionPlan, concatenation, contiguous

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["assembled", "box_of", "grid_geometry", "retiled", "slice_of", "split"]


# -- the geometry of a regular grid --------------------------------------------------
def grid_geometry(layout: "Layout") -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """``(order, stacked, axes)`` of a regular grid, or ``None`` for other layouts.

    ``order`` lists the fragments in C order of their grid coordinates;
    stacking their arrays in that order and reshaping to ``stacked`` (the grid,
    then per mode its local block count and block extent) puts every block axis
    apart, and permuting by ``axes`` to (block count, grid, block extent) per
    mode makes the tensor's C order. Regular: no replicas, no padding, no
    strides of the layout's own, and along every mode a whole number of blocks
    that the grid shares out evenly.
    """
    return _grid_geometry(layout)


# Geometries of this many layouts: every gather, scatter and redistribution by a
# framework without views asks, and the answer sorts the fragments by grid position.
@lru_cache(maxsize=256)
def _grid_geometry(layout: "Layout") -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    if layout.nreplicas != 1 or layout.element_strides is not None or layout.block_strides is not None:
        return None
    n = layout.ndim
    per_fragment = []
    for extent, block, grid in zip(layout.shape, layout.block, layout.grid):
        if block == 0 or extent % block or (extent // block) % grid:
            return None
        per_fragment.append(extent // block // grid)
    order = tuple(sorted(range(layout.nfragments), key=lambda i: layout.coords_of(i)[0]))
    stacked = tuple(layout.grid) + tuple(x for k, b in zip(per_fragment, layout.block) for x in (k, b))
    axes = tuple(p for m in range(n) for p in (n + 2 * m, m, n + 2 * m + 1))
    return order, stacked, axes


# -- gather ----------------------------------------------------------------------------
def assembled(dt: DistributedTensor, target: "Adapter", device: Any, memo: dict[Any, Any],
              gather_plan: Callable[[Device], RedistributionPlan]) -> Any:
    """The gather of ``dt`` into ``target`` (a framework without views) made by
    ``target`` itself, or ``None``.

    ``memo`` keeps what was worked out for ``dt``'s fragments; ``gather_plan(device)``
    is the copy plan of a gather into a C-ordered array on ``device``.
    """
    if dt.size == 0 or not dt.fragments or not isinstance(target, Rearranging):
        return None
    key = ("assembly", target.name, device)
    if key not in memo:
        memo[key] = _assembly(dt, target, device, gather_plan)
    found = memo[key]
    if found is None:
        return None
    frags = dt.fragments
    dev, ranges, grid = found
    if grid is not None:  # first: even slabs are a grid too, and a faster one (see the module's notes)
        order, stacked, axes = grid
        whole = target.compose([frags[i]._array for i in order], stacked, axes, dt.shape, dev)
        if whole is not None:
            return whole
    if ranges is not None:
        return target.assemble([Span(frags[i]._array, start, size) for i, start, size in ranges], dt.shape, dev)
    return None


def _assembly(dt: DistributedTensor, target: "Adapter", device: Any,
              gather_plan: Callable[[Device], RedistributionPlan]) -> tuple[Device, Any, Any] | None:
    """``(device, ranges, grid)`` of the gather: ``ranges`` as ``[(fragment, start, size)]``
    for slabs, ``grid`` from :func:`grid_geometry`, each ``None`` where it does not
    apply; ``None`` where neither does."""
    frags = dt.fragments
    dev = frags[0].device
    if any(not f.is_local or f.is_padded or f.framework != target.name or f.device != dev for f in frags):
        return None
    if device is not None and as_device(device) != dev:
        return None
    joined = concatenation(gather_plan(dev).copies_into(0))
    ranges = None
    if joined is not None and joined[0] == 0 and sum(c.size for c in joined[1]) == dt.size:
        ranges = [(c.src, c.src_offset, c.size) for c in joined[1]]
    grid = grid_geometry(dt.layout)
    return None if ranges is None and grid is None else (dev, ranges, grid)


# -- scatter ---------------------------------------------------------------------------
def split(array: Any, a: "Adapter", plan: RedistributionPlan, layout: "Layout", device: Device,
          dtype: str) -> DistributedTensor | None:
    """The scatter of ``array`` (an array of ``a``, a framework without views, on
    ``device``) over ``layout``, made by ``a`` itself where every fragment lies on
    ``device``; ``None`` otherwise. ``plan`` is the scatter's copy plan."""
    if not isinstance(a, Rearranging) or _only_device(layout) != device:
        return None
    arrays: list[Any] | None = None
    grid = grid_geometry(layout)
    if grid is not None:  # first, as for gathers
        arrays = _decomposed(array, a, layout, grid)
    if arrays is None:
        pieces = _split_pieces(plan, layout)
        arrays = None if pieces is None else a.split(array, pieces)
    return None if arrays is None else _tensor(arrays, a, layout, device, dtype)


def _only_device(layout: "Layout") -> Device | None:
    """The one device holding every fragment of ``layout``, or ``None``."""
    devices = set(layout.devices)
    return next(iter(devices)) if len(devices) == 1 else None


def _tensor(arrays: list[Any], a: "Adapter", layout: "Layout", device: Device, dtype: str) -> DistributedTensor:
    """The tensor of ``layout`` (all of whose fragments are this process's) whose
    fragments are ``arrays``, arrays of ``a`` on ``device``."""
    dl_device = (1, device.index) if device.kind == "cpu" else None
    name = a.name
    out = [Fragment.of_result(frag, part, name, a, False, dl_device) for frag, part in zip(layout.fragments, arrays)]
    return TensorBase._create(layout, out, dtype)


def _decomposed(array: Any, a: Rearranging, layout: "Layout", grid: tuple[Any, ...]) -> list[Any] | None:
    """The fragments of a regular grid cut from ``array`` by :meth:`Rearranging.decompose`, in fragment order."""
    order = grid[0]
    parts = a.decompose(array, *_decomposition(layout))
    if parts is None:
        return None
    out: list[Any] = [None] * len(order)
    for position, index in enumerate(order):
        out[index] = parts[position]
    return out


# Cheap to work out (a permutation of the grid's axes); kept with the grid geometry it reads.
@lru_cache(maxsize=256)
def _decomposition(layout: "Layout") -> tuple[tuple[int, ...], tuple[int, ...], int, tuple[int, ...]]:
    """What :meth:`Rearranging.decompose` needs to cut a regular grid of ``layout`` from one array."""
    _, stacked, axes = _grid_geometry(layout)  # type: ignore[misc]  # only asked of regular grids
    permuted = tuple(stacked[p] for p in axes)
    back = tuple(sorted(range(len(axes)), key=lambda p: axes[p]))  # the inverse permutation
    return permuted, back, math.prod(layout.grid), tuple(layout.fragments[0].shape)


def _split_pieces(plan: RedistributionPlan, layout: "Layout") -> tuple[Cut, ...] | None:
    """A :class:`Cut` per fragment of a scatter into ranges of the source, or
    ``None`` (worked out once per plan and layout)."""
    return plan.remembered(("split pieces", layout), lambda lay: _ranges(plan, lay))  # type: ignore[no-any-return]


def _ranges(plan: RedistributionPlan, layout: "Layout") -> tuple[Cut, ...] | None:
    if layout.element_strides is not None:
        return None
    pieces = []
    for frag in layout.fragments:
        copies = plan.copies_into(frag.index)
        c = copies[0] if len(copies) == 1 else None
        if c is None or c.dst_offset != 0 or c.size != frag.size or not contiguous(c):
            return None
        pieces.append(Cut(c.src_offset, c.size, frag.shape))
    return tuple(pieces)


# -- one pass between layouts ------------------------------------------------------------
#: A piece: ``(source fragment, dims, starts, extents)``: the source's elements in C
#: order reshaped to ``dims``, then ``starts[i]:starts[i] + extents[i]`` along each axis.
Piece = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]
# How a new fragment is made: a :class:`~dlmg.adapters.capabilities.Tiling`, a
# :class:`Slice` (a :data:`Piece` reshaped to its box) or a :class:`Concat` of tilings.


def slice_of(c: Copy, size: int) -> Piece | None:
    """The source side of ``c`` as a basic slice of its C-ordered source of ``size``
    elements: ``(c.src, dims, starts, extents)``, or ``None`` where its strides do
    not nest (each a whole multiple of the next, the last 1, no row running past
    its parent) or the slice would run past the source. A plan drops axes of
    extent 1: one is put back last where the last stride is not 1 (a column)."""
    shape, strides = c.shape, c.src_strides
    if shape and strides[-1] != 1:
        shape, strides = (*shape, 1), (*strides, 1)
    if not shape or size % strides[0]:
        return None
    dims = [size // strides[0]]
    for outer, inner, extent in zip(strides, strides[1:], shape[1:]):
        if inner <= 0 or outer % inner or extent * inner > outer:
            return None
        dims.append(outer // inner)
    starts, rest = [], c.src_offset
    for stride in strides:
        starts.append(rest // stride)
        rest %= stride
    if any(s + e > d for s, e, d in zip(starts, shape, dims)):
        return None
    return c.src, tuple(dims), tuple(starts), tuple(shape)


def box_of(c: Copy, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The destination side of ``c`` as a box of its C-ordered destination of
    ``shape``: ``(starts, extents)`` per axis, or ``None`` where it writes no box.

    A copy's axes follow the destination's, but a plan drops axes of extent 1
    and merges an axis with the next where both sides are contiguous across
    them; a merged axis is split again here (its inner part must then span its
    axes whole)."""
    strides = c_strides(shape)
    starts, rest = [], c.dst_offset
    for stride in strides:
        starts.append(rest // stride if stride else 0)
        rest = rest % stride if stride else rest
    extents = [1] * len(shape)
    last = len(shape)  # copy axes map to strictly earlier destination axes, in order
    for extent, stride in zip(reversed(c.shape), reversed(c.dst_strides)):
        axis = next((d for d in range(last - 1, -1, -1) if strides[d] == stride and shape[d] > 1), None)
        if axis is None:
            return None
        while extent > shape[axis] - starts[axis]:  # merged with outer axes: this one whole
            if starts[axis] or extent % shape[axis]:
                return None
            extents[axis] = shape[axis]
            extent //= shape[axis]
            axis -= 1
            while axis >= 0 and shape[axis] == 1:
                axis -= 1
            if axis < 0:
                return None
        extents[axis] = extent
        last = axis
    if math.prod(extents) != c.size:
        return None
    return tuple(starts), tuple(extents)


def _tiling(items: list[tuple[tuple[int, ...], tuple[int, ...], Tiling]], shape: tuple[int, ...],
            axis: int = 0) -> Tiling | None:
    """The boxes of ``items`` (``(starts, extents, leaf)``) as nested concatenations
    making ``shape``, cut axis by axis from the first (each cut's pieces span the
    later axes whole), or ``None`` where they do not tile it so."""
    if axis == len(shape):
        return items[0][2] if len(items) == 1 else None
    groups: dict[tuple[int, int], list[Any]] = {}
    for item in items:
        groups.setdefault((item[0][axis], item[1][axis]), []).append(item)
    spans = sorted(groups)
    at = 0
    for start, extent in spans:
        if start != at:
            return None
        at += extent
    if at != shape[axis]:
        return None
    children = [_tiling(groups[span], shape, axis + 1) for span in spans]
    if any(child is None for child in children):
        return None
    return children[0] if len(children) == 1 else Concat(axis, tuple(children))  # type: ignore[arg-type]


#: The most slices of one redistribution made in one call: the call is compiled once
#: per geometry, and compiling grows with the slices (JAX on the CPU: 0.3 s for 256
#: slices, 1.0 s for 1024); beyond, the gather and the scatter or the copies.
MOST_SLICES = 512


def _tilings(plan: RedistributionPlan, source: "Layout",
             layout: "Layout") -> tuple[Retiling, ...] | None:
    """Per fragment of ``layout``, its shape and how to make it from slices of the
    fragments of ``source`` (:data:`Tiling`), or ``None`` where a fragment is no
    such tiling (worked out once per plan and layout)."""
    return plan.remembered(("tilings", source, layout), lambda src, lay: _tilings_of(plan, src, lay))  # type: ignore[no-any-return]


def _tilings_of(plan: RedistributionPlan, source: "Layout",
                layout: "Layout") -> tuple[Retiling, ...] | None:
    if layout.element_strides is not None or source.element_strides is not None:
        return None
    if len(plan.copies) > MOST_SLICES:
        return None
    sizes = [math.prod(f.shape) for f in source.fragments]
    out = []
    for frag in layout.fragments:
        items = []
        for c in plan.copies_into(frag.index):
            piece, box = slice_of(c, sizes[c.src]), box_of(c, frag.shape)
            if piece is None or box is None:
                return None
            items.append((box[0], box[1], Slice(*piece, box[1])))
        tiling = _tiling(items, frag.shape) if items else None
        if tiling is None:
            return None
        out.append(Retiling(frag.shape, tiling))
    return tuple(out)


def retiled(dt: DistributedTensor, a: "Adapter", plan: RedistributionPlan, layout: "Layout",
            device: Device) -> DistributedTensor | None:
    """``dt`` in ``layout`` made by ``a`` (a framework without views) in one call
    (:meth:`Rearranging.retile`), where every fragment before and after is one of its
    arrays on ``device`` and every new fragment a tiling of slices of the old
    ones; ``None`` otherwise. ``plan`` is the redistribution's copy plan."""
    if not isinstance(a, Rearranging):
        return None
    frags = dt.fragments
    for f in frags:
        if not f.is_local or f.is_padded or f.adapter is not a or f.device != device:
            return None
    targets = _tilings(plan, dt.layout, layout)
    if targets is None:
        return None
    arrays = a.retile([f._array for f in frags], targets, device)
    return None if arrays is None else _tensor(arrays, a, layout, device, dt.dtype)
