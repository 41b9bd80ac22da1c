"""Reading what a DLPack producer hands over, without importing its framework.

:func:`inspect` negotiates a capsule with ``obj.__dlpack__``, validates the
managed tensor it holds, copies the metadata into a :class:`DLPackInfo` and
releases the capsule as a consumer must (rename, then call the deleter once).
"""

from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Any

from .._shapes import c_strides as c_contiguous_strides
from ..device import Device
from ..dtypes import DType, from_dlpack_code, info
from ..errors import DLPackError, DeviceError, DtypeError
from .abi import (
    CAPSULE_NAME,
    CAPSULE_NAME_VERSIONED,
    DLPACK_MAX_NDIM,
    DLPACK_VERSION,
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    USED_CAPSULE_NAME,
    USED_CAPSULE_NAME_VERSIONED,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLTensor,
)
from .bounds import check_metadata
from .capsule import capsule_name, capsule_pointer, is_capsule, mark_consumed

__all__ = ["DLPackInfo", "inspect", "device_of", "c_contiguous_strides"]

# Device types whose __dlpack__ takes a stream (array API standard): CUDA, ROCm.
_STREAM_DEVICE_TYPES = frozenset({2, 10})
_NO_SYNC = -1


@dataclass(frozen=True)
class DLPackInfo:
    """The metadata of one DLPack tensor, copied out of its capsule.

    Attributes
    ----------
    device : Device
        Where the memory lives.
    dtype : str
        dlmg's element type name (``"float32"``, ``"bfloat16"``...).
    shape : tuple of int
        Extents.
    strides : tuple of int
        Strides in elements; derived as C-contiguous when the producer gave
        none (``strides_given`` is then False).
    byte_offset : int
        Bytes from ``data`` to the first element.
    data : int
        The raw ``DLTensor.data`` pointer (0 for NULL).
    readonly : bool
        The producer set ``READ_ONLY``. Always False for legacy capsules,
        which cannot say.
    version : tuple of int or None
        ``(major, minor)`` of a versioned capsule, None for a legacy one.
    flags : int
        The raw ``DLManagedTensorVersioned.flags`` (0 for legacy capsules).
    strides_given : bool
        Whether the producer filled ``strides`` (NULL means C-contiguous).
    """

    device: Device
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    byte_offset: int
    data: int
    readonly: bool
    version: tuple[int, int] | None
    flags: int = 0
    strides_given: bool = True

    @property
    def ptr(self) -> int:
        """Address of the first element: ``data + byte_offset``."""
        return self.data + self.byte_offset

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dtype_info(self) -> DType:
        """The :class:`~dlmg.dtypes.DType` record (code, bits, lanes)."""
        return info(self.dtype)

    @property
    def itemsize(self) -> int:
        """Bytes per element (sub-byte types count whole bytes)."""
        return self.dtype_info.itemsize

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def is_c_contiguous(self) -> bool:
        """Whether the elements are dense in row-major order.

        Strides of modes with extent 1 are ignored, and an empty tensor is
        contiguous, as NumPy and the DLPack spec treat them.
        """
        if self.size == 0:
            return True
        expected = 1
        for extent, stride in zip(reversed(self.shape), reversed(self.strides)):
            if extent != 1 and stride != expected:
                return False
            expected *= extent
        return True

    @property
    def is_copied(self) -> bool:
        """The producer set ``IS_COPIED`` (the memory is a fresh copy)."""
        return bool(self.flags & IS_COPIED)

    @property
    def is_subbyte_padded(self) -> bool:
        """The producer set ``IS_SUBBYTE_TYPE_PADDED``."""
        return bool(self.flags & IS_SUBBYTE_TYPE_PADDED)




def _producer_name(obj: Any) -> str:
    return type(obj).__qualname__


def _request(obj: Any, stream: int | None) -> Any:
    """Call ``__dlpack__`` for the newest capsule the producer offers."""
    extra = {} if stream is None else {"stream": stream}
    try:
        return obj.__dlpack__(max_version=DLPACK_VERSION, **extra)
    except TypeError:  # a producer older than the 2023 keywords (JAX)
        return obj.__dlpack__(**extra)


def _acquire(obj: Any) -> Any:
    if is_capsule(obj):
        return obj
    if not hasattr(obj, "__dlpack__"):
        raise TypeError(f"{_producer_name(obj)} object does not support DLPack (it has no __dlpack__)")
    stream = None
    if hasattr(obj, "__dlpack_device__"):
        try:
            device_type = int(obj.__dlpack_device__()[0])
        except Exception as exc:
            raise DLPackError(f"{_producer_name(obj)}.__dlpack_device__() failed: {exc}") from exc
        if device_type in _STREAM_DEVICE_TYPES:
            stream = _NO_SYNC  # metadata only: ask the producer not to synchronise
    try:
        if stream is not None:
            try:
                return _request(obj, stream)
            except (TypeError, ValueError, RuntimeError, AssertionError, BufferError):
                pass  # a producer that rejects stream=-1: let it use its default
        return _request(obj, None)
    except BufferError as exc:
        raise DLPackError(f"{_producer_name(obj)}.__dlpack__() refused to export: {exc}") from exc


def _call_deleter(managed: DLManagedTensor | DLManagedTensorVersioned, address: int) -> None:
    deleter = managed.deleter
    if deleter:
        deleter(address)


def _parse_tensor(t: DLTensor) -> dict[str, Any]:
    """Validate a DLTensor and copy its metadata out (no pointer kept)."""
    ndim = int(t.ndim)
    if ndim < 0:
        raise DLPackError(f"DLPack tensor has a negative ndim ({ndim})")
    if ndim > DLPACK_MAX_NDIM:
        raise DLPackError(f"DLPack tensor has ndim={ndim}, more than dlmg accepts ({DLPACK_MAX_NDIM})")
    if ndim > 0 and not t.shape:
        raise DLPackError(f"DLPack tensor has ndim={ndim} but a NULL shape pointer")
    shape = tuple(t.shape[:ndim]) if ndim else ()
    for axis, extent in enumerate(shape):
        if extent < 0:
            raise DLPackError(f"DLPack tensor has a negative extent {extent} in mode {axis} (shape {shape})")
    strides_given = bool(t.strides) if ndim else True
    strides = tuple(t.strides[:ndim]) if (ndim and strides_given) else c_contiguous_strides(shape)

    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    try:
        dtype = from_dlpack_code(code, bits, lanes)
    except DtypeError as exc:
        raise DLPackError(
            f"DLPack tensor has an unknown dtype (code={code}, bits={bits}, lanes={lanes})"
        ) from exc

    device_type, device_id = int(t.device.device_type), int(t.device.device_id)
    try:
        device = Device.from_dlpack(device_type, device_id)
    except DeviceError as exc:
        raise DLPackError(
            f"DLPack tensor is on an unknown device (device_type={device_type}, device_id={device_id})"
        ) from exc

    data = int(t.data or 0)
    size = 1
    for extent in shape:
        size *= extent
    if data == 0 and size != 0:
        raise DLPackError(f"DLPack tensor has a NULL data pointer but {size} elements (shape {shape})")
    check_metadata(shape, strides, dtype.itemsize, data, int(t.byte_offset), device.is_host)
    return {
        "device": device,
        "dtype": dtype.name,
        "shape": shape,
        "strides": strides,
        "byte_offset": int(t.byte_offset),
        "data": data,
        "strides_given": strides_given,
    }


def _consume(capsule: Any, producer: Any) -> DLPackInfo:
    name = capsule_name(capsule) if is_capsule(capsule) else None
    if not is_capsule(capsule):
        raise DLPackError(
            f"{_producer_name(producer)}.__dlpack__() returned {type(capsule).__name__}, not a PyCapsule"
        )
    if name in (USED_CAPSULE_NAME, USED_CAPSULE_NAME_VERSIONED):
        raise DLPackError(f"the DLPack capsule was already consumed (its name is {name.decode()!r})")
    if name not in (CAPSULE_NAME, CAPSULE_NAME_VERSIONED):
        raise DLPackError(f"the capsule is not a DLPack tensor (its name is {name!r})")
    versioned = name == CAPSULE_NAME_VERSIONED
    address = capsule_pointer(capsule, name)
    # From here on the capsule is ours: rename it so its own destructor
    # leaves the managed tensor alone, and call the deleter exactly once.
    mark_consumed(capsule, versioned)
    if versioned:
        managed: Any = DLManagedTensorVersioned.from_address(address)
    else:
        managed = DLManagedTensor.from_address(address)
    try:
        if versioned:
            major, minor = int(managed.version.major), int(managed.version.minor)
            if major != DLPACK_VERSION[0]:
                # ABI of another major version: nothing but the deleter may be touched.
                raise DLPackError(
                    f"DLPack capsule has version {major}.{minor}; dlmg reads major version "
                    f"{DLPACK_VERSION[0]} only"
                )
            flags = int(managed.flags)
            fields = _parse_tensor(managed.dl_tensor)
            return DLPackInfo(
                version=(major, minor), flags=flags, readonly=bool(flags & READ_ONLY), **fields
            )
        fields = _parse_tensor(managed.dl_tensor)
        return DLPackInfo(version=None, flags=0, readonly=False, **fields)
    finally:
        _call_deleter(managed, address)


def inspect(obj: Any) -> DLPackInfo:
    """Read the DLPack metadata of an array of any framework, without copying
    and without importing that framework.

    Parameters
    ----------
    obj : object
        Anything with ``__dlpack__`` (NumPy, PyTorch, JAX, CuPy arrays, a
        :class:`~dlmg.dlpack.DLPackExporter`...), or a raw, unconsumed DLPack
        PyCapsule, which this consumes.

    Returns
    -------
    DLPackInfo
        Device, dtype, shape, strides in elements, data pointer and flags.

    Raises
    ------
    TypeError
        When ``obj`` does not speak DLPack.
    DLPackError
        (a ``BufferError``) when the producer refuses to export, or hands over
        a capsule dlmg cannot use: consumed already, of a major version other
        than 1, or with invalid metadata (negative or huge ndim, NULL shape,
        negative extent, unknown dtype or device, NULL data with elements,
        or sizes and addresses no memory can have: see
        :func:`dlmg.dlpack.bounds.check_metadata`).

    Notes
    -----
    The producer is asked for ``max_version=(1, 1)`` first and, on
    ``TypeError``, without the newer keywords (JAX only exports legacy
    capsules). CUDA and ROCm producers are passed ``stream=-1`` (no
    synchronisation: only metadata is read), or no stream if they reject it.
    The capsule is renamed ``used_dltensor[_versioned]`` and its deleter runs
    exactly once, also when validation fails.

    Examples
    --------
    >>> import numpy as np
    >>> info = inspect(np.zeros((2, 3), np.float32).T)
    >>> info.shape, info.strides, info.dtype, info.is_c_contiguous
    ((3, 2), (1, 3), 'float32', False)
    """
    capsule = _acquire(obj)
    return _consume(capsule, obj)


def device_of(obj: Any) -> Device:
    """The device of a DLPack array, cheaply, through ``__dlpack_device__``.

    Parameters
    ----------
    obj : object
        Anything with ``__dlpack_device__``, or an unconsumed DLPack capsule
        (read without consuming it).

    Returns
    -------
    Device

    Raises
    ------
    TypeError
        When ``obj`` has no ``__dlpack_device__`` and is no capsule.
    DLPackError
        When the device type is unknown or the answer malformed.

    Examples
    --------
    >>> import numpy as np
    >>> device_of(np.zeros(3))
    Device('cpu:0')
    """
    if is_capsule(obj):
        name = capsule_name(obj)
        if name not in (CAPSULE_NAME, CAPSULE_NAME_VERSIONED):
            raise DLPackError(f"the capsule is not an unconsumed DLPack tensor (its name is {name!r})")
        address = capsule_pointer(obj, name)
        if name == CAPSULE_NAME_VERSIONED:
            managed: Any = DLManagedTensorVersioned.from_address(address)
            if int(managed.version.major) != DLPACK_VERSION[0]:
                raise DLPackError(f"DLPack capsule has major version {managed.version.major}")
        else:
            managed = DLManagedTensor.from_address(address)
        pair: Any = (managed.dl_tensor.device.device_type, managed.dl_tensor.device.device_id)
    else:
        method = getattr(obj, "__dlpack_device__", None)
        if method is None:
            raise TypeError(f"{_producer_name(obj)} object has no __dlpack_device__")
        pair = method()
    try:
        device_type, device_id = pair
        return Device.from_dlpack(int(device_type), int(device_id))
    except (TypeError, ValueError) as exc:
        raise DLPackError(
            f"{_producer_name(obj)}.__dlpack_device__() gave {pair!r}, not a known "
            "(device_type, device_id) pair"
        ) from exc
