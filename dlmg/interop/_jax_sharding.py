"""Conversions between JAX shardings and dlmg layouts, and the mapping
between JAX devices and dlmg devices. Internal to :mod:`dlmg.interop.jax`,
which documents the rules. JAX is imported only inside the functions."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..errors import DeviceError, LayoutError
from ..layout import Layout
from ..layout.layout import sharding_of_layout
from ..registry import get_adapter

if TYPE_CHECKING:  # pragma: no cover
    import jax

#: Mesh axis names of the meshes :func:`sharding_from_layout` builds.
_MODE_AXIS = "dim{}"
_REPLICA_AXIS = "replica"


# --------------------------------------------------------------------------
# JAX devices


def _adapter() -> Any:
    return get_adapter("jax")


def jax_module() -> Any:
    """The jax module (FrameworkNotInstalledError, with what to install, without it)."""
    return _adapter().module()


def dlmg_device(jdev: Any) -> Device:
    """The dlmg device of a JAX device, by the JAX adapter's convention
    (``cpu:<id>`` for JAX's CPU devices, the local hardware id for GPUs)."""
    found = _adapter().device_from_native(jdev)
    if found is None:  # pragma: no cover - JAX devices always have a platform and an id
        raise DeviceError(f"{jdev!r} is no JAX device")
    return found


def jax_devices() -> dict[Device, Any]:
    """The addressable JAX devices of every available backend, keyed by dlmg device."""
    jax = jax_module()
    out: dict[Device, Any] = {}
    for backend in ("cpu", "gpu"):
        try:
            devices = jax.local_devices(backend=backend)
        except RuntimeError:  # backend not present
            continue
        for d in devices:
            try:
                out.setdefault(dlmg_device(d), d)
            except DeviceError:  # pragma: no cover - a platform dlmg has no kind for
                continue
    return out


def _process_of(jdev: Any) -> int:
    """The JAX process (multi-controller) owning ``jdev``; 0 in one process."""
    return int(getattr(jdev, "process_index", 0))


def _global_jax_devices() -> dict[tuple[int, Device], Any]:
    """Every JAX device of every process, keyed by ``(process, dlmg device)``."""
    jax = jax_module()
    out: dict[tuple[int, Device], Any] = {}
    for backend in ("cpu", "gpu"):
        try:
            devices = jax.devices(backend=backend)
        except RuntimeError:  # backend not present
            continue
        for d in devices:
            try:
                out.setdefault((_process_of(d), dlmg_device(d)), d)
            except DeviceError:  # pragma: no cover - a platform dlmg has no kind for
                continue
    return out


def _jax_device(device: Device, table: Mapping[Device, Any] | None = None) -> Any:
    """The JAX device that is ``device``; a DeviceError when JAX has none."""
    table = jax_devices() if table is None else table
    try:
        return table[device]
    except KeyError:
        raise DeviceError(
            f"device {device} is no JAX device; JAX has {', '.join(str(d) for d in table) or 'none'}"
        ) from None


def _local_pool(kind: str) -> list[Any]:
    """The addressable JAX devices holding memory of ``kind`` (``cpu``/``cuda``)."""
    jax = jax_module()
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
    return Layout(shape_t, block=block, grid=grid, devices=[dlmg_device(d) for d in ordered],
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
            f"A layout it can express: {layout_expression(jax_compatible_layout(layout))}"
        )


def _mesh_for(layout: Layout, table: Mapping[Device, Any]) -> tuple[Any, tuple]:
    """A mesh of the layout's devices and the PartitionSpec entries over it."""
    import numpy as np

    jax = jax_module()
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


def spec_on_mesh(layout: Layout, mesh: Any) -> tuple:
    """The PartitionSpec entries placing ``layout`` on the given ``mesh``.

    For each mode, the mesh axes along which the device's grid coordinate
    changes split that mode, major first; the other axes are replicas.
    """
    import numpy as np

    mesh_devs = np.asarray(mesh.devices)
    names = tuple(mesh.axis_names)
    where = {dlmg_device(d): i for i, d in enumerate(mesh_devs.flat)}
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
    jax = jax_module()
    _check_expressible(layout)
    table = jax_devices()
    if mesh is None:
        mesh, spec = _mesh_for(layout, table)
    else:
        spec = spec_on_mesh(layout, mesh)
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*spec))
    _cross_check(sharding, layout)
    return sharding


def to_sharding(layout: Layout, mesh: "jax.sharding.Mesh | None" = None) -> "jax.sharding.NamedSharding":
    """Alias of :func:`sharding_from_layout` (also ``Layout.to_sharding``)."""
    return sharding_from_layout(layout, mesh)


def _cross_check(sharding: Any, layout: Layout) -> None:
    """Every device's piece under ``sharding`` is what its fragment owns."""
    index_map = sharding.devices_indices_map(layout.shape)
    by_device = {(_process_of(d), dlmg_device(d)): ix for d, ix in index_map.items()}
    for frag in layout.fragments:
        index = by_device.get((frag.rank, frag.device))
        if index is None or index_spans(index, layout.shape) != fragment_spans(frag):
            raise LayoutError(  # a bug, not a user error: say everything
                f"internal: sharding {sharding} gives device {frag.device} index {index} but "
                f"fragment {frag.index} of {layout!r} owns {frag.ranges}"
            )


def index_spans(index: tuple, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    index = tuple(index) + (slice(None),) * (len(shape) - len(tuple(index)))
    out = []
    for m, (ix, n) in enumerate(zip(index, shape)):
        a, b = _span(ix, n, "?", m)
        out.append((a, b) if b > a else (0, 0))
    return tuple(out)


def fragment_spans(frag: Any) -> tuple[tuple[int, int] | None, ...]:
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


def layout_expression(layout: Layout) -> str:
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
    table = jax_devices()
    if mesh is None:
        if not jax_layout_problems(layout) and all(d in table for d in layout.devices):
            return layout
        if len(set(layout.devices)) == layout.nfragments and all(d in table for d in layout.devices):
            if all(n % g == 0 for n, g in zip(shape, layout.grid)):
                block = tuple(n // g if g > 1 else max(n, 1) for n, g in zip(shape, layout.grid))
                return Layout(shape, block=block, grid=layout.grid, devices=layout.devices)
        pool = [dlmg_device(d) for d in _local_pool(layout.devices[0].kind)] or list(table)
        counts: Sequence[int] = range(len(pool), 1, -1)
    else:
        import numpy as np

        pool = [dlmg_device(d) for d in np.asarray(mesh.devices).flat]
        counts = [len(pool)]
    modes = sorted(range(len(shape)), key=lambda m: (layout.grid[m] == 1, m))
    for p in counts:
        for m in modes:
            if shape[m] % p == 0 and shape[m] > 0:
                target = Layout.slab(shape, axis=m, devices=pool[:p])
                if mesh is None:
                    return target
                try:
                    spec_on_mesh(target, mesh)
                    return target
                except LayoutError:
                    continue
    if mesh is not None:
        return Layout.replicated(shape, devices=pool)
    return Layout.single(shape, pool[0])


sharding_of_layout.provide(sharding_from_layout)  # Layout.to_sharding
