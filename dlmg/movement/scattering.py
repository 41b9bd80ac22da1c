"""Scatter: one regular array spread over a layout's fragments; a redistribution
out of one array. Across processes :mod:`~dlmg.movement.across` takes over."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..device import Device, unreachable_hint
from ..distributed.state import current
from ..dtypes import canonical, info
from ..errors import DeviceError, FragmentError, FrameworkError, LayoutMismatchError
from ..layout import Layout
from ..plans.endpoints import full_endpoint, layout_endpoints
from ..plans.build import build_plan
from ..plans.plan import RedistributionPlan
from ..registry import adapter_for, get_adapter
from ..fragment import process_rank
from ..base import TensorBase
from . import across
from .copies import Buffer, run_jobs
from .destinations import allocate_all, copy_jobs, finish_fragment
from .rearrange import split
from .sources import PLAN_CACHE_SIZE

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..tensor import DistributedTensor

__all__ = ["scatter", "scatter_plan"]


def scatter(array: Any, layout: "Layout", framework: str | None = None, root: int | None = None) -> "DistributedTensor":
    """Spread a regular array over ``layout``'s fragments (see :func:`dlmg.scatter`)."""
    if not isinstance(layout, Layout):
        raise TypeError(f"scatter needs a dlmg.Layout, got {type(layout).__name__}")
    if current() is not None:
        return across.scatter(array, layout, framework, 0 if root is None else root)
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
        target = get_adapter(framework)
        missing = _unsupported(target, layout)
        if missing:
            raise DeviceError(
                f"scatter: framework {target.name!r} cannot hold fragments on "
                f"{', '.join(map(str, missing))}{unreachable_hint(missing)}"
            )
    src_dev = a.device_of(array)
    strides = tuple(int(s) for s in a.strides_of(array))
    plan = scatter_plan(shape, strides, src_dev, layout, dtype)
    if target is a and not a.traits.can_view:
        found = split(array, a, plan, layout, src_dev, dtype)
        if found is not None:
            return found
    sources = {0: Buffer(array, a, src_dev)}
    written, carvings = allocate_all(layout, layout.fragments, target, dtype, (a.name,))
    run_jobs(copy_jobs(plan, sources, dict(enumerate(written)), carvings), dtype)
    me = process_rank()
    out = [finish_fragment(frag, buf, target, me) for frag, buf in zip(layout.fragments, written)]
    return TensorBase._create(layout, out, dtype)


def _unsupported(adapter: "Adapter", layout: "Layout") -> tuple[Device, ...]:
    """The devices of ``layout`` that ``adapter``'s framework cannot hold arrays on."""
    return _unsupported_devices(adapter.name, layout)


# Answers for this many (framework, layout): a scatter asks on every call, and the answer
# (one supports() per device) does not change while a process runs. Keyed on the layout,
# which keeps its hash: keyed on the device tuple, hashing it cost nearly as much as
# working the answer out; keyed on the layout, it is found at once.
@lru_cache(maxsize=256)
def _unsupported_devices(framework: str, layout: "Layout") -> tuple[Device, ...]:
    adapter = get_adapter(framework)
    return tuple(d for d in dict.fromkeys(layout.devices) if not adapter.supports(d))


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def scatter_plan(
    shape: tuple[int, ...], strides: tuple[int, ...], device: Device, layout: "Layout", dtype: str
) -> RedistributionPlan:
    return build_plan(
        [full_endpoint(shape, strides, device)], layout_endpoints(layout), info(dtype).itemsize,
        can_reuse=lambda s, d: False, dst_layout=layout, dtype=dtype,
    )
