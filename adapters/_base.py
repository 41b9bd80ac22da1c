"""The interface every framework adapter implements: the whole contract.

An adapter holds only what differs between frameworks: recognising arrays,
devices, allocation, DLPack import and export quirks, strided views, streams.
Math goes through the framework's array-API namespace (:meth:`Adapter.namespace`).

Everything dlmg's core asks of a framework is declared here, once: methods
that every framework must answer raise ``NotImplementedError``; the others
have the default that is right for a simple, synchronous, host-or-device
framework. The core never probes an adapter with ``getattr``/``hasattr`` and
never tests a framework's name; :func:`dlmg.testing.check_adapter` checks an
adapter against this contract.
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from functools import partial
from contextlib import AbstractContextManager
from typing import Any, ClassVar, NamedTuple, Sequence

from dlmg.device import Device
from dlmg.dlpack.bounds import ranges_meet, strided_extent
from dlmg.dtypes import canonical, info
from dlmg.errors import DtypeError, FrameworkNotInstalledError

__all__ = ["Adapter", "ArrayInfo"]


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


class Adapter:
    """Base class of the framework adapters.

    Subclasses set the class attributes and implement the methods that raise
    ``NotImplementedError`` here. Instances are stateless singletons obtained
    through :func:`dlmg.registry.get_adapter`.

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
    mutable : bool
        Whether arrays can be written in place (``False`` for JAX).
    can_view : bool
        Whether :meth:`as_strided` views memory with any strides and
        :meth:`copy_into` writes through such views: such a framework can run
        the copies of a redistribution itself. Frameworks without it (JAX)
        have their fragments written by one that has, then handed over.
    stream_ordered : bool
        Whether the framework orders its own work on each device's current
        stream, so that copies among its arrays on one device need no
        host-side wait.
    orders_across_devices : bool
        Whether that ordering also holds for copies between two devices (a
        device-to-device copy waits for the source device's stream).
    synchronizes_device : bool
        Whether :meth:`synchronize_array` waits for the array's whole device,
        so one wait per device is enough.
    done_on_return : bool
        Whether host work is complete when the framework's call returns, so
        host arrays never need a wait.
    distinct_host_devices : bool
        Whether the framework tells host devices apart (``cpu:0``,
        ``cpu:1``...), so that an array on ``cpu:0`` does not fit a slot on
        ``cpu:1``.
    dlpack_dtypes : frozenset of str or None
        The dlmg dtypes the framework takes in and hands out through DLPack;
        ``None`` for all of them.
    negative_strides : bool
        Whether arrays can have negative strides (``False`` where the
        framework has no such views, as JAX: importers then need not ask).
    tensor_protocols : dict of str to callable
        Methods :class:`~dlmg.DistributedTensor` carries for this framework's
        own protocols (NumPy's ``__array_ufunc__``, JAX's ``__jax_array__``...),
        so that the framework's functions meet dlmg's answer -- run dlmg's
        function, or refuse saying what to call -- instead of failing with a
        message of their own. Installed when dlmg is imported (built-in
        adapters) or registered.
    """

    name: ClassVar[str] = ""
    modules: ClassVar[tuple[str, ...]] = ()
    package: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""
    mutable: ClassVar[bool] = True
    can_view: ClassVar[bool] = False
    stream_ordered: ClassVar[bool] = False
    orders_across_devices: ClassVar[bool] = False
    synchronizes_device: ClassVar[bool] = False
    done_on_return: ClassVar[bool] = False
    distinct_host_devices: ClassVar[bool] = False
    dlpack_dtypes: ClassVar[frozenset[str] | None] = None
    negative_strides: ClassVar[bool] = True
    tensor_protocols: ClassVar[dict[str, Any]] = {}

    # -- the framework itself -------------------------------------------------
    def available(self) -> bool:
        """Whether the framework can be imported."""
        try:
            self.module()
        except FrameworkNotInstalledError:
            return False
        return True

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

    def in_use(self) -> bool:
        """Whether the framework has been imported (it may have queued work); imports nothing."""
        return bool(self.package) and self.package in sys.modules

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

    def holds_dtype(self, dtype: str) -> bool:
        """Whether the framework holds ``dtype`` as it is now (:meth:`check_dtype` passes)."""
        try:
            self.check_dtype(dtype)
        except DtypeError:
            return False
        return True

    def carries(self, dtype: str) -> bool:
        """Whether ``dtype`` can go in and out of the framework through DLPack."""
        return self.dlpack_dtypes is None or dtype in self.dlpack_dtypes

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
        importer must copy or refuse). The default reads :meth:`strides_of`, where
        :attr:`negative_strides` says the framework's arrays can have them."""
        if not self.negative_strides:
            return False
        shape, strides = self.shape_of(array), self.strides_of(array)
        return math.prod(shape) > 0 and any(s < 0 for n, s in zip(shape, strides) if n > 1)

    def data_ptr(self, array: Any) -> int:
        """The address of ``array``'s first element."""
        raise NotImplementedError

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

    def dlpack_device_on(self, device: Device) -> tuple[int, int] | None:
        """What ``__dlpack_device__`` of every array of this framework on
        ``device`` (a device other than the host) reports, or ``None`` where it
        depends on the array (the default: the array is asked, once per
        fragment). Declared where the answer follows from the device alone, so
        that a fragment knows it from the moment it is made: asking some
        frameworks' arrays costs more than a DLPack export."""
        return None

    def tracks_gradients(self, array: Any) -> bool:
        """Whether an autograd graph records ``array`` (so it must not be
        overwritten behind the framework's back)."""
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

    def importer(
        self, source: "Adapter", dtype: str, shape: tuple[int, ...]
    ) -> Callable[[Any, Device], Any] | None:
        """A quicker :meth:`from_dlpack` for many arrays known alike, or ``None``.

        ``take_in(array, device)`` imports an array of ``source``, of ``dtype``,
        no larger than ``shape`` along any axis and already on ``device`` (the
        fragments of one tensor), as ``from_dlpack(array, device=device)``
        would, sharing the array's memory (a framework whose arrays cannot be
        written may copy where its own import does, as JAX does with unaligned
        host buffers). What holds for all of them (the dtype, the size) is
        checked here, once. Where it cannot take an array as it is, it returns ``None`` or
        raises, and the caller asks :meth:`from_dlpack`, which copies or says
        why not. By default ``None``: every array goes through
        :meth:`from_dlpack`.
        """
        return None

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

    def copy_many(self, dsts: Sequence[Any], srcs: Sequence[Any]) -> None:
        """Write each ``srcs[i]`` into the view ``dsts[i]`` (pairs as for :meth:`copy_into`;
        the destinations do not overlap).

        The default calls :meth:`copy_into` pair by pair. A framework may
        issue the copies together instead (one batched launch, or its copy
        engine directly), as long as they are queued in order on its current
        stream with no host-side wait.
        """
        for dst, src in zip(dsts, srcs):
            self.copy_into(dst, src)

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """Write the arrays ``srcs`` one after another along their first axis into
        ``dst``, a C-contiguous view of exactly their stacked shape: every piece
        has ``dst``'s trailing extents, and any strides. A gather of slabs is
        one (1-D pieces), and so are the bands of rows that row slabs give a
        column slab (2-D strided pieces).

        The default copies each into its view of ``dst`` through
        :meth:`copy_many`; a framework with a concatenation into a given
        output (``torch.cat(out=)``) does it as one call. Queued like
        :meth:`copy_many`: in order on the current stream, no host-side wait.
        """
        views, offset = [], 0
        strides = self.strides_of(dst)
        for src in srcs:
            shape = self.shape_of(src)
            views.append(self.as_strided(dst, shape, strides, offset))
            offset += math.prod(shape)
        self.copy_many(views, srcs)

    def assemble(self, pieces: Sequence[tuple[Any, int, int]], shape: tuple[int, ...], device: Device) -> Any:
        """A new array of ``shape`` on ``device`` whose elements, in C order, are the
        ranges ``(array, start, size)`` of ``pieces`` one after another (elements
        ``start`` to ``start + size`` of each C-ordered array), made by the
        framework itself; ``None`` where it does not (the default).

        What a gather of slabs is, for a framework without views: dlmg otherwise
        copies the ranges into a staging buffer of a framework with views and
        hands that over. All arrays are this framework's, on ``device``.
        """
        return None

    def split(self, array: Any, pieces: Sequence[tuple[int, int, tuple[int, ...]]]) -> list[Any] | None:
        """New arrays, one per ``(start, size, shape)`` of ``pieces``: elements
        ``start`` to ``start + size`` of the C-ordered ``array``, in ``shape``, on
        ``array``'s device, made by the framework itself; ``None`` where it does
        not (the default). What a scatter into slabs is (see :meth:`assemble`).
        """
        return None

    def compose(self, arrays: Sequence[Any], stacked: tuple[int, ...], axes: tuple[int, ...],
                shape: tuple[int, ...], device: Device) -> Any:
        """A new array of ``shape`` on ``device``: ``arrays`` (of one shape) stacked,
        reshaped to ``stacked``, their axes permuted by ``axes`` (as
        ``transpose``) and reshaped to ``shape``; ``None`` where the framework
        does not offer it (the default).

        What a gather of a regular block-cyclic grid is, for a framework without
        views (see :meth:`assemble`).
        """
        return None

    def decompose(self, array: Any, shape: tuple[int, ...], axes: tuple[int, ...], count: int,
                  part: tuple[int, ...]) -> list[Any] | None:
        """New arrays, the inverse of :meth:`compose`: ``array`` reshaped to
        ``shape``, its axes permuted by ``axes``, reshaped to ``(count, *part)``
        and cut along the first axis; ``None`` where the framework does not offer
        it (the default)."""
        return None

    def retile(self, arrays: Sequence[Any], targets: Sequence[tuple[tuple[int, ...], Any]],
               device: Device) -> list[Any] | None:
        """New arrays on ``device``, one per ``(shape, tiling)`` of ``targets``, made by
        the framework itself from ``arrays`` (C-ordered, all on ``device``);
        ``None`` where it does not (the default).

        A tiling is ``("slice", i, dims, starts, extents, box)``: ``arrays[i]``'s
        elements in C order reshaped to ``dims``, then ``starts[k]:starts[k] +
        extents[k]`` along each axis ``k``, reshaped to ``box``; or ``("concat",
        axis, children)``: the children's arrays concatenated along ``axis``. The
        whole tiling has the target's ``shape``. What a redistribution between
        layouts on one device is, for a framework without views: one pass over
        the bytes, where a gather (:meth:`assemble`, :meth:`compose`) followed by
        a scatter makes two.
        """
        return None

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

    def exporter(self, array: Any) -> Callable[..., Any]:
        """The call exporting ``array`` (keywords as ``__dlpack__``), kept by a
        fragment for its later exports: :meth:`export` bound to ``array`` (the
        default), or the array's own ``__dlpack__`` where :meth:`export` adds
        nothing for it. Checks that do not change over the array's life (its
        dtype) may run here once; what may change (the current device) must
        stay in the call."""
        return partial(self.export, array)

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
        if not self.mutable:
            return False
        return ranges_meet(self.memory_range(a), self.memory_range(b))

    def allocation_of(self, array: Any) -> tuple[Any, int] | None:
        """The one-dimensional C-contiguous array of this framework whose memory
        ``array`` views, and how many elements into it ``array``'s first element
        lies; ``None`` where ``array`` is no such view (the default).

        dlmg carves the dense fragments of one GPU out of one allocation;
        reading several such fragments through the allocation lets one copy
        move a whole redistribution. Answer only where the framework's own
        record of the view says so (``None`` costs a copy per fragment,
        a wrong answer reads the wrong memory).
        """
        return None

    def memory_range(self, array: Any) -> tuple[int, int] | None:
        """The bytes ``[start, end)`` that ``array``'s elements span, from its data
        pointer, shape and strides (``None`` when it has no elements)."""
        shape = self.shape_of(array)
        if not all(shape):
            return None
        itemsize = info(self.dtype_of(array)).itemsize
        start = self.data_ptr(array)
        low, high = strided_extent(shape, self.strides_of(array))
        return start + low * itemsize, start + (high + 1) * itemsize

    # -- compiling --------------------------------------------------------------
    #: Whether :meth:`compile_elementwise` can trace a function over a list of
    #: arrays (one compiled call for all of a device's fragments), as ``jax.jit``
    #: and ``torch.compile`` do; ``cupy.fuse`` takes arrays only.
    batches_elementwise: bool = False
    #: Whether single operators (``a * b`` on a tensor) may run as one compiled
    #: call per device over all of its fragments, too: for frameworks whose
    #: per-operation host cost exceeds one compiled call's and whose compiler
    #: builds a call in milliseconds, once per shape (JAX). Needs
    #: :attr:`batches_elementwise`.
    batches_operators: bool = False

    #: The arithmetic operators :meth:`list_operator` may be asked for.
    LIST_OPERATORS = ("add", "subtract", "multiply", "divide", "pow", "floor_divide", "remainder")

    def list_operator(self, name: str, in_place: bool = False) -> Callable[..., Any] | None:
        """One call applying an arithmetic operator to lists of this framework's
        arrays at once, or ``None`` where the framework has none (the default).

        Parameters
        ----------
        name : str
            One of :attr:`LIST_OPERATORS`.
        in_place : bool
            Write each result into the left array (the ``x += y`` form).

        Returns
        -------
        callable or None
            ``call(xs, ys)`` with two lists of arrays of equal shapes pair by
            pair, or ``call(xs, scalar)`` with a Python scalar: the list of
            ``xs[i] <op> ys[i]`` (in place: ``None``, ``xs`` written). The
            results, their dtypes and the errors raised must be those of the
            operator applied pair by pair; what it saves is the host work of
            one call per array (torch's ``_foreach_*`` launch one kernel for
            many arrays on a GPU). Callers fall back to the pair-by-pair
            operator for arrays that record gradients, and use list
            operations only where every fragment is of one framework. In
            place, a failure may carry the position of the pair that failed
            as the exception's ``list_position`` (the arrays before it are
            written), which the error then names; without it, the first.
        """
        return None

    def compile_elementwise(self, fn: Callable[..., Any], device: Device) -> tuple[Callable[..., Any], str]:
        """A compiled form of an elementwise function for this framework's arrays on ``device``.

        Parameters
        ----------
        fn : callable
            ``fn(xp, *args)``: the work on one fragment, given an array-API
            namespace ``xp`` and the fragment's arrays (and Python scalars).
        device : Device
            Where the arrays live.

        Returns
        -------
        kernel : callable
            ``kernel(*args)`` returns what ``fn(xp, *args)`` returns. A compiler
            may trace ``fn`` once and specialise on the arguments' shapes and
            dtypes; callers keep one kernel per (function, dtype, shape, device).
        compiler : str
            What compiles it (``"jax.jit"``, ``"cupy.fuse"``, ...); the default
            runs ``fn`` as it is: ``"eager"``.
        """
        xp = self.namespace()

        def eager(*args: Any) -> Any:
            return fn(xp, *args)

        return eager, "eager"

    # -- contractions ------------------------------------------------------
    def einsum(self, subscripts: str, *arrays: Any) -> Any:
        """``einsum(subscripts, *arrays)`` in this framework, on the arrays' device.

        ``subscripts`` is explicit (``"ij,jk->ik"``, letters ``a-zA-Z`` only)
        and the arrays share one dtype. By default the ``einsum`` that the
        framework's :meth:`namespace` carries (NumPy, torch, ``jax.numpy`` and
        CuPy all have one, though the array API standard names none); a
        framework without one overrides this.
        """
        return self.namespace().einsum(subscripts, *arrays)
