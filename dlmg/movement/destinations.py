"""Where a movement writes: destination buffers, the copy jobs filling them, and
the fragments made of them.

:func:`allocate` and :func:`allocate_all` make writable buffers for destination
fragments (dense fragments of one GPU carved out of one allocation),
:func:`copy_jobs` pairs a plan's copies with them, :func:`finish_fragment`
turns a filled buffer into a fragment, :func:`destination` is where a gather
writes. The one-process and the cross-process moves use the same functions.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from .._shapes import c_strides
from ..device import Device, as_device, unreachable_hint
from ..dtypes import canonical, info
from ..errors import DeviceError, DtypeError, FrameworkError, LayoutError, LayoutMismatchError, ReadOnlyError
from ..plans.plan import RedistributionPlan, one_copy
from ..registry import DEFAULT_FRAMEWORK, adapter_for, get_adapter, viewing_frameworks
from ..fragment import Fragment, process_rank
from .copies import GIVEN_VIEWS_MAX_BYTES, Buffer, copy_framework, synchronize

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..layout import FragmentLayout, Layout
    from ..tensor import DistributedTensor

__all__ = [
    "allocate", "allocate_all", "Carving", "copy_jobs", "finish_fragment", "choose_framework", "reuse",
    "default_device", "destination", "check_out",
]


def allocate(frag: "FragmentLayout", framework: "Adapter", dtype: str, prefer: Sequence[str]) -> tuple[Buffer, "Adapter"]:
    """A writable buffer for destination fragment ``frag``; returns (buffer, copy framework)."""
    device = frag.device
    lay = frag.layout
    if framework.traits.can_view:
        writer = framework
    else:
        if lay.element_strides is not None:
            raise LayoutError(
                f"framework {framework.name!r} cannot hold fragments with explicit strides "
                f"(element_strides={lay.element_strides}, block_strides={lay.block_strides}); "
                f"use a dense layout or a framework with views ({', '.join(viewing_frameworks())})"
            )
        writer = copy_framework(device, dtype, prefer)
    shape = frag.shape if lay.element_strides is None else (frag.span,)
    base = writer.empty(tuple(shape), dtype, device)
    return Buffer(base, writer, writer.device_of(base) if frag.size else device), writer


#: Carved destinations start at multiples of this many bytes (what CUDA's allocators
#: give and what XLA asks of the arrays it takes in).
_CARVE_ALIGN = 256


class _Group(NamedTuple):
    """Where the dense fragments of one device go in their shared allocation."""

    device: Device
    positions: tuple[int, ...]  # in the list of fragments asked for
    offsets: tuple[int, ...]
    total: int
    shapes: tuple[tuple[int, ...], ...]
    strides: tuple[tuple[int, ...], ...]
    members: tuple[int, ...]  # fragment numbers
    sizes: tuple[int, ...]


# Carvings worked out for this many (layout, fragments, itemsize): a redistribution
# between the same layouts asks again on every call, and the answer walks every fragment.
@lru_cache(maxsize=256)
def _carve_groups(layout: "Layout", indices: tuple[int, ...], itemsize: int) -> tuple[_Group, ...]:
    """How :func:`allocate_all` carves fragments ``indices`` of ``layout`` of
    ``itemsize``-byte elements."""
    frags = [layout.fragments[i] for i in indices]
    by_device: dict[Device, list[int]] = {}
    if _CARVE_ALIGN % itemsize == 0:
        for k, frag in enumerate(frags):
            if frag.layout.element_strides is None and frag.size and not frag.device.is_host:
                by_device.setdefault(frag.device, []).append(k)
    step = _CARVE_ALIGN // itemsize
    groups = []
    for device, positions in by_device.items():
        if len(positions) < 2:
            continue
        offsets, total = [], 0
        for k in positions:
            offsets.append(total)
            total += -(-frags[k].size // step) * step
        shapes = tuple(tuple(frags[k].shape) for k in positions)
        groups.append(_Group(device, tuple(positions), tuple(offsets), total, shapes, tuple(map(c_strides, shapes)),
                             tuple(frags[k].index for k in positions), tuple(frags[k].size for k in positions)))
    return tuple(groups)


class Carving(NamedTuple):
    """Destinations carved out of one allocation ``whole`` as ``group`` says."""

    whole: Buffer
    group: _Group


def allocate_all(
    layout: "Layout", frags: Sequence["FragmentLayout"], framework: "Adapter", dtype: str, prefer: Sequence[str]
) -> tuple[list[Buffer], list[Carving]]:
    """Buffers for destination fragments ``frags`` of ``layout``: dense ones of one
    GPU carved out of one allocation (aligned views, one after another), others
    each their own (see :func:`allocate`); and the carvings made.

    One allocation instead of one per fragment takes the allocator's host work
    once, and lets a copy that fills consecutive destinations from consecutive
    source elements run as one copy (see :func:`copy_jobs`). The fragments then share
    that allocation, which is freed when the last goes. Host fragments stay
    apart: their copies run on threads, one per destination, and a large host
    allocation is a fresh mapping whose pages fault in on first touch (the C
    allocator reuses freed blocks of up to 32 MiB instead).
    """
    itemsize = info(dtype).itemsize
    out: list[Buffer | None] = [None] * len(frags)
    carvings: list[Carving] = []
    groups = _carve_groups(layout, tuple(f.index for f in frags), itemsize) if framework.traits.can_view and isinstance(itemsize, int) else ()
    for group in groups:
        whole = framework.empty((group.total,), dtype, group.device)
        where = framework.device_of(whole)
        for k, shape, strides, offset in zip(group.positions, group.shapes, group.strides, group.offsets):
            out[k] = Buffer(framework.as_strided(whole, shape, strides, offset), framework, where)
        carvings.append(Carving(Buffer(whole, framework, where), group))
    for k, frag in enumerate(frags):
        if out[k] is None:
            out[k] = allocate(frag, framework, dtype, prefer)[0]
    return out, carvings  # type: ignore[return-value]


def copy_jobs(
    plan: RedistributionPlan, sources: dict[int, Buffer], written: dict[int, Buffer], carvings: Sequence[Carving],
    places: dict[int, tuple[int, int]] | None = None, one_copies: dict[Any, Any] | None = None,
) -> list[tuple[Sequence[Any], dict[int, Buffer], Buffer]]:
    """The copy jobs filling destinations ``written`` (fragment number -> buffer):
    one per destination, except that the destinations of a carving that
    ``plan`` fills with consecutive elements of one source get one copy into the
    carved allocation (a slab scatter of a contiguous array: one copy, with two
    views instead of two per fragment), and those it fills with one view of
    each source repeated at regular steps get one strided copy per source (a
    cyclic scatter: one copy with a mode more; see
    :meth:`~dlmg.plans.plan.RedistributionPlan.stacked`). Where the sources too
    were carved out of one allocation (``places``, see :func:`source_places`)
    and the pieces step regularly through both, every copy into a carving is
    one copy (:func:`~dlmg.plans.plan.one_copy`, remembered per carving in
    ``one_copies``, kept with ``plan`` by the source tensor): one launch for a
    whole redistribution on one GPU."""
    jobs: list[tuple[Sequence[Any], dict[int, Buffer], Buffer]] = []
    joined: set[int] = set()
    for whole, group in carvings:
        copy = plan.joined(group.members, group.offsets, group.sizes)
        copies: tuple[Any, ...] | None = (copy,) if copy is not None else None
        if copies is None and places and one_copies is not None:
            if group not in one_copies:
                made = one_copy(group.members, group.offsets, places, plan.copies_into)
                one_copies[group] = None if made is None else (made,)
            copies = one_copies[group]
        if copies is None:
            copies = plan.stacked(group.members, group.offsets, group.sizes)
        if copies is not None:
            jobs.append((copies, sources, whole))
            joined.update(group.members)
    jobs.extend((plan.copies_into(i), sources, buf) for i, buf in written.items() if i not in joined)
    return jobs


def finish_fragment(frag: "FragmentLayout", buf: Buffer, framework: "Adapter", rank: int | None = None) -> "Fragment":
    """The fragment of ``frag`` held in ``buf`` (``rank``: this process's, when the caller has it)."""
    lay = frag.layout
    device = frag.device
    if lay.element_strides is None:
        array = buf.base
        if buf.adapter.name != framework.name:
            synchronize([buf])  # the staging framework's queued copies, before another framework reads
            array = framework.from_dlpack(buf.adapter.producer(array), device=device)
        return Fragment.of_array(frag, array, framework.name, rank=rank if rank is not None else process_rank(),
                                 adapter=framework)
    if frag.is_strided:
        view = buf.adapter.as_strided(buf.base, frag.shape, frag.strides, 0)
        return Fragment.of_array(frag, view, framework.name, rank=process_rank())
    return Fragment.of_memory(frag, buf.base, framework.name, rank=process_rank())


def choose_framework(dt: "DistributedTensor", frag: "FragmentLayout", framework: str | None) -> "Adapter":
    if framework is not None:
        adapter = get_adapter(framework)
        if not adapter.supports(frag.device):
            raise DeviceError(
                f"framework {adapter.name!r} cannot hold fragment {frag.index} on {frag.device}"
                f"{unreachable_hint([frag.device])}"
            )
        return adapter
    names = [f.framework for f in dt.fragments if f.is_local and f.device == frag.device]
    names += list(dt.frameworks)
    if not names:  # a process holding no fragment of the source (several processes)
        names = list(viewing_frameworks())
    for name in dict.fromkeys(n for n in names if n is not None):
        adapter = get_adapter(name)
        if adapter.supports(frag.device):
            return adapter
    raise FrameworkError(
        f"none of the tensor's frameworks ({', '.join(dt.frameworks)}) can hold fragment "
        f"{frag.index} on {frag.device}; pass framework= to choose one that can"
    )


def reuse(src: "Fragment", frag: "FragmentLayout") -> "Fragment":
    return src.with_layout(frag)


def default_device(dt: "DistributedTensor") -> Device:
    for f in dt.fragments:
        if f.is_local:
            return f.device
    return dt.layout.devices[0]


def destination(dt: "DistributedTensor", framework: str | None, device: Any, out: Any) -> tuple[Buffer, Any]:
    """Where a gather of ``dt`` writes: ``(buffer, finish)``; ``finish()`` returns the result
    (hands a staging buffer to an immutable target framework)."""
    if out is not None:
        return check_out(dt, out, framework, device), lambda: out
    if framework is None:
        framework = dt.frameworks[0] if dt.frameworks else DEFAULT_FRAMEWORK
    target = get_adapter(framework)
    dev = target.landing_device(default_device(dt)) if device is None else as_device(device)
    if not target.supports(dev):
        raise DeviceError(f"framework {target.name!r} cannot hold an array on {dev}{unreachable_hint([dev])}")
    writer = target if target.traits.can_view else copy_framework(dev, dt.dtype, tuple(dt.frameworks))
    base = writer.empty(dt.shape, dt.dtype, dev)
    buf = Buffer(base, writer, writer.device_of(base) if dt.size else dev)

    def finish() -> Any:
        if writer.name == target.name:
            return base
        synchronize([buf])  # the staging framework's queued copies, before another framework reads
        return target.from_dlpack(writer.producer(base), device=dev)

    return buf, finish


def check_out(dt: "DistributedTensor", out: Any, framework: str | None, device: Any) -> Buffer:
    a = adapter_for(out)
    if framework is not None and get_adapter(framework).name != a.name:
        raise FrameworkError(f"gather: out is a {a.name} array but framework={framework!r} was asked for")
    if not a.traits.can_view:
        raise FrameworkError(
            f"gather: out is a {a.name} array, which cannot be written in place (immutable); "
            f"call gather(framework={a.name!r}) for a new array instead"
        )
    shape = a.shape_of(out)
    if shape != dt.shape:
        raise LayoutMismatchError(f"gather: out has shape {shape} but the tensor {dt.shape}")
    got = canonical(a.dtype_of(out))
    if got != dt.dtype:
        raise DtypeError(f"gather: out has dtype {got}, the tensor {dt.dtype}")
    dev = a.device_of(out)
    if device is not None and not _same_slot(as_device(device), dev):
        raise DeviceError(f"gather: out lies on {dev} but device={device!r} was asked for")
    if a.is_readonly(out):
        raise ReadOnlyError(f"gather: out (a {a.name} array) is read-only; nothing was written")
    strides = a.strides_of(out)
    if any(s == 0 and n > 1 for s, n in zip(strides, shape)):
        raise ValueError(f"gather: out has zero strides {strides} (a broadcast view); elements would overlap")
    return Buffer(out, a, dev, given=dt.size * dt.itemsize <= GIVEN_VIEWS_MAX_BYTES)


def _same_slot(a: Device, b: Device) -> bool:
    return a == b or (a.is_host and b.is_host)
