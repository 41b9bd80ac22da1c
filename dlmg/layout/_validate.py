"""Validation and per-mode arithmetic shared by :class:`~dlmg.layout.Layout`
and :class:`~dlmg.layout.FragmentLayout`: checked ints and per-mode tuples,
device lists, local extents and the memory-overlap proof for strided
fragments. Internal to :mod:`dlmg.layout`."""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable
from typing import Any

from ..device import Device, as_device
from ..errors import DeviceError, LayoutError

#: Above this many elements, strides that the quick sufficient test cannot
#: prove free of overlap are rejected instead of checked element by element.
_EXACT_OVERLAP_CHECK_LIMIT = 1 << 22

#: Extents, blocks, strides, element counts and memory offsets stay below
#: 2**63: every framework indexes with int64, and no memory holds more.
INDEX_LIMIT = 1 << 63


def context_of(**fields: Any) -> str:
    """``shape=(9, 9), grid=(2, 0)`` for the fields that are known so far."""
    return ", ".join(f"{name}={value!r}" for name, value in fields.items() if value is not None)


def as_int(value: Any, what: str, context: str) -> int:
    """``operator.index(value)``, refusing bools, floats and strings."""
    if isinstance(value, bool):
        raise LayoutError(f"{what} = {value!r} is a bool, not an int ({context})")
    try:
        return operator.index(value)
    except TypeError:
        raise LayoutError(
            f"{what} = {value!r} of type {type(value).__name__} is not an int ({context})"
        ) from None


def per_mode(
    name: str, values: Any, ndim: int, context: str, *, minimum: int
) -> tuple[int, ...]:
    """Validate a per-mode sequence of ints of length ``ndim``, each ``>= minimum``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise LayoutError(
            f"{name} must be a sequence of {ndim} ints (one per mode), got {values!r} ({context})"
        )
    values = tuple(values)
    if len(values) != ndim:
        raise LayoutError(
            f"{name} has {len(values)} entries but the layout has {ndim} modes: "
            f"{name}={values!r} ({context})"
        )
    out = []
    for mode, value in enumerate(values):
        number = as_int(value, f"{name}[{mode}]", context)
        if number < minimum:
            rule = "non-negative" if minimum == 0 else "positive"
            raise LayoutError(
                f"{name}[{mode}] = {number} must be {rule} (mode {mode}; {context})"
            )
        if number >= INDEX_LIMIT:
            raise LayoutError(
                f"{name}[{mode}] = {number} is 2**63 or more, beyond the int64 range every framework "
                f"indexes with (mode {mode}; {context})"
            )
        out.append(number)
    return tuple(out)


def as_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)):
        raise LayoutError(f"shape must be a sequence of ints, got {shape!r}")
    if not isinstance(shape, Iterable):
        shape = (as_int(shape, "shape", f"shape={shape!r}"),)
    shape = tuple(shape)
    out = per_mode("shape", shape, len(shape), f"shape={shape!r}", minimum=0)
    count = math.prod(out)
    if count >= INDEX_LIMIT:
        raise LayoutError(
            f"shape={out} has {count} elements, 2**63 or more, beyond the int64 range every framework "
            "indexes with"
        )
    return out


def check_span(
    shape: tuple[int, ...],
    block: tuple[int, ...],
    grid: tuple[int, ...],
    es: tuple[int, ...],
    bs: tuple[int, ...],
    context: str,
) -> None:
    """Raise when the memory of fragment 0 (the largest) reaches 2**63 elements."""
    local = [mode_local_extent(n, b, g, 0) for n, b, g in zip(shape, block, grid)]
    if not all(local):
        return
    span = 1 + sum(mode_max_offset(n, b, e, k) for n, b, e, k in zip(local, block, es, bs))
    if span >= INDEX_LIMIT:
        raise LayoutError(
            f"element_strides={es} and block_strides={bs} put fragment 0 over {span} elements of "
            f"memory, 2**63 or more, which no memory holds ({context})"
        )


def as_devices(devices: Any, context: str) -> tuple[Device, ...]:
    if isinstance(devices, (str, Device)):
        devices = (devices,)
    if not isinstance(devices, Iterable):
        raise LayoutError(f"devices must be a sequence of devices, got {devices!r} ({context})")
    out = []
    seen: dict[Device, Device] = {}  # equal devices as one object: per-fragment checks compare identity first
    for position, device in enumerate(devices):
        try:
            parsed = as_device(device)
        except DeviceError as exc:
            raise LayoutError(f"devices[{position}] = {device!r} is not a device: {exc} ({context})") from None
        out.append(seen.setdefault(parsed, parsed))
    return tuple(out)


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)




def mode_local_extent(extent: int, block: int, grid: int, coord: int) -> int:
    """Elements of one mode held by grid coordinate ``coord``."""
    nblocks = ceil_div(extent, block)
    owned = len(range(coord, nblocks, grid))
    if owned == 0:
        return 0
    size = owned * block
    if (nblocks - 1) % grid == coord:  # the last, possibly partial, block is ours
        size -= nblocks * block - extent
    return size


def mode_max_offset(local: int, block: int, element_stride: int, block_stride: int) -> int:
    """Largest ``k*block_stride + i*element_stride`` over local indices ``< local``."""
    last = local - 1
    k, i = divmod(last, block)
    best = k * block_stride + i * element_stride
    if k >= 1:  # the end of the previous, full block may reach further
        best = max(best, (k - 1) * block_stride + (block - 1) * element_stride)
    return best


def check_no_overlap(
    shape: tuple[int, ...],
    block: tuple[int, ...],
    grid: tuple[int, ...],
    es: tuple[int, ...],
    bs: tuple[int, ...],
    context: str,
) -> None:
    """Raise when two elements of one fragment would share memory.

    The fragment with grid coordinate 0 along every mode holds, per mode,
    a superset of the (local block, in-block index) pairs of any other
    fragment, so checking it covers them all.
    """
    local = [mode_local_extent(n, b, g, 0) for n, b, g in zip(shape, block, grid)]
    if math.prod(local) <= 1:
        return
    # quick sufficient test on the box of full blocks: sort the (count, stride)
    # pairs; every stride must step past everything the smaller ones reach
    dims = []
    for m, n_local in enumerate(local):
        b = block[m]
        nloc_blocks = ceil_div(n_local, b)
        if nloc_blocks > 1:
            dims.append((bs[m], nloc_blocks, m, "block_strides"))
        if min(b, n_local) > 1:
            dims.append((es[m], min(b, n_local), m, "element_strides"))
    dims.sort()
    reach = 0
    culprit = None
    for stride, count, mode, name in dims:
        if stride <= reach:
            culprit = (name, mode, stride)
            break
        reach += (count - 1) * stride
    if culprit is None:
        return
    total = math.prod(local)
    exact = total <= _EXACT_OVERLAP_CHECK_LIMIT
    if exact:
        import numpy as np

        offsets = np.zeros((), dtype=np.int64)
        for m, n_local in enumerate(local):
            li = np.arange(n_local, dtype=np.int64)
            along = (li // block[m]) * bs[m] + (li % block[m]) * es[m]
            offsets = np.add.outer(offsets, along)
        flat = offsets.ravel()
        if np.unique(flat).size == flat.size:
            return
    name, mode, stride = culprit
    verdict = "make elements of a fragment overlap" if exact else (
        f"cannot be proven free of overlap (fragments of more than "
        f"{_EXACT_OVERLAP_CHECK_LIMIT} elements are only checked by sorted strides)"
    )
    raise LayoutError(
        f"element_strides={es} and block_strides={bs} {verdict} in memory: "
        f"{name}[{mode}] = {stride} does not step past the elements of the smaller strides "
        f"(fragment 0 has local shape {tuple(local)}; {context})"
    )


def as_ranks(ranks: Any, count: int, context: str) -> tuple[int, ...]:
    """One non-negative process rank per fragment (``None``: all 0; an int: all that one)."""
    if ranks is None:
        return (0,) * count
    if isinstance(ranks, Iterable) and not isinstance(ranks, (str, bytes)):
        values = tuple(ranks)
        if len(values) != count:
            raise LayoutError(
                f"ranks has {len(values)} entries but the layout has {count} fragments (one rank per "
                f"device, replicas included): ranks={values!r} ({context})"
            )
    else:
        values = (ranks,) * count
    out = []
    for i, value in enumerate(values):
        r = as_int(value, f"ranks[{i}]", context)
        if r < 0:
            raise LayoutError(f"ranks[{i}] = {r} must be a non-negative process rank ({context})")
        out.append(r)
    return tuple(out)


#: The pending reductions a layout may declare (see ``Layout(partial=...)``).
PARTIAL_KINDS = ("sum", "max", "min")


def as_partial(partial: Any, context: str) -> str | None:
    """``None`` or one of :data:`PARTIAL_KINDS` (the replicas hold the parts)."""
    if partial is None:
        return None
    if partial not in PARTIAL_KINDS:
        raise LayoutError(f"partial = {partial!r} is not one of {PARTIAL_KINDS} or None ({context})")
    return str(partial)
