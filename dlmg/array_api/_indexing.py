"""Indexing a distributed tensor: ``dt[2:5]``, ``dt[:, 1]``, ``dt[..., ::2]``, ``dt[None]``, index arrays, masks.

Every key is first read as NumPy reads it (:mod:`._keys`): bounds, index
dtypes, lists, boolean scalars and arrays, before any framework sees an index
(JAX clamps out-of-bounds indices, torch reads negative ones from the end).

Basic indexing (integers, slices, ``...``, ``None``) runs fragment by
fragment as **views** when every mode it restricts is held whole by each
fragment (grid 1 there): each fragment indexes its own array through its
adapter (:meth:`~dlmg.adapters.Adapter.index`, which knows whether the
framework has negative strides), no element moves, and the result shares the
fragments' memory (NumPy, torch, CuPy; JAX arrays are values). Integers along
split modes (the other split modes taken whole) are views as well: the result's
fragments are views of the fragments that own the integers' positions, on their
devices and processes, so writes through them land (NumPy's view semantics).
Otherwise --
a restricted mode split over devices, integer index arrays, boolean masks --
each requested element is read from the fragment that owns it
(:mod:`dlmg.ops.routed`, owner-routed requests) into a new tensor laid out as a
balanced slab over the tensor's own devices and processes. A distributed
boolean mask of the tensor's shape is a stream compaction: local selection in
each fragment of a row slab, an exclusive scan of the counts, and the pieces
placed into the balanced slab of the result.

A distributed integer index of one mode (``x[idx]``, ``x[:, idx]``, ``take``) is
read where it lies: the result keeps its distribution. Keys with several
distributed index arrays, or one of more than one mode, are read the same way:
the index arrays broadcast to one shape and laid out alike (distributed boolean
masks of some of the modes read as their distributed ``nonzero``), each result
fragment reading the index fragments it sits with and asking the owners of the
elements they name.

A tensor holding a pending reduction (``layout.partial``: its replicas are the
addends, or candidates, of its value) keeps it under a basic key, since
indexing is linear: each replica is indexed alike, as views where the
fragments allow, otherwise each replica's selection read from its owners
(the replicas stacked along a leading mode, one owner-routed read). Index
arrays and masks read its value (:func:`~dlmg.ops._pending.guard`).

Assignment (``dt[key] = value``) writes into the fragments in place the same
ways (a scalar through a distributed mask of the tensor's shape: each fragment
writes its own elements), after NumPy's checks on the value: its shape must broadcast to the
selection's, and its dtype must cast to the tensor's (``same_kind`` for arrays;
for Python scalars NumPy 2's rules: a complex into a real tensor raises
``TypeError``, an integer outside the dtype's range ``OverflowError``). A value
that shares memory with the tensor is copied first, so ``x[:, 1:] = x[:, :-1]``
reads the old values.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..distributed import state as process_state
from ..device import Device
from ..dtypes import canonical, info
from ..layout import Layout
from ..ops._operands import is_distributed
from ..ops._writes import check_writable, unalias
from ..ops.broadcast import align
from ..ops.contract.pending import settled
from ..ops.contract.phases import stacked_layout
from ..ops._pending import guard
from ..ops._executor import executor as _executor, move_array
from ..ops.dispatch import new_tensor
from ..ops.routed import Box, box, place_pieces, read, result_frameworks, result_layout, write
from ..ops.unique import nonzero
from ._keys import NewAxisIndex, as_index_array, coordinates, is_advanced, normalize
from ._manipulation import broadcast_to

__all__ = ["getitem", "setitem", "check_value", "take", "take_along_axis"]


def _local_layout(x: Any, items: list[Any]) -> tuple[Layout, tuple[Any, ...]] | None:
    """The result layout of a basic key that every fragment can apply to its own array, and
    the key each fragment applies, or ``None``."""
    layout = x.layout
    shape: list[int] = []
    block: list[int] = []
    grid: list[int] = []
    keys: list[Any] = []
    mode = 0
    for k in items:
        if k is None:
            shape.append(1)
            block.append(1)
            grid.append(1)
            keys.append(None)
            continue
        n = layout.shape[mode]
        if isinstance(k, range):
            if len(k) == n and k.step == 1:
                shape.append(n)
                block.append(layout.block[mode])
                grid.append(layout.grid[mode])
                keys.append(slice(None))
            else:
                if layout.grid[mode] != 1:
                    return None
                shape.append(len(k))
                block.append(max(len(k), 1))
                grid.append(1)
                keys.append(_as_slice(k))
        else:
            if layout.grid[mode] != 1:
                return None
            keys.append(k)
        mode += 1
    out = Layout(tuple(shape), block=tuple(block), grid=tuple(grid), devices=layout.devices, ranks=layout.ranks,
                 partial=layout.partial)  # each addend (candidate) indexed alike: the result's addends
    return out, tuple(keys) + (Ellipsis,)  # ``...``: a 0-d view, not a scalar, for a full integer key


def _pinned_layout(x: Any, items: list[Any]) -> tuple[Layout, list[tuple[int, tuple[Any, ...]]]] | None:
    """For a basic key with integers along split modes (``x[3]`` of row slabs,
    ``x[:, 3]`` of column slabs) and only whole ranges on the other split modes: the
    result's layout, whose fragments are the fragments of ``x`` that hold the integers'
    positions, and per result fragment ``(x's fragment, the key it applies)``; ``None``
    for other keys. Each result fragment is then a view of its source fragment (NumPy's
    view semantics: writes through it land in ``x``)."""
    layout = x.layout
    shape: list[int] = []
    block: list[int] = []
    grid: list[int] = []
    kept: list[int | None] = []  # per result mode: x's mode (None for a new axis)
    fixed: dict[int, int] = {}  # x's mode -> the grid coordinate holding the integer
    local: list[Any] = []
    mode = 0
    for k in items:
        if k is None:
            shape.append(1)
            block.append(1)
            grid.append(1)
            kept.append(None)
            local.append(None)
            continue
        n, b, g = layout.shape[mode], layout.block[mode], layout.grid[mode]
        if isinstance(k, int):
            fixed[mode] = (k // b) % g
            local.append((k // b) // g * b + k % b)
        elif isinstance(k, range):
            whole = len(k) == n and k.step == 1
            if g != 1 and not whole:
                return None
            shape.append(len(k))
            block.append(b if whole else max(len(k), 1))
            grid.append(g)
            kept.append(mode)
            local.append(slice(None) if whole else _as_slice(k))
        else:
            return None
        mode += 1
    if not fixed:
        return None
    ngrid = math.prod(grid)
    devices: list[Any] = []
    ranks: list[int] = []
    sources: list[tuple[int, tuple[Any, ...]]] = []
    for i in range(ngrid * layout.nreplicas):
        replica, rest = divmod(i, ngrid)
        coords = [0] * layout.ndim
        for m, g in zip(kept, grid):
            rest, c = divmod(rest, g)
            if m is not None:
                coords[m] = c
        for m, c in fixed.items():
            coords[m] = c
        f = layout.fragment_index(coords, replica)
        devices.append(layout.devices[f])
        ranks.append(layout.ranks[f])
        sources.append((f, tuple(local) + (Ellipsis,)))
    out = Layout(tuple(shape), block=tuple(block), grid=tuple(grid), devices=devices, ranks=ranks,
                 partial=layout.partial)  # replica r's fragments are views of x's replica r: its addends
    return out, sources


def _pinned(x: Any, layout: Layout, sources: list[tuple[int, tuple[Any, ...]]]) -> Any:
    """The tensor of :func:`_pinned_layout`: each fragment a view of its source fragment."""
    arrays: list[Any] = []
    for f, keys in sources:
        frag = x.fragments[f]
        arrays.append(frag.adapter.index(frag.array, keys) if frag.is_local else None)
    return new_tensor(arrays, layout, x.dtype)


def _as_slice(r: range) -> slice:
    if not len(r):
        return slice(0, 0)
    stop = r[-1] + (1 if r.step > 0 else -1)
    return slice(r.start, stop if stop >= 0 else None, r.step)


def _element(x: Any, items: list[int]) -> Any:
    """``x[i, j, ...]`` with one int per mode: a 0-d view of a fragment holding the element
    (one of this process's where it holds one), on that fragment's device and process."""
    pairs = x.layout.global_to_local(tuple(items))
    f, local = next(((f, li) for f, li in pairs if x.fragments[f].is_local), pairs[0])
    frag = x.fragments[f]
    layout = Layout.single((), frag.device, ranks=frag.rank)
    if not frag.is_local:
        return new_tensor([None], layout, x.dtype)
    if frag.is_padded:
        view = frag.adapter.as_strided(frag.memory, (), (), frag.layout.memory_offset(local))
    else:
        view = frag.array[tuple(local) + (Ellipsis,)]
    return new_tensor([view], layout, x.dtype)


def _read_scalar_masks(items: list[Any]) -> list[Any]:
    """``items`` with each 0-d distributed boolean mask read (every process takes part)
    and replaced by the new axis of length 1 or 0 that NumPy makes of it."""
    return [NewAxisIndex(np.zeros(1 if bool(k.item()) else 0, dtype=np.int64))
            if is_distributed(k) and k.ndim == 0 and k.dtype == "bool" else k for k in items]


def getitem(x: Any, key: Any) -> Any:
    """``x[key]`` (see the module)."""
    items = _read_scalar_masks(normalize(key, x.shape))
    if not any(is_advanced(k) for k in items):
        return _basic(x, items)
    x = guard(x, "indexing")  # index arrays and masks read the value of a pending reduction
    if any(is_distributed(k) for k in items):
        masks = [k for k in items if is_distributed(k)]
        if len(items) == 1 and masks[0].dtype == "bool" and masks[0].shape == x.shape:
            return _masked(x, masks[0])
        along = _single_index(x, items)
        if along is not None:
            return _along(x, items[along], along, "__getitem__")
        layout, boxes = _advanced_boxes(x, items)
        return read(x, boxes, layout, result_frameworks(x, layout), "__getitem__")
    return _routed_getitem(x, items)


def _basic(x: Any, items: list[Any]) -> Any:
    """``x[key]`` for a basic key (integers, ranges, ``None``): views where the fragments
    allow, else owner-routed reads; a pending reduction stays pending (each replica indexed
    alike)."""
    if x.ndim and len(items) == x.ndim and all(isinstance(k, int) for k in items) and \
            not x.layout.is_replicated and x.layout.partial is None:
        return _element(x, items)
    found = _local_layout(x, items)
    if found is not None:
        return _views(x, *found)
    pinned = _pinned_layout(x, items)
    if pinned is not None:
        return _pinned(x, *pinned)
    if x.layout.partial is not None:
        return _pending_routed(x, items)
    return _routed_getitem(x, items)


def _single_index(x: Any, items: list[Any]) -> int | None:
    """The mode of the one distributed 1-D integer index of a key whose other entries take
    whole modes (``x[idx]``, ``x[:, idx]``: a ``take``), else ``None``."""
    if len(items) != x.ndim:
        return None
    found = None
    for m, k in enumerate(items):
        if is_distributed(k):
            if found is not None or k.ndim != 1 or k.dtype == "bool":
                return None
            found = m
        elif not (isinstance(k, range) and k.step == 1 and len(k) == x.shape[m]):
            return None
    return found


def _views(x: Any, layout: Layout, keys: tuple[Any, ...]) -> Any:
    arrays: list[Any] = []
    for frag in x.fragments:
        arrays.append(frag.adapter.index(frag.array, keys) if frag.is_local else None)
    return new_tensor(arrays, layout, x.dtype)


def _routed_getitem(x: Any, items: list[Any]) -> Any:
    """Each element of the selection read from its owner (:func:`dlmg.ops.routed.read`)."""
    rshape, coords = coordinates(items, x.shape)
    layout = result_layout(x, rshape)
    requests = {o: box(coords, layout, o) for o in _held(layout)}
    return read(x, requests, layout, result_frameworks(x, layout), "__getitem__")


def _pending_layout(x: Any, shape: tuple[int, ...]) -> Layout:
    """Where the addends of a routed selection of shape ``shape`` from a pending ``x`` go: per
    replica, a balanced slab along mode 0 over that replica's own devices (and processes),
    each once, in fragment order; the same split for every replica."""
    src = x.layout
    places = []
    for r in range(src.nreplicas):
        cells = range(r * src.ngrid, (r + 1) * src.ngrid)
        places.append(list(dict.fromkeys((src.devices[f], src.ranks[f]) for f in cells)))
    n = min(len(p) for p in places)
    first = [d for d, _ in places[0][:n]]
    base = Layout.slab(shape, 0, first) if shape else Layout.single((), first[0])
    chosen = [p[i] for p in places for i in range(base.ngrid)]
    return Layout(shape, block=base.block, grid=base.grid, devices=[d for d, _ in chosen],
                  ranks=[r for _, r in chosen], partial=src.partial)


def _pending_routed(x: Any, items: list[Any]) -> Any:
    """A basic key of a pending ``x`` that no fragment can apply alone (a split mode cut):
    every addend's selection read from its owners, kept pending.

    The addends are viewed as one tensor with a leading replica mode (each fragment a
    view with a mode of extent 1 in front), the key read from it with that mode whole
    (:func:`dlmg.ops.routed.read`, owner-routed requests, into :func:`_pending_layout`
    stacked alike), and each result fragment viewed back without the mode: replica ``r``
    of the result holds addend ``r``'s selection. Moving addends is exact (indexing is
    linear); it moves ``k`` copies of the selection, not the whole tensor, and no sum is
    formed."""
    src = x.layout
    k = src.nreplicas
    order = [c + src.ngrid * r for c in range(src.ngrid) for r in range(k)]
    stacked = new_tensor([x.fragments[f].adapter.index(x.fragments[f].array, (None, Ellipsis))
                          if x.fragments[f].is_local else None for f in order], stacked_layout(src), x.dtype)
    rshape, coords = coordinates([range(k), *items], (k, *x.shape))
    out = _pending_layout(x, rshape[1:])
    target = stacked_layout(out)
    requests = {o: box(coords, target, o) for o in _held(target)}
    got = read(stacked, requests, target, result_frameworks(stacked, target), "__getitem__")
    arrays: list[Any] = [None] * out.nfragments
    for c in range(out.ngrid):
        for r in range(k):
            frag = got.fragments[r + k * c]
            if frag.is_local:
                arrays[c + out.ngrid * r] = frag.adapter.index(frag.array, (0, Ellipsis))
    return new_tensor(arrays, out, x.dtype)


def _held(layout: Layout) -> list[int]:
    """The fragments of ``layout`` this process holds."""
    me = process_state.rank() if process_state.current() is not None else 0
    return [i for i, r in enumerate(layout.ranks) if r == me]


def _masked(x: Any, mask: Any) -> Any:
    """``x[mask]`` for a distributed boolean mask of ``x``'s shape: a stream compaction.

    Both are laid out in row slabs over ``x``'s devices (a redistribution where they
    are not), each slab selects its own elements in its framework, an exclusive scan
    of the slabs' counts gives each piece's place in the result (Blelloch's scan-based
    compaction), and the pieces are placed into the balanced slab of the result.
    """
    slabs = result_layout(x, x.shape)
    xs = x if x.layout.same_distribution(slabs) else x.redistribute(slabs)
    ms = mask if mask.layout.same_distribution(slabs) else mask.redistribute(slabs)
    pieces: dict[int, Any] = {}
    for frag, m in zip(xs.fragments, ms.fragments):
        if not frag.is_local:
            continue
        sel = frag.adapter.index(frag.array, (m.array if m.framework == frag.framework else
                                             _moved(m.array, frag),))
        pieces[frag.index] = frag.adapter.namespace().reshape(sel, (-1,))
    return place_pieces(pieces, slabs.ranks, x.dtype, lambda total: result_layout(x, (total,)),
                        lambda out: result_frameworks(x, out), "__getitem__")


def _moved(array: Any, frag: Any) -> Any:
    return move_array(array, _executor(frag.framework, frag.device))


def _advanced_items(items: list[Any]) -> list[Any]:
    """``items`` with every distributed boolean mask replaced by its distributed
    ``nonzero`` (one 1-D integer tensor per mode it covers), as NumPy reads a mask."""
    out: list[Any] = []
    for k in items:
        if is_distributed(k) and k.dtype == "bool":
            out.extend(nonzero(k))
        else:
            out.append(k)
    return out


def _advanced_boxes(x: Any, items: list[Any]) -> tuple[Layout, dict[int, Box]]:
    """The layout of ``x[items]`` for a key with distributed index arrays, and per result
    fragment held here, the elements it names (owner-routed, as Global Arrays'
    ``NGA_Gather`` of the combined index).

    The index arrays (distributed, host arrays, and integers, which count as index arrays
    beside them: NumPy's rule) broadcast to one shape ``B``; the distributed ones are
    laid out as the first of them (broadcast as views where their fragments allow, a
    redistribution where their distribution differs), and the result takes that
    distribution over ``B``'s modes, whole along the modes that ranges and ``None``
    keep. Each result fragment reads the index fragments it sits with, so no index is
    gathered either.
    """
    items = _advanced_items(items)
    arrays = [k for k in items if is_distributed(k) or isinstance(k, (np.ndarray, NewAxisIndex))]
    shapes = [tuple(k.shape) if is_distributed(k) else (k.array if isinstance(k, NewAxisIndex) else k).shape
              for k in arrays]
    try:
        bshape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(s) for s in shapes)) from None
    lead = None
    aligned: dict[int, Any] = {}
    for i, k in enumerate(items):
        if not is_distributed(k):
            continue
        k = settled(k)
        if tuple(k.shape) != bshape:
            k = broadcast_to(k, bshape)
        if lead is None:
            lead = k.layout.dense
        elif not k.layout.same_distribution(lead):
            k = k.redistribute(lead)
        aligned[i] = k
    assert lead is not None
    joined = [i for i, k in enumerate(items) if i in aligned or isinstance(k, (int, np.ndarray, NewAxisIndex))]
    together = joined == list(range(joined[0], joined[-1] + 1))
    nb = len(bshape)
    shape: list[int] = []
    block: list[int] = []
    grid: list[int] = []
    axes: list[int | None] = []  # per entry: its result axis (ranges, None) or None
    block_at = 0
    if not together:
        shape.extend(bshape)
    for i, k in enumerate(items):
        if i in joined:
            if together and i == joined[0]:
                block_at = len(shape)
                shape.extend(bshape)
            axes.append(None)
        elif isinstance(k, range) or k is None:
            axes.append(len(shape))
            shape.append(len(k) if isinstance(k, range) else 1)
        else:
            axes.append(None)
    for ax in range(len(shape)):
        if block_at <= ax < block_at + nb:
            block.append(lead.block[ax - block_at])
            grid.append(lead.grid[ax - block_at])
        else:
            block.append(max(shape[ax], 1))
            grid.append(1)
    layout = Layout(tuple(shape), block=tuple(block), grid=tuple(grid), devices=lead.devices, ranks=lead.ranks)
    ndim = len(shape)
    boxes: dict[int, Box] = {}
    for o in _held(layout):
        picks = [layout.owned_indices(o, j) for j in range(ndim)]
        box_shape = tuple(len(p) for p in picks)
        inner = box_shape[block_at:block_at + nb]
        place = (1,) * block_at + inner + (1,) * (ndim - block_at - nb)
        subs = []
        mode = 0
        for i, k in enumerate(items):
            if k is None or isinstance(k, NewAxisIndex):
                continue
            if i in aligned:
                values = _index_values(aligned[i].fragments[o], x.shape[mode], mode).reshape(place)
            elif isinstance(k, np.ndarray):
                values = np.broadcast_to(k, bshape)[np.ix_(*picks[block_at:block_at + nb])].reshape(place)
            elif isinstance(k, range):
                axis = axes[i]
                assert axis is not None  # a range keeps its mode
                sh = [1] * ndim
                sh[axis] = box_shape[axis]
                values = np.asarray(k, dtype=np.int64)[picks[axis]].reshape(sh)
            else:
                values = np.full((1,) * ndim, k, dtype=np.int64)
            subs.append(values)
            mode += 1
        boxes[o] = Box(subs, box_shape)
    return layout, boxes


# -- assignment ----------------------------------------------------------------------------
_KIND_ORDER = {"b": 0, "u": 1, "i": 1, "f": 2, "V": 2, "c": 3}


def check_value(value: Any, dtype: str, name: str = "__setitem__") -> None:
    """Refuse a value NumPy's assignment would refuse for a tensor of ``dtype``.

    Arrays (host arrays, 0-d arrays, distributed tensors) cast ``same_kind``; Python
    scalars follow NumPy 2: a complex into a real dtype is a ``TypeError``, an integer
    outside an integer dtype's range an ``OverflowError``, NaN or an infinity into an
    integer dtype a ``ValueError`` / ``OverflowError``.
    """
    kind = info(dtype).kind
    if isinstance(value, (bool, np.bool_)):
        return
    if isinstance(value, int):
        if kind in "iu":
            lo, hi = _int_range(dtype)
            if not lo <= value <= hi:
                raise OverflowError(f"{name}: Python integer {value} out of bounds for {dtype}")
        return
    if isinstance(value, float):
        if kind in "iu" and not math.isfinite(value):
            if math.isnan(value):
                raise ValueError(f"{name}: cannot convert float NaN to integer ({dtype})")
            raise OverflowError(f"{name}: cannot convert float infinity to integer ({dtype})")
        return
    if isinstance(value, complex):
        if kind != "c":
            raise TypeError(f"{name}: cannot assign the complex value {value!r} to a tensor of dtype {dtype} "
                            "(NumPy refuses it; take .real or convert the tensor with astype)")
        return
    source = value.dtype if is_distributed(value) else _dtype_name(value)
    if source is None:
        return
    src_kind = info(source).kind
    if _KIND_ORDER.get(src_kind, 0) > _KIND_ORDER.get(kind, 0) and kind != "b" or (
            kind == "b" and src_kind != "b"):
        raise TypeError(f"{name}: cannot cast a value of dtype {source} into a tensor of dtype {dtype} "
                        f"under the 'same_kind' rule; convert it first (astype)")


def _int_range(dtype: str) -> tuple[int, int]:
    bits = info(dtype).itemsize * 8
    if info(dtype).kind == "u":
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _dtype_name(value: Any) -> str | None:
    dt = getattr(value, "dtype", None)
    if dt is None:
        return None
    try:
        return canonical(dt)
    except Exception:
        return None


def _target_shape(value_shape: tuple[int, ...], shape: tuple[int, ...]) -> None:
    """NumPy's rule for an assigned value: leading ones dropped, then broadcast into ``shape``."""
    vs = list(value_shape)
    while len(vs) > len(shape) and vs[0] == 1:
        vs.pop(0)
    ok = len(vs) <= len(shape) and all(a in (1, b) for a, b in zip(reversed(vs), reversed(shape)))
    if not ok:
        raise ValueError(f"could not broadcast input array from shape {tuple(value_shape)} into shape "
                         f"{tuple(shape)}")


def setitem(x: Any, key: Any, value: Any) -> None:
    """``x[key] = value`` in place (see the module)."""
    local = [f.index for f in x.fragments if f.is_local]
    check_writable(x, local, "__setitem__")
    items = _read_scalar_masks(normalize(key, x.shape))
    check_value(value, x.dtype)
    if isinstance(value, (list, tuple, np.generic)):
        value = np.asarray(value)
    if is_distributed(value):
        value = unalias(x, value)
    if is_distributed(value) and value.ndim == 0:
        value = value.item()  # one value: every process takes part
    if any(is_distributed(k) for k in items):
        along = _single_index(x, items)
        if along is not None:
            layout, boxes = _along_boxes(x, items[along], along)
            _target_shape(tuple(getattr(value, "shape", ())), layout.shape)
            _write_selection(x, layout, boxes, value)
        elif len(items) == 1 and items[0].dtype == "bool" and not hasattr(value, "shape"):
            _masked_fill(x, items[0], value)
        else:
            layout, boxes = _advanced_boxes(x, items)
            _target_shape(tuple(getattr(value, "shape", ())), layout.shape)
            _write_selection(x, layout, boxes, value)
        return
    found = None if any(is_advanced(k) for k in items) else _local_layout(x, items)
    if found is None:
        _routed_setitem(x, items, value)
        return
    layout, keys = found
    vshape = tuple(getattr(value, "shape", ()))
    _target_shape(vshape, layout.shape)
    if is_distributed(value) and value.ndim:
        view = _views(x, layout, keys)
        value = align((view, value), "__setitem__", communicate=True)[1]
    host = None if is_distributed(value) or not vshape else _host(value, layout.shape)
    replaced = {}
    for frag in x.fragments:
        if not frag.is_local:
            continue
        if is_distributed(value):
            part = value.fragments[frag.index].array if value.ndim else value.fragments[0].array
        elif host is not None:
            part = host[np.ix_(*(layout.owned_indices(frag.index, m) for m in range(layout.ndim)))]
        else:
            part = value
        if isinstance(part, np.ndarray):
            part = _as_dtype(part, x.dtype)
        if hasattr(part, "shape"):
            ex = _executor(frag.framework, frag.device)
            part = move_array(part, ex)
            if str(getattr(part, "dtype", "")) != str(frag.array.dtype):
                part = ex.xp.astype(part, frag.array.dtype)
        new = frag.adapter.assign(frag.array, keys, part)
        if new is not None:
            replaced[frag.index] = new
    if replaced:
        x._replace_arrays(replaced)


def _as_dtype(part: np.ndarray, dtype: str) -> np.ndarray:
    """A host part in the tensor's dtype before it reaches a framework (which may refuse
    a wider one, as JAX without 64-bit types does); kept as is where NumPy lacks it."""
    try:
        return part.astype(np.dtype(dtype), copy=False)
    except TypeError:
        return part


def _masked_fill(x: Any, mask: Any, value: Any) -> None:
    """``x[mask] = scalar`` for a distributed mask of ``x``'s shape: the mask laid out as
    ``x`` (a redistribution where it is not), then each fragment writes its own elements."""
    m = mask if mask.layout.same_distribution(x.layout) else mask.redistribute(x.layout.dense)
    replaced = {}
    for frag, part in zip(x.fragments, m.fragments):
        if not frag.is_local:
            continue
        new = frag.adapter.assign(frag.array, (_moved(part.array, frag),), value)
        if new is not None:
            replaced[frag.index] = new
    if replaced:
        x._replace_arrays(replaced)


def _host(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """A host value broadcast (without a copy) to ``shape``."""
    a = value if isinstance(value, np.ndarray) else np.asarray(move_array(value, _executor("numpy", Device("cpu", 0))))
    while a.ndim > len(shape) and a.shape[0] == 1:
        a = a[0]
    return np.broadcast_to(a, shape)


def _routed_setitem(x: Any, items: list[Any], value: Any) -> None:
    """Each element of the selection written at its owners (:func:`dlmg.ops.routed.write`)."""
    rshape, coords = coordinates(items, x.shape)
    _target_shape(tuple(getattr(value, "shape", ())), rshape)
    layout = result_layout(x, rshape)
    _write_selection(x, layout, {o: box(coords, layout, o) for o in _held(layout)}, value)


def _write_selection(x: Any, layout: Layout, boxes: dict[int, Box], value: Any) -> None:
    """``value`` (broadcast to ``layout``'s shape, checked) written at the elements of ``x``
    that ``boxes`` name for the fragments of ``layout`` held here."""
    rshape = layout.shape
    vshape = tuple(getattr(value, "shape", ()))
    if is_distributed(value):
        value = value.redistribute(layout) if value.shape == rshape else _spread(value, rshape, layout)
    host = None if is_distributed(value) or not vshape else _host(value, rshape)
    requests = []
    for o, request in boxes.items():
        picks = [layout.owned_indices(o, m) for m in range(layout.ndim)]
        if is_distributed(value):
            src = value.fragments[o]
            values = _flat_values(src.array, src.framework, src.device, x.dtype)
        elif host is not None:
            values = _flat_values(_as_dtype(np.ascontiguousarray(host[np.ix_(*picks)]), x.dtype), "numpy", None,
                                  x.dtype)
        else:
            values = _scalar_values(value, request.size, x.dtype)
        requests.append((request, values))
    write(x, requests, "__setitem__")


def _spread(value: Any, shape: tuple[int, ...], layout: Layout) -> Any:
    """A distributed value broadcast to ``shape`` and laid out as ``layout``."""
    return broadcast_to(value, shape).redistribute(layout)


def _flat_values(arr: Any, framework: str, device: Any, dtype: str) -> Any:
    def values(ex: Any) -> Any:
        got = move_array(arr, ex)
        return ex.run(lambda xp: xp.astype(xp.reshape(got, (-1,)), ex.dtype(dtype)))

    return values


def _scalar_values(value: Any, n: int, dtype: str) -> Any:
    scalar = value.item() if hasattr(value, "item") else value

    def values(ex: Any) -> Any:
        return ex.run(lambda xp: xp.full((n,), scalar, dtype=ex.dtype(dtype),
                                         device=ex.adapter.native_device(ex.device)))

    return values


# -- take and take_along_axis --------------------------------------------------------------
def _axis(axis: Any, ndim: int, name: str) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an int, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise ValueError(f"{name}: axis {a} is out of bounds for a tensor of {ndim} modes")
    return a % ndim


def _index_values(frag: Any, n: int, mode: int) -> np.ndarray:
    """A local fragment of a distributed index tensor as host int64 indices, checked
    against extent ``n`` (negative ones counted from the end)."""
    host = move_array(frag.array, _executor("numpy", Device("cpu", 0)))
    a = np.asarray(host)
    if a.dtype.kind not in "iu":
        raise IndexError(f"arrays used as indices must be of integer type, got dtype {a.dtype}")
    a = a.reshape(-1)
    lo, hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    if lo < -n or hi >= n:
        raise IndexError(f"index {hi if hi >= n else lo} is out of bounds for axis {mode} with size {n}")
    if lo < 0:
        a = np.where(a < 0, a + n, a)
    return a


def _along_boxes(x: Any, idx: Any, axis: int) -> tuple[Layout, dict[int, Box]]:
    """The layout of ``x``'s elements at ``idx`` along ``axis`` (``idx``'s distribution,
    whole along the other modes of ``x`` where ``idx`` is 1-D) and, per fragment held
    here, the elements it names: the index fragment it sits with along ``axis``, its own
    positions along the other modes."""
    if idx.ndim == x.ndim:
        layout = idx.layout.dense
    else:  # take: a 1-D index along ``axis``, the other modes whole
        lay = idx.layout
        shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        whole = lambda part: tuple(max(n, 1) for n in part)  # noqa: E731
        layout = Layout(shape, block=whole(x.shape[:axis]) + lay.block + whole(x.shape[axis + 1:]),
                        grid=(1,) * axis + lay.grid + (1,) * (x.ndim - axis - 1), devices=lay.devices,
                        ranks=lay.ranks)
    boxes = {}
    for o in _held(layout):
        box_shape = tuple(layout.fragment(o).shape)
        # along ``axis`` the index values name the positions: its own indices are not needed
        picks = [None if j == axis else layout.owned_indices(o, j) for j in range(layout.ndim)]
        values = _index_values(idx.fragments[o], x.shape[axis], axis)
        if idx.ndim != x.ndim:
            values = values.reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        else:
            values = values.reshape(box_shape)
        subs = [values if p is None else p.reshape((1,) * m + (-1,) + (1,) * (x.ndim - m - 1))
                for m, p in enumerate(picks)]
        boxes[o] = Box(subs, box_shape)
    return layout, boxes


def _along(x: Any, indices: Any, axis: int, name: str) -> Any:
    """``x``'s elements at ``indices`` along ``axis``, every other mode of the result read
    at its own position: each result fragment reads the index fragment it sits with and
    asks the owners for the values. The result keeps the distribution of ``indices``
    (whole along the other modes of ``x`` where ``indices`` is 1-D)."""
    layout, boxes = _along_boxes(x, settled(indices), axis)
    return read(x, boxes, layout, result_frameworks(x, layout), name)


def take(x: Any, indices: Any, /, *, axis: int | None = None) -> Any:
    """Elements of ``x`` at ``indices`` along ``axis`` (array API ``take``), by owner-routed requests.

    Each requested index is sent to the fragment that owns it and the values come
    back (Global Arrays' ``NGA_Gather``): nothing is collected. With host indices the
    result is a balanced slab over ``x``'s devices and processes; with distributed
    indices it keeps their distribution along ``axis`` (the other modes whole).

    Parameters
    ----------
    x : DistributedTensor
    indices : DistributedTensor or array of int
        One mode of indices; negative indices count from the end; out-of-bounds ones raise ``IndexError``.
    axis : int, optional
        Required unless ``x`` is 1-D.

    Returns
    -------
    DistributedTensor
    """
    x = settled(x)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis must be given for a tensor of {x.ndim} modes")
        axis = 0
    a = _axis(axis, x.ndim, "take")
    if is_distributed(indices):
        if indices.ndim != 1:
            raise ValueError(f"take: indices must be 1-D, got shape {indices.shape}")
        return _along(x, indices, a, "take")
    host = as_index_array(indices)
    if host.ndim != 1 or host.dtype == bool:
        raise ValueError(f"take: indices must be a 1-D integer array, got shape {host.shape} of {host.dtype}")
    return getitem(x, (slice(None),) * a + (host,))


def take_along_axis(x: Any, indices: Any, /, *, axis: int = -1) -> Any:
    """``x``'s elements at ``indices`` along ``axis``, position by position (array API
    ``take_along_axis``), by owner-routed requests.

    ``indices`` has ``x``'s number of modes; the other modes broadcast. Each result
    element asks the fragment owning its source for the value (one all-to-all of
    indices, one of values across processes). With distributed indices of the
    result's shape the result keeps their distribution; otherwise it is a balanced
    slab over ``x``'s devices and processes.

    Returns
    -------
    DistributedTensor
    """
    x = settled(x)
    a = _axis(axis, x.ndim, "take_along_axis")
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices have {indices.ndim} modes, x has {x.ndim}")
    shape = list(x.shape)
    shape[a] = indices.shape[a]
    try:
        rshape = np.broadcast_shapes(tuple(shape), tuple(indices.shape))
    except ValueError:
        raise ValueError(f"take_along_axis: indices of shape {indices.shape} do not broadcast with x of shape "
                         f"{x.shape} outside axis {a}") from None
    if is_distributed(indices):
        if tuple(indices.shape) == tuple(rshape):
            return _along(x, indices, a, "take_along_axis")
        indices = broadcast_to(indices, rshape)
        return _along(x, indices, a, "take_along_axis")
    host = as_index_array(indices)
    if host.dtype == bool:
        raise IndexError("take_along_axis: indices must be integers, got booleans")
    host = _checked_host(host, x.shape[a], a)
    coords = []
    for m in range(x.ndim):
        if m == a:
            coords.append(host)
        else:
            coords.append(np.arange(rshape[m], dtype=np.int64).reshape((1,) * m + (-1,) + (1,) * (x.ndim - m - 1)))
    layout = result_layout(x, tuple(rshape))
    requests = {o: box(coords, layout, o) for o in _held(layout)}
    return read(x, requests, layout, result_frameworks(x, layout), "take_along_axis")


def _checked_host(a: np.ndarray, n: int, mode: int) -> np.ndarray:
    a = a.astype(np.int64, copy=False)
    if a.size and (int(a.min()) < -n or int(a.max()) >= n):
        bad = int(a.max()) if int(a.max()) >= n else int(a.min())
        raise IndexError(f"index {bad} is out of bounds for axis {mode} with size {n}")
    return np.where(a < 0, a + n, a)
