"""Refusing DLPack metadata that cannot describe real memory.

A producer's ``DLTensor`` is trusted for its memory, not for its arithmetic:
a ``byte_offset`` of ``2**63``, a stride of ``2**62`` or a shape of ``2**80``
elements cannot describe memory of any process, and taken at face value they
end in a segmentation fault or an overflow deep inside a framework. The
reader (:mod:`dlmg.dlpack.reader`) therefore checks at import what is
*detectably* impossible:

* the element count, and the element count times the item size, reach
  ``2**63`` (no allocation is that large: sizes are ``ptrdiff_t``);
* a stride times its extent, or the sum of them (the strided span), in
  elements or in bytes, leaves the int64 range;
* ``byte_offset`` reaches ``2**63``;
* ``data + byte_offset`` plus the strided span runs below address 0 or past
  the top of the address space: ``2**64``, or the user address space of host
  memory on platforms where it is known.

What cannot be detected (a pointer into unmapped memory below those limits)
is the producer's responsibility, as in every DLPack consumer.
"""

from __future__ import annotations

import ctypes
import platform
from collections.abc import Sequence

from ..errors import DLPackError

__all__ = ["INT64_LIMIT", "ADDRESS_LIMIT", "host_address_limit", "strided_extent", "ranges_meet", "check_metadata"]

#: The first value outside int64 (``2**63``): no byte count or offset reaches it.
INT64_LIMIT = 1 << 63

#: One past the highest address of a 64-bit address space.
ADDRESS_LIMIT = 1 << (8 * ctypes.sizeof(ctypes.c_void_p))

# Where user-space pointers of host memory must lie below. x86-64 keeps bit
# 63 clear in every user address (canonical form, with 5-level paging and with
# linear address masking). Platforms that allow tags in the top byte
# (AArch64 top-byte-ignore) may set any bit, so only the pointer width applies.
_HOST_LIMITS = {"x86_64": 1 << 63, "amd64": 1 << 63}


def host_address_limit() -> int:
    """One past the highest address host memory can have on this platform.

    Returns
    -------
    int
        ``2**63`` on x86-64 (user addresses never set bit 63), else the
        pointer width's limit (``2**64`` on 64-bit platforms).
    """
    return min(_HOST_LIMITS.get(platform.machine().lower(), ADDRESS_LIMIT), ADDRESS_LIMIT)


def strided_extent(shape: Sequence[int], strides: Sequence[int]) -> tuple[int, int]:
    """The lowest and highest element offsets a strided view reaches.

    Parameters
    ----------
    shape, strides : sequence of int
        Extents and element strides of a non-empty view.

    Returns
    -------
    (int, int)
        ``(low, high)`` such that every element lies at an offset in
        ``[low, high]`` from the first element (``low <= 0 <= high``).
    """
    low = high = 0
    for n, s in zip(shape, strides):
        reach = (n - 1) * s
        if reach < 0:
            low += reach
        else:
            high += reach
    return low, high


def ranges_meet(first: tuple[int, int] | None, second: tuple[int, int] | None) -> bool:
    """Whether two half-open byte ranges ``[start, end)`` share a byte (``None``: no bytes)."""
    return first is not None and second is not None and max(first[0], second[0]) < min(first[1], second[1])


def _fail(field: str, value: object, why: str) -> DLPackError:
    return DLPackError(f"DLPack tensor has {field}={value}: {why}, which no memory can hold")


def check_metadata(
    shape: Sequence[int],
    strides: Sequence[int],
    itemsize: int,
    data: int,
    byte_offset: int,
    host: bool,
) -> None:
    """Raise when a DLTensor's sizes or addresses cannot describe real memory.

    Parameters
    ----------
    shape : sequence of int
        Extents (already checked non-negative).
    strides : sequence of int
        Element strides (C-contiguous ones when the producer gave none).
    itemsize : int
        Bytes per element.
    data : int
        ``DLTensor.data`` (0 for NULL).
    byte_offset : int
        ``DLTensor.byte_offset`` (unsigned).
    host : bool
        Whether the memory is host memory (then :func:`host_address_limit`
        bounds the addresses, else :data:`ADDRESS_LIMIT`).

    Raises
    ------
    DLPackError
        Naming the field and the value: an element count or byte size that
        reaches ``2**63``, a stride whose span leaves the int64 range, a
        ``byte_offset`` that reaches ``2**63``, or a first or last element
        outside the address space. Empty tensors are checked for their
        ``byte_offset`` only (they address no memory).
    """
    if byte_offset >= INT64_LIMIT:
        raise _fail("byte_offset", byte_offset, f"an offset of 2**63 bytes or more (limit {INT64_LIMIT - 1})")
    count = 1
    for extent in shape:
        count *= extent
    if count == 0:
        return
    shape_text = tuple(shape)
    if count >= INT64_LIMIT:
        raise _fail("shape", shape_text, f"{count} elements, 2**63 or more")
    if count * itemsize >= INT64_LIMIT:
        raise _fail("shape", shape_text, f"{count} elements of {itemsize} bytes = {count * itemsize} bytes, 2**63 or more")
    for axis, (n, s) in enumerate(zip(shape, strides)):
        if abs((n - 1) * s) * itemsize >= INT64_LIMIT:
            raise _fail(
                f"strides[{axis}]", s,
                f"with extent {n} and {itemsize}-byte elements it spans {(n - 1) * s * itemsize} bytes, "
                "outside int64",
            )
    low, high = strided_extent(shape, strides)
    if (high - low + 1) * itemsize >= INT64_LIMIT:
        raise _fail("strides", tuple(strides), f"the view spans {(high - low + 1) * itemsize} bytes, outside int64")
    first = data + byte_offset
    start = first + low * itemsize
    end = first + (high + 1) * itemsize  # one past the last byte
    limit = host_address_limit() if host else ADDRESS_LIMIT
    if start < 0:
        raise _fail(
            "data + byte_offset", hex(first),
            f"with strides {tuple(strides)} the view starts {-low * itemsize} bytes earlier, below address 0",
        )
    if end > limit:
        where = "host address space" if host else "address space"
        raise _fail(
            "data + byte_offset", hex(first),
            f"with shape {shape_text} and strides {tuple(strides)} the view ends at {hex(end)}, past the "
            f"{where} (limit {hex(limit)})",
        )
