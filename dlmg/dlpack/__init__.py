"""dlmg's DLPack layer: the 1.x ABI in ctypes, importing no framework.

- :mod:`~dlmg.dlpack.abi`: the structs, flag bits and type/device codes;
- :func:`inspect` / :func:`device_of`: read any producer's capsule, validated;
- :mod:`~dlmg.dlpack.bounds`: the sizes and addresses no memory can have,
  refused at import;
- :class:`DLPackExporter`: export memory dlmg does not own (a raw address
  with an owner, or a buffer-protocol object) to any consumer;
- :func:`live_exports`: managed tensors exported and not yet released.

See ``docs/dlpack.md`` for the guarantees.
"""

from __future__ import annotations

from .abi import (
    CAPSULE_NAME,
    CAPSULE_NAME_VERSIONED,
    DL_DEVICE_TYPES,
    DLPACK_CODES,
    DLPACK_DELETER,
    DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_MAX_NDIM,
    DLPACK_VERSION,
    IS_COPIED,
    IS_SUBBYTE_TYPE_PADDED,
    READ_ONLY,
    USED_CAPSULE_NAME,
    USED_CAPSULE_NAME_VERSIONED,
    DLDataType,
    DLDataTypeCode,
    DLDevice,
    DLDeviceType,
    DLManagedTensor,
    DLManagedTensorVersioned,
    DLPackVersion,
    DLTensor,
)
from .capsule import is_capsule
from .exporter import DLPackExporter, live_exports
from .reader import DLPackInfo, c_contiguous_strides, device_of, inspect

__all__ = [
    "CAPSULE_NAME",
    "CAPSULE_NAME_VERSIONED",
    "DL_DEVICE_TYPES",
    "DLPACK_CODES",
    "DLPACK_DELETER",
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_MAX_NDIM",
    "DLPACK_VERSION",
    "IS_COPIED",
    "IS_SUBBYTE_TYPE_PADDED",
    "READ_ONLY",
    "USED_CAPSULE_NAME",
    "USED_CAPSULE_NAME_VERSIONED",
    "DLDataType",
    "DLDataTypeCode",
    "DLDevice",
    "DLDeviceType",
    "DLManagedTensor",
    "DLManagedTensorVersioned",
    "DLPackVersion",
    "DLTensor",
    "DLPackExporter",
    "DLPackInfo",
    "c_contiguous_strides",
    "device_of",
    "inspect",
    "is_capsule",
    "live_exports",
]
