"""Sharded ``jax.Array`` in and out of dlmg, without copies.

JAX refuses ``__dlpack__`` for an array on more than one device, even a fully
replicated one. This module closes that gap: :func:`from_jax` wraps the
addressable shards of a sharded array as the fragments of a
:class:`~dlmg.DistributedTensor`, and :func:`to_jax` assembles a distributed
tensor back into one sharded array. Both hand over the shards' buffers as they
are (the same ``unsafe_buffer_pointer``); nothing is copied.

The conversions between a JAX sharding and a :class:`~dlmg.Layout` are plain
functions (:func:`layout_from_sharding`, :func:`sharding_from_layout`):

* a tensor mode split over the mesh axes ``(x, y)`` (a ``PartitionSpec``
  entry ``('x', 'y')``, ``x`` major) becomes one block of ``n / (|x| * |y|)``
  elements per grid coordinate, the coordinate of a device along the mode
  being ``x_index * |y| + y_index``;
* mesh axes that split no mode become the replica mode; the replica index
  enumerates them row-major in mesh order, which is JAX's ``replica_id``;
* the layout lists the devices column-major over the grid (mode 0 fastest),
  then by replica.

The layouts are derived from ``sharding.devices_indices_map(shape)``, so any
:class:`jax.sharding.Sharding` works whose index map is a regular tiling
(``NamedSharding``, ``SingleDeviceSharding``, GSPMD-style shardings);
otherwise a :class:`~dlmg.LayoutError` says why.

JAX is imported only inside the functions here; importing dlmg never imports
it.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..errors import DeviceError, FragmentError, FrameworkError, LayoutError
from ..layout import Layout
from ..layout.layout import sharding_of_layout
from ..fragment import process_rank
from ..construct import from_fragments
from ..dtypes import canonical
from ..distributed.state import current
from ..ops._pending import guard
from ..registry import get_adapter

if TYPE_CHECKING:  # pragma: no cover
    import jax

    from ..tensor import DistributedTensor

__all__ = [
    "from_jax",
    "to_jax",
    "layout_from_sharding",
    "sharding_from_layout",
    "to_sharding",
    "jax_layout_problems",
    "jax_compatible_layout",
]

#: Mesh axis names of the meshes :func:`sharding_from_layout` builds.
_MODE_AXIS = "dim{}"
_REPLICA_AXIS = "replica"


# --------------------------------------------------------------------------
# JAX devices


def _adapter() -> Any:
    return get_adapter("jax")


def _jax() -> Any:
    """The jax module (FrameworkNotInstalledError, with what to install, without it)."""
    return _adapter().module()


def _dlmg_device(jdev: Any) -> Device:
    """The dlmg device of a JAX device, by the JAX adapter's convention
    (``cpu:<id>`` for JAX's CPU devices, the local hardware id for GPUs)."""
    found = _adapter().device_from_native(jdev)
    if found is None:  # pragma: no cover - JAX devices always have a platform and an id
        raise DeviceError(f"{jdev!r} is no JAX device")
    return found


def _jax_devices() -> dict[Device, Any]:
    """The addressable JAX devices of every available backend, keyed by dlmg device."""
    jax = _jax()
    out: dict[Device, Any] = {}
    for backend in ("cpu", "gpu"):
        try:
            devices = jax.local_devices(backend=backend)
        except RuntimeError:  # backend not present
            continue
        for d in devices:
            try:
                out.setdefault(_dlmg_device(d), d)
            except DeviceError:  # pragma: no cover - a platform dlmg has no kind for
                continue
    return out


def _process_of(jdev: Any) -> int:
    """The JAX process (multi-controller) owning ``jdev``; 0 in one process."""
    return int(getattr(jdev, "process_index", 0))


def _global_jax_devices() -> dict[tuple[int, Device], Any]:
    """Every JAX device of every process, keyed by ``(process, dlmg device)``."""
    jax = _jax()
    out: dict[tuple[int, Device], Any] = {}
    for backend in ("cpu", "gpu"):
        try:
            devices = jax.devices(backend=backend)
        except RuntimeError:  # backend not present
            continue
        for d in devices:
            try:
                out.setdefault((_process_of(d), _dlmg_device(d)), d)
            except DeviceError:  # pragma: no cover - a platform dlmg has no kind for
                continue
    return out


def _jax_device(device: Device, table: Mapping[Device, Any] | None = None) -> Any:
    """The JAX device that is ``device``; a DeviceError when JAX has none."""
    table = _jax_devices() if table is None else table
    try:
        return table[device]
    except KeyError:
        raise DeviceError(
            f"device {device} is no JAX device; JAX has {', '.join(str(d) for d in table) or 'none'}"
        ) from None


def _local_pool(kind: str) -> list[Any]:
    """The addressable JAX devices holding memory of ``kind`` (``cpu``/``cuda``)."""
    jax = _jax()
    backend = "cpu" if Device(kind).is_host else "gpu"
    try:
        return list(jax.local_devices(backend=backend))
    except RuntimeError:
        return []


# --------------------------------------------------------------------------
# sharding -> layout


def _span(index: Any, extent: int, device: Any, mode: int) -> tuple[int, int]:
    """``(start, stop)`` of one entry of a JAX index tuple."""
    if isinstance(index, slice):
        start, stop, step = index.indices(extent)
        if step != 1:
            raise LayoutError(
                f"device {device} holds mode {mode} with step {step} ({index}); a layout needs "
                "contiguous pieces"
            )
        return start, max(start, stop)
    i = int(index)  # an int index (a dropped mode) is a piece of one element
    return i, i + 1


def _geometry(
    index_map: Mapping[Any, tuple], shape: tuple[int, ...]
) -> tuple[tuple[int, ...], tuple[int, ...], list[Any], dict[Any, tuple[tuple[int, ...], int]]]:
    """Block, grid, layout-ordered devices and ``{device: (coords, replica)}``
    of a JAX device -> index map.

    Raises
    ------
    LayoutError
        When the pieces are no regular tiling of the shape (one equal block per
        grid coordinate, every coordinate held by the same number of devices).
    """
    ndim = len(shape)
    spans: dict[Any, tuple[tuple[int, int], ...]] = {}
    for device, index in index_map.items():
        index = tuple(index) if isinstance(index, tuple) else (index,)
        index = index + (slice(None),) * (ndim - len(index))
        if len(index) != ndim:
            raise LayoutError(f"device {device} has index {index} with {len(index)} entries for shape {shape}")
        spans[device] = tuple(_span(ix, n, device, m) for m, (ix, n) in enumerate(zip(index, shape)))
    if not spans:
        raise LayoutError(f"the sharding places shape {shape} on no device")

    block, grid, starts = [], [], []
    for m, n in enumerate(shape):
        pieces = sorted({s[m] for s in spans.values()})
        context = f"mode {m} (extent {n}) is cut into {pieces}"
        if pieces[0][0] != 0 or pieces[-1][1] != n or any(a[1] != b[0] for a, b in zip(pieces, pieces[1:])):
            raise LayoutError(f"{context}, which does not tile the extent in disjoint pieces")
        size = pieces[0][1] - pieces[0][0]
        if any(b - a != size for a, b in pieces[:-1]) or pieces[-1][1] - pieces[-1][0] > size:
            raise LayoutError(f"{context}; a layout needs pieces of one size (the last may be smaller)")
        grid.append(len(pieces))
        block.append(max(size, 1) if len(pieces) > 1 else max(n, 1))
        starts.append({p: c for c, p in enumerate(pieces)})

    # replicas: numbered in the map's order (the sharding's device assignment),
    # which is how JAX numbers ``replica_id``
    seen: dict[tuple[int, ...], int] = {}
    where: dict[Any, tuple[tuple[int, ...], int]] = {}
    for device, s in spans.items():
        coords = tuple(starts[m][s[m]] for m in range(ndim))
        replica = seen.get(coords, 0)
        seen[coords] = replica + 1
        where[device] = (coords, replica)
    cells = math.prod(grid)
    counts = set(seen.values())
    if len(seen) != cells or len(counts) != 1:
        missing = [c for c in itertools.product(*(range(g) for g in grid)) if c not in seen]
        raise LayoutError(
            f"the pieces of shape {shape} form a grid {tuple(grid)} but are held unevenly: "
            f"copies per grid coordinate {dict(sorted(seen.items()))}"
            + (f", coordinates held by no device {missing}" if missing else "")
        )
    (nreplicas,) = counts
    ordered: list[Any] = [None] * (cells * nreplicas)
    for device, (coords, replica) in where.items():
        f = 0
        for c, g in zip(reversed(coords), reversed(grid)):
            f = f * g + c
        ordered[f + cells * replica] = device
    return tuple(block), tuple(grid), ordered, where


def layout_from_sharding(sharding: "jax.sharding.Sharding", shape: Sequence[int]) -> Layout:
    """The :class:`~dlmg.Layout` of an array of ``shape`` sharded by ``sharding``.

    Parameters
    ----------
    sharding : jax.sharding.Sharding
        A ``NamedSharding``, ``SingleDeviceSharding`` or any sharding with
        ``devices_indices_map``.
    shape : sequence of int
        The global shape of the array.

    Returns
    -------
    Layout
        One fragment per device: along each mode, a mode split into ``p``
        pieces has ``block = n / p`` and ``grid = p`` (every fragment one
        block); devices holding the same piece are replicas, numbered as
        JAX's ``replica_id``. Devices are listed column-major over the grid,
        then by replica.

    Raises
    ------
    LayoutError
        When the sharding does not fit ``shape`` (JAX's own error is
        chained) or its pieces are no regular tiling.

    Examples
    --------
    >>> mesh = jax.make_mesh((2, 4), ("x", "y"))                 # doctest: +SKIP
    >>> layout_from_sharding(NamedSharding(mesh, P(("x", "y"))), (8, 4))  # doctest: +SKIP
    Layout((8, 4), block=(1, 4), grid=(8, 1), devices=('cpu:0', ..., 'cpu:7'))
    """
    shape_t = tuple(int(n) for n in shape)
    try:
        index_map = sharding.devices_indices_map(shape_t)
    except AttributeError:
        raise TypeError(
            f"sharding must be a jax.sharding.Sharding, got {type(sharding).__name__}"
        ) from None
    except Exception as exc:  # JAX's IndivisibleError, ValueError...
        raise LayoutError(f"sharding {sharding} does not fit shape {shape_t}: {exc}") from exc
    block, grid, ordered, _ = _geometry(index_map, shape_t)
    return Layout(shape_t, block=block, grid=grid, devices=[_dlmg_device(d) for d in ordered],
                  ranks=[_process_of(d) for d in ordered])


# --------------------------------------------------------------------------
# layout -> sharding


def jax_layout_problems(layout: Layout) -> list[str]:
    """Why JAX cannot express ``layout`` as a sharding (empty when it can).

    JAX splits every mode evenly into one contiguous piece per grid
    coordinate and places one piece on each device; so every mode with
    ``grid > 1`` needs ``block * grid == extent``, and no device may hold two
    fragments. Whether the devices are JAX devices is not checked here.
    """
    problems = []
    for m, (n, b, g) in enumerate(zip(layout.shape, layout.block, layout.grid)):
        if g > 1 and b * g != n:
            kind = "block-cyclic" if b * g < n else "uneven"
            problems.append(
                f"mode {m} is {kind}: block {b} * grid {g} = {b * g} != extent {n} "
                "(JAX needs one equal contiguous block per device)"
            )
    seen: dict[Device, int] = {}
    for f, d in enumerate(layout.devices):
        if d in seen:
            problems.append(f"device {d} holds fragments {seen[d]} and {f} (JAX allows one piece per device)")
            break
        seen[d] = f
    return problems


def _check_expressible(layout: Layout) -> None:
    problems = jax_layout_problems(layout)
    if problems:
        raise LayoutError(
            f"JAX cannot express layout {layout!r}: {'; '.join(problems)}. "
            f"A layout it can express: {_layout_expr(jax_compatible_layout(layout))}"
        )


def _mesh_for(layout: Layout, table: Mapping[Device, Any]) -> tuple[Any, tuple]:
    """A mesh of the layout's devices and the PartitionSpec entries over it."""
    import numpy as np

    jax = _jax()
    if any(layout.ranks):  # devices of several processes (multi-controller JAX)
        everyone = _global_jax_devices()
        missing = [f"{r}:{d}" for r, d in zip(layout.ranks, layout.devices) if (r, d) not in everyone]
        if missing:
            raise DeviceError(f"JAX has no device {', '.join(missing)} (process:device) in its global device list")
        jdevs = [everyone[(r, d)] for r, d in zip(layout.ranks, layout.devices)]
    else:
        jdevs = [_jax_device(d, table) for d in layout.devices]
    sizes, names, spec = [], [], []
    for m, g in enumerate(layout.grid):
        if g > 1:
            sizes.append(g)
            names.append(_MODE_AXIS.format(m))
        spec.append(_MODE_AXIS.format(m) if g > 1 else None)
    if layout.nreplicas > 1 or not sizes:
        sizes.append(layout.nreplicas)
        names.append(_REPLICA_AXIS)
    # devices[c0 + g0 * (c1 + ...) + P * r] sits at mesh position (c0, c1, ..., r):
    # a Fortran-order reshape of the device list
    grid_devs = np.empty(len(jdevs), dtype=object)
    grid_devs[:] = jdevs
    mesh = jax.sharding.Mesh(grid_devs.reshape(sizes, order="F"), tuple(names))
    return mesh, tuple(spec)


def _spec_on_mesh(layout: Layout, mesh: Any) -> tuple:
    """The PartitionSpec entries placing ``layout`` on the given ``mesh``.

    For each mode, the mesh axes along which the device's grid coordinate
    changes split that mode, major first; the other axes are replicas.
    """
    import numpy as np

    mesh_devs = np.asarray(mesh.devices)
    names = tuple(mesh.axis_names)
    where = {_dlmg_device(d): i for i, d in enumerate(mesh_devs.flat)}
    context = f"mesh {dict(zip(names, mesh_devs.shape))} with devices {[str(d) for d in where]}"
    if len(where) != layout.nfragments or set(where) != set(layout.devices):
        raise LayoutError(
            f"layout {layout!r} does not fit {context}: the mesh must hold exactly the layout's devices"
        )
    coords = np.zeros(mesh_devs.shape + (layout.ndim,), dtype=np.int64)
    flat = coords.reshape(-1, layout.ndim)
    for frag in layout.fragments:
        flat[where[frag.device]] = frag.coords
    spec: list[Any] = []
    used: set[int] = set()
    for m, g in enumerate(layout.grid):
        c = coords[..., m]
        axes = [a for a in range(len(names)) if mesh_devs.shape[a] > 1 and np.any(np.diff(c, axis=a))]
        if g == 1:
            spec.append(None)
            continue
        overlap = used.intersection(axes)
        if overlap:
            raise LayoutError(
                f"layout {layout!r} does not fit {context}: mesh axis {names[min(overlap)]!r} "
                f"would split two modes"
            )
        used.update(axes)
        for order in itertools.permutations(axes):
            expect = np.zeros_like(c)
            for a in order:  # first axis major
                shape = [1] * c.ndim
                shape[a] = mesh_devs.shape[a]
                expect = expect * mesh_devs.shape[a] + np.arange(mesh_devs.shape[a]).reshape(shape)
            if math.prod(mesh_devs.shape[a] for a in order) == g and np.array_equal(expect, c):
                break
        else:
            raise LayoutError(
                f"layout {layout!r} does not fit {context}: the grid coordinates of mode {m} "
                f"are no row-major numbering of any mesh axes (they vary along "
                f"{[names[a] for a in axes]})"
            )
        spec.append(names[order[0]] if len(order) == 1 else tuple(names[a] for a in order))
    return tuple(spec)


def sharding_from_layout(layout: Layout, mesh: "jax.sharding.Mesh | None" = None) -> "jax.sharding.NamedSharding":
    """The ``NamedSharding`` that places an array as ``layout`` does.

    Parameters
    ----------
    layout : Layout
        Every split mode must be even with one block per device
        (``block * grid == extent``) and the devices distinct JAX devices.
    mesh : jax.sharding.Mesh, optional
        The mesh to express the layout on; it must hold exactly the layout's
        devices, and every mode's grid coordinate must be a row-major
        numbering of some of its axes. ``None`` builds a mesh with one axis
        ``"dim{m}"`` per split mode ``m`` and a ``"replica"`` axis for the
        copies (the layout's device list reshaped in Fortran order).

    Returns
    -------
    jax.sharding.NamedSharding
        A sharding with ``layout_from_sharding(result, layout.shape)`` equal
        to ``layout`` when ``mesh`` is ``None``; on a given mesh the replicas
        may be numbered differently (the data placement is the same).

    Raises
    ------
    LayoutError
        When JAX cannot express the layout; the message names a layout it
        can express (for :meth:`DistributedTensor.redistribute`).
    DeviceError
        When a device of the layout is no JAX device.
    """
    jax = _jax()
    _check_expressible(layout)
    table = _jax_devices()
    if mesh is None:
        mesh, spec = _mesh_for(layout, table)
    else:
        spec = _spec_on_mesh(layout, mesh)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
    _cross_check(sharding, layout)
    return sharding


def to_sharding(layout: Layout, mesh: "jax.sharding.Mesh | None" = None) -> "jax.sharding.NamedSharding":
    """Alias of :func:`sharding_from_layout` (also ``Layout.to_sharding``)."""
    return sharding_from_layout(layout, mesh)


def _cross_check(sharding: Any, layout: Layout) -> None:
    """Every device's piece under ``sharding`` is what its fragment owns."""
    index_map = sharding.devices_indices_map(layout.shape)
    by_device = {(_process_of(d), _dlmg_device(d)): ix for d, ix in index_map.items()}
    for frag in layout.fragments:
        index = by_device.get((frag.rank, frag.device))
        if index is None or _index_spans(index, layout.shape) != _fragment_spans(frag):
            raise LayoutError(  # a bug, not a user error: say everything
                f"internal: sharding {sharding} gives device {frag.device} index {index} but "
                f"fragment {frag.index} of {layout!r} owns {frag.ranges}"
            )


def _index_spans(index: tuple, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    index = tuple(index) + (slice(None),) * (len(shape) - len(tuple(index)))
    out = []
    for m, (ix, n) in enumerate(zip(index, shape)):
        a, b = _span(ix, n, "?", m)
        out.append((a, b) if b > a else (0, 0))
    return tuple(out)


def _fragment_spans(frag: Any) -> tuple[tuple[int, int] | None, ...]:
    """Per mode, the one contiguous ``(start, stop)`` a fragment owns
    (``(0, 0)`` when empty; ``None`` when not contiguous)."""
    out: list[tuple[int, int] | None] = []
    for ranges in frag.ranges:
        ranges = [r for r in ranges if r[1] > r[0]]
        if not ranges:
            out.append((0, 0))
        elif all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])):
            out.append((ranges[0][0], ranges[-1][1]))
        else:
            out.append(None)
    return tuple(out)


# --------------------------------------------------------------------------
# a layout JAX can express


def _layout_expr(layout: Layout) -> str:
    """A constructor expression for ``layout`` (``Layout.slab(...)`` when it is one)."""
    devices = [str(d) for d in layout.devices]
    split = [m for m, g in enumerate(layout.grid) if g > 1]
    if len(split) == 1 and layout.nreplicas == 1:
        m = split[0]
        if layout == Layout.slab(layout.shape, axis=m, devices=layout.devices):
            return f"Layout.slab({layout.shape}, axis={m}, devices={devices})"
    if not split and layout.nreplicas == 1:
        return f"Layout.single({layout.shape}, {devices[0]!r})"
    if not split:
        return f"Layout.replicated({layout.shape}, devices={devices})"
    return f"Layout({layout.shape}, block={layout.block}, grid={layout.grid}, devices={devices})"


def jax_compatible_layout(layout: Layout, mesh: "jax.sharding.Mesh | None" = None) -> Layout:
    """A layout close to ``layout`` that JAX can express (``layout`` itself when it can).

    In order of preference: the same grid and devices with even blocks (when
    the grid divides the shape and the devices are distinct JAX devices);
    else slabs along one mode over as many JAX devices of the layout's kind
    (host or GPU) as divide that mode, preferring the modes already split;
    else the whole tensor on one device. With ``mesh``, the target uses
    exactly the mesh's devices (slabs over all of them, or replicated).

    Parameters
    ----------
    layout : Layout
    mesh : jax.sharding.Mesh, optional

    Returns
    -------
    Layout
    """
    shape = layout.shape
    table = _jax_devices()
    if mesh is None:
        if not jax_layout_problems(layout) and all(d in table for d in layout.devices):
            return layout
        if len(set(layout.devices)) == layout.nfragments and all(d in table for d in layout.devices):
            if all(n % g == 0 for n, g in zip(shape, layout.grid)):
                block = tuple(n // g if g > 1 else max(n, 1) for n, g in zip(shape, layout.grid))
                return Layout(shape, block=block, grid=layout.grid, devices=layout.devices)
        pool = [_dlmg_device(d) for d in _local_pool(layout.devices[0].kind)] or list(table)
        counts: Sequence[int] = range(len(pool), 1, -1)
    else:
        import numpy as np

        pool = [_dlmg_device(d) for d in np.asarray(mesh.devices).flat]
        counts = [len(pool)]
    modes = sorted(range(len(shape)), key=lambda m: (layout.grid[m] == 1, m))
    for p in counts:
        for m in modes:
            if shape[m] % p == 0 and shape[m] > 0:
                target = Layout.slab(shape, axis=m, devices=pool[:p])
                if mesh is None:
                    return target
                try:
                    _spec_on_mesh(target, mesh)
                    return target
                except LayoutError:
                    continue
    if mesh is not None:
        return Layout.replicated(shape, devices=pool)
    return Layout.single(shape, pool[0])


sharding_of_layout.provide(sharding_from_layout)  # Layout.to_sharding



# --------------------------------------------------------------------------
# jax.Array <-> DistributedTensor


def _is_jax_array(obj: Any) -> bool:
    top = type(obj).__module__.partition(".")[0]
    cls = type(obj)
    return top in ("jax", "jaxlib") and hasattr(cls, "addressable_shards") and hasattr(cls, "is_deleted")


def from_jax(array: "jax.Array") -> "DistributedTensor":
    """Wrap a (sharded) ``jax.Array`` as a distributed tensor, without a copy.

    Each addressable shard becomes one fragment: the fragment's array is
    ``shard.data``, which shares the shard's buffer (the same
    ``unsafe_buffer_pointer``). The layout is
    :func:`layout_from_sharding` of the array's sharding, and every shard's
    ``index`` is checked against the range its fragment owns.

    Parameters
    ----------
    array : jax.Array
        Sharded over any number of devices, replicated or on one device.

    Returns
    -------
    DistributedTensor
        Fragments are JAX arrays, one per device (replicas included).

    Raises
    ------
    FrameworkError
        When ``array`` is no ``jax.Array``.
    FragmentError
        When it is deleted, or spans several processes (multi-controller
        JAX) while :func:`dlmg.distributed.init` was not called, or a JAX
        process index differs from the dlmg rank of that process.
    LayoutError
        When its sharding has no layout.

    Notes
    -----
    JAX buffers are immutable by contract; fragments handed on to a mutable
    framework (``dt.to("torch")``) must not be written.

    In a multi-controller program (``jax.distributed.initialize``) the array
    spans several processes: the layout's ``ranks`` are the devices'
    ``process_index``, and this process wraps only its addressable shards.
    JAX's process indices must equal dlmg's ranks (start both with the same
    numbering).
    """
    if not _is_jax_array(array):
        raise FrameworkError(
            f"from_jax needs a jax.Array, got {type(array).__module__}.{type(array).__qualname__}"
        )
    if array.is_deleted():
        raise FragmentError("from_jax got a deleted jax.Array (its buffers were donated or freed)")
    if not array.is_fully_addressable:
        _check_processes(array)
    shape = tuple(int(n) for n in array.shape)
    try:
        layout, fragment_of = _sharding_layout(array.sharding, shape)
    except TypeError:  # an unhashable sharding: found again every time
        layout, fragment_of = _sharding_layout.__wrapped__(array.sharding, shape)
    me = process_rank()
    arrays = {}
    for shard in array.addressable_shards:
        index = fragment_of[shard.device]
        if layout.ranks[index] == me:
            arrays[index] = shard.data

    return from_fragments(arrays, layout, dtype=canonical(str(array.dtype)))


@functools.lru_cache(maxsize=256)
def _sharding_layout(sharding: Any, shape: tuple[int, ...]) -> tuple["Layout", dict[Any, int]]:
    """The layout of ``sharding`` over ``shape`` and the fragment index of each JAX
    device, with every device's index checked against the range its fragment
    owns; remembered per (sharding, shape), since JAX shardings are hashable."""
    layout = layout_from_sharding(sharding, shape)
    index_map = sharding.devices_indices_map(shape)
    by_device = {_dlmg_device(d): d for d in index_map}
    fragment_of = {}
    for frag in layout.fragments:
        device = by_device.get(frag.device)
        if device is None:  # pragma: no cover - the layout was derived from the same map
            raise FragmentError(f"the sharding places nothing on {frag.device} (fragment {frag.index})")
        if _index_spans(index_map[device], shape) != _fragment_spans(frag):
            raise LayoutError(  # pragma: no cover - the geometry was derived from the same map
                f"device {frag.device} holds index {index_map[device]} but fragment {frag.index} "
                f"of {layout!r} owns {frag.ranges}"
            )
        fragment_of[device] = frag.index
    return layout, fragment_of


def _check_processes(array: "jax.Array") -> None:
    """A multi-process array needs dlmg across the same processes, numbered alike."""
    engine = current()
    if engine is None:
        raise FragmentError(
            "from_jax got a jax.Array that spans several processes (multi-controller JAX); call "
            "dlmg.distributed.init() in every process first"
        )
    indices = {int(s.device.process_index) for s in array.addressable_shards}
    if indices != {engine.rank}:
        raise FragmentError(
            f"from_jax: this process is JAX process {sorted(indices)} but dlmg rank {engine.rank}; "
            "start JAX (jax.distributed.initialize(process_id=...)) and dlmg with the same process numbering"
        )


def _fragment_to_jax(array: Any, framework: str, device: Device) -> Any:
    """``array`` as a JAX array on ``device``: itself when it already is one
    there; else moved (JAX CPU devices: zero-copy) or imported through DLPack
    by the JAX adapter (zero-copy where JAX can address the memory)."""
    adapter = get_adapter("jax")
    if framework == "jax":
        return adapter.to_device(array, device)
    return adapter.from_dlpack(array, device=device)


def to_jax(
    tensor: "DistributedTensor",
    *,
    mesh: "jax.sharding.Mesh | None" = None,
    redistribute: bool = False,
) -> "jax.Array":
    """Assemble a distributed tensor into one sharded ``jax.Array``.

    Fragments that already are JAX arrays on their slot's device are used as
    they are; others are imported onto the slot's JAX device through DLPack
    (zero-copy where JAX can address the memory: host fragments aligned to 64
    bytes, GPU fragments on that GPU, compact strides). The pieces are joined
    with ``jax.make_array_from_single_device_arrays`` under
    :func:`sharding_from_layout`.

    Parameters
    ----------
    tensor : DistributedTensor
    mesh : jax.sharding.Mesh, optional
        The mesh of the result's ``NamedSharding``; by default one built from
        the layout's devices (see :func:`sharding_from_layout`).
    redistribute : bool, optional
        When JAX cannot express the layout (block-cyclic, uneven, a device
        holding two fragments, non-JAX devices), redistribute first to
        :func:`jax_compatible_layout` instead of raising.

    Returns
    -------
    jax.Array

    Raises
    ------
    LayoutError
        When JAX cannot express the layout and ``redistribute`` is false; the
        message names the layout to redistribute to.
    DtypeError
        For a 64-bit dtype while ``jax_enable_x64`` is off (JAX would narrow it
        silently).
    """
    jax = _jax()

    tensor = guard(tensor, "to_jax")  # a pending reduction: its value
    get_adapter("jax").check_dtype(canonical(tensor.dtype))
    layout = tensor.layout
    table = _jax_devices()
    problems = jax_layout_problems(layout)
    mine = [f.device for f in tensor.fragments if f.rank == process_rank()]
    problems += [f"device {d} is no JAX device" for d in dict.fromkeys(mine) if d not in table]
    if mesh is not None and not problems:
        try:
            _spec_on_mesh(layout, mesh)
        except LayoutError as exc:
            problems.append(str(exc))
    if problems:
        target = jax_compatible_layout(layout, mesh)
        if not redistribute or any(layout.ranks):
            raise LayoutError(
                f"to_jax: JAX cannot express layout {layout!r}: {'; '.join(problems)}. "
                f"Redistribute first, e.g. tensor.redistribute({_layout_expr(target)}), "
                "or call to_jax(redistribute=True), which does that"
            )
        tensor = tensor.redistribute(target)
        layout = tensor.layout
    sharding = sharding_from_layout(layout, mesh)
    arrays = []
    for frag in tensor.fragments:
        if not frag.is_local:  # another process's shard (multi-controller JAX)
            continue
        device = layout.devices[frag.index]
        arrays.append(_fragment_to_jax(frag.array, frag.adapter.name, device))
    return jax.make_array_from_single_device_arrays(layout.shape, sharding, arrays)
