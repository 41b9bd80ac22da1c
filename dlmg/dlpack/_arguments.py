"""Checks of the arguments of :class:`~dlmg.dlpack.DLPackExporter` and of its
``__dlpack__`` keywords, and the byte range a strided view spans. Internal to
:mod:`dlmg.dlpack`."""

from __future__ import annotations

import operator
from typing import Any

from ..device import Device
from .abi import DLPACK_VERSION

_CUDA_LIKE = frozenset({2, 13})  # CUDA, CUDA managed: CUDA stream values
_ROCM = 10


def as_int(value: Any, field: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{field} must be an int, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{field} must be an int, got {value!r} of type {type(value).__name__}") from None


def as_ints(values: Any, field: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{field} must be a sequence of ints, got {values!r}")
    if not hasattr(values, "__iter__"):
        return (as_int(values, field),)  # a lone int is a 1-d shape
    return tuple(as_int(v, f"{field}[{i}]") for i, v in enumerate(values))


def negotiate_version(max_version: Any) -> tuple[int, int] | None:
    if max_version is None:
        return None
    try:
        major, minor = max_version
        major, minor = as_int(major, "max_version[0]"), as_int(minor, "max_version[1]")
    except (TypeError, ValueError):
        raise TypeError(f"max_version must be None or a (major, minor) tuple of ints, got {max_version!r}") from None
    # Minor versions share one ABI, so any 1.x (or later) consumer gets dlmg's 1.x.
    return DLPACK_VERSION if major >= 1 else None


def check_stream(stream: Any, device: Device) -> None:
    if stream is None:
        return
    code = device.dlpack[0]
    if code in _CUDA_LIKE or code == _ROCM:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(f"stream must be None or an int for {device} memory, got {stream!r}")
        if code == _ROCM:
            bad = stream < -1 or stream in (1, 2)
            allowed = "None, -1, 0 or a stream pointer > 2"
        else:
            bad = stream < -1 or stream == 0
            allowed = "None, -1, 1, 2 or a stream pointer > 2"
        if bad:
            raise ValueError(f"stream={stream!r} is not valid for {device} memory; expected {allowed}")
        return
    raise ValueError(f"stream must be None for {device} memory (it has no streams), got {stream!r}")


def memory_span(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int, byte_offset: int) -> tuple[int, int]:
    """Byte range ``[lo, hi)``, relative to the pointer, that a view touches."""
    low = high = 0
    for extent, stride in zip(shape, strides):
        if extent == 0:
            return byte_offset, byte_offset
        reach = (extent - 1) * stride
        if reach < 0:
            low += reach
        else:
            high += reach
    return byte_offset + low * itemsize, byte_offset + (high + 1) * itemsize
