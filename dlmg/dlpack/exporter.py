"""Exporting memory dlmg does not own as DLPack capsules.

:class:`DLPackExporter` wraps a raw address (with an explicit owner) or any
object with the buffer protocol, and implements ``__dlpack__`` and
``__dlpack_device__`` as the array API standard specifies, so that
``np.from_dlpack``, ``torch.from_dlpack`` and ``jax.numpy.from_dlpack`` take
the memory without a copy.

Lifetime. Each ``__dlpack__`` call allocates one managed tensor and files it,
with the owner, in the module registry ``_LIVE`` under its address (which is
also its ``manager_ctx``). The deleter, a ctypes callback, removes the entry,
so the owner is released exactly once, after the last consumer is done.

Capsules carry no destructor. A Python-level capsule destructor would run
inside ``PyCapsule`` deallocation, where a consumer that rejects the capsule
has typically already set its exception, and a ctypes callback cannot run
with an exception pending without replacing it by a ``SystemError``. Instead
the registry keeps a reference to every capsule it has not yet seen consumed
and reclaims one that is still unconsumed once nobody else refers to it; this
sweep runs on later exports, on garbage collection and in :func:`live_exports`.
"""

from __future__ import annotations

import ctypes
import gc
import numbers
import sys
from collections.abc import Sequence
from typing import Any

from ..device import Device, as_device
from ..dtypes import canonical, info
from ..errors import DLPackError
from .abi import (
    CAPSULE_NAME,
    CAPSULE_NAME_VERSIONED,
    DLPACK_DELETER,
    DLPACK_MAX_NDIM,
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    DLDeviceType,
    DLManagedTensor,
    DLManagedTensorVersioned,
)
from .capsule import capsule_name, new_capsule
from ._arguments import as_int, as_ints, check_stream, negotiate_version, memory_span
from .reader import c_contiguous_strides

__all__ = ["DLPackExporter", "live_exports"]

_API = ctypes.pythonapi
_PTR_SIZE = ctypes.sizeof(ctypes.c_void_p)
_MAX_ADDRESS = 2 ** (8 * _PTR_SIZE) - 1
_FRESH = (CAPSULE_NAME, CAPSULE_NAME_VERSIONED)
_HOST_ALIASES = frozenset({"cuda_host", "rocm_host"})  # pinned host memory the CPU reads in place

#: Registry (not a cache): what keeps exported memory alive until its consumer calls
#: the deleter: managed-tensor address (= manager_ctx) -> (managed struct, owner)
_LIVE: dict[int, tuple[Any, Any]] = {}
#: Registry: managed-tensor address -> capsule not yet seen consumed
_PENDING: dict[int, Any] = {}
_SWEEP = {"at": 32, "gc_hooked": False}

# --- C API bindings ----------------------------------------------------------

# Called with an exception possibly pending, so: no argtypes (their from_param
# conversion would be a checked Python call); arguments are prebuilt byrefs.
_PyErr_Fetch = _API._FuncPtr(("PyErr_Fetch", _API))
_PyErr_Fetch.restype = None
_PyErr_Restore = ctypes.PYFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(
    ("PyErr_Restore", _API)
)
_Py_IncRef = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", _API))


class _PyBuffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)),
        ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_STRIDES = 0x0018  # read-only acceptable, strided allowed
_PyObject_GetBuffer = ctypes.PYFUNCTYPE(
    ctypes.c_int, ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int
)(("PyObject_GetBuffer", _API))
_PyBuffer_Release = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_PyBuffer))(("PyBuffer_Release", _API))


# --- the deleter -------------------------------------------------------------


def _make_deleter() -> Any:
    slots = (ctypes.c_void_p * 3)()
    refs = tuple(ctypes.byref(slots, i * _PTR_SIZE) for i in range(3))

    # Everything is bound as a default so the callback still works while
    # module globals are being cleared at interpreter shutdown.
    def deleter(
        address,
        _live=_LIVE,
        _fetch=_PyErr_Fetch,
        _restore=_PyErr_Restore,
        _finalizing=sys.is_finalizing,
        _slots=slots,
        _r=refs,
        _vp=ctypes.c_void_p,
    ):
        # A consumer may free its array with an exception pending; park it
        # first, since any checked call would turn it into a SystemError.
        _fetch(_r[0], _r[1], _r[2])
        pending = (_slots[0], _slots[1], _slots[2])
        try:
            if not _finalizing():
                _live.pop(address, None)  # releases the owner, exactly once
        except BaseException:  # noqa: BLE001 - nothing may propagate into C
            pass
        if pending[0] is not None:
            # Re-raised here; ctypes reports it as unraisable, which beats losing it.
            _restore(_vp(pending[0]), _vp(pending[1]), _vp(pending[2]))

    callback = DLPACK_DELETER(deleter)
    _Py_IncRef(callback)  # never freed: consumers may call it during shutdown
    return callback


_DELETER = _make_deleter()


# --- reclaiming abandoned capsules -------------------------------------------


def _refcount_in(table: dict, key: int, _getrefcount=sys.getrefcount) -> int:
    obj = table.get(key)
    return 0 if obj is None else _getrefcount(obj)


# What _refcount_in reports for an object referenced by the table alone.
_ONLY_TABLE = _refcount_in({0: object()}, 0)


def _sweep() -> None:
    """Forget consumed capsules; release unconsumed ones nobody else holds."""
    for address in list(_PENDING):
        alone = _refcount_in(_PENDING, address) == _ONLY_TABLE
        capsule = _PENDING.get(address)
        if capsule is None:
            continue
        fresh = capsule_name(capsule) in _FRESH
        del capsule
        if not fresh:
            _PENDING.pop(address, None)  # consumed: the consumer calls the deleter
        elif alone:
            _PENDING.pop(address, None)
            _LIVE.pop(address, None)  # abandoned unconsumed: nobody can consume it now
    _SWEEP["at"] = max(32, 2 * len(_PENDING))


def _on_gc(phase: str, _info: dict, _pending=_PENDING, _finalizing=sys.is_finalizing) -> None:
    if phase == "stop" and _pending and not _finalizing():
        try:
            _sweep()
        except Exception:  # noqa: BLE001 - a gc callback must not raise
            pass


def live_exports() -> int:
    """How many managed tensors dlmg has exported and not yet had released.

    Counts capsules held unconsumed and tensors a consumer still uses; after
    every consumer is gone it returns to its previous value (useful for leak
    tests). Unconsumed capsules dropped since the last export are reclaimed
    first.

    Returns
    -------
    int
    """
    _sweep()
    return len(_LIVE)


# --- validation helpers ------------------------------------------------------


def _buffer_address(obj: Any) -> tuple[int, memoryview]:
    """Address of ``obj``'s buffer and a memoryview that pins the export."""
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(
            f"pointer_or_buffer must be an int address or support the buffer protocol; "
            f"got {type(obj).__name__}"
        ) from None
    raw = _PyBuffer()
    if _PyObject_GetBuffer(view, ctypes.byref(raw), _PyBUF_STRIDES) != 0:  # pragma: no cover
        raise TypeError(f"cannot read the buffer of {type(obj).__name__}")
    try:
        address = int(raw.buf or 0)
    finally:
        _PyBuffer_Release(ctypes.byref(raw))
    return address, view


# --- the exporter ------------------------------------------------------------


class DLPackExporter:
    """A DLPack producer for memory dlmg does not own.

    Parameters
    ----------
    pointer_or_buffer : int, numpy integer, ctypes.c_void_p or buffer
        The address of the memory (``data``), or any object supporting the
        Python buffer protocol (host memory only); then its address is used,
        the buffer is kept as owner and ``readonly`` is inferred from it.
    shape : sequence of int
        Extents, each >= 0 (at most 64 modes).
    dtype : str or dtype
        Element type in any form :func:`dlmg.dtypes.canonical` accepts.
    device : Device, str or tuple of int
        Where the memory lives (``"cpu"``, ``"cuda:1"``, or a DLPack
        ``(device_type, device_id)`` pair).
    strides : sequence of int, optional
        Strides in elements (any sign); C-contiguous when omitted.
    owner : object, optional
        Kept alive until the last consumer has released the memory.
    readonly : bool, optional
        Mark the memory read-only (``READ_ONLY`` in versioned capsules).
    byte_offset : int, optional
        Bytes from the address to the first element.

    Raises
    ------
    TypeError
        For a non-integer field, an unknown dtype (``DtypeError``) or an
        object that is neither an address nor a buffer.
    ValueError
        For a NULL address with elements, a negative extent or offset, a
        strides length mismatch, a view reaching outside its buffer, a
        buffer on a non-host device, or an unknown device (``DeviceError``).

    Notes
    -----
    ``__dlpack__`` follows the array API standard: a versioned capsule when
    ``max_version >= (1, 0)``, a legacy one otherwise. Read-only memory
    cannot be marked in a legacy capsule, so such a request raises
    ``BufferError`` unless ``copy=True``. ``copy=True`` copies host memory
    (``IS_COPIED``; a fresh, writable, 64-byte aligned buffer) and raises
    ``BufferError`` for device memory. A ``dl_device`` other than the
    memory's own raises ``BufferError`` (pinned host memory may be exported
    as CPU memory). ``stream`` is validated but nothing is synchronised: the
    memory must be ready when it is exported.

    Examples
    --------
    >>> import numpy as np
    >>> base = np.arange(6, dtype=np.float32)
    >>> exporter = DLPackExporter(base, (2, 3), "float32", "cpu")
    >>> view = np.from_dlpack(exporter)
    >>> view.ctypes.data == base.ctypes.data
    True
    """

    __slots__ = (
        "_data", "_shape", "_strides", "_dtype", "_device", "_owner",
        "_readonly", "_byte_offset", "_dims", "__weakref__",
    )

    def __init__(
        self,
        pointer_or_buffer: Any,
        shape: Sequence[int],
        dtype: Any,
        device: Any,
        *,
        strides: Sequence[int] | None = None,
        owner: Any = None,
        readonly: bool = False,
        byte_offset: int = 0,
    ) -> None:
        shape_t = as_ints(shape, "shape")
        if len(shape_t) > DLPACK_MAX_NDIM:
            raise ValueError(f"shape has {len(shape_t)} modes; at most {DLPACK_MAX_NDIM} are supported")
        for axis, extent in enumerate(shape_t):
            if extent < 0:
                raise ValueError(f"shape[{axis}] must be >= 0, got {extent} (shape {shape_t})")
        if strides is None:
            strides_t = c_contiguous_strides(shape_t)
        else:
            strides_t = as_ints(strides, "strides")
            if len(strides_t) != len(shape_t):
                raise ValueError(
                    f"strides has {len(strides_t)} entries but shape {shape_t} has {len(shape_t)} modes"
                )
        self._dtype = info(canonical(dtype))
        self._device = as_device(device)
        self._byte_offset = as_int(byte_offset, "byte_offset")
        if self._byte_offset < 0:
            raise ValueError(f"byte_offset must be >= 0, got {self._byte_offset}")
        if not isinstance(readonly, bool):
            raise TypeError(f"readonly must be a bool, got {readonly!r}")
        size = 1
        for extent in shape_t:
            size *= extent

        if isinstance(pointer_or_buffer, bool):
            raise TypeError(f"pointer_or_buffer must be an address or a buffer, got {pointer_or_buffer!r}")
        if isinstance(pointer_or_buffer, (numbers.Integral, ctypes.c_void_p)):
            # NumPy integers and c_void_p also have the buffer protocol: they are addresses here.
            raw = pointer_or_buffer.value if isinstance(pointer_or_buffer, ctypes.c_void_p) else pointer_or_buffer
            data = int(raw or 0)
            keep: Any = owner
        else:
            if not self._device.is_host:
                raise ValueError(
                    f"a buffer-protocol object is host memory; device must be the host, got {self._device}"
                )
            data, view = _buffer_address(pointer_or_buffer)
            readonly = readonly or view.readonly
            if view.c_contiguous and size:
                lo, hi = memory_span(shape_t, strides_t, self._dtype.itemsize, self._byte_offset)
                if lo < 0 or hi > view.nbytes:
                    raise ValueError(
                        f"shape {shape_t}, strides {strides_t} and byte_offset {self._byte_offset} "
                        f"reach bytes [{lo}, {hi}) outside the {view.nbytes}-byte buffer"
                    )
            keep = view if owner is None else (view, owner)
        if not 0 <= data <= _MAX_ADDRESS:
            raise ValueError(f"pointer must be a non-negative address below 2**{8 * _PTR_SIZE}, got {data}")
        if data == 0 and size != 0:
            raise ValueError(f"pointer is 0 (NULL) but shape {shape_t} has {size} elements")

        self._data = data
        self._shape = shape_t
        self._strides = strides_t
        self._owner = keep
        self._readonly = readonly
        self._dims = ctypes.c_int64 * max(len(shape_t), 1)

    # -- read-only properties -------------------------------------------------

    @property
    def pointer(self) -> int:
        """The address handed over as ``DLTensor.data``."""
        return self._data

    @property
    def ptr(self) -> int:
        """Address of the first element: ``pointer + byte_offset``."""
        return self._data + self._byte_offset

    @property
    def byte_offset(self) -> int:
        """Bytes from :attr:`pointer` to the first element."""
        return self._byte_offset

    @property
    def shape(self) -> tuple[int, ...]:
        """Extents."""
        return self._shape

    @property
    def strides(self) -> tuple[int, ...]:
        """Strides in elements."""
        return self._strides

    @property
    def dtype(self) -> str:
        """dlmg's element type name."""
        return self._dtype.name

    @property
    def device(self) -> Device:
        """Where the memory lives."""
        return self._device

    @property
    def readonly(self) -> bool:
        """Whether consumers are told the memory is read-only."""
        return self._readonly

    @property
    def owner(self) -> Any:
        """What is kept alive for the consumers (the buffer's memoryview,
        the given owner, or both as a tuple)."""
        return self._owner

    def __repr__(self) -> str:
        return (
            f"DLPackExporter(pointer=0x{self._data:x}, shape={self._shape}, dtype={self.dtype!r}, "
            f"device={str(self._device)!r}, strides={self._strides}, byte_offset={self._byte_offset}, "
            f"readonly={self._readonly})"
        )

    # -- the protocol ---------------------------------------------------------

    def __dlpack_device__(self) -> tuple[DLDeviceType, int]:
        """The ``(device_type, device_id)`` of the memory, as DLPack codes.

        Returns
        -------
        tuple of (DLDeviceType, int)
        """
        code, index = self._device.dlpack
        return (DLDeviceType(code), index)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """Export the memory as a DLPack capsule (array API standard).

        Parameters
        ----------
        stream : int or None, optional
            The consumer's stream. Only None for host memory; for CUDA -1, 1,
            2 or a pointer > 2; for ROCm -1, 0 or a pointer > 2. No
            synchronisation is performed.
        max_version : tuple of int or None, optional
            The newest DLPack version the consumer reads. ``(1, x)`` or later
            gives a ``dltensor_versioned`` capsule of version 1.1, None a
            legacy ``dltensor`` capsule.
        dl_device : tuple of int or None, optional
            Requested ``(device_type, device_id)``; must be the memory's own
            (pinned host memory may be asked for as CPU memory).
        copy : bool or None, optional
            True: export a copy (host memory only). False or None: never copy.

        Returns
        -------
        PyCapsule
            To be consumed once, by a consumer that renames it and calls the
            deleter when done.

        Raises
        ------
        BufferError
            (``DLPackError``) for another device, a copy of device memory, or
            a legacy request of read-only memory without ``copy=True``.
        ValueError
            For a stream value the device does not accept.
        TypeError
            For malformed arguments.
        """
        version = negotiate_version(max_version)
        device = self._target_device(dl_device)
        check_stream(stream, device)
        if copy not in (None, True, False):
            raise TypeError(f"copy must be None, True or False, got {copy!r}")
        if copy:
            data, byte_offset, owner = self._copy()
            flags = IS_COPIED
        else:
            if self._readonly and version is None:
                raise DLPackError(
                    "the memory is read-only and a legacy (unversioned) DLPack capsule cannot say so; "
                    "ask with max_version=(1, 0) or later, pass copy=True for a writable copy, or "
                    "build the exporter with readonly=False if the consumer never writes"
                )
            data, byte_offset, owner = self._data, self._byte_offset, self._owner
            flags = READ_ONLY if self._readonly else 0
        if self._dtype.bits * self._dtype.lanes < 8:
            flags |= IS_SUBBYTE_TYPE_PADDED
        return self._export(version, device, data, byte_offset, flags, owner)

    # -- internals ------------------------------------------------------------

    def _target_device(self, dl_device: Any) -> Device:
        if dl_device is None:
            return self._device
        try:
            code, index = dl_device
            pair = (as_int(code, "dl_device[0]"), as_int(index, "dl_device[1]"))
        except (TypeError, ValueError):
            raise TypeError(f"dl_device must be None or a (device_type, device_id) pair, got {dl_device!r}") from None
        if pair == self._device.dlpack:
            return self._device
        if pair == (1, 0) and self._device.kind in _HOST_ALIASES:
            return Device("cpu", 0)
        raise DLPackError(
            f"cannot export {self._device} memory to dl_device={pair}: dlmg's exporter does not "
            "move memory between devices"
        )

    def _copy(self) -> tuple[int, int, Any]:
        if not self._device.is_host:
            raise DLPackError(
                f"copy=True: dlmg's exporter can copy host memory only, not {self._device} memory; "
                "copy with the memory's framework instead"
            )
        itemsize = self._dtype.itemsize
        lo, hi = memory_span(self._shape, self._strides, itemsize, self._byte_offset)
        nbytes = hi - lo
        buf = (ctypes.c_char * (nbytes + 64))()
        aligned = (ctypes.addressof(buf) + 63) & ~63  # JAX imports 64-byte aligned memory in place
        if nbytes:
            ctypes.memmove(aligned, self._data + lo, nbytes)
        return aligned, self._byte_offset - lo if nbytes else 0, buf

    def _export(
        self, version: tuple[int, int] | None, device: Device, data: int, byte_offset: int, flags: int, owner: Any
    ) -> Any:
        if len(_PENDING) >= _SWEEP["at"]:
            _sweep()
        if not _SWEEP["gc_hooked"]:
            gc.callbacks.append(_on_gc)
            _SWEEP["gc_hooked"] = True
        if version is None:
            managed: Any = DLManagedTensor()
        else:
            managed = DLManagedTensorVersioned()
            managed.version.major, managed.version.minor = version
            managed.flags = flags
        tensor = managed.dl_tensor
        tensor.data = data or None
        tensor.device.device_type, tensor.device.device_id = device.dlpack
        tensor.ndim = len(self._shape)
        tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = self._dtype.dlpack
        # Both arrays are referenced by the struct, so they live exactly as long.
        tensor.shape = self._dims(*self._shape)
        tensor.strides = self._dims(*self._strides)
        tensor.byte_offset = byte_offset
        address = ctypes.addressof(managed)
        managed.manager_ctx = address
        managed.deleter = _DELETER
        _LIVE[address] = (managed, owner)
        capsule = new_capsule(address, versioned=version is not None)
        _PENDING[address] = capsule
        return capsule
