"""Gather, scatter, redistribution and framework changes of distributed tensors.

These functions connect tensors to the copy planner (:mod:`~dlmg.plans.plan`)
and executor (:mod:`~dlmg.plans.execute`):

* :func:`gather` is a redistribution into one regular array (fresh, or a
  given strided destination of any mutable framework);
* :func:`scatter` is a redistribution out of one regular array;
* :func:`redistribute` moves between any two layouts of the same shape,
  reusing fragments that stay as they are;
* :func:`to_framework` hands every fragment to another framework through
  DLPack.

Only fragments of this process are read or written. Across processes (after
:func:`dlmg.distributed.init`) gather, scatter and redistribute go to the
communication engine (:mod:`dlmg.distributed.collectives`); without it, a
tensor with fragments of other processes is refused with
:class:`~dlmg.errors.FragmentError`.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from .._shapes import c_strides
from ..device import Device, as_device, unreachable_hint
from ..distributed._state import current
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK, adapter_for, get_adapter, viewing_frameworks
from ..dtypes import canonical, info
from ..errors import (
    CopyRequiredError,
    DeviceError,
    DtypeError,
    FragmentError,
    FrameworkError,
    LayoutError,
    LayoutMismatchError,
    ReadOnlyError,
)
from .endpoints import Endpoint, array_endpoint, full_endpoint, layout_endpoints
from .execute import Buffer, copy_framework, run_jobs, synchronize
from .plan import RedistributionPlan, build_plan, one_copy
from .rearrange import assembled, retiled, split
from ..fragment import slot_dlpack_device
from ..tensor import DistributedTensor, Fragment, process_rank

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..layout import FragmentLayout

__all__ = ["gather", "scatter", "redistribute", "to_framework", "tensor_plan"]

#: Plans kept per kind (redistribute, gather, scatter), least recently used dropped.
_PLAN_CACHE_SIZE = 128


def _get(name: str) -> "Adapter":
    return get_adapter(name)


# -- sources -------------------------------------------------------------------
def _engine(dt: "DistributedTensor", what: str) -> Any:
    """The active communication engine, or ``None`` when dlmg runs in one process.

    Raises
    ------
    FragmentError
        When ``dt`` has fragments of other processes but no engine was set up.
    """
    engine = current()
    if engine is None and not _all_local(dt):
        remote = [f.index for f in dt.fragments if not f.is_local]
        if remote:
            raise FragmentError(
                f"{what}: fragments {remote} are held by other processes (ranks "
                f"{sorted({dt.fragments[i].rank for i in remote})}); call dlmg.distributed.init() "
                "in every process first"
            )
    return engine


def _all_local(dt: "DistributedTensor") -> bool:
    """Whether this process holds every fragment of ``dt`` (asked once per fragments tuple)."""
    memo = _memo(dt)
    local = memo.get("all local")
    if local is None:
        local = memo["all local"] = all(f.is_local for f in dt.fragments)
    return local


def _source_geometry(frag: "Fragment") -> Any:
    if not frag.is_local:
        return None
    if frag.is_padded:
        return "padded"
    return frag.adapter.strides_of(frag.array)


def _source_endpoints(layout: "Layout", geometry: Sequence[Any]) -> list[Endpoint]:
    """Endpoints of a tensor's fragments: ``geometry`` has, per fragment, its
    strides, ``"padded"`` or ``None`` (held by another process)."""
    base = layout_endpoints(layout)
    out = []
    for frag, ep, geo in zip(layout.fragments, base, geometry):
        rank = -1 if geo is None else process_rank()
        if geo is None or geo == "padded":
            out.append(Endpoint(ep.index, ep.device, ep.modes, ep.scales, ep.group, ep.fixed_memory, rank))
        else:
            out.append(array_endpoint(frag, geo, rank=rank))
    return out


def _memo(dt: "DistributedTensor") -> dict[Any, Any]:
    """What dlmg remembers about ``dt``'s current fragments (plans, source buffers).

    Fragments never change geometry, framework or device while the tensor's
    fragments tuple stays the same object; a new tuple (in-place updates of
    JAX fragments) starts a new memo.
    """
    memo = dt.__dict__.get("_plan_memo")
    if memo is None or memo.get("fragments") is not dt.fragments or len(memo) > 32:
        memo = dt.__dict__["_plan_memo"] = {"fragments": dt.fragments}
    return memo


def _views(dt: "DistributedTensor") -> dict[Any, Any]:
    """The source views of ``dt``'s copies, kept across calls (see :func:`run_copies`)."""
    memo = _memo(dt)
    views = memo.get("views")
    if views is None or len(views) > 4096:
        views = memo["views"] = {}
    return views


def _source_buffers(dt: "DistributedTensor") -> dict[int, Buffer]:
    memo = _memo(dt)
    out = memo.get("sources")
    if out is None:
        out = {}
        for frag in dt.fragments:
            if frag.is_local:
                base = frag.base
                out[frag.index] = Buffer(base, frag.adapter, frag.adapter.device_of(base))
        memo["sources"] = out
    return out


def _source_places(dt: "DistributedTensor") -> tuple[dict[int, Buffer], dict[int, tuple[int, int]]]:
    """``dt``'s source buffers, with the allocations that several of them view
    added under keys -1, -2, ... (fragments dlmg carved out of one allocation
    on a GPU, see :func:`_allocate_all`), and where each such fragment lies:
    fragment -> ``(key, element offset)``. A copy plan can then read all of
    them as one array (:func:`~dlmg.plans.plan.one_copy`)."""
    memo = _memo(dt)
    found = memo.get("places")
    if found is None:
        sources = _source_buffers(dt)
        shared: dict[Any, tuple[Buffer, list[tuple[int, int]]]] = {}  # allocation -> (buffer, fragments)
        for index, buf in sources.items():
            if buf.device.is_host:
                continue
            adapter = buf.adapter
            found_whole = adapter.allocation_of(buf.base)
            if found_whole is not None:
                whole, offset = found_whole
                key = (adapter.name, buf.device, adapter.data_ptr(whole), adapter.shape_of(whole))
                shared.setdefault(key, (Buffer(whole, adapter, buf.device), []))[1].append((index, offset))
        extended: dict[int, Buffer] = dict(sources)
        places: dict[int, tuple[int, int]] = {}
        for buf, members in shared.values():
            if len(members) > 1:
                number = -1 - len(extended) + len(sources)
                extended[number] = buf
                places.update((index, (number, offset)) for index, offset in members)
        found = memo["places"] = (extended, places) if places else (sources, places)
    return found


# -- destinations --------------------------------------------------------------
def _allocate(frag: "FragmentLayout", framework: "Adapter", dtype: str, prefer: Sequence[str]) -> tuple[Buffer, "Adapter"]:
    """A writable buffer for destination fragment ``frag``; returns (buffer, copy framework)."""
    device = frag.device
    lay = frag.layout
    if framework.can_view:
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


def _carve_groups(layout: "Layout", frags: Sequence["FragmentLayout"], itemsize: int) -> tuple[_Group, ...]:
    """How :func:`_allocate_all` carves ``frags`` (fragments of ``layout``) of
    ``itemsize``-byte elements: worked out once per layout, fragments and itemsize."""
    memo = layout.__dict__.setdefault("_carve_groups", {})
    key = (itemsize, tuple(frag.index for frag in frags))
    found = memo.get(key)
    if found is not None:
        return found
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
    memo[key] = found = tuple(groups)
    return found


class _Carving(NamedTuple):
    """Destinations carved out of one allocation ``whole`` as ``group`` says."""

    whole: Buffer
    group: _Group


def _allocate_all(
    layout: "Layout", frags: Sequence["FragmentLayout"], framework: "Adapter", dtype: str, prefer: Sequence[str]
) -> tuple[list[Buffer], list[_Carving]]:
    """Buffers for destination fragments ``frags`` of ``layout``: dense ones of one
    GPU carved out of one allocation (aligned views, one after another), others
    each their own (see :func:`_allocate`); and the carvings made.

    One allocation instead of one per fragment takes the allocator's host work
    once, and lets a copy that fills consecutive destinations from consecutive
    source elements run as one copy (see :func:`_jobs`). The fragments then share
    that allocation, which is freed when the last goes. Host fragments stay
    apart: their copies run on threads, one per destination, and a large host
    allocation is a fresh mapping whose pages fault in on first touch (the C
    allocator reuses freed blocks of up to 32 MiB instead).
    """
    itemsize = info(dtype).itemsize
    out: list[Buffer | None] = [None] * len(frags)
    carvings: list[_Carving] = []
    groups = _carve_groups(layout, frags, itemsize) if framework.can_view and isinstance(itemsize, int) else ()
    for group in groups:
        whole = framework.empty((group.total,), dtype, group.device)
        where = framework.device_of(whole)
        for k, shape, strides, offset in zip(group.positions, group.shapes, group.strides, group.offsets):
            out[k] = Buffer(framework.as_strided(whole, shape, strides, offset), framework, where)
        carvings.append(_Carving(Buffer(whole, framework, where), group))
    for k, frag in enumerate(frags):
        if out[k] is None:
            out[k] = _allocate(frag, framework, dtype, prefer)[0]
    return out, carvings  # type: ignore[return-value]


def _jobs(
    plan: RedistributionPlan, sources: dict[int, Buffer], written: dict[int, Buffer], carvings: Sequence[_Carving],
    places: dict[int, tuple[int, int]] | None = None, memo: dict[Any, Any] | None = None,
) -> list[tuple[Sequence[Any], dict[int, Buffer], Buffer]]:
    """The copy jobs filling destinations ``written`` (fragment number -> buffer):
    one per destination, except that the destinations of a carving that
    ``plan`` fills with consecutive elements of one source get one copy into the
    carved allocation (a slab scatter of a contiguous array: one copy, with two
    views instead of two per fragment), and those it fills with one view of
    each source repeated at regular steps get one strided copy per source (a
    cyclic scatter: one copy with a mode more; see
    :meth:`~dlmg.plans.plan.RedistributionPlan.stacked`). Where the sources too
    were carved out of one allocation (``places``, see :func:`_source_places`)
    and the pieces step regularly through both, every copy into a carving is
    one copy (:func:`~dlmg.plans.plan.one_copy`, remembered in ``memo``, the
    source tensor's): one launch for a whole redistribution on one GPU."""
    jobs: list[tuple[Sequence[Any], dict[int, Buffer], Buffer]] = []
    joined: set[int] = set()
    for whole, group in carvings:
        copy = plan.joined(group.members, group.offsets, group.sizes)
        copies: tuple[Any, ...] | None = (copy,) if copy is not None else None
        if copies is None and places and memo is not None:
            key = ("one copy", id(plan), group)
            found = memo.get(key)
            if found is None or found[0] is not plan:
                made = one_copy(group.members, group.offsets, places, plan.copies_into)
                found = memo[key] = (plan, None if made is None else (made,))  # the plan kept: its id stays unique
            copies = found[1]
        if copies is None:
            copies = plan.stacked(group.members, group.offsets, group.sizes)
        if copies is not None:
            jobs.append((copies, sources, whole))
            joined.update(group.members)
    jobs.extend((plan.copies_into(i), sources, buf) for i, buf in written.items() if i not in joined)
    return jobs


def _finish(frag: "FragmentLayout", buf: Buffer, framework: "Adapter", rank: int | None = None) -> "Fragment":
    """The fragment of ``frag`` held in ``buf`` (``rank``: this process's, when the caller has it)."""
    lay = frag.layout
    device = frag.device
    if lay.element_strides is None:
        array = buf.base
        if buf.adapter.name != framework.name:
            synchronize([buf])  # the staging framework's queued copies, before another framework reads
            array = framework.from_dlpack(buf.adapter.producer(array), device=device)
        return Fragment.of_array(frag, array, framework.name, rank=rank if rank is not None else process_rank(),
                                 adapter=framework, dl_device=slot_dlpack_device(framework, device))
    if frag.is_strided:
        view = buf.adapter.as_strided(buf.base, frag.shape, frag.strides, 0)
        return Fragment.of_array(frag, view, framework.name, rank=process_rank())
    return Fragment.of_memory(frag, buf.base, framework.name, rank=process_rank())


def _choose_framework(dt: "DistributedTensor", frag: "FragmentLayout", framework: str | None) -> "Adapter":
    if framework is not None:
        adapter = _get(framework)
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
        adapter = _get(name)
        if adapter.supports(frag.device):
            return adapter
    raise FrameworkError(
        f"none of the tensor's frameworks ({', '.join(dt.frameworks)}) can hold fragment "
        f"{frag.index} on {frag.device}; pass framework= to choose one that can"
    )


# -- redistribute ----------------------------------------------------------------
def _plan_for(dt: "DistributedTensor", layout: "Layout", targets: Sequence[str]) -> RedistributionPlan:
    if dt.layout.shape != layout.shape:
        raise LayoutMismatchError(
            f"cannot redistribute a tensor of shape {dt.shape} to a layout of shape {layout.shape} "
            f"({layout!r})"
        )
    geometry = tuple(_source_geometry(f) for f in dt.fragments)
    frameworks = tuple(f.framework for f in dt.fragments)
    return _redistribution_plan(dt.layout, geometry, frameworks, layout, tuple(targets), dt.dtype)


@lru_cache(maxsize=_PLAN_CACHE_SIZE)
def _redistribution_plan(
    src_layout: "Layout",
    geometry: tuple[Any, ...],
    frameworks: tuple[str | None, ...],
    layout: "Layout",
    targets: tuple[str, ...],
    dtype: str,
) -> RedistributionPlan:
    def can_reuse(s: Endpoint, d: Endpoint) -> bool:
        geo = geometry[s.index]
        if geo is None or frameworks[s.index] != targets[d.index]:
            return False
        if geo == "padded":  # padded memory fits only the same padded geometry
            return d.fixed_memory
        return True

    return build_plan(
        _source_endpoints(src_layout, geometry), layout_endpoints(layout), info(dtype).itemsize,
        can_reuse=can_reuse, src_layout=src_layout, dst_layout=layout, dtype=dtype,
    )


def _targets(dt: "DistributedTensor", layout: "Layout", framework: str | None) -> list["Adapter"]:
    # the choice depends on the destination's device only: made once per device
    chosen: dict[Device, "Adapter"] = {}
    out = []
    for frag in layout.fragments:
        adapter = chosen.get(frag.device)
        if adapter is None:
            adapter = chosen[frag.device] = _choose_framework(dt, frag, framework)
        out.append(adapter)
    return out


def _planned(
    dt: "DistributedTensor", layout: "Layout", framework: str | None
) -> tuple[list["Adapter"], RedistributionPlan, bool]:
    """The target frameworks and the plan of redistributing ``dt`` to ``layout``, and
    whether this process holds every fragment of ``dt``.

    Remembered on the tensor per target layout object: a tensor's fragments
    (their frameworks, devices and strides) never change while the fragments
    tuple stays the same object, so a repeated redistribution finds its plan
    with one dictionary lookup instead of describing every fragment again.
    """
    memo = _memo(dt)
    key = ("redistribute", id(layout), framework)
    found = memo.get(key)
    if found is not None and found[0] is layout:
        return found[1], found[2], found[3]
    targets = _targets(dt, layout, framework)
    plan = _plan_for(dt, layout, [a.name for a in targets])
    local = _all_local(dt)
    memo[key] = (layout, targets, plan, local)
    return targets, plan, local


def tensor_plan(dt: "DistributedTensor", layout: "Layout", framework: str | None = None) -> Any:
    """The plan :func:`redistribute` runs for ``dt`` and ``layout``: a
    :class:`RedistributionPlan` in one process, the per-process-pair
    :class:`~dlmg.distributed.routes.Routes` across processes."""
    engine = _engine(dt, "plan_redistribution")
    if engine is not None:
        from ..distributed.collectives import redistribution_routes

        return redistribution_routes(dt.layout, layout, dt.itemsize, engine)
    return _planned(dt, layout, framework)[1]


def redistribute(dt: "DistributedTensor", layout: "Layout", framework: str | None = None) -> "DistributedTensor":
    """``dt`` in ``layout`` (see :meth:`dlmg.DistributedTensor.redistribute`)."""
    if not isinstance(layout, Layout):
        raise TypeError(f"redistribute needs a dlmg.Layout, got {type(layout).__name__}")
    if _engine(dt, "redistribute") is not None:
        from ..distributed.collectives import redistribute as across

        return across(dt, layout, framework)
    targets, plan, local = _planned(dt, layout, framework)
    if not targets[0].can_view and not plan.reused:
        made = _relaid(dt, layout, targets, plan)
        if made is not None:
            return made
    sources, places = _source_places(dt)
    prefer = tuple(dt.frameworks)
    written: dict[int, tuple[Buffer, "Adapter"]] = {}
    carvings: list[_Carving] = []
    fresh = [(frag, target) for frag, target in zip(layout.fragments, targets) if frag.index not in plan.reused]
    by_framework: dict[str, tuple["Adapter", list[Any]]] = {}
    for frag, target in fresh:
        by_framework.setdefault(target.name, (target, []))[1].append(frag)
    for target, frags in by_framework.values():
        bufs, carved = _allocate_all(layout, frags, target, dt.dtype, prefer)
        carvings.extend(carved)
        for frag, buf in zip(frags, bufs):
            written[frag.index] = (buf, target)
    buffers = {i: buf for i, (buf, _) in written.items()}
    run_jobs(_jobs(plan, sources, buffers, carvings, places, _memo(dt)), dt.dtype, _views(dt))
    out: list["Fragment"] = []
    for frag in layout.fragments:
        if frag.index in written:
            buf, target = written[frag.index]
            out.append(_finish(frag, buf, target))
        else:
            out.append(_reuse(dt.fragments[plan.reused[frag.index]], frag))
    return DistributedTensor._create(layout, out, dt.dtype)


def _reuse(src: "Fragment", frag: "FragmentLayout") -> "Fragment":
    return src.with_layout(frag)


def _relaid(dt: "DistributedTensor", layout: "Layout", targets: list["Adapter"],
            plan: RedistributionPlan) -> "DistributedTensor | None":
    """The redistribution made by a framework without views itself, where every
    fragment, before and after, is one of its arrays on one device: one pass
    from the old fragments to the new (:func:`~dlmg.plans.rearrange.retiled`)
    where each new one is a tiling of slices of the old, else its own gather
    (:func:`~dlmg.plans.rearrange.assembled`) then its own scatter
    (:func:`~dlmg.plans.rearrange.split`), two compiled calls instead of a staging
    array of another framework and an import per fragment. ``None`` elsewhere."""
    target = targets[0]
    device = layout.devices[0]
    if any(t is not target for t in targets) or any(d != device for d in layout.devices):
        return None
    made = retiled(dt, target, plan, layout, device)
    if made is not None:
        return made
    memo = _memo(dt)
    key = ("relaid", id(layout))
    declined = memo.get(key)
    if declined is not None and declined[0] is layout:  # the scatter declined before: not gathered again
        return None
    whole = assembled(dt, target, device, memo, partial(_c_ordered_gather_plan, dt))
    if whole is None:
        return None
    made = split(whole, target, _scatter_plan(dt.shape, c_strides(dt.shape), device, layout, dt.dtype), layout,
                 device, dt.dtype)
    if made is None:
        memo[key] = (layout,)
    return made


# -- gather ------------------------------------------------------------------------
def _default_device(dt: "DistributedTensor") -> Device:
    for f in dt.fragments:
        if f.is_local:
            return f.device
    return dt.layout.devices[0]


def gather(dt: "DistributedTensor", framework: str | None = None, device: Any = None, out: Any = None,
           root: int | None = None) -> Any:
    """The whole of ``dt`` as one array (see :meth:`dlmg.DistributedTensor.gather`)."""
    if _engine(dt, "gather") is not None:
        from ..distributed.collectives import gather as across

        return across(dt, framework, device, out, root)
    if root not in (None, 0):
        raise ValueError(f"gather: root={root!r} but dlmg runs in one process (rank 0)")
    if out is None:
        target = _get(framework if framework is not None else dt.frameworks[0] if dt.frameworks else DEFAULT_FRAMEWORK)
        if not target.can_view:  # a framework with views writes one buffer of its own as well
            whole = assembled(dt, target, device, _memo(dt), partial(_c_ordered_gather_plan, dt))
            if whole is not None:
                return whole
    buf, finish = destination(dt, framework, device, out)
    _fill(dt, buf, None if out is None else buf.adapter.strides_of(out))
    return finish()


def destination(dt: "DistributedTensor", framework: str | None, device: Any, out: Any) -> tuple[Buffer, Any]:
    """Where a gather of ``dt`` writes: ``(buffer, finish)``; ``finish()`` returns the result
    (hands a staging buffer to an immutable target framework)."""
    if out is not None:
        return _check_out(dt, out, framework, device), lambda: out
    if framework is None:
        framework = dt.frameworks[0] if dt.frameworks else DEFAULT_FRAMEWORK
    target = _get(framework)
    dev = target.landing_device(_default_device(dt)) if device is None else as_device(device)
    if not target.supports(dev):
        raise DeviceError(f"framework {target.name!r} cannot hold an array on {dev}{unreachable_hint([dev])}")
    writer = target if target.can_view else copy_framework(dev, dt.dtype, tuple(dt.frameworks))
    base = writer.empty(dt.shape, dt.dtype, dev)
    buf = Buffer(base, writer, writer.device_of(base) if dt.size else dev)

    def finish() -> Any:
        if writer.name == target.name:
            return base
        synchronize([buf])  # the staging framework's queued copies, before another framework reads
        return target.from_dlpack(writer.producer(base), device=dev)

    return buf, finish


def _check_out(dt: "DistributedTensor", out: Any, framework: str | None, device: Any) -> Buffer:
    a = adapter_for(out)
    if framework is not None and _get(framework).name != a.name:
        raise FrameworkError(f"gather: out is a {a.name} array but framework={framework!r} was asked for")
    if not a.can_view:
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
    return Buffer(out, a, dev)


def _same_slot(a: Device, b: Device) -> bool:
    return a == b or (a.is_host and b.is_host)


def _fill(dt: "DistributedTensor", buf: Buffer, strides: Sequence[int] | None = None) -> None:
    """Write all of ``dt`` into ``buf`` (a full array with element ``strides``; C order by default)."""
    if dt.size == 0:
        return
    if strides is None:
        strides = buf.adapter.strides_of(buf.base)
    strides = tuple(int(s) for s in strides)
    memo = _memo(dt)
    plan = memo.get(("gather", strides, buf.device))
    if plan is None:
        geometry = tuple(_source_geometry(f) for f in dt.fragments)
        plan = memo[("gather", strides, buf.device)] = _gather_plan(dt.layout, geometry, strides, buf.device, dt.dtype)
    sources, places = _source_places(dt)
    copies = plan.copies_into(0)
    if places and not buf.device.is_host:  # fragments carved out of one allocation: one copy where they step regularly
        key = ("one copy", id(plan))
        found = memo.get(key)
        if found is None or found[0] is not plan:
            made = one_copy((0,), (0,), places, plan.copies_into)
            found = memo[key] = (plan, None if made is None or made.src_device != made.dst_device else (made,))
        if found[1] is not None:
            copies = found[1]
    run_jobs([(copies, sources, buf)], dt.dtype, _views(dt))


def _c_ordered_gather_plan(dt: "DistributedTensor", device: Device) -> RedistributionPlan:
    """The plan of a gather of ``dt`` into a C-ordered array on ``device``."""
    geometry = tuple(_source_geometry(f) for f in dt.fragments)
    return _gather_plan(dt.layout, geometry, c_strides(dt.shape), device, dt.dtype)


@lru_cache(maxsize=_PLAN_CACHE_SIZE)
def _gather_plan(
    src_layout: "Layout", geometry: tuple[Any, ...], strides: tuple[int, ...], device: Device, dtype: str
) -> RedistributionPlan:
    return build_plan(
        _source_endpoints(src_layout, geometry), [full_endpoint(src_layout.shape, strides, device)],
        info(dtype).itemsize, can_reuse=lambda s, d: False, src_layout=src_layout, dtype=dtype,
    )


# -- scatter -------------------------------------------------------------------------
def scatter(array: Any, layout: "Layout", framework: str | None = None, root: int | None = None) -> "DistributedTensor":
    """Spread a regular array over ``layout``'s fragments (see :func:`dlmg.scatter`)."""
    if not isinstance(layout, Layout):
        raise TypeError(f"scatter needs a dlmg.Layout, got {type(layout).__name__}")
    if current() is not None:
        from ..distributed.collectives import scatter as across

        return across(array, layout, framework, 0 if root is None else root)
    if root not in (None, 0):
        raise ValueError(f"scatter: root={root!r} but dlmg runs in one process (rank 0)")
    if any(r != 0 for r in layout.ranks):
        raise FragmentError(
            f"scatter: the layout puts fragments on ranks {sorted(set(layout.ranks))}; call "
            "dlmg.distributed.init() in every process first"
        )
    a = adapter_for(array)
    shape = a.shape_of(array)
    if shape != layout.shape:
        raise LayoutMismatchError(f"scatter: the array has shape {shape} but the layout {layout.shape} ({layout!r})")
    dtype = canonical(a.dtype_of(array))
    if framework is None:
        missing = _unsupported(a, layout)
        if missing:
            raise FrameworkError(
                f"scatter: the source is a {a.name} array and {a.name} cannot hold fragments on "
                f"{', '.join(map(str, missing))}; pass framework= to choose one that can{unreachable_hint(missing)}"
            )
        target = a
    else:
        target = _get(framework)
        missing = _unsupported(target, layout)
        if missing:
            raise DeviceError(
                f"scatter: framework {target.name!r} cannot hold fragments on "
                f"{', '.join(map(str, missing))}{unreachable_hint(missing)}"
            )
    src_dev = a.device_of(array)
    strides = tuple(int(s) for s in a.strides_of(array))
    plan = _scatter_plan(shape, strides, src_dev, layout, dtype)
    if target is a and not a.can_view:
        found = split(array, a, plan, layout, src_dev, dtype)
        if found is not None:
            return found
    sources = {0: Buffer(array, a, src_dev)}
    written, carvings = _allocate_all(layout, layout.fragments, target, dtype, (a.name,))
    run_jobs(_jobs(plan, sources, dict(enumerate(written)), carvings), dtype)
    me = process_rank()
    out = [_finish(frag, buf, target, me) for frag, buf in zip(layout.fragments, written)]
    return DistributedTensor._create(layout, out, dtype)


def _unsupported(adapter: "Adapter", layout: "Layout") -> list[Device]:
    """The devices of ``layout`` that ``adapter``'s framework cannot hold arrays on,
    found once per layout and framework (the answer does not change while a process runs)."""
    memo = layout.__dict__.setdefault("_unsupported", {})
    found = memo.get(adapter.name)
    if found is None:
        found = memo[adapter.name] = [d for d in dict.fromkeys(layout.devices) if not adapter.supports(d)]
    return found


@lru_cache(maxsize=_PLAN_CACHE_SIZE)
def _scatter_plan(
    shape: tuple[int, ...], strides: tuple[int, ...], device: Device, layout: "Layout", dtype: str
) -> RedistributionPlan:
    return build_plan(
        [full_endpoint(shape, strides, device)], layout_endpoints(layout), info(dtype).itemsize,
        can_reuse=lambda s, d: False, dst_layout=layout, dtype=dtype,
    )


# -- to --------------------------------------------------------------------------------
def to_framework(dt: "DistributedTensor", framework: str, copy: bool | None = None) -> "DistributedTensor":
    """``dt`` with every local fragment handed to ``framework`` (see :meth:`dlmg.DistributedTensor.to`)."""
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    target = _get(framework)
    name = target.name
    me = process_rank()
    out = []
    take_in = target.from_dlpack
    quick, quick_source = None, None  # the target's importer of the last source framework's arrays
    last_device: Device | None = None
    dl_device: tuple[int, int] | None = None  # what Fragment.__dlpack_device__ reports on last_device
    for frag in dt.fragments:
        # attributes read directly: this loop is the whole cost of to()
        array = frag._array
        if frag.rank != me or (array is None and frag._memory is None) or (
            frag.framework == name and copy is not True
        ):
            out.append(frag)
            continue
        if array is None or copy is not None:
            out.append(_handed_over(frag, target, copy, me))
            continue
        # the common case, a zero-copy hand-over of a plain fragment
        src = frag._adapter or frag.adapter
        device = frag.layout.device
        if src is not quick_source:
            quick_source, quick = src, target.importer(src, dt.dtype, dt.shape)
        new = None
        if quick is not None:
            try:
                new = quick(array, device)
            except Exception:  # the full import below copies, or says why it cannot
                new = None
        readonly = frag._readonly or src.is_readonly(array)
        if new is None:  # (the importer's arrays share the memory, or are immutable: see Adapter.importer)
            try:
                new = take_in(src.producer(array), device=device)
            except Exception as exc:
                raise _hand_over_error(frag, target, copy, exc) from exc
            readonly = readonly and (not frag.size or target.data_ptr(new) == src.data_ptr(array))
        if device is not last_device:  # the import put it on the fragment's device: host
            # memory in slot cpu:k exports as (1, k); a layout's equal devices are one object
            last_device, dl_device = device, slot_dlpack_device(target, device)
        out.append(Fragment.of_result(frag.layout, new, name, target, readonly, dl_device))  # frag.rank is me
    return DistributedTensor._create(dt.layout, out, dt.dtype)


def _hand_over_error(frag: Fragment, target: "Adapter", copy: bool | None, exc: Exception) -> Exception:
    if isinstance(exc, CopyRequiredError):
        return exc
    if copy is False:
        return CopyRequiredError(
            f"fragment {frag.index} ({frag.framework} on {frag.device}) cannot be handed to "
            f"{target.name} without a copy: {exc}"
        )
    return FragmentError(
        f"fragment {frag.index} ({frag.framework} on {frag.device}) could not be handed to "
        f"{target.name}: {exc}"
    )


def _handed_over(frag: Fragment, target: "Adapter", copy: bool | None, me: int) -> Fragment:
    """``frag`` handed to ``target`` with ``copy`` asked, or a padded fragment."""
    name = target.name
    padded = frag._array is None
    if padded and not target.can_view:
        raise LayoutError(
            f"fragment {frag.index} lies in padded blocks, which {target.name} cannot view; "
            "redistribute to a dense layout first"
        )
    src = frag.adapter
    base = frag.base
    readonly = frag._readonly or bool(src.is_readonly(base))
    device = frag.layout.device
    try:
        new = target.from_dlpack(src.producer(base), device=device, copy=copy)
    except Exception as exc:
        raise _hand_over_error(frag, target, copy, exc) from exc
    if copy is not None and frag.size and (target.data_ptr(new) == src.data_ptr(base)) != (not copy):
        if copy is False:
            raise CopyRequiredError(
                f"fragment {frag.index}: {target.name} copied the memory although copy=False was asked"
            )
        # copy=True honoured by the framework's own copy (JAX's from_dlpack ignores it on the host)
        new = target.from_dlpack(new, device=frag.device, copy=True)
    # Memory handed on without a copy stays as read-only as its source was.
    readonly = readonly and copy is not True and (not frag.size or target.data_ptr(new) == src.data_ptr(base))
    if padded:
        return Fragment.of_memory(frag.layout, new, name, rank=me, readonly=readonly)
    return Fragment.of_array(frag.layout, new, name, rank=me, readonly=readonly, adapter=target,
                             dl_device=slot_dlpack_device(target, device))
