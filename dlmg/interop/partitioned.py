"""The ``__partitioned__`` protocol: distributed tensors in and out.

The protocol (the data-apis consortium draft, implemented by Heat) describes a
distributed array as a dictionary:

* ``shape``: the global shape;
* ``partition_tiling``: how many partitions each mode is cut into;
* ``partitions``: for every position of that grid, a dictionary with
  ``start`` (global offset), ``shape``, ``data`` (the array, or ``None`` where
  another process holds it) and ``location`` (where it can be read locally);
* ``locals``: the positions this process holds (SPMD producers);
* ``get``: a callable that turns handles from ``data`` into arrays.

dlmg produces it with one partition per block of the layout (a slab layout
has one block per fragment, a block-cyclic layout many): ``data`` is a view of
the owning fragment's array, no copy; ``location`` lists, for every replica,
``(process rank, (DLPack device type, device id))``. It adds these keys of its
own, which foreign consumers may ignore: ``dtype`` (top level and per
partition), and per partition ``fragments`` (the fragment index of every
replica), ``replicas`` (a view per replica, ``None`` where not held here),
``base`` (the whole fragment array per replica) and ``base_start`` (where the
partition starts inside it).

:func:`from_partitioned` consumes any producer's dictionary. Partitions that
tile each mode regularly (equal sizes, a smaller last one) give a
block-cyclic layout whose grid is the shortest period of the owners along
each mode; when every fragment of that layout is one array (one partition per
fragment, or dlmg's own ``base``) it is used as is. Partitions of one owner
that are separate arrays become one fragment each (a layout with one block
per fragment, still no copy), or, with ``copy=True``, are copied into the
block-cyclic layout. Irregular tilings need ``copy=True``.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..errors import FragmentError, LayoutError
from ..layout import Layout
from ._wrap import wrap_fragments
from ..fragment import process_rank
from ..ops._pending import guard
from ..registry import adapter_for
from ..construct import device_fits, from_fragments
from ..dtypes import canonical
from ..construct import scatter

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["partitioned", "from_partitioned"]


# -- producing ---------------------------------------------------------------------------
def _get(handles: Any) -> Any:
    """The protocol's ``get``: dlmg's partitions are arrays already (a module-level
    function so that the dictionary pickles)."""
    if isinstance(handles, (list, tuple)):
        return list(handles)
    return handles


def _me() -> int:
    return process_rank()


def partitioned(tensor: "DistributedTensor") -> dict[str, Any]:
    """The ``__partitioned__`` dictionary of ``tensor`` (also ``tensor.__partitioned__``).

    Every block of the layout is one partition (``partition_tiling`` is
    ``layout.nblocks``); its ``data`` is a view of this process's fragment
    holding it, without a copy, or ``None`` where another process holds it.

    Parameters
    ----------
    tensor : DistributedTensor

    Returns
    -------
    dict
        ``shape``, ``partition_tiling``, ``partitions``, ``locals``, ``get``
        and dlmg's ``dtype``; see the module docstring.

    Raises
    ------
    Notes
    -----
    The protocol has no word for parts of a value: a pending reduction
    (``layout.partial``) is resolved first, and the dictionary describes its value.
    """
    tensor = guard(tensor, "__partitioned__")
    lay = tensor.layout
    views: dict[tuple[int, tuple[int, ...]], Any] = {}
    for frag in tensor.fragments:
        if not frag.is_local:
            continue
        if lay.ndim == 0:  # indexing a 0-d array with () gives a scalar, not a view
            views[(frag.index, ())] = frag.array[...]
            continue
        for glob, view in frag.block_views():
            views[(frag.index, tuple(sl.start for sl in glob))] = view
    whole = all(f.is_strided for f in lay.fragments)  # padded blocks: no single array
    partitions: dict[tuple[int, ...], dict[str, Any]] = {}
    local_positions = []
    for pos in itertools.product(*(range(n) for n in lay.nblocks)):
        start = tuple(j * b for j, b in zip(pos, lay.block))
        shape = tuple(min(b, n - s) for b, n, s in zip(lay.block, lay.shape, start))
        owners = lay.owners(start)
        replicas = [views.get((f, start)) for f in owners]
        bases = []
        for f in owners:
            frag = tensor.fragments[f]
            bases.append(frag.array if frag.is_local and not frag.is_padded else None)
        data = next((v for v in replicas if v is not None), None)
        base_start = tuple((j // g) * b for j, g, b in zip(pos, lay.grid, lay.block))
        part = {
            "start": start,
            "shape": shape,
            "data": data,
            "location": [(tensor.fragments[f].rank, lay.devices[f].dlpack) for f in owners],
            "dtype": tensor.dtype,
            "replicas": replicas,
        }
        if whole:  # fragments that are single arrays can be handed back whole
            part.update(fragments=list(owners), base=bases, base_start=base_start)
        partitions[pos] = part
        if data is not None:
            local_positions.append(pos)
    return {
        "shape": lay.shape,
        "partition_tiling": lay.nblocks,
        "partitions": partitions,
        "locals": local_positions,
        "get": _get,
        "dtype": tensor.dtype,
    }


# -- consuming: reading the dictionary ----------------------------------------------------
def _tuple(value: Any, what: str, n: int | None = None) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise LayoutError(f"__partitioned__: {what} must be a tuple of ints, got {value!r}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool):
            raise LayoutError(f"__partitioned__: {what}[{i}] = {v!r} is a bool, not an int")
        try:
            out.append(operator.index(v))
        except TypeError:
            raise LayoutError(f"__partitioned__: {what}[{i}] = {v!r} is not an int") from None
    if n is not None and len(out) != n:
        raise LayoutError(f"__partitioned__: {what} = {tuple(out)} has {len(out)} entries, expected {n}")
    return tuple(out)


def _location(entry: Any, what: str) -> tuple[int, Device | None]:
    """``(rank, device or None)`` from a location entry: a rank, or ``(rank, (type, id))``."""
    if isinstance(entry, bool):
        raise LayoutError(f"__partitioned__: {what} = {entry!r} is not a process rank")
    try:
        return operator.index(entry), None
    except TypeError:
        pass
    if isinstance(entry, Sequence) and not isinstance(entry, (str, bytes)) and len(entry) == 2:
        rank, dev = entry
        try:
            rank = operator.index(rank)
            device = Device.from_dlpack(*dev) if dev is not None else None
        except Exception:
            raise LayoutError(
                f"__partitioned__: {what} = {entry!r} is not (rank, (DLPack device type, id))"
            ) from None
        return rank, device
    raise LayoutError(
        f"__partitioned__: {what} = {entry!r} names no process rank; dlmg takes SPMD producers, whose "
        f"locations are ranks or (rank, (DLPack device type, id)) pairs (not Ray or Dask addresses)"
    )


def _dictionary(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    attr = getattr(type(obj), "__partitioned__", None)
    if attr is None and not hasattr(obj, "__partitioned__"):
        raise TypeError(f"from_partitioned needs an object with __partitioned__ (or its dict), got {type(obj).__name__}")
    value = obj.__partitioned__
    if callable(value):  # the draft first described a method, Heat has a property
        value = value()
    if not isinstance(value, Mapping):
        raise LayoutError(f"__partitioned__ of {type(obj).__name__} is a {type(value).__name__}, not a dict")
    return value


def _mode_tiling(
    parts: Mapping[tuple[int, ...], Mapping[str, Any]], shape: tuple[int, ...], tiling: tuple[int, ...]
) -> tuple[list[list[tuple[int, int]]], list[str]]:
    """Per mode, ``(start, size)`` of each partition index, and the modes where they do not tile."""
    spans: list[list[tuple[int, int] | None]] = [[None] * t for t in tiling]
    for pos, part in parts.items():
        start = _tuple(part.get("start"), f"partitions[{pos}]['start']", len(shape))
        size = _tuple(part.get("shape"), f"partitions[{pos}]['shape']", len(shape))
        for m, k in enumerate(pos):
            seen = spans[m][k]
            if seen is None:
                spans[m][k] = (start[m], size[m])
            elif seen != (start[m], size[m]):
                raise LayoutError(
                    f"__partitioned__: partitions at index {k} of mode {m} disagree: start/size "
                    f"{seen} and {(start[m], size[m])} (at {pos}); the partitions form no grid"
                )
    out: list[list[tuple[int, int]]] = []
    for m, row in enumerate(spans):
        full = [span for span in row if span is not None]
        at = 0
        for k, (lo, count) in enumerate(full):
            if lo != at or count < 0:
                raise LayoutError(
                    f"__partitioned__: mode {m}: partition {k} starts at {lo}, expected {at} "
                    f"(starts and sizes along the mode: {full})"
                )
            at += count
        if at != shape[m]:
            raise LayoutError(f"__partitioned__: mode {m}: the partitions cover {at} of {shape[m]} elements")
        out.append(full)
    irregular = []
    for m, full in enumerate(out):
        b = max(full[0][1], 1) if full else 1
        if any(count != max(0, min(b, shape[m] - k * b)) for k, (_, count) in enumerate(full)):
            irregular.append(f"mode {m}: sizes {[count for _, count in full]}")
    return out, irregular


def _period(keys: Mapping[tuple[int, ...], Any], tiling: tuple[int, ...], mode: int) -> int:
    """The shortest ``p`` with ``keys[pos] == keys[pos with pos[mode] % p]`` everywhere."""
    for p in range(1, tiling[mode] + 1):
        if all(
            keys[pos] == keys[pos[:mode] + (pos[mode] % p,) + pos[mode + 1:]]
            for pos in keys
            if pos[mode] >= p
        ):
            return p
    return tiling[mode]  # pragma: no cover - p = tiling always qualifies


# -- consuming ---------------------------------------------------------------------------
def from_partitioned(obj: Any, *, copy: bool = False) -> "DistributedTensor":
    """A :class:`~dlmg.DistributedTensor` from any ``__partitioned__`` producer.

    Parameters
    ----------
    obj : object or dict
        An object with ``__partitioned__``, or that dictionary itself. An
        SPMD producer: locations are process ranks or ``(rank, (DLPack
        device type, id))`` pairs, partitions held elsewhere have ``data``
        ``None``. Partition arrays may be of any framework dlmg knows.
    copy : bool, default False
        ``False``: never copy. Partitions are wrapped as fragments as they
        are; the layout is block-cyclic with the owners' period when each of
        its fragments is one array, and has one fragment per partition
        otherwise. An irregular tiling is refused. ``True``: copy where the
        block-cyclic layout needs it (partitions of one owner joined into one
        fragment; an irregular tiling spread as evenly as the tiling allows,
        in one process only; partition data on another device than its location
        names moved there).

    Returns
    -------
    DistributedTensor
        Its fragments are the partitions' arrays (or the producer's own
        fragment arrays, for a dlmg producer) wherever no copy was made.

    Raises
    ------
    LayoutError
        A dictionary that is incomplete or inconsistent (the message names the
        key, the partition and the value), non-SPMD locations, or an
        irregular tiling without ``copy=True``, or partition data on another
        device than its location names without ``copy=True``.
    """
    d = _dictionary(obj)
    shape, tiling, parts = _read_tiling(d)
    if not parts:
        return _empty(shape, d.get("dtype"))
    spans, irregular = _mode_tiling(parts, shape, tiling)
    owners, arrays = _read_owners(parts, d.get("get"))
    nrep = len(next(iter(owners.values())))
    local_device = next((_device_of(a) for row in arrays.values() for a in row if a is not None), None)
    me = _me()
    devices = {
        pos: [dev if dev is not None else _guess_device(pos, r, rank, arrays[pos][r], me, local_device)
              for r, (rank, dev) in enumerate(entries)]
        for pos, entries in owners.items()
    }
    moved = _place(arrays, devices, copy)
    if irregular:
        if not copy:
            raise LayoutError(
                f"__partitioned__: the partitions do not cut every mode into equal blocks ({'; '.join(irregular)}), "
                "which no block-cyclic layout describes; from_partitioned(obj, copy=True) copies them "
                "into one that spreads the modes evenly"
            )
        return _irregular_copy(shape, tiling, spans, arrays, devices, owners)
    block = tuple(max(row[0][1], 1) if row else 1 for row in spans)
    use_fragments = not moved and all("fragments" in p and "base_start" in p for p in parts.values())
    keys = {
        pos: tuple(
            (rank, str(devices[pos][r]), parts[pos]["fragments"][r] if use_fragments else None)
            for r, (rank, _) in enumerate(owners[pos])
        )
        for pos in parts
    }
    grid = tuple(_period(keys, tiling, m) for m in range(len(shape)))
    fine = Layout(shape, block=block, grid=tiling, devices=_devices(tiling, nrep, devices))
    coarse = Layout(shape, block=block, grid=grid, devices=_devices(grid, nrep, devices))
    if use_fragments:  # a dlmg producer: its own fragment arrays
        return _wrap_bases(coarse, parts, arrays, owners)
    if grid == tiling:
        return _wrap(fine, parts, arrays, owners)
    tensor = _wrap(fine, parts, arrays, owners)
    return tensor.redistribute(coarse) if copy else tensor


def _read_tiling(d: Mapping[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...], dict[tuple[int, ...], Any]]:
    """The shape, the partition tiling and the partitions by position, each checked."""
    for key in ("shape", "partition_tiling", "partitions"):
        if key not in d:
            raise LayoutError(f"__partitioned__ has no {key!r} (keys: {sorted(map(str, d))})")
    shape = _tuple(d["shape"], "shape")
    tiling = _tuple(d["partition_tiling"], "partition_tiling", len(shape))
    bad = [m for m, (n, t) in enumerate(zip(shape, tiling)) if t < 0 or (t == 0 and n != 0)]
    if bad:  # (no partition at all would wrap memory nobody wrote)
        raise LayoutError(
            f"__partitioned__: partition_tiling={tiling} must cut every mode into at least one partition; "
            f"mode {bad[0]} of extent {shape[bad[0]]} has {tiling[bad[0]]} (shape={shape})"
        )
    raw = d["partitions"]
    if not isinstance(raw, Mapping):
        raise LayoutError(f"__partitioned__: partitions must be a dict, got {type(raw).__name__}")
    parts = {tuple(k) if isinstance(k, (tuple, list)) else (k,): v for k, v in raw.items()}
    expect = set(itertools.product(*(range(t) for t in tiling)))
    if set(parts) != expect:
        missing = sorted(expect - set(parts))[:4]
        extra = sorted(set(parts) - expect, key=str)[:4]
        raise LayoutError(
            f"__partitioned__: partitions must have every position of partition_tiling={tiling}; "
            f"missing {missing}, unexpected {extra}"
        )
    return shape, tiling, parts


def _read_owners(
    parts: Mapping[tuple[int, ...], Any], get: Any,
) -> tuple[dict[tuple[int, ...], list[tuple[int, Device | None]]], dict[tuple[int, ...], list[Any]]]:
    """Each partition's locations, read as replicas ``(rank, device or None)``, and the
    arrays this process holds of each (through ``get`` where the producer gives one)."""
    me = _me()
    nrep = None
    owners: dict[tuple[int, ...], list[tuple[int, Device | None]]] = {}
    arrays: dict[tuple[int, ...], list[Any]] = {}
    for pos, part in parts.items():
        loc = part.get("location")
        if not isinstance(loc, (list, tuple)) or (
            len(loc) == 2 and isinstance(loc[1], (list, tuple)) and not isinstance(loc[0], (list, tuple))
        ):
            loc = [loc]  # one location given bare: a rank, an address or one (rank, device) pair
        entries = [_location(e, f"partitions[{pos}]['location'][{r}]") for r, e in enumerate(loc)]
        if not entries:
            raise LayoutError(f"__partitioned__: partitions[{pos}]['location'] is empty")
        if nrep is None:
            nrep = len(entries)
        elif len(entries) != nrep:
            raise LayoutError(
                f"__partitioned__: partitions[{pos}] has {len(entries)} locations, others {nrep}; "
                "dlmg reads several locations as replicas, the same number for every partition"
            )
        owners[pos] = entries
        arrays[pos] = _replica_arrays(part, entries, me, get, pos)
    return owners, arrays


def _replica_arrays(part: Mapping[str, Any], entries: list, me: int, get: Any, pos: tuple) -> list[Any]:
    """The arrays this process holds of each replica of one partition (``None`` elsewhere).

    dlmg's producer lists a view per replica (``replicas``); other producers
    give one ``data``, which belongs to the first replica located here.
    """
    given = part.get("replicas")
    if given is None:
        mine = next((r for r, (rank, _) in enumerate(entries) if rank == me), None)
        given = [part.get("data") if r == mine else None for r in range(len(entries))]
    if len(given) != len(entries):
        raise LayoutError(
            f"__partitioned__: partitions[{pos}] lists {len(given)} replicas for {len(entries)} locations"
        )
    out: list[Any] = []
    for (rank, _), handle in zip(entries, given):
        if handle is None or rank != me:
            out.append(None)  # held elsewhere
            continue
        array = get(handle) if callable(get) else handle
        if array is None:  # this process's own partition, and no data for it
            raise LayoutError(
                f"__partitioned__: partitions[{pos}] is on this process (rank {me}) but "
                f"{'get(' + repr(handle)[:60] + ')' if callable(get) else 'its data'} gave None instead of an array"
            )
        out.append(array)
    return out


def _place(arrays: dict[tuple, list[Any]], devices: dict[tuple, list[Device]], copy: bool) -> bool:
    """Check that each partition's data lies on the device its location names; with ``copy``,
    move the ones that do not (in ``arrays``) and say whether any moved. An unpickled JAX
    array, for one, comes back on JAX's default device whatever its location says."""
    moved = False
    for pos, row in arrays.items():
        for r, array in enumerate(row):
            if array is None:
                continue
            adapter = adapter_for(array)
            want, found = devices[pos][r], adapter.device_of(array)
            if device_fits(adapter, found, want):
                continue
            if not copy:
                raise LayoutError(
                    f"__partitioned__: partitions[{pos}]'s data lies on {found}, but its location names {want} "
                    "(an unpickled JAX array comes back on JAX's default device, for one); put the data on "
                    "that device first, or call from_partitioned(obj, copy=True), which moves it there"
                )
            row[r] = adapter.to_device(array, want)
            moved = True
    return moved


def _device_of(array: Any) -> Device:
    return adapter_for(array).device_of(array)


def _guess_device(pos: tuple, r: int, rank: int, array: Any, me: int, local: Device | None) -> Device:
    if array is not None:
        return _device_of(array)
    if local is not None and local.is_host:
        return Device("cpu", 0)
    raise LayoutError(
        f"__partitioned__: partitions[{pos}] lies on process {rank} and its location names no device; "
        "give locations as (rank, (DLPack device type, id)) for device memory"
    )


def _devices(grid: tuple[int, ...], nrep: int, devices: Mapping[tuple[int, ...], list[Device]]) -> list[Device]:
    """Devices in fragment order (column-major over ``grid``, then replicas); the cell
    at coordinates ``c`` is the partition at position ``c``."""
    out = []
    for r in range(nrep):
        for flat in range(math.prod(grid)):
            coords, rest = [], flat
            for g in grid:
                rest, c = divmod(rest, g)
                coords.append(c)
            out.append(devices[tuple(coords)][r])
    return out


def _ranks(layout: Layout, owners: Mapping[tuple[int, ...], list]) -> list[int]:
    out = []
    for frag in layout.fragments:
        out.append(owners[frag.coords][frag.replica][0])
    return out


def _wrap(layout: Layout, parts: Mapping, arrays: Mapping, owners: Mapping) -> "DistributedTensor":
    """One fragment per partition (``layout.grid`` is the tiling)."""
    ranks = _ranks(layout, owners)
    me = _me()
    given = {}
    for frag in layout.fragments:
        if ranks[frag.index] == me:
            array = arrays[frag.coords][frag.replica]
            if array is None:
                raise FragmentError(
                    f"__partitioned__: partitions[{frag.coords}] (replica {frag.replica}) is located on "
                    f"this process (rank {me}) but has no data"
                )
            given[frag.index] = array
    return wrap_fragments(given, layout, ranks, dtype=_dtype(parts) if not given else None)


def _wrap_bases(layout: Layout, parts: Mapping, arrays: Mapping, owners: Mapping) -> "DistributedTensor":
    """One fragment per cell of ``layout`` from the producer's fragment arrays (``base``)."""
    me = _me()
    ranks = [0] * layout.nfragments
    given: dict[int, Any] = {}
    for pos, part in parts.items():
        cell = tuple(k % g for k, g in zip(pos, layout.grid))
        for r, (rank, _) in enumerate(owners[pos]):
            f = layout.fragment_index(cell, r)
            ranks[f] = rank
            if rank != me:
                continue
            base = (part.get("base") or [None] * (r + 1))[r]
            expect = tuple((k // g) * b for k, g, b in zip(pos, layout.grid, layout.block))
            if base is None or tuple(part["base_start"]) != expect:
                raise LayoutError(
                    f"__partitioned__: partitions[{pos}] names fragment {part['fragments'][r]} but gives "
                    f"no fragment array starting it at local offset {expect} (base_start="
                    f"{part.get('base_start')})"
                )
            seen = given.get(f)
            if seen is None:
                if adapter_for(base).shape_of(base) != layout.fragments[f].shape:
                    raise LayoutError(
                        f"__partitioned__: the fragment array of partitions[{pos}] has shape "
                        f"{adapter_for(base).shape_of(base)}, expected {layout.fragments[f].shape}"
                    )
                given[f] = base
            elif seen is not base:
                raise LayoutError(f"__partitioned__: partitions of fragment {f} name different fragment arrays")
    return wrap_fragments(given, layout, ranks, dtype=_dtype(parts) if not given else None)


def _dtype(parts: Mapping) -> Any:
    for part in parts.values():
        if part.get("dtype") is not None:
            return part["dtype"]
    return None


def _empty(shape: tuple[int, ...], dtype: Any) -> "DistributedTensor":
    import numpy as np


    name = canonical(dtype) if dtype is not None else "float32"
    return from_fragments([np.empty(shape, dtype=name)], Layout.single(shape, "cpu"))


def _irregular_copy(
    shape: tuple[int, ...],
    tiling: tuple[int, ...],
    spans: Sequence[Sequence[tuple[int, int]]],
    arrays: Mapping[tuple[int, ...], list[Any]],
    devices: Mapping[tuple[int, ...], list[Device]],
    owners: Mapping[tuple[int, ...], list[tuple[int, Device | None]]],
) -> "DistributedTensor":
    """Assemble on the host, then scatter over ``tiling`` even blocks (one process)."""
    import numpy as np


    me = _me()
    if any(entries[0][0] != me for entries in owners.values()):
        raise LayoutError(
            "__partitioned__: copying an irregular tiling needs every partition in this process; "
            "redistribute it in its own framework first"
        )
    first = next(a for row in arrays.values() for a in row if a is not None)
    framework = adapter_for(first).name
    full = None
    for pos, row in arrays.items():
        one = from_fragments([row[0]], Layout.single(tuple(row[0].shape), adapter_for(row[0]).device_of(row[0]), ranks=me))
        values = one.gather(framework="numpy")
        if full is None:
            full = np.empty(shape, dtype=values.dtype)
        key = tuple(slice(spans[m][k][0], spans[m][k][0] + spans[m][k][1]) for m, k in enumerate(pos))
        want = tuple(spans[m][k][1] for m, k in enumerate(pos))
        if values.shape != want or values.dtype != full.dtype:  # as the regular path: no broadcast, no cast
            raise LayoutError(
                f"__partitioned__: partitions[{pos}] holds {values.dtype}{list(values.shape)}, but its "
                f"place in shape={shape} takes {full.dtype}{list(want)}"
            )
        full[key] = values
    block = tuple(max(-(-n // t), 1) for n, t in zip(shape, tiling))
    grid = tuple(len(range(0, n, b)) or 1 for n, b in zip(shape, block))
    nrep = len(next(iter(devices.values())))
    layout = Layout(shape, block=block, grid=grid, devices=_devices(grid, nrep, devices))
    return scatter(full, layout, framework=framework)
