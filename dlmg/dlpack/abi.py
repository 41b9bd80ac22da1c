"""A ctypes mirror of the DLPack 1.x C ABI.

Only the layout lives here: structs, flag bits, device and data type codes.
The byte offsets are those of ``dlpack.h`` on a 64-bit platform and are
checked by ``tests/test_dlpack_abi.py``.
"""

from __future__ import annotations

import ctypes
import enum

from ..device import DL_DEVICE_TYPES
from ..dtypes import DLPACK_CODES

__all__ = [
    "DLPACK_VERSION",
    "DLPACK_MAX_NDIM",
    "DLDevice",
    "DLDataType",
    "DLTensor",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLPACK_DELETER",
    "READ_ONLY",
    "IS_COPIED",
    "IS_SUBBYTE_TYPE_PADDED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
    "DLDeviceType",
    "DLDataTypeCode",
    "DL_DEVICE_TYPES",
    "DLPACK_CODES",
    "CAPSULE_NAME",
    "CAPSULE_NAME_VERSIONED",
    "USED_CAPSULE_NAME",
    "USED_CAPSULE_NAME_VERSIONED",
]

#: The highest DLPack version dlmg reads and writes: ``(major, minor)``.
DLPACK_VERSION: tuple[int, int] = (1, 1)

#: The largest ``ndim`` dlmg accepts from a producer; anything above is
#: treated as corrupt metadata rather than read.
DLPACK_MAX_NDIM = 64

#: ``DLManagedTensorVersioned.flags`` bits.
READ_ONLY = DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
IS_COPIED = DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1
IS_SUBBYTE_TYPE_PADDED = DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED = 1 << 2

#: PyCapsule names of the protocol (fresh and consumed, legacy and versioned).
CAPSULE_NAME = b"dltensor"
CAPSULE_NAME_VERSIONED = b"dltensor_versioned"
USED_CAPSULE_NAME = b"used_dltensor"
USED_CAPSULE_NAME_VERSIONED = b"used_dltensor_versioned"

#: ``DLDeviceType`` as an ``IntEnum`` (``DLDeviceType.CUDA == 2``).
DLDeviceType = enum.IntEnum(  # type: ignore[misc]
    "DLDeviceType", {kind.upper(): code for code, kind in DL_DEVICE_TYPES.items()}
)
#: ``DLDataTypeCode`` as an ``IntEnum`` (``DLDataTypeCode.BFLOAT == 4``).
DLDataTypeCode = enum.IntEnum(  # type: ignore[misc]
    "DLDataTypeCode", {name.upper(): code for name, code in DLPACK_CODES.items()}
)


class DLDevice(ctypes.Structure):
    """``DLDevice``: a device type code and a device ordinal."""

    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    """``DLDataType``: type code, bits per lane and lane count."""

    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """``DLTensor``: the borrowed view of the memory (strides in elements)."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLPackVersion(ctypes.Structure):
    """``DLPackVersion``: the ABI version a versioned tensor was written for."""

    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


#: ``void (*deleter)(DLManagedTensor[Versioned] *self)``; the argument is taken
#: as a plain address so one prototype serves both struct kinds.
DLPACK_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    """``DLManagedTensor``: the legacy (pre-1.0, unversioned) managed tensor."""

    _fields_ = [
        ("dl_tensor", DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DLPACK_DELETER),
    ]


class DLManagedTensorVersioned(ctypes.Structure):
    """``DLManagedTensorVersioned``: the DLPack >= 1.0 managed tensor."""

    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DLPACK_DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]
