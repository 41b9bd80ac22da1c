"""The interface every framework adapter implements: what every framework must answer.

An adapter holds only what differs between frameworks: recognising arrays,
devices, allocation, DLPack import and export quirks, strided views, streams.
Math goes through the framework's array-API namespace (:meth:`Adapter.namespace`).

What dlmg's core asks of every framework is declared here, once: methods that
every framework must answer raise ``NotImplementedError``; the others have the
default that is right for a simple, synchronous, host-or-device framework; the
facts about the framework are one frozen record, :class:`Traits`. The
optional fast paths (copies issued together, list operators, compilers,
rearrangements for frameworks without views, quicker imports and exports) are
capabilities an adapter declares among its bases
(:mod:`dlmg.adapters.capabilities`). The core never probes an adapter with
``getattr``/``hasattr`` and never tests a framework's name;
:func:`dlmg.testing.check_adapter` checks an adapter against this contract and
against every capability it declares.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from dlmg.device import Device
from dlmg.dlpack.bounds import ranges_meet, strided_extent
from dlmg.dtypes import NAMES, canonical, info
from dlmg.errors import DtypeError, FrameworkError, FrameworkNotInstalledError

__all__ = [
    "PROTOCOL_QUESTIONS", "Adapter", "AdapterCore", "ArrayInfo", "ProtocolHook", "Traits", "available", "carries",
    "holds_dtype", "in_use", "loose_traits", "memory_range",
]

class ArrayInfo(NamedTuple):
    """What dlmg knows about an array or DLPack producer without importing it.

    An immutable record (a named tuple: made for every import that needs a
    description, at a third of the cost of a frozen dataclass).

    Attributes
    ----------
    device : Device
        Where the data lives (for JAX the JAX device, so ``cpu:3`` is kept).
    dtype : str
        dlmg dtype name.
    shape : tuple of int
    strides : tuple of int
        Strides in elements (C-contiguous ones when the producer gave none).
    ptr : int
        Address of the first element (``data + byte_offset``).
    readonly : bool
        Whether the producer marks the memory read-only (or is immutable).
    framework : str
        The name of the adapter that described it (``"dlpack"`` for foreign
        producers).
    """

    device: Device
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr: int
    readonly: bool
    framework: str

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return info(self.dtype).itemsize


#: The ways a framework calls a protocol method (:attr:`ProtocolHook.asks`), each with
#: the call's signature: the questions ``dlmg._protocols`` answers.
PROTOCOL_QUESTIONS: dict[str, str] = {
    "ufunc": "NEP 13: (self, ufunc, method, *inputs, **kwargs), an elementwise function by name",
    "function": "NEP 18: (self, func, types, args, kwargs), a function of the namespace by name",
    "dispatch": "(cls, func, types, args=(), kwargs=None) on the class, for every function and "
                "method of the framework, its internal ones included",
    "array": "(self), asking for one array of the framework; its operators take an answer that "
             "is no array as NotImplemented, its conversions call the answer's __array__",
}


class ProtocolHook(NamedTuple):
    """One of the framework's own protocols through which its functions meet an object
    they do not know (a :class:`~dlmg.DistributedTensor`): a fact about the framework.

    What dlmg answers through it is dlmg's policy, built from this record by
    ``dlmg._protocols``; the adapter only says which method the framework calls
    and how it calls it.

    Attributes
    ----------
    name : str
        The method the framework calls on the object (``"__array_function__"``).
    asks : str
        How the framework calls it, a key of :data:`PROTOCOL_QUESTIONS`.
    hint : str
        What else to call, appended to dlmg's refusal (``"; for a sharded jax.Array
        on the same buffers: dt.to_jax()"``); may be empty.
    """

    name: str
    asks: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class Traits:
    """The facts about a framework that dlmg's core reads, as one record.

    Every adapter states its framework's facts in one place, the class
    attribute :attr:`Adapter.traits` (``traits = Traits(mutable=False,
    distinct_host_devices=True)``); the core reads ``adapter.traits.mutable``
    and never a loose attribute of the adapter. Each default is the answer
    that is right for a simple, synchronous host framework whose arrays can
    be written in place; every trait that lets dlmg skip work (a view, a
    wait, a question to each array) defaults to ``False``, so a framework
    that leaves it unset is asked more, never trusted more. Frozen: a fact
    does not change while dlmg runs.

    The element types a framework carries through DLPack (``dlpack_dtypes``)
    and the protocols through which its functions meet a distributed tensor
    (``protocols``) are facts of the same kind and live here too. So do the
    two facts about the framework's compiler (``batches_elementwise``,
    ``batches_operators``), which only an adapter that declares the
    :class:`~dlmg.adapters.capabilities.CompiledElementwise` capability may
    set: the capability is what the adapter can do, the traits say how far
    the core may lean on it.

    Attributes
    ----------
    mutable : bool
        Whether arrays can be written in place (``False`` for JAX).
    can_view : bool
        Whether :meth:`Adapter.as_strided` views memory with any strides and
        :meth:`Adapter.copy_into` writes through such views: such a framework
        can run the copies of a redistribution itself. Frameworks without it
        (JAX) have their fragments written by one that has, then handed over.
        Needs ``mutable``.
    stream_ordered : bool
        Whether the framework orders its own work on each device's current
        stream, so that copies among its arrays on one device need no
        host-side wait.
    orders_across_devices : bool
        Whether that ordering also holds for copies between two devices (a
        device-to-device copy waits for the source device's stream). Needs
        ``stream_ordered``.
    synchronizes_device : bool
        Whether :meth:`Adapter.synchronize_array` waits for the array's whole
        device, so one wait per device is enough.
    done_on_return : bool
        Whether host work is complete when the framework's call returns, so
        host arrays never need a wait: waiting for a tensor's fragments then
        asks no host array (a 64-fragment torch wait costs several times more
        asking each: the figure is in docs/performance-history.md).
    distinct_host_devices : bool
        Whether the framework tells host devices apart (``cpu:0``,
        ``cpu:1``...), so that an array on ``cpu:0`` does not fit a slot on
        ``cpu:1``.
    host_only : bool
        Whether every array of the framework lies in host memory, so that
        :meth:`Adapter.device_of` always answers ``cpu:0`` (NumPy): wrapping
        then asks no array its device (a third of :func:`dlmg.from_fragments`'
        time over 64 small arrays: the figure is in docs/performance-history.md).
    batches_elementwise : bool
        Whether :meth:`~dlmg.adapters.capabilities.CompiledElementwise.compile_elementwise`
        can trace a function over a list of arrays (one compiled call for all
        of a device's fragments), as ``jax.jit`` and ``torch.compile`` do;
        ``cupy.fuse`` takes arrays only. Needs the ``CompiledElementwise``
        capability.
    batches_operators : bool
        Whether single operators (``a * b`` on a tensor) may run as one
        compiled call per device over all of its fragments, too: for
        frameworks whose per-operation host cost exceeds one compiled call's
        and whose compiler builds a call in milliseconds, once per shape
        (JAX). Needs ``batches_elementwise``.
    dlpack_dtypes : frozenset of str or None
        The dlmg dtypes the framework takes in and hands out through DLPack;
        ``None`` for all of them (:func:`carries` answers from it).
    protocols : tuple of ProtocolHook
        The framework's own protocols through which its functions meet a
        distributed tensor (NumPy's ``__array_function__``, JAX's
        ``__jax_array__``...): facts, from which ``dlmg._protocols`` builds
        dlmg's answers. :class:`~dlmg.DistributedTensor` carries the methods
        that :data:`dlmg.registry.BUILTIN_PROTOCOLS` names; each finds its
        declaration when called (:func:`dlmg.registry.protocol_hook`), so
        importing dlmg loads no adapter.

    Raises
    ------
    FrameworkError
        When a flag is no bool, a trait needs another that is not set,
        ``dlpack_dtypes`` holds a name that is no dlmg dtype or ``protocols``
        holds something other than :class:`ProtocolHook` records.
    """

    mutable: bool = True
    can_view: bool = False
    stream_ordered: bool = False
    orders_across_devices: bool = False
    synchronizes_device: bool = False
    done_on_return: bool = False
    distinct_host_devices: bool = False
    host_only: bool = False
    batches_elementwise: bool = False
    batches_operators: bool = False
    dlpack_dtypes: frozenset[str] | None = None
    protocols: tuple[ProtocolHook, ...] = ()

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "bool" and not isinstance(value, bool):
                raise FrameworkError(f"Traits.{field.name} must be a bool, got {value!r}")
        for trait, needs in (("can_view", "mutable"), ("orders_across_devices", "stream_ordered"),
                             ("batches_operators", "batches_elementwise")):
            if getattr(self, trait) and not getattr(self, needs):
                raise FrameworkError(f"Traits.{trait}=True needs {needs}=True")
        kinds = self.dlpack_dtypes
        if kinds is not None and not (isinstance(kinds, frozenset) and kinds <= set(NAMES)):
            raise FrameworkError(f"Traits.dlpack_dtypes must be None or a frozenset of dlmg dtype names, got {kinds!r}")
        if not (isinstance(self.protocols, tuple) and all(isinstance(h, ProtocolHook) for h in self.protocols)):
            raise FrameworkError(f"Traits.protocols must be a tuple of ProtocolHook, got {self.protocols!r}")


_TRAIT_NAMES = frozenset(field.name for field in fields(Traits))



@runtime_checkable
class AdapterCore(Protocol):
    """What every framework must answer: the required part of the adapter contract.

    :class:`Adapter` declares these (its methods that raise
    ``NotImplementedError``) beside the framework's facts and the optional
    methods with defaults; an adapter is a subclass of :class:`Adapter` that
    implements at least these. Everything else a framework may do better is a
    capability (:mod:`dlmg.adapters.capabilities`).
    """

    name: str
    modules: tuple[str, ...]
    package: str
    install_hint: str

    def namespace(self) -> Any:
        """The framework's array-API namespace."""

    def device_of(self, array: Any) -> Device:
        """The device holding ``array``."""

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """``array``'s strides in elements."""

    def data_ptr(self, array: Any) -> int:
        """The address of ``array``'s first element."""

    def supports(self, device: Device) -> bool:
        """Whether the framework holds arrays on ``device``."""

    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """An uninitialised array on ``device``."""

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """An array filled with ``fill_value`` on ``device``."""

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """Any DLPack producer as the framework's array."""

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` on ``device``."""

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A view of ``array``'s memory."""

    def ascontiguous(self, array: Any) -> Any:
        """``array`` as a C-contiguous array."""


class Adapter:
    """Base class of the framework adapters.

    Required of every adapter (:class:`AdapterCore`): the attributes :attr:`name`,
    :attr:`modules`, :attr:`package` and :attr:`install_hint`, and the eleven
    methods that raise ``NotImplementedError`` here (:meth:`namespace`, :meth:`device_of`,
    :meth:`strides_of`, :meth:`data_ptr`, :meth:`supports`, :meth:`empty`,
    :meth:`full`, :meth:`from_dlpack`, :meth:`to_device`, :meth:`as_strided`,
    :meth:`ascontiguous`). The facts about the framework are one record,
    :attr:`traits`; everything else is an optional method, each with the default
    that is right for a simple, synchronous host framework; the optional fast
    paths are capabilities (:mod:`dlmg.adapters.capabilities`). The architecture
    page tables all four. Instances are stateless singletons obtained through
    :func:`dlmg.registry.get_adapter`.

    Attributes
    ----------
    name : str
        Framework name used throughout dlmg (``"torch"``).
    modules : tuple of str
        Top-level module names whose array types this adapter owns.
    package : str
        The module to import for the framework.
    install_hint : str
        What to install when the framework is missing.
    traits : Traits
        The facts about the framework (:class:`Traits`), stated once per
        adapter: ``traits = Traits(mutable=False)``. A subclass of another
        adapter that differs in one fact restates it with
        :func:`dataclasses.replace` of its base's record. A trait set as a
        loose class attribute of its own (``mutable = False``) is refused when
        the adapter registers (:func:`loose_traits`).
    """

    name: ClassVar[str] = ""
    modules: ClassVar[tuple[str, ...]] = ()
    package: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""
    traits: ClassVar[Traits] = Traits()

    # -- the framework itself -------------------------------------------------
    def module(self) -> Any:
        """Import and return the framework's module.

        Raises
        ------
        FrameworkNotInstalledError
            When it is not installed; the message says what to install.
        """
        try:
            return importlib.import_module(self.package)
        except ImportError as exc:
            raise FrameworkNotInstalledError(
                f"dlmg needs {self.package!r} for framework {self.name!r} but it is not "
                f"installed ({exc}); install it with: {self.install_hint}"
            ) from exc

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is an array of this framework (checked without importing it).

        The answer must follow from the array's type alone:
        :func:`dlmg.registry.adapter_for` remembers the types an adapter owns.
        """
        return type(array).__module__.partition(".")[0] in self.modules

    def from_scalar(self, obj: Any) -> Any:
        """A 0-d array for a scalar object of this framework that :meth:`owns`
        refuses (NumPy's ``np.float32(1)``); ``None`` when ``obj`` is none."""
        return None

    def namespace(self) -> Any:
        """The framework's array-API namespace (through array-api-compat where needed)."""
        raise NotImplementedError

    def index(self, array: Any, key: tuple[Any, ...]) -> Any:
        """``array[key]`` for a key dlmg has checked: in-bounds non-negative ints, slices
        of any non-zero step, ``None``, ``...`` and index arrays of this framework, with
        NumPy's meaning (a view where the framework has one). A framework without
        negative strides overrides this to reverse through a copy (``flip``)."""
        return array[key]

    def assign(self, array: Any, key: tuple[Any, ...], value: Any) -> Any:
        """``array[key] = value`` for a key as :meth:`index` takes and a value of
        ``array``'s dtype on its device that broadcasts to the selection. Returns
        ``None`` after writing in place, or the new array for an immutable framework
        (``array.at[key].set(value)``)."""
        if not self.traits.mutable:
            return array.at[key].set(value)
        array[key] = value
        return None

    def einsum(self, subscripts: str, *arrays: Any) -> Any:
        """``einsum(subscripts, *arrays)`` in this framework, on the arrays' device.

        ``subscripts`` is explicit (``"ij,jk->ik"``, letters ``a-zA-Z`` only)
        and the arrays share one dtype. By default the ``einsum`` that the
        framework's :meth:`namespace` carries (NumPy, torch, ``jax.numpy`` and
        CuPy all have one, though the array API standard names none); a
        framework without one overrides this.
        """
        return self.namespace().einsum(subscripts, *arrays)

    # -- dtypes and devices in the framework's own terms ---------------------
    def native_dtype(self, dtype: Any) -> Any:
        """The framework's dtype object for a dlmg dtype.

        By default the attribute of that name of :meth:`namespace`.

        Raises
        ------
        DtypeError
            When the framework has no such element type (or refuses it now).
        """
        name = canonical(dtype)
        found = getattr(self.namespace(), name, None)
        if found is None:
            raise DtypeError(f"{self.name} has no element type {name!r}")
        return found

    def check_dtype(self, dtype: str) -> None:
        """Refuse a dtype the framework cannot hold now without changing it.

        Raises
        ------
        DtypeError
            When it cannot (JAX narrows 64-bit types unless x64 is enabled).
        """
        return None

    def native_device(self, device: Device) -> Any:
        """The framework's device object for a dlmg device (``None`` where it has none).

        Raises
        ------
        DeviceError
            When the framework has no such device.
        """
        return None

    def device_from_native(self, obj: Any) -> Device | None:
        """The dlmg device of one of the framework's device objects; ``None``
        when ``obj`` is not one."""
        return None

    def device_context(self, device: Device) -> Callable[[], AbstractContextManager[Any]] | None:
        """A factory of the context manager that makes ``device`` current for
        work of this framework, or ``None`` when there is nothing to enter
        (host work, frameworks whose arrays carry their device)."""
        return None

    # -- describing arrays ----------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """The :class:`~dlmg.device.Device` holding ``array``."""
        raise NotImplementedError

    def dtype_of(self, array: Any) -> str:
        """The dlmg dtype name of ``array`` (by default read from ``array.dtype``)."""
        return canonical(array.dtype)

    def shape_of(self, array: Any) -> tuple[int, ...]:
        """The shape of ``array`` as a tuple of ints."""
        shape = array.shape
        if type(shape) is tuple:  # NumPy, JAX, CuPy: already a tuple of ints
            return shape
        return tuple(int(n) for n in shape)

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """The strides of ``array`` in elements."""
        raise NotImplementedError

    def runs_backwards(self, array: Any) -> bool:
        """Whether a mode of ``array`` longer than 1 has a negative stride (which an
        importer must copy or refuse). The default reads :meth:`strides_of`; a
        framework without views (JAX) answers ``False``."""
        shape, strides = self.shape_of(array), self.strides_of(array)
        return math.prod(shape) > 0 and any(s < 0 for n, s in zip(shape, strides) if n > 1)

    def data_ptr(self, array: Any) -> int:
        """The address of ``array``'s first element."""
        raise NotImplementedError

    def memory_signature(self, array: Any) -> Any:
        """``array``'s shape, strides and data address as one value, cheap to make
        and compare: equal signatures of one array at two moments mean that views
        made of it in between still show its memory. Only compared, never read
        (a framework may give strides in its own units). The default asks
        :meth:`shape_of`, :meth:`strides_of` and :meth:`data_ptr`; NumPy and torch
        answer from their own fields at a fraction of that, which every gather and
        redistribution pays per fragment (figures in docs/performance-history.md)."""
        return (self.shape_of(array), self.strides_of(array), self.data_ptr(array))

    def supports(self, device: Device) -> bool:
        """Whether this framework can hold arrays on ``device``."""
        raise NotImplementedError

    def is_readonly(self, array: Any) -> bool:
        """Whether ``array``'s memory must not be written (read-only or immutable)."""
        return False

    def describe(self, array: Any) -> ArrayInfo:
        """An :class:`ArrayInfo` of ``array``."""
        return ArrayInfo(
            self.device_of(array),
            self.dtype_of(array),
            self.shape_of(array),
            self.strides_of(array),
            self.data_ptr(array),
            self.is_readonly(array),
            self.name,
        )

    def dlpack_device(self, array: Any) -> tuple[int, int]:
        """``array.__dlpack_device__()`` as a plain ``(device_type, device_id)`` pair."""
        dev_type, dev_id = array.__dlpack_device__()
        return (int(dev_type), int(dev_id))

    def tracks_gradients(self, arrays: Sequence[Any]) -> bool:
        """Whether an autograd graph records any of ``arrays`` (so they must not be
        overwritten behind the framework's back): one call for all of an operand's
        fragments. ``False`` for a framework without autograd."""
        return False

    def landing_device(self, device: Device) -> Device:
        """Where a whole array gathered from fragments on ``device`` goes when no device is asked for.

        The fragments' own device when this framework can hold arrays there,
        otherwise the host: asking NumPy for an array of GPU fragments means
        host memory.
        """
        return device if self.supports(device) else Device("cpu", 0)

    # -- making and moving arrays ---------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """An uninitialised array on ``device``."""
        raise NotImplementedError

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """An array filled with ``fill_value`` on ``device``."""
        raise NotImplementedError

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """Take in any DLPack producer as this framework's array.

        Zero-copy when ``obj`` is on a device this framework can address and
        ``copy`` is not ``True``; ``copy=False`` raises
        :class:`~dlmg.errors.CopyRequiredError` where a copy would be needed.
        """
        raise NotImplementedError

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` on ``device`` (the same array when it already is there)."""
        raise NotImplementedError

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A view of ``array``'s memory with the given shape, element strides and
        element offset (relative to ``array``'s first element)."""
        raise NotImplementedError

    def ascontiguous(self, array: Any) -> Any:
        """``array`` as a C-contiguous array of this framework (a copy unless it is one)."""
        raise NotImplementedError

    def copy_into(self, dst: Any, src: Any) -> None:
        """Write ``src`` (same framework, same shape) into the view ``dst``."""
        dst[...] = src

    def export(
        self,
        array: Any,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of ``array``: ``array.__dlpack__(...)`` with the
        keywords that are not ``None``, and whatever the framework needs around
        it (a device context, a check)."""
        given = {"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy}
        return array.__dlpack__(**{k: v for k, v in given.items() if v is not None})

    def producer(self, array: Any) -> Any:
        """An object whose ``__dlpack__`` is :meth:`export` of ``array``.

        Hand this, rather than ``array``, to another framework's
        ``from_dlpack`` where the framework's own ``__dlpack__`` has a quirk
        (torch on a non-current CUDA device). By default ``array`` itself.
        """
        return array

    # -- streams --------------------------------------------------------------
    def synchronize(self, device: Device | None = None) -> None:
        """Wait until all work this framework queued on ``device`` (or all devices) is done."""
        return None

    def synchronize_array(self, array: Any) -> None:
        """Wait until the work producing ``array`` is done (by default: its device's)."""
        self.synchronize(self.device_of(array))

    # -- what the framework computes in and what its results share ------------
    def accumulate_dtype(self, dtype: str, op: str) -> str:
        """The element type reduction ``op`` (``"sum"``, ``"prod"``) runs in here
        when its result must have type ``dtype``.

        By default ``dtype`` itself. A framework that lacks the arithmetic for
        ``dtype`` names a type it has where the result is exact after a cast
        back to ``dtype`` (two's-complement int64 for unsigned sums and
        products: both wrap modulo ``2**64``); dlmg casts the result back.
        """
        return dtype

    def shares_memory(self, a: Any, b: Any) -> bool:
        """Whether arrays ``a`` and ``b`` of this framework may overlap in memory.

        The default compares the byte ranges their data pointers, shapes and
        strides span (conservative: interleaved views count as overlapping).
        Frameworks with immutable arrays answer False (nothing can be written
        through either).
        """
        if not self.traits.mutable:
            return False
        return ranges_meet(memory_range(self, a), memory_range(self, b))


# -- questions with one answer for every adapter, asked through the contract ------------
def available(adapter: Adapter) -> bool:
    """Whether ``adapter``'s framework can be imported."""
    try:
        adapter.module()
    except FrameworkNotInstalledError:
        return False
    return True


def in_use(adapter: Adapter) -> bool:
    """Whether ``adapter``'s framework has been imported (it may have queued work); imports nothing."""
    return bool(adapter.package) and adapter.package in sys.modules


def holds_dtype(adapter: Adapter, dtype: str) -> bool:
    """Whether ``adapter``'s framework holds ``dtype`` as it is now
    (:meth:`Adapter.check_dtype` passes)."""
    try:
        adapter.check_dtype(dtype)
    except DtypeError:
        return False
    return True


def carries(adapter: Adapter, dtype: str) -> bool:
    """Whether ``dtype`` can go in and out of ``adapter``'s framework through DLPack
    (:attr:`Traits.dlpack_dtypes`)."""
    kinds = adapter.traits.dlpack_dtypes
    return kinds is None or dtype in kinds


def loose_traits(adapter: Adapter) -> dict[str, Any]:
    """The traits ``adapter`` states outside its :attr:`Adapter.traits` record: members
    named like a field of :class:`Traits` on its class (or a base) or on itself, by
    name, with their values.

    dlmg's core reads only ``adapter.traits``, so such a member (``mutable = False``,
    the form of an older contract) would leave the framework described by the
    defaults; :func:`dlmg.registry.register` refuses an adapter that has one.
    """
    found: dict[str, Any] = {}
    for owner in (*reversed(type(adapter).__mro__), adapter):
        found.update((n, v) for n, v in vars(owner).items() if n in _TRAIT_NAMES)
    return found


def memory_range(adapter: Adapter, array: Any) -> tuple[int, int] | None:
    """The bytes ``[start, end)`` that ``array``'s elements span, from its data
    pointer, shape and strides (``None`` when it has no elements)."""
    shape = adapter.shape_of(array)
    if not all(shape):
        return None
    itemsize = info(adapter.dtype_of(array)).itemsize
    start = adapter.data_ptr(array)
    low, high = strided_extent(shape, adapter.strides_of(array))
    return start + low * itemsize, start + (high + 1) * itemsize
