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
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..errors import FragmentError, FrameworkError, LayoutError
from ._jax_sharding import (
    dlmg_device,
    fragment_spans,
    index_spans,
    jax_module,
    jax_devices,
    layout_expression,
    spec_on_mesh,
    jax_compatible_layout,
    jax_layout_problems,
    layout_from_sharding,
    sharding_from_layout,
    to_sharding,
)
from ..fragment import process_rank
from ..construct import from_fragments
from ..dtypes import canonical
from ..distributed._state import current
from ..ops._pending import guard
from ..registry import get_adapter

if TYPE_CHECKING:  # pragma: no cover
    import jax

    from ..layout import Layout
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
    by_device = {dlmg_device(d): d for d in index_map}
    fragment_of = {}
    for frag in layout.fragments:
        device = by_device.get(frag.device)
        if device is None:  # pragma: no cover - the layout was derived from the same map
            raise FragmentError(f"the sharding places nothing on {frag.device} (fragment {frag.index})")
        if index_spans(index_map[device], shape) != fragment_spans(frag):
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
    jax = jax_module()

    tensor = guard(tensor, "to_jax")  # a pending reduction: its value
    get_adapter("jax").check_dtype(canonical(tensor.dtype))
    layout = tensor.layout
    table = jax_devices()
    problems = jax_layout_problems(layout)
    mine = [f.device for f in tensor.fragments if f.rank == process_rank()]
    problems += [f"device {d} is no JAX device" for d in dict.fromkeys(mine) if d not in table]
    if mesh is not None and not problems:
        try:
            spec_on_mesh(layout, mesh)
        except LayoutError as exc:
            problems.append(str(exc))
    if problems:
        target = jax_compatible_layout(layout, mesh)
        if not redistribute or any(layout.ranks):
            raise LayoutError(
                f"to_jax: JAX cannot express layout {layout!r}: {'; '.join(problems)}. "
                f"Redistribute first, e.g. tensor.redistribute({layout_expression(target)}), "
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
