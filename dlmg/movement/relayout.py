"""Redistribution: a tensor moved to another layout of the same shape, reusing
fragments that stay as they are.

In one process the plan (:mod:`~dlmg.plans.plan`) runs here; across
processes (after :func:`dlmg.distributed.init`) :mod:`~dlmg.movement.across`
takes over. A tensor with fragments of other processes and no engine is
refused with :class:`~dlmg.errors.FragmentError`.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Sequence

from .._shapes import c_strides
from ..device import Device
from ..dtypes import info
from ..errors import LayoutMismatchError
from ..layout import Layout
from ..plans.endpoints import Endpoint, layout_endpoints
from ..plans.build import build_plan
from ..plans.delegated import DelegatedPlan
from ..plans.plan import RedistributionPlan
from . import across
from .copies import Buffer, run_jobs
from .delegated import delegated, delegation_of
from .destinations import Carving, allocate_all, choose_framework, copy_jobs, finish_fragment, reuse
from .gathering import c_ordered_gather_plan
from .rearrange import assembled, retiled, split
from .scattering import scatter_plan
from .sources import KEPT, PLAN_CACHE_SIZE, all_local, engine_for, remembered, source_endpoints, source_geometry, \
    source_places, source_views

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..tensor import Fragment
    from ..tensor import DistributedTensor

__all__ = ["redistribute", "tensor_plan"]


class _Move:
    """What a tensor remembers of its redistribution to one layout (see
    :class:`~dlmg.movement.sources.Remembered`)."""

    __slots__ = ("targets", "plan", "local", "one_copies", "declined")

    def __init__(self, targets: list["Adapter"], plan: RedistributionPlan, local: bool) -> None:
        self.targets = targets
        self.plan = plan
        self.local = local
        self.one_copies: dict[Any, Any] = {}  # carving -> its one copy, or None (see copy_jobs)
        self.declined = False  # a framework without views could not split the gathered whole


def _plan_for(dt: "DistributedTensor", layout: "Layout", targets: Sequence[str]) -> RedistributionPlan:
    if dt.layout.shape != layout.shape:
        raise LayoutMismatchError(
            f"cannot redistribute a tensor of shape {dt.shape} to a layout of shape {layout.shape} "
            f"({layout!r})"
        )
    geometry = tuple(source_geometry(f) for f in dt.fragments)
    frameworks = tuple(f.framework for f in dt.fragments)
    return _redistribution_plan(dt.layout, geometry, frameworks, layout, tuple(targets), dt.dtype)


@lru_cache(maxsize=PLAN_CACHE_SIZE)
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
        source_endpoints(src_layout, geometry), layout_endpoints(layout), info(dtype).itemsize,
        can_reuse=can_reuse, src_layout=src_layout, dst_layout=layout, dtype=dtype,
    )


def _targets(dt: "DistributedTensor", layout: "Layout", framework: str | None) -> list["Adapter"]:
    # the choice depends on the destination's device only: made once per device
    chosen: dict[Device, "Adapter"] = {}
    out = []
    for frag in layout.fragments:
        adapter = chosen.get(frag.device)
        if adapter is None:
            adapter = chosen[frag.device] = choose_framework(dt, frag, framework)
        out.append(adapter)
    return out


def _planned(dt: "DistributedTensor", layout: "Layout", framework: str | None) -> "_Move":
    """The target frameworks and the plan of redistributing ``dt`` to ``layout``, and
    whether this process holds every fragment of ``dt``.

    Remembered on the tensor per target layout and framework: a tensor's fragments
    (their frameworks, devices and strides) never change while the fragments
    tuple stays the same object, so a repeated redistribution finds its plan
    with one dictionary lookup instead of describing every fragment again.
    """
    moves = remembered(dt).moves
    found = moves.get((layout, framework))
    if found is not None:
        return found  # type: ignore[no-any-return]
    targets = _targets(dt, layout, framework)
    plan = _plan_for(dt, layout, [a.name for a in targets])
    if len(moves) >= KEPT:
        moves.clear()
    found = moves[(layout, framework)] = _Move(targets, plan, all_local(dt))
    return found


def tensor_plan(dt: "DistributedTensor", layout: "Layout", framework: str | None = None) -> Any:
    """The plan :func:`redistribute` runs for ``dt`` and ``layout``: a
    :class:`RedistributionPlan` in one process (a :class:`DelegatedPlan` where the
    framework owning every fragment moves it all), the per-process-pair
    :class:`~dlmg.plans.routes.Routes` across processes."""
    if not isinstance(layout, Layout):
        raise TypeError(f"plan_redistribution needs a dlmg.Layout, got {type(layout).__name__}"
                        + (" (pass its .layout)" if isinstance(getattr(layout, "layout", None), Layout) else ""))
    engine = engine_for(dt, "plan_redistribution")
    if engine is not None:
        return across.redistribution_routes(dt.layout, layout, dt.itemsize, engine)
    plan = _planned(dt, layout, framework).plan
    found = delegation_of(dt, layout, framework)
    return plan if found is None else DelegatedPlan.of(plan, found[1].call)


def redistribute(dt: "DistributedTensor", layout: "Layout", framework: str | None = None) -> "DistributedTensor":
    """``dt`` in ``layout`` (see :meth:`dlmg.DistributedTensor.redistribute`)."""
    if not isinstance(layout, Layout):
        raise TypeError(f"redistribute needs a dlmg.Layout, got {type(layout).__name__}")
    if engine_for(dt, "redistribute") is not None:
        return across.redistribute(dt, layout, framework)
    handed = delegated(dt, layout, framework)  # the whole move by the framework owning every fragment
    if handed is not None:
        return handed
    move = _planned(dt, layout, framework)
    targets, plan = move.targets, move.plan
    if not targets[0].traits.can_view and not plan.reused:
        made = _relaid(dt, layout, move)
        if made is not None:
            return made
    sources, places = source_places(dt)
    prefer = tuple(dt.frameworks)
    written: dict[int, tuple[Buffer, "Adapter"]] = {}
    carvings: list[Carving] = []
    fresh = [(frag, target) for frag, target in zip(layout.fragments, targets) if frag.index not in plan.reused]
    by_framework: dict[str, tuple["Adapter", list[Any]]] = {}
    for frag, target in fresh:
        by_framework.setdefault(target.name, (target, []))[1].append(frag)
    for target, frags in by_framework.values():
        bufs, carved = allocate_all(layout, frags, target, dt.dtype, prefer)
        carvings.extend(carved)
        for frag, buf in zip(frags, bufs):
            written[frag.index] = (buf, target)
    buffers = {i: buf for i, (buf, _) in written.items()}
    run_jobs(copy_jobs(plan, sources, buffers, carvings, places, move.one_copies), dt.dtype, source_views(dt))
    out: list["Fragment"] = []
    for frag in layout.fragments:
        if frag.index in written:
            buf, target = written[frag.index]
            out.append(finish_fragment(frag, buf, target))
        else:
            out.append(reuse(dt.fragments[plan.reused[frag.index]], frag))
    return type(dt)._create(layout, out, dt.dtype)


def _relaid(dt: "DistributedTensor", layout: "Layout", move: "_Move") -> "DistributedTensor | None":
    """The redistribution made by a framework without views itself, where every
    fragment, before and after, is one of its arrays on one device: one pass
    from the old fragments to the new (:func:`~dlmg.plans.rearrange.retiled`)
    where each new one is a tiling of slices of the old, else its own gather
    (:func:`~dlmg.plans.rearrange.assembled`) then its own scatter
    (:func:`~dlmg.plans.rearrange.split`), two compiled calls instead of a staging
    array of another framework and an import per fragment. ``None`` elsewhere."""
    targets, plan = move.targets, move.plan
    target = targets[0]
    device = layout.devices[0]
    if any(t is not target for t in targets) or any(d != device for d in layout.devices):
        return None
    made = retiled(dt, target, plan, layout, device)
    if made is not None:
        return made
    if move.declined:  # the scatter declined before: not gathered again
        return None
    whole = assembled(dt, target, device, remembered(dt).assemblies, partial(c_ordered_gather_plan, dt))
    if whole is None:
        return None
    made = split(whole, target, scatter_plan(dt.shape, c_strides(dt.shape), device, layout, dt.dtype), layout,
                 device, dt.dtype)
    if made is None:
        move.declined = True
    return made
