"""The NumPy adapter: host arrays.

NumPy arrays live in the one host memory, so they fit any ``cpu`` slot of a
layout and are reported on ``cpu:0``. NumPy cannot take in or hand out
bfloat16 (nor the float8/float6/float4 types) through DLPack even with
ml_dtypes installed; dlmg raises :class:`~dlmg.errors.DtypeError` for those
rather than failing deep inside NumPy.
"""

from __future__ import annotations

import ctypes
import functools
import math
import sys
from operator import attrgetter
from typing import Any, Callable

from dlmg.device import Device
from dlmg.dtypes import canonical
from dlmg.errors import DeviceError, DLPackError, DtypeError, LayoutError

from ._base import ProtocolHook, Traits
from ._common import (
    NUMPY_DLPACK_DTYPES,
    BaseAdapter,
    UnsupportedDtypeError,
    source_of,
    call_dlpack,
    check_copy,
    describe_producer,
    element_strides,
    import_producer,
    runs_backwards_by_byte_strides,
    other_known_framework,
    OPERATORS,
    pair_by_pair,
)
from .capabilities import ListOperators, QuickExport, QuickImport

__all__ = ["NumpyAdapter"]


def _interface_address(array: Any) -> int:
    return int(array.__array_interface__["data"][0])


def _struct_reader(offset: int) -> Callable[[Any], int]:
    """A reader of the pointer-sized field ``offset`` bytes into an ndarray's object
    (CPython only: there ``id()`` is the object's address). Objects that are not
    ndarrays (a subclass adapter's arrays may be other objects) go through
    ``__array_interface__``: their struct is not NumPy's."""
    import numpy as np

    ndarray = np.ndarray
    field = ctypes.c_void_p.from_address

    def struct_address(array: Any) -> int:
        if type(array) is ndarray or isinstance(array, ndarray):
            return field(id(array) + offset).value or 0
        return _interface_address(array)

    return struct_address


def _agrees_on_probes(reader: Callable[[Any], int]) -> bool:
    """Whether ``reader`` gives ``__array_interface__``'s address for probe arrays
    (an owner, an offset view, a zero-size array, a reversed strided view, a
    read-only big-endian one): a wrong offset reads a count, a pointer to the
    shape or the object's type instead, and fails here."""
    import numpy as np

    whole = np.arange(12.0).reshape(3, 4)
    frozen = np.arange(6, dtype=">i4")[1:]
    frozen.flags.writeable = False
    probes = (whole, whole[1:, 2:], np.empty(0, np.int8), np.ones(5, np.float32)[::-2], frozen)
    return all(reader(a) == _interface_address(a) for a in probes)


# Kept: choosing the reader probes five arrays, and the reader is asked for every
# fragment before each copy, where a look-up costs almost nothing; one answer.
@functools.lru_cache(maxsize=1)
def _address_reader() -> Callable[[Any], int]:
    """How to read an ndarray's data address: on CPython from its ``data`` field,
    the first after the object header in NumPy's public ``PyArrayObject`` struct (the
    same in NumPy 1 and 2; the header's size is ``object.__basicsize__``, which
    counts the extra fields of debug and free-threaded builds), when that agrees
    with ``__array_interface__`` for the probe arrays; else through
    ``__array_interface__``."""
    if sys.implementation.name == "cpython":
        struct_address = _struct_reader(object.__basicsize__)
        if _agrees_on_probes(struct_address):
            return struct_address
    return _interface_address


# Kept: the copy engine makes a view of every copy's destination each call; looked up
# here, ``numpy.ndarray`` is found faster than through the adapter's import; one answer.
@functools.lru_cache(maxsize=1)
def _ndarray() -> Any:
    """``numpy.ndarray``, the constructor of :meth:`NumpyAdapter.as_strided`'s views."""
    import numpy as np

    return np.ndarray


#: Host allocations start on this boundary (the strictest any framework asks for: JAX's).
_ALIGNMENT = 64
#: ... from this size on.
_ALIGN_FROM = 1 << 16


class _InterfaceView:
    """Carries an ``__array_interface__`` to ``numpy.asarray`` and keeps the
    array whose memory it describes alive (as the view's ``base``)."""

    __slots__ = ("__array_interface__", "base")

    def __init__(self, interface: dict, base: Any) -> None:
        self.__array_interface__ = interface
        self.base = base

_HOST = Device("cpu", 0)


def _bf16_error(what: str, dtype: str) -> UnsupportedDtypeError:
    return UnsupportedDtypeError(
        f"NumPy cannot {what} {dtype} arrays through DLPack (not even with ml_dtypes, which "
        f"only gives NumPy the {dtype} type itself); keep this data in torch, JAX or CuPy, "
        f"or reinterpret it as a same-size integer type before the exchange"
    )


@functools.lru_cache(maxsize=128)
def _native_dtype_of(adapter: Any, dtype: str) -> Any:
    """:meth:`NumpyAdapter.native_dtype` of a dtype name, per adapter (a subclass may hold
    another NumPy-like package), asked for every allocation: worked out anew 0.6-1.4 us, remembered 0.07 us on the 2-core CPU."""
    return adapter._native_dtype(dtype)


@functools.lru_cache(maxsize=64)
def _exportable(dtype: Any) -> bool:
    """Whether NumPy dtype ``dtype`` travels through DLPack, asked per export: worked out anew 0.22 us, remembered 0.07 us on the 2-core CPU."""
    return canonical(dtype) in NUMPY_DLPACK_DTYPES


class NumpyAdapter(BaseAdapter, QuickImport, QuickExport, ListOperators):
    """Adapter for :mod:`numpy` arrays (host memory only)."""

    name = "numpy"
    modules = ("numpy",)
    package = "numpy"
    install_hint = "pip install numpy"
    traits = Traits(
        host_only=True,  # device_of: always the host
        can_view=True,
        done_on_return=True,  # host work is finished when the call returns
        dlpack_dtypes=NUMPY_DLPACK_DTYPES,
        # np.sqrt(dt), np.sum(dt, axis=0) run as dlmg's functions; np.ones(...) + dt says to scatter
        protocols=(ProtocolHook("__array_ufunc__", "ufunc"), ProtocolHook("__array_function__", "function")),
    )

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a NumPy ``ndarray`` (not a NumPy scalar), checked
        by type module first; NumPy is necessarily imported when it matches."""
        if type(array).__module__.partition(".")[0] not in self.modules:
            return False
        np = sys.modules.get("numpy")
        return np is not None and isinstance(array, np.ndarray)

    def from_scalar(self, obj: Any) -> Any:
        """A NumPy scalar (``np.float32(1)``) as a 0-d array; ``None`` for anything else."""
        np = sys.modules.get("numpy")
        if np is not None and isinstance(obj, np.generic):
            return np.asarray(obj)
        return None

    def _np(self) -> Any:
        """The numpy module (also for subclasses whose ``package`` is another one)."""
        return self._import("numpy")

    def namespace(self) -> Any:
        """``array_api_compat.numpy``."""
        return self._import("array_api_compat.numpy")

    def einsum(self, subscripts: str, *arrays: Any) -> Any:
        """NumPy's ``einsum`` with ``optimize=True``: products go to BLAS (through ``tensordot``)
        instead of NumPy's own loops, several times faster for a matrix product."""
        return self._np().einsum(subscripts, *arrays, optimize=True)

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """Always ``cpu:0``: NumPy arrays live in host memory."""
        return _HOST

    runs_backwards = runs_backwards_by_byte_strides

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """Strides in elements.

        Raises
        ------
        DLPackError
            When a byte stride is not a multiple of the item size.
        """
        return element_strides(array.strides, array.itemsize, "NumPy")

    def data_ptr(self, array: Any) -> int:
        """Address of the first element (``__array_interface__['data'][0]``)."""
        return int(array.__array_interface__["data"][0])

    def memory_signature(self, array: Any) -> Any:
        """Shape, byte strides and data address (see :meth:`Adapter.memory_signature`).

        The address is read from the array object's ``data`` field, the first
        after the object header in NumPy's public ``PyArrayObject`` struct (the
        same in NumPy 1 and 2), where CPython is checked to put it
        (:func:`_address_reader`); elsewhere from ``__array_interface__``: the copy
        engine checks every fragment before each gather or redistribution (figure
        in docs/performance-history.md)."""
        return (array.shape, array.strides, _address_reader()(array))

    def is_readonly(self, array: Any) -> bool:
        """Whether the array is not writeable."""
        return not array.flags.writeable

    def shares_memory(self, a: Any, b: Any) -> bool:
        """``numpy.may_share_memory`` (the bounds check, conservative and cheap).

        Two distinct arrays that both own their memory (allocated by NumPy for
        each alone) never share it: answered without asking NumPy (new results
        of operations)."""
        if a is b:
            return True
        if a.base is None and b.base is None and a.flags.owndata and b.flags.owndata:
            return False
        return bool(self._np().may_share_memory(a, b))

    def supports(self, device: Device) -> bool:
        """True for ``cpu`` devices (any index: one host memory)."""
        return device.kind == "cpu"

    def landing_device(self, device: Device) -> Device:
        """The host, always: NumPy holds host memory only (``cpu:k`` of the fragments kept)."""
        return device if device.kind == "cpu" else Device("cpu", 0)

    # -- making and moving ----------------------------------------------------
    def native_dtype(self, dtype: Any) -> Any:
        """The NumPy dtype of a dlmg dtype (bfloat16 and float8 types through ml_dtypes).

        Raises
        ------
        DtypeError
            When NumPy has no such type (ml_dtypes missing for bfloat16).
        """
        if isinstance(dtype, str):  # asked for every allocation (a tensor's DataType too): remembered per name
            return _native_dtype_of(self, dtype)
        return self._native_dtype(dtype)

    def _native_dtype(self, dtype: Any) -> Any:
        np = self._np()
        name = canonical(dtype)
        try:
            return np.dtype(name)
        except TypeError:
            pass
        try:
            import ml_dtypes
        except ImportError as exc:
            raise DtypeError(f"NumPy needs ml_dtypes for {name}: pip install ml_dtypes") from exc
        scalar = getattr(ml_dtypes, name.removesuffix("_x2"), None)
        if scalar is None or name.endswith("_x2"):
            raise DtypeError(f"NumPy has no element type {name!r}, not even through ml_dtypes")
        return np.dtype(scalar)

    def _check_device(self, device: Device | None) -> None:
        if device is not None and device.kind != "cpu":
            raise DeviceError(f"NumPy arrays live on the host (cpu); device {device} is not supported")

    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """``numpy.empty`` (``device`` must be a ``cpu`` device), 64-byte aligned.

        Aligned (from 64 KiB on) so that any framework takes the memory in
        without a copy (JAX copies host buffers that are not 64-byte aligned);
        NumPy itself aligns to 16 bytes only.

        Raises
        ------
        LayoutError
            For a shape NumPy cannot allocate (too many bytes, or extents
            whose running product overflows, even with a zero extent).
        """
        self._check_device(device)
        np = self._np()
        kind = np.dtype(self.native_dtype(dtype))
        nbytes = math.prod(shape) * kind.itemsize
        if nbytes < _ALIGN_FROM or nbytes >= sys.maxsize:
            # small buffers: a copy on import costs less than aligning them; negative or
            # overflowing shapes: NumPy's own call raises its own error
            try:
                return np.empty(shape, kind)
            except ValueError as exc:  # "array is too big", also for (2**62, 2**62, 0)
                raise LayoutError(
                    f"NumPy cannot allocate an array of shape {tuple(shape)} and dtype {dtype}: {exc}") from exc
        raw = np.empty(nbytes + _ALIGNMENT, dtype=np.uint8)
        start = -self.data_ptr(raw) % _ALIGNMENT
        return raw[start:start + nbytes].view(kind).reshape(shape)

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """``numpy.full`` (``device`` must be a ``cpu`` device)."""
        self._check_device(device)
        return self._np().full(tuple(shape), fill_value, dtype=self.native_dtype(dtype))

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """``numpy.from_dlpack`` with dlmg's checks.

        Zero-copy for host producers unless ``copy=True``. Read-only producers
        (NumPy, JAX) give read-only arrays.

        Raises
        ------
        DtypeError
            For bfloat16 and the float8/6/4 types, which NumPy's DLPack cannot carry.
        CopyRequiredError
            ``copy=False`` with a producer off the host.
        DeviceError
            ``device`` not a ``cpu`` device.
        """
        np = self._np()
        copy = check_copy(copy)
        self._check_device(device)
        if self.owns(obj):
            return obj.copy() if copy else obj
        known, inner = source_of(obj)
        src = describe_producer(obj) if known is None else known.describe(inner)
        if src.dtype not in NUMPY_DLPACK_DTYPES:
            raise _bf16_error("import", src.dtype)
        producer = import_producer(obj, known, inner)
        if not src.device.is_host:
            if copy is False:
                raise self._copy_required(f"can only import host memory and the producer is on {src.device}")
            try:
                return np.from_dlpack(producer, device="cpu", copy=True)
            except (TypeError, BufferError, ValueError, RuntimeError) as exc:
                raise DeviceError(
                    f"NumPy cannot import memory on {src.device} and the producer would not copy it "
                    f"to the host ({exc}); move it to the host first (its adapter's to_device)"
                ) from exc
        try:
            try:
                return np.from_dlpack(producer, copy=copy)
            except TypeError:  # NumPy < 2.1 has no copy=
                out = np.from_dlpack(producer)
                return out.copy() if copy else out
        except (RuntimeError, ValueError, BufferError) as exc:  # "Unsupported dtype", "array is too big"
            if isinstance(exc, DLPackError):
                raise
            raise DLPackError(
                f"NumPy could not import a {src.dtype} DLPack tensor of shape {src.shape}: {exc}"
            ) from exc

    def importer(self, source: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """Host arrays of another known framework, imported by ``numpy.from_dlpack``
        of the source's producer without :meth:`from_dlpack`'s description of
        each (see :meth:`Adapter.importer`). ``None`` for the types NumPy's
        DLPack cannot carry and for producers of no known framework."""
        if not other_known_framework(self, source) or dtype not in NUMPY_DLPACK_DTYPES:
            return None
        take, producer = self._np().from_dlpack, source.producer

        def take_in(array: Any, device: Device) -> Any:
            if device.kind != "cpu":
                return None
            return take(producer(array))

        return take_in

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` itself for a ``cpu`` device; other devices raise DeviceError."""
        self._check_device(device)
        return array

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A view with element ``strides`` starting ``offset`` elements from ``array``'s first one.

        Inside a C-contiguous array the view is made by the ``ndarray``
        constructor over ``array``'s buffer (bounds-checked);
        otherwise from ``array``'s ``__array_interface__`` in one step (what
        ``numpy.lib.stride_tricks.as_strided`` does, without its second call
        for the offset). The copy engine makes two views per copy. The view is
        writeable when ``array`` is, and keeps ``array`` alive.
        """
        itemsize = array.itemsize
        if offset >= 0 and array.flags.c_contiguous:
            make = _ndarray()
            try:  # the fast way, one constructor call, for views inside a contiguous array
                return make(shape, array.dtype, array, offset * itemsize, [s * itemsize for s in strides])
            except (TypeError, ValueError):  # a view reaching outside the array's own extent
                pass
        np = self._np()
        byte_strides = tuple(int(s) * itemsize for s in strides)
        interface = array.__array_interface__
        pointer, readonly = interface["data"]
        view = np.asarray(_InterfaceView({
            "shape": tuple(int(n) for n in shape),
            "strides": byte_strides,
            "typestr": interface["typestr"],
            "data": (pointer + int(offset) * itemsize, readonly),
            "version": 3,
        }, array))
        if view.dtype != array.dtype:  # ml_dtypes types travel as opaque void bytes
            view = view.view(array.dtype)
        return view

    def ascontiguous(self, array: Any) -> Any:
        """``numpy.ascontiguousarray``."""
        return self._np().ascontiguousarray(array)

    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)``; bfloat16 raises a clear DtypeError first."""
        self.producer(array)  # the dtype check
        try:  # NumPy >= 2.1 takes every keyword of the protocol
            return array.__dlpack__(**kwargs)
        except TypeError:  # an older NumPy: the keywords it knows, or a clear error
            return call_dlpack(array, **kwargs)

    def exporter(self, array: Any) -> Any:
        """``array.__dlpack__`` itself (after the dtype check) where NumPy takes every
        keyword of the protocol (2.1 and later): an export through a fragment is
        then one Python call more than NumPy's own, not three."""
        self.producer(array)
        return array.__dlpack__ if _takes_every_keyword(self._np()) else functools.partial(self.export, array)

    def exports_itself(self, dtype: Any) -> bool:
        """``True`` for the dtypes NumPy exports (not bfloat16 and the other ml_dtypes)
        where NumPy takes every keyword of the protocol (2.1 and later)."""
        try:
            return _exportable(dtype) and _takes_every_keyword(self._np())
        except (TypeError, DtypeError):  # an unhashable or unknown dtype object: the checked export
            return False

    def producer(self, array: Any) -> Any:
        """``array`` itself; raises a clear DtypeError first for bfloat16 and the
        other types NumPy cannot export (before another framework's import fails)."""
        if not _exportable(array.dtype):
            raise _bf16_error("export", self.dtype_of(array))
        return array

    def list_operator(self, name: str, in_place: bool = False) -> Any:
        """NumPy's operator pair by pair (all of :attr:`LIST_OPERATORS`, ``//`` and
        ``%`` too): NumPy has no list operations, but one
        call for all of a tensor's NumPy fragments spares dlmg's dispatch of
        each (on the 2-core CPU, ``a * b + c`` over 8 small fragments went from
        2.0 to 1.15 us per fragment per operator above NumPy's own loop). Results
        of 4 MiB and more are carved from one allocation (:func:`_carved`):
        8 MiB arrays each fault in 4 KiB pages, one large one in huge pages.
        Results, dtypes, strides and errors are the operator's; 0-d results,
        which NumPy returns as scalars, are made 0-d arrays again. ``None`` for
        other names."""
        return _list_call(self._np(), name, in_place)

    def copy_into(self, dst: Any, src: Any) -> None:
        """``dst[...] = src``; a large strided copy with its rows viewed as one element
        each on both sides (see :func:`_as_rows`)."""
        if dst.nbytes >= _SHORT_ROWS_FROM and dst.ndim > 1:
            dst, src = _as_rows(self._np(), dst, src)
        dst[...] = src


#: Strided copies move each row (the contiguous last mode) as one element from this size
#: on, and from the smaller one where rows are at most _SHORT_ROW bytes: NumPy's copy loop
#: pays per row, a copy of whole-row elements per element. Below these sizes making the
#: two views of whole rows costs more than it saves, except where rows are short.
_ROWS_FROM = 1 << 20
_SHORT_ROWS_FROM = 1 << 16
_SHORT_ROW = 64


def _as_rows(np: Any, dst: Any, src: Any) -> tuple[Any, Any]:
    """``dst`` and ``src`` viewed with each row of their last mode as one element (a
    void dtype of the row's bytes), where both have the same dtype and shape, that
    mode is contiguous on both sides and longer than one element, they are not both
    contiguous, and the copy is large enough for its rows (see :data:`_ROWS_FROM`);
    themselves otherwise. The copy moves the same bytes either way."""
    item = dst.itemsize
    row = dst.shape[-1] * item
    if (src.dtype != dst.dtype or src.shape != dst.shape or dst.strides[-1] != item or src.strides[-1] != item
            or row == item or (row > _SHORT_ROW and dst.nbytes < _ROWS_FROM)
            or (dst.flags.c_contiguous and src.flags.c_contiguous)):
        return dst, src
    rows = _row_type(np, row)
    try:
        return dst.view(rows), src.view(rows)
    except (TypeError, ValueError):  # a dtype NumPy will not view as bytes
        return dst, src


#: list_operator name -> the ufunc its operator calls on plain arrays; not ``pow``, whose
#: operator takes shortcuts for some exponents (``x ** 0.5`` is ``sqrt``)
_UFUNCS = {"add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "true_divide",
           "floor_divide": "floor_divide", "remainder": "remainder"}
#: From this many bytes of results on, a list operation carves them from one allocation. Each
#: array of a few MiB comes from the C heap in 4 KiB pages (glibc serves it from the heap once an
#: array that size was freed), one large one is mapped afresh with the huge pages NumPy asks for
#: from 4 MiB: far fewer page faults, so the carved operation runs as fast as NumPy's on one
#: array, where results made one by one are slower.
_CARVE_FROM = 1 << 22
_SCALARS = (int, float, bool, complex)
_SIZE = attrgetter("size")
#: The largest element of any result (complex128), in bytes.
_LARGEST_ITEM = 16


def _list_operation(np: Any, ops: tuple[Any, Any, Any], in_place: bool, xs: list[Any], ys: Any) -> list[Any] | None:
    """``xs[i] <op> ys[i]`` pair by pair (:func:`pair_by_pair`; results of
    :data:`_CARVE_FROM` bytes and more carved from one allocation, see
    :func:`_carved`), with NumPy's 0-d scalar results as 0-d arrays."""
    operation, inplace, ufunc = ops
    if in_place:
        return pair_by_pair(inplace, True, xs, ys)
    results = _carved(np, operation, ufunc, xs, ys) if ufunc is not None and len(xs) > 1 else None
    if results is None:
        results = pair_by_pair(operation, False, xs, ys)
    if results is not None and xs and xs[0].ndim == 0:
        ndarray = np.ndarray
        results = [r if isinstance(r, ndarray) else np.asarray(r) for r in results]
    return results


def _carved(np: Any, operation: Any, ufunc: str, xs: list[Any], ys: Any) -> list[Any] | None:
    """The results written by the ufunc into views of one new array (``out=``), where
    they take :data:`_CARVE_FROM` bytes or more and every operand is a plain
    C-contiguous ``ndarray`` of one dtype (a list of them of the same shapes, or a
    Python scalar): the operator's results, dtypes, strides and warnings, from one
    allocation. ``None`` (nothing computed) otherwise; also where the operator
    refuses the operands' types, which the caller's pair-by-pair call then raises."""
    count = sum(map(_SIZE, xs))  # (map: no generator frame; every operator on NumPy fragments asks)
    if count * _LARGEST_ITEM < _CARVE_FROM:  # small results: not worth asking more
        return None
    ndarray = np.ndarray
    scalar = type(ys) in _SCALARS
    if not scalar and not (isinstance(ys, list) and len(ys) == len(xs)):
        return None
    dtype = xs[0].dtype
    for k, x in enumerate(xs):
        if type(x) is not ndarray or x.dtype != dtype or not x.flags.c_contiguous:
            return None
        if not scalar:
            y = ys[k]
            if type(y) is not ndarray or y.dtype != ys[0].dtype or y.shape != x.shape or not y.flags.c_contiguous:
                return None
    try:  # the result's dtype, from empty operands: the operator's own type resolution
        result_type = operation(xs[0].reshape(-1)[:0], ys if scalar else ys[0].reshape(-1)[:0]).dtype
    except Exception:  # noqa: BLE001 - refused: raised again, pair by pair
        return None
    if count * result_type.itemsize < _CARVE_FROM:
        return None
    call = getattr(np, ufunc)
    whole = np.empty(count, result_type)
    results, at = [], 0
    for k, x in enumerate(xs):
        out = whole[at:at + x.size].reshape(x.shape)
        at += x.size
        call(x, ys if scalar else ys[k], out=out)
        results.append(out)
    return results


@functools.cache
def _takes_every_keyword(np: Any) -> bool:
    """Whether ``ndarray.__dlpack__`` takes ``stream``, ``max_version``, ``dl_device`` and
    ``copy`` (NumPy 2.1 and later), asked of an empty array once."""
    try:
        np.empty(0).__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=None)
    except TypeError:
        return False
    return True


@functools.lru_cache(maxsize=64)
def _row_type(np: Any, row: int) -> Any:
    """NumPy's dtype of one row of ``row`` bytes, asked per copy of rows: made anew 1.5-2.2 us, remembered 0.07 us on the 2-core CPU."""
    return np.dtype((np.void, row))


@functools.lru_cache(maxsize=32)
def _list_call(np: Any, name: str, in_place: bool) -> Any:
    """The call :meth:`NumpyAdapter.list_operator` hands out for ``name``, made once per
    operator (a ``partial`` each call would cost as much as the lookup); ``None`` for other names."""
    ops = OPERATORS.get(name)
    if ops is None:
        return None
    return functools.partial(_list_operation, np, (*ops, _UFUNCS.get(name)), in_place)
