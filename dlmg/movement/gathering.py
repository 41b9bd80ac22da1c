"""Gather: the whole of a tensor as one regular array (fresh, or a given strided
destination of any mutable framework); a redistribution into one array.
Across processes :mod:`~dlmg.movement.across` takes over."""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, Sequence

from .._shapes import c_strides
from ..device import Device
from ..dtypes import info
from ..plans.endpoints import full_endpoint
from ..plans.build import build_plan
from ..plans.plan import RedistributionPlan, one_copy
from ..registry import DEFAULT_FRAMEWORK, get_adapter
from . import across
from .copies import Buffer, run_jobs
from .destinations import destination
from .rearrange import assembled
from .sources import KEPT, PLAN_CACHE_SIZE, engine_for, remembered, source_endpoints, source_geometry, \
    source_places, source_views

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["gather", "c_ordered_gather_plan"]

_UNSET = object()  # a gather's one copy not worked out yet


def gather(dt: "DistributedTensor", framework: str | None = None, device: Any = None, out: Any = None,
           root: int | None = None) -> Any:
    """The whole of ``dt`` as one array (see :meth:`dlmg.DistributedTensor.gather`)."""
    if engine_for(dt, "gather") is not None:
        return across.gather(dt, framework, device, out, root)
    if root not in (None, 0):
        raise ValueError(f"gather: root={root!r} but dlmg runs in one process (rank 0)")
    if out is None:
        target = get_adapter(framework if framework is not None else dt.frameworks[0] if dt.frameworks else DEFAULT_FRAMEWORK)
        if not target.traits.can_view:  # a framework with views writes one buffer of its own as well
            whole = assembled(dt, target, device, remembered(dt).assemblies, partial(c_ordered_gather_plan, dt))
            if whole is not None:
                return whole
    buf, finish = destination(dt, framework, device, out)
    _fill(dt, buf, None if out is None else buf.adapter.strides_of(out))
    return finish()


def _fill(dt: "DistributedTensor", buf: Buffer, strides: Sequence[int] | None = None) -> None:
    """Write all of ``dt`` into ``buf`` (a full array with element ``strides``; C order by default)."""
    if dt.size == 0:
        return
    if strides is None:
        strides = buf.adapter.strides_of(buf.base)
    strides = tuple(int(s) for s in strides)
    gathers = remembered(dt).gathers
    found = gathers.get((strides, buf.device))
    if found is None:
        if len(gathers) >= KEPT:
            gathers.clear()
        geometry = tuple(source_geometry(f) for f in dt.fragments)
        found = gathers[(strides, buf.device)] = [_gather_plan(dt.layout, geometry, strides, buf.device, dt.dtype), _UNSET]
    plan = found[0]
    sources, places = source_places(dt)
    copies = plan.copies_into(0)
    if places and not buf.device.is_host:  # fragments carved out of one allocation: one copy where they step regularly
        if found[1] is _UNSET:
            made = one_copy((0,), (0,), places, plan.copies_into)
            found[1] = None if made is None or made.src_device != made.dst_device else (made,)
        if found[1] is not None:
            copies = found[1]
    run_jobs([(copies, sources, buf)], dt.dtype, source_views(dt))


def c_ordered_gather_plan(dt: "DistributedTensor", device: Device) -> RedistributionPlan:
    """The plan of a gather of ``dt`` into a C-ordered array on ``device``."""
    geometry = tuple(source_geometry(f) for f in dt.fragments)
    return _gather_plan(dt.layout, geometry, c_strides(dt.shape), device, dt.dtype)


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def _gather_plan(
    src_layout: "Layout", geometry: tuple[Any, ...], strides: tuple[int, ...], device: Device, dtype: str
) -> RedistributionPlan:
    return build_plan(
        source_endpoints(src_layout, geometry), [full_endpoint(src_layout.shape, strides, device)],
        info(dtype).itemsize, can_reuse=lambda s, d: False, src_layout=src_layout, dtype=dtype,
    )
