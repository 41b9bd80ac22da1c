"""Making distributed tensors: wrap arrays or raw memory, allocate, scatter.

* :func:`from_fragments` wraps existing arrays (any framework, mixed allowed)
  without a copy;
* :func:`from_pointers` wraps raw memory addresses, honouring the layout's
  element and block strides, with an optional lifetime ``owner``;
* :func:`empty` and :func:`full` allocate every fragment of a layout in one
  framework on its device (the layer under the public ``dlmg.empty``,
  ``dlmg.zeros``, ``dlmg.ones``, ``dlmg.full``, which take a shape and
  ``layout=``/``framework=``);
* :func:`scatter` spreads one regular array over a layout (an explicit copy).

Every function checks what it is given and raises a clear error naming the
fragment, the field and the value.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Sequence

from .device import Device, unreachable_hint
from ._scalars import check_scalar
from .adapters.capabilities import exports_itself
from .dlpack.bounds import ADDRESS_LIMIT
from .dtypes import canonical, info
from .errors import DeviceError, FragmentError, FrameworkError, LayoutError
from .layout import Layout
from .registry import DEFAULT_FRAMEWORK, adapter_for, viewing_frameworks
from .fragment import Fragment, process_rank
from .base import TensorBase
from .dlpack import DLPackExporter
from .registry import get_adapter
from .movement import scatter as _scatter

if TYPE_CHECKING:  # pragma: no cover
    from .adapters import Adapter
    from .layout import FragmentLayout
    from .tensor import DistributedTensor

__all__ = ["from_fragments", "from_pointers", "empty", "full", "scatter"]


# -- shared checks ----------------------------------------------------------------
def _check_layout(layout: Any, what: str) -> "Layout":
    if not isinstance(layout, Layout):
        raise TypeError(f"{what} needs a dlmg.Layout as layout, got {type(layout).__name__}")
    return layout


def _ranks(layout: "Layout") -> tuple[int, ...]:
    """The process of every fragment: the layout's ``ranks``."""
    return layout.ranks


def _slots(layout: "Layout", items: Any, ranks: tuple[int, ...], what: str) -> list[Any]:
    """``items`` (a sequence in fragment order, or a mapping by fragment index) as one
    entry per fragment (``None`` where nothing was given)."""
    n = layout.nfragments
    if type(items) in (list, tuple) and len(items) == n:  # the common call, before the slower checks
        return items  # type: ignore[no-any-return]
    if isinstance(items, Mapping):
        slots: list[Any] = [None] * n
        for key, value in items.items():
            try:
                i = operator.index(key)
            except TypeError:
                raise FragmentError(f"{what}: key {key!r} is not a fragment index") from None
            if not 0 <= i < n:
                raise FragmentError(f"{what}: fragment index {i} out of range for a layout of {n} fragments")
            slots[i] = value
        return slots
    if isinstance(items, (str, bytes)) or not hasattr(items, "__len__"):
        raise TypeError(
            f"{what} takes a sequence in fragment order or a mapping {{fragment index: value}}, "
            f"got {type(items).__name__}"
        )
    items = list(items)
    if len(items) == n:
        return items
    me = process_rank()
    local = [i for i in range(n) if ranks[i] == me]
    if len(items) == len(local) and len(local) < n:
        slots = [None] * n
        for i, value in zip(local, items):
            slots[i] = value
        return slots
    expect = f"{n}" if len(local) == n else f"{n} (or {len(local)}, one per fragment of process {me})"
    raise FragmentError(
        f"{what}: got {len(items)} entries but the layout has {expect} fragments "
        f"(shape {layout.shape}, grid {layout.grid}, {layout.nreplicas} replica(s))"
    )


def device_fits(adapter: "Adapter", have: Device, slot: Device) -> bool:
    """Whether an array of ``adapter`` on ``have`` may be the fragment for ``slot``: the same
    device, or host memory in any host slot where the framework has one host device."""
    if have == slot:
        return True
    return have.is_host and slot.is_host and not adapter.traits.distinct_host_devices


_UNSEEN: Any = object()
_EXPORT = attrgetter("__dlpack__")
_HOST = Device("cpu", 0)


# -- from_fragments ----------------------------------------------------------------
def from_fragments(
    arrays: Sequence[Any] | Mapping[int, Any],
    layout: "Layout",
    *,
    dtype: Any = None,
) -> DistributedTensor:
    """Wrap existing arrays as the fragments of a distributed tensor, without a copy.

    Parameters
    ----------
    arrays : sequence or mapping of arrays
        One array per fragment in fragment order (column-major over the grid,
        then replica), or a mapping ``{fragment index: array}``. Arrays may
        come from different frameworks (NumPy, torch, JAX, CuPy, any DLPack
        producer); each must have its fragment's local shape and all one
        element type. NumPy and torch host arrays fit any ``cpu`` slot (one
        host memory); a JAX array on ``cpu:3`` fits only a ``cpu:3`` slot.
        When ``layout.ranks`` spreads the fragments over processes, each
        process gives arrays for its own fragments only: a mapping, a
        sequence of its fragments in order, or a full-length sequence with
        ``None`` for the others.
    layout : Layout
        Its ``ranks`` say which process holds each fragment.
    dtype : dtype, optional
        The element type, checked against the arrays (needed only when this
        process holds no fragment).

    Returns
    -------
    DistributedTensor
        Its fragments' ``array`` are the very objects given.

    Raises
    ------
    FragmentError
        Wrong count, shape, dtype, device or rank (the message names the fragment).
    FrameworkError
        An object of no known framework.

    Notes
    -----
    Arrays may have any strides their framework allows for a dense layout
    (the layout then describes the distribution only). With explicit
    ``element_strides`` every array must have the fragment's strides;
    padded layouts (blocks apart in memory) take raw memory through
    :func:`from_pointers`.

    Examples
    --------
    >>> import numpy as np, dlmg
    >>> lay = dlmg.Layout.slab((4, 3), 0, ["cpu", "cpu"])
    >>> dt = dlmg.from_fragments([np.zeros((2, 3)), np.ones((2, 3))], lay)
    >>> dt[3, 0]
    1.0
    """
    if not isinstance(layout, Layout):
        _check_layout(layout, "from_fragments")
    me = process_rank()
    want: str | None = None if dtype is None else canonical(dtype)
    # the usual call: a list or tuple with an array for every fragment, all of this process
    if type(arrays) in (list, tuple) and 0 < len(arrays) == layout.ranks.count(me) == len(layout.devices):
        alike = _wrap_alike(arrays, layout, want)  # type: ignore[arg-type]
        if alike is not None:
            return alike
    rank_of = _ranks(layout)
    slots = _slots(layout, arrays, rank_of, "from_fragments")
    checker = _FragmentChecker(layout, want)
    frags: list[Fragment] = []
    for frag, array, rank in zip(layout.fragments, slots, rank_of):
        if rank != me:
            if array is not None:
                raise FragmentError(
                    f"fragment {frag.index} belongs to process {rank}, but this is process {me}: pass None for it"
                )
            frags.append(Fragment.remote(frag, rank))
        elif array is None:
            raise FragmentError(
                f"fragment {frag.index} (on {frag.device}) belongs to this process but no array was given"
            )
        else:
            frags.append(checker.wrap(frag, array))
    if checker.want is None:
        raise FragmentError("from_fragments: this process holds no fragment; pass dtype= to name the element type")
    return TensorBase._create(layout, frags, checker.want)


class _FragmentChecker:
    """:func:`from_fragments`' checks of one array against its fragment, fragment after
    fragment, remembering what the fragment before had: most fragments of one tensor
    repeat its type, dtype object and device objects, which are then checked once."""

    def __init__(self, layout: "Layout", want: str | None) -> None:
        self.layout = layout
        self.want = want
        self.first: int | None = None
        self.explicit_strides = layout.element_strides is not None
        self.last_type: type | None = None
        self.adapter: Any = None
        self.opaque = False  # an adapter that may hand another adapter the next array of the same type
        self.direct = False  # whether the arrays' own __dlpack__ is the whole export (asked per dtype)
        self.seen_raw = self.seen_adapter = self.seen_got = _UNSEEN
        self.seen_have = self.seen_slot = self.seen_host = _UNSEEN

    def wrap(self, frag: "FragmentLayout", array: Any) -> Fragment:
        """``array`` as fragment ``frag``, after checking its shape, dtype and device."""
        adapter = self._adapter(array)
        self._check_shape(frag, array, adapter)
        self._check_dtype(frag.index, array, adapter)
        self._check_device(frag, array, adapter)
        if self.explicit_strides:
            _check_strides(frag, adapter, array)
        export = array.__dlpack__ if self.direct else None
        return Fragment.of_result(frag, array, adapter.name, adapter, False, None, export)

    def _adapter(self, array: Any) -> Any:
        cls = type(array)
        if cls is not self.last_type:  # fragments of one tensor are mostly of one type
            self.adapter, self.last_type = adapter_for(array), cls
            self.opaque = self.adapter.name == "dlpack"
        elif self.opaque:
            self.adapter = adapter_for(array)
        return self.adapter

    def _check_shape(self, frag: "FragmentLayout", array: Any, adapter: Any) -> None:
        shape = getattr(array, "shape", None)
        if shape != frag.shape:  # the framework's own shape first: a tuple (or torch.Size) of ints
            shape = adapter.shape_of(array)
        if shape != frag.shape:
            i, layout = frag.index, self.layout
            raise FragmentError(
                f"fragment {i}: the {adapter.name} array has shape {shape}, but fragment {i} of the "
                f"layout has local shape {frag.shape} (global shape {layout.shape}, coords {frag.coords})"
            )

    def _check_dtype(self, i: int, array: Any, adapter: Any) -> None:
        raw = getattr(array, "dtype", None)
        if raw is None or raw is not self.seen_raw or adapter is not self.seen_adapter:
            got = canonical(adapter.dtype_of(array))
            self.seen_raw, self.seen_adapter, self.seen_got = raw, adapter, got
            self.direct = raw is not None and exports_itself(adapter, raw)
        else:  # the dtype object of the fragment before (frameworks share one per dtype)
            got = self.seen_got
        if self.want is None:
            self.want, self.first = got, i
        elif got is not self.want and got != self.want:  # canonical names are shared objects
            origin = f"fragment {self.first}" if self.first is not None else "dtype="
            raise FragmentError(f"fragment {i} has dtype {got}, but {origin} has {self.want}: one dtype per tensor")

    def _check_device(self, frag: "FragmentLayout", array: Any, adapter: Any) -> None:
        try:
            have = adapter.device_of(array)
        except DeviceError as exc:
            raise FragmentError(f"fragment {frag.index}: {exc}") from exc
        slot = frag.device
        # checked once per run of fragments with the same device objects and adapter (a
        # layout's equal devices are one object; whether host slots fit depends on the adapter)
        if have is self.seen_have and slot is self.seen_slot and adapter is self.seen_host:
            return
        if have != slot and not device_fits(adapter, have, slot):
            raise FragmentError(
                f"fragment {frag.index}: the {adapter.name} array lies on {have}, but the layout puts fragment "
                f"{frag.index} on {slot}" + (unreachable_hint([slot]) if have.is_host else "")
            )
        self.seen_have, self.seen_slot, self.seen_host = have, slot, adapter


def _wrap_alike(arrays: Sequence[Any], layout: "Layout", want: str | None) -> DistributedTensor | None:
    """:func:`from_fragments` of one array per fragment, all of this process, in a
    dense layout: the checks of the fragment-by-fragment loop, made once for what
    the arrays share (one type, so one adapter; one dtype object, so one dtype and
    one export; for a framework whose arrays are all host memory, one device) and
    per array only for the type, the dtype object, the shape and, where devices
    vary, the device.

    ``None`` where any array differs from the first in type or dtype object, or
    does not fit: the fragment-by-fragment loop then wraps what it can and names
    what it cannot.
    """
    first = arrays[0]
    raw = getattr(first, "dtype", None)
    if raw is None or layout.element_strides is not None:
        return None
    try:
        adapter = adapter_for(first)
    except FrameworkError:
        return None
    if adapter.name == "dlpack":  # (it may hand another array of the same type to another adapter)
        return None
    got = canonical(adapter.dtype_of(first))
    if want is not None and got != want:
        return None
    slots = layout.devices
    slot = slots[0]
    try:
        if adapter.traits.host_only and slots.count(slot) == len(slots):  # the usual case: no array asked its device
            if not (slot.is_host and (not adapter.traits.distinct_host_devices or slot == _HOST)):
                return None
        elif not _devices_fit(adapter, arrays, slots):
            return None
        # where the arrays' own __dlpack__ is the whole export (NumPy, for the dtypes it
        # exports), the fragments keep it from the start: asked once per dtype here
        frags = Fragment.of_alike(layout.fragments, arrays, adapter, None, exports_itself(adapter, raw))
    except (AttributeError, DeviceError):  # the fragment-by-fragment loop names the fragment
        return None
    return None if frags is None else TensorBase._create(layout, frags, got)


def _devices_fit(adapter: "Adapter", arrays: Sequence[Any], slots: Sequence[Device]) -> bool:
    """Whether every array is of the first one's type (its adapter is asked nothing
    otherwise) and lies on a device that fits its slot."""
    kind = type(arrays[0])
    seen_have = seen_slot = _UNSEEN
    for array, slot in zip(arrays, slots):
        if type(array) is not kind:
            return False
        have = adapter.device_of(array)
        if have is not seen_have or slot is not seen_slot:  # a layout's equal devices are one object
            if have != slot and not device_fits(adapter, have, slot):
                return False
            seen_have, seen_slot = have, slot
    return True


def _check_strides(frag: "FragmentLayout", adapter: "Adapter", array: Any) -> None:
    if not frag.is_strided:
        raise FragmentError(
            f"fragment {frag.index} lies in padded blocks that no single array describes; wrap its "
            "memory with dlmg.from_pointers"
        )
    have = adapter.strides_of(array)
    bad = [m for m, (n, a, b) in enumerate(zip(frag.shape, have, frag.strides)) if n > 1 and a != b]
    if bad:
        raise FragmentError(
            f"fragment {frag.index}: the array has strides {have}, but the layout's explicit strides "
            f"give {frag.strides} (mode {bad[0]})"
        )


# -- from_pointers ------------------------------------------------------------------
def _pointer(value: Any, index: int) -> int:
    if isinstance(value, bool):
        raise FragmentError(f"pointer of fragment {index} is a bool ({value!r}), not an address")
    try:
        ptr = operator.index(value)
    except TypeError:
        raise FragmentError(
            f"pointer of fragment {index} is a {type(value).__name__} ({value!r}), not an int address"
        ) from None
    if ptr == 0:
        raise FragmentError(f"pointer of fragment {index} is 0 (NULL); give the address of its memory")
    if ptr < 0:
        raise FragmentError(f"pointer of fragment {index} is negative ({ptr})")
    if ptr >= ADDRESS_LIMIT:
        raise FragmentError(f"pointer of fragment {index} is {ptr:#x}, past the address space (limit {ADDRESS_LIMIT:#x})")
    return ptr


def from_pointers(
    layout: "Layout",
    pointers: Sequence[int] | Mapping[int, int],
    dtype: Any,
    owner: Any = None,
    framework: str = DEFAULT_FRAMEWORK,
) -> DistributedTensor:
    """Wrap raw memory addresses as the fragments of a distributed tensor.

    Parameters
    ----------
    layout : Layout
        Its ``element_strides``/``block_strides`` say where each element sits
        in a fragment's memory (dense when ``None``); a fragment needs
        ``layout.fragment(i).span`` elements of memory.
    pointers : sequence or mapping of int
        Addresses in fragment order, or ``{fragment index: address}`` to bind
        addresses to explicit fragments. Only this process's fragments are
        given (those ``layout.ranks`` gives this process).
    dtype : dtype
        The element type.
    owner : object, optional
        Kept alive as long as any fragment, view or DLPack consumer of the
        memory lives, then released (exactly once). Without it the caller
        keeps the memory alive.
    framework : str, optional
        The framework of the fragments' arrays (``"numpy"``, ``"torch"``,
        ``"cupy"``, ``"jax"``).

    Returns
    -------
    DistributedTensor

    Raises
    ------
    FragmentError
        Wrong count, a NULL, negative or non-int pointer, a missing fragment.
    LayoutError
        Explicit strides with a framework that cannot view memory (JAX).

    Notes
    -----
    How a fragment is represented:

    * dense layouts: the fragment's array is the memory as a C-contiguous
      array of the local shape;
    * explicit strides that one strided array can describe (at most one
      block per mode, or ``block_strides == block * element_strides``): the
      array is that strided view;
    * padded blocks (blocks apart in memory): no single array describes the
      fragment; :attr:`Fragment.memory` is the whole memory as a flat array
      (``span`` elements) and :meth:`Fragment.block_views` gives one strided
      view per owned block. Such fragments take part in gather, scatter and
      redistribution; ``Fragment.array`` and ``__dlpack__`` raise.

    Memory on host devices is handed over as DLPack device ``cpu``; a JAX
    fragment lands on its slot's JAX CPU device.
    """

    layout = _check_layout(layout, "from_pointers")
    name = canonical(dtype)
    adapter = get_adapter(framework)
    rank_of = _ranks(layout)
    slots = _slots(layout, pointers, rank_of, "from_pointers")
    me = process_rank()
    if layout.element_strides is not None and not adapter.traits.can_view:
        raise LayoutError(
            f"from_pointers: {adapter.name} cannot view memory with the layout's explicit strides "
            f"(element_strides={layout.element_strides}, block_strides={layout.block_strides}); "
            f"use one of {', '.join(viewing_frameworks())}"
        )
    frags: list[Fragment] = []
    for frag, value, rank in zip(layout.fragments, slots, rank_of):
        i = frag.index
        if rank != me:
            if value is not None:
                raise FragmentError(f"fragment {i} belongs to process {rank}, not this one ({me}): give no pointer")
            frags.append(Fragment.remote(frag, rank))
            continue
        if not adapter.supports(frag.device):
            raise DeviceError(f"from_pointers: {adapter.name} cannot hold fragment {i} on {frag.device}")
        if frag.size == 0:
            frags.append(Fragment.of_array(frag, adapter.empty(frag.shape, name, frag.device), adapter.name, rank=rank))
            continue
        if value is None:
            raise FragmentError(f"fragment {i} (on {frag.device}) belongs to this process but no pointer was given")
        ptr = _pointer(value, i)
        dev = Device("cpu", 0) if frag.device.kind == "cpu" else frag.device
        if layout.element_strides is None or frag.is_strided:
            strides = None if layout.element_strides is None else frag.strides
            exporter = DLPackExporter(ptr, frag.shape, name, dev, strides=strides, owner=owner)
            array = adapter.from_dlpack(exporter, device=frag.device, copy=False)
            frags.append(Fragment.of_array(frag, array, adapter.name, rank=rank))
        else:
            exporter = DLPackExporter(ptr, (frag.span,), name, dev, owner=owner)
            memory = adapter.from_dlpack(exporter, device=frag.device, copy=False)
            frags.append(Fragment.of_memory(frag, memory, adapter.name, rank=rank))
    return TensorBase._create(layout, frags, name)


# -- allocation ---------------------------------------------------------------------
_UNINITIALISED = object()  # empty(): no fill value at all (None is a user's missing value)
_BYTE_LIMIT = 1 << 63  # no allocation reaches 2**63 bytes (sizes are ptrdiff_t)


def _check_bytes(layout: "Layout", name: str, what: str) -> None:
    """Refuse fragments no memory can hold, before a framework is asked to."""
    itemsize = info(name).itemsize
    strided = layout.element_strides is not None
    for frag in layout.fragments:
        count = frag.span if strided else frag.size
        if count * itemsize >= _BYTE_LIMIT:
            raise LayoutError(
                f"{what}: fragment {frag.index} of layout shape {layout.shape} needs {count} elements of "
                f"{name} = {count * itemsize} bytes, 2**63 or more, which no memory can hold"
            )


def _allocate(layout: Any, dtype: Any, framework: str, fill: Any, what: str) -> DistributedTensor:
    layout = _check_layout(layout, what)
    name = canonical(dtype)
    if fill is not _UNINITIALISED:
        fill = check_scalar(fill, name, f"{what}: fill_value")
    _check_bytes(layout, name, what)
    adapter = get_adapter(framework)
    rank_of = _ranks(layout)
    me = process_rank()
    strided = layout.element_strides is not None
    if strided and not adapter.traits.can_view:
        raise LayoutError(
            f"{what}: {adapter.name} cannot hold fragments with explicit strides "
            f"(element_strides={layout.element_strides}); use one of {', '.join(viewing_frameworks())}, or a dense layout"
        )
    mine = [f.device for f, r in zip(layout.fragments, rank_of) if r == me]
    missing = [str(d) for d in dict.fromkeys(mine) if not adapter.supports(d)]
    if missing:
        raise DeviceError(f"{what}: {adapter.name} cannot hold arrays on {', '.join(missing)}{unreachable_hint(missing)}")
    frags = []
    for frag, rank in zip(layout.fragments, rank_of):
        if rank != me:
            frags.append(Fragment.remote(frag, rank))
            continue
        shape = (frag.span,) if strided else frag.shape
        if fill is _UNINITIALISED:
            base = adapter.empty(tuple(shape), name, frag.device)
        else:
            base = adapter.full(tuple(shape), fill, name, frag.device)
        if not strided:
            frags.append(Fragment.of_array(frag, base, adapter.name, rank=rank))
        elif frag.is_strided:
            view = adapter.as_strided(base, frag.shape, frag.strides, 0)
            frags.append(Fragment.of_array(frag, view, adapter.name, rank=rank))
        else:
            frags.append(Fragment.of_memory(frag, base, adapter.name, rank=rank))
    return TensorBase._create(layout, frags, name)


def empty(layout: "Layout", dtype: Any = "float32", framework: str = DEFAULT_FRAMEWORK) -> DistributedTensor:
    """A tensor of ``layout`` with uninitialised fragments of ``framework`` on their devices.

    With explicit layout strides each fragment's memory holds ``span``
    elements (see :func:`from_pointers` for how padded fragments look).
    JAX has no uninitialised arrays; its fragments are zeros.
    """
    return _allocate(layout, dtype, framework, _UNINITIALISED, "empty")


def full(layout: "Layout", fill_value: Any, dtype: Any = "float32", framework: str = DEFAULT_FRAMEWORK) -> DistributedTensor:
    """A tensor of ``layout`` filled with ``fill_value`` (see :func:`empty`).

    Raises
    ------
    TypeError
        When ``fill_value`` is ``None`` or not a number.
    DtypeRangeError
        When ``dtype`` cannot represent ``fill_value`` (``300`` for int8, ``1e300``
        for float32); a :class:`~dlmg.errors.DtypeError` and a ``ValueError``.
    LayoutError
        When a fragment would need ``2**63`` bytes or more.
    """
    return _allocate(layout, dtype, framework, fill_value, "full")


def scatter(array: Any, layout: "Layout", framework: str | None = None, *, root: int | None = None) -> DistributedTensor:
    """Spread a regular array of any framework over ``layout``'s fragments (a copy).

    Parameters
    ----------
    array : array
        NumPy, torch, JAX, CuPy or any DLPack producer, of the layout's shape,
        any strides. Across processes only process ``root`` passes it; the
        others pass ``None``.
    layout : Layout
    framework : str, optional
        The framework of the fragments; by default the array's own, which
        must support every device of the layout.
    root : int, optional
        Across processes (after :func:`dlmg.distributed.init`): the rank
        whose array is spread (0 by default); each process receives its own
        fragments.

    Returns
    -------
    DistributedTensor
        Fragment ``i`` holds the elements of the blocks it owns, in
        increasing global order, on its device.
    """
    return _scatter(array, layout, framework, root)
