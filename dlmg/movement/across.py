"""Gather, scatter and redistribution when the fragments live in several processes.

Each function follows the same steps on every process:

1. local preparation -- check the arguments, allocate the destination memory,
   plan the routes (:mod:`~dlmg.plans.routes`, the same on every
   process) and pack the outgoing pieces (:mod:`~dlmg.movement.exchange`);
2. the agreement (:mod:`~dlmg.distributed.agree`): same operation and layouts
   everywhere, nobody failed;
3. one all-to-all(v) of the packed messages, then the copies into the
   destinations;
4. a second agreement (:func:`~dlmg.distributed.agree.conclude`): a process
   whose copies failed after the data moved makes every process raise, so
   no process returns a value the others did not also get.

The whole of each runs under the engine's lock
(:func:`~dlmg.distributed.agree.exclusive`): one collective at a time per
process, whatever threads call them.

``gather()`` with every process receiving is an all-gather. When each process
holds one equal slab of leading rows and every process's destination is a
C-contiguous array, it runs as the engine's all-gather straight from the
fragments into the destinations (no packing); the processes vote on that in
the agreement, so they all take the same path.
"""

from __future__ import annotations

import operator
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .._shapes import c_strides
from ..device import Device
from ..dtypes import canonical, info
from ..errors import FragmentError, FrameworkError, LayoutMismatchError
from ..fragment import verify_fragments
from ..distributed.state import check_ranks, current
from ..distributed.agree import conclude, describe, exclusive, prepare, prepare_vote
from ..layout import Layout
from ..plans.endpoints import full_endpoint, layout_endpoints, same_memory
from ..plans.routes import Routes, full_places, layout_places, plan_routes
from ..registry import adapter_for, get_adapter
from ..fragment import Fragment
from ..base import TensorBase
from . import exchange
from .copies import Buffer, copy_framework
from .destinations import allocate, choose_framework, destination, finish_fragment, reuse
from .exchange import deliver, pack
from .sources import source_buffers, source_endpoints, source_geometry

if TYPE_CHECKING:  # pragma: no cover
    from ..distributed.engine import Engine
    from ..tensor import DistributedTensor

__all__ = ["gather", "scatter", "redistribute", "gather_routes", "redistribution_routes", "scatter_routes"]

#: Routes kept per kind (gather, redistribute, scatter), least recently used dropped.
_CACHE_SIZE = 64


def _engine() -> "Engine":
    engine = current()
    if engine is None:  # pragma: no cover - callers check first
        raise RuntimeError("dlmg.distributed.init() was not called")
    return engine


def _comm_device(layout: "Layout", engine: "Engine") -> Device:
    """Where messages of a tensor of ``layout`` are staged on this process."""
    return Device("cpu", 0) if layout.devices[0].is_host else engine.local_device()


def _root(root: Any, engine: "Engine", what: str) -> int:
    try:
        r = operator.index(root)
    except TypeError:
        raise TypeError(f"{what}: root must be an int rank, got {root!r}") from None
    if not 0 <= r < engine.world_size:
        raise ValueError(f"{what}: root={r} is not a rank of the {engine.world_size} processes")
    return r


# -- routes (identical on every process) --------------------------------------------
def gather_routes(layout: "Layout", receivers: tuple[int, ...], itemsize: int, engine: "Engine") -> Routes:
    """Routes of a gather of a tensor of ``layout`` into whole arrays on ``receivers``."""
    device = _comm_device(layout, engine)
    return _gather_routes(layout, receivers, itemsize, engine.world_size, device, engine.transport(device))


@lru_cache(maxsize=_CACHE_SIZE)
def _gather_routes(
    layout: "Layout", receivers: tuple[int, ...], itemsize: int, world: int, device: Device, transport: str
) -> Routes:
    return plan_routes(
        layout_places(layout), full_places(layout.shape, receivers, [device] * len(receivers)),
        world, itemsize, transport)


def redistribution_routes(src: "Layout", dst: "Layout", itemsize: int, engine: "Engine") -> Routes:
    """Routes moving a tensor from layout ``src`` to layout ``dst``."""
    device = _comm_device(dst, engine)
    return _redistribution_routes(src, dst, itemsize, engine.world_size, engine.transport(device))


@lru_cache(maxsize=_CACHE_SIZE)
def _redistribution_routes(src: "Layout", dst: "Layout", itemsize: int, world: int, transport: str) -> Routes:
    return plan_routes(layout_places(src), layout_places(dst), world, itemsize, transport)


def scatter_routes(layout: "Layout", root: int, itemsize: int, engine: "Engine") -> Routes:
    """Routes spreading a whole array of process ``root`` over ``layout``."""
    device = _comm_device(layout, engine)
    return _scatter_routes(layout, root, itemsize, engine.world_size, device, engine.transport(device))


@lru_cache(maxsize=_CACHE_SIZE)
def _scatter_routes(layout: "Layout", root: int, itemsize: int, world: int, device: Device, transport: str) -> Routes:
    return plan_routes(
        full_places(layout.shape, (root,), [device]), layout_places(layout), world, itemsize, transport)


# -- gather ----------------------------------------------------------------------------
def _slab_rows(layout: "Layout", world: int) -> bool:
    """Whether rank ``r`` holds exactly rows ``[r*b, (r+1)*b)`` (one equal slab each, no replicas)."""
    return (
        layout.ndim > 0 and layout.nreplicas == 1 and layout.nfragments == world
        and layout.ranks == tuple(range(world)) and layout.grid[0] == world
        and all(g == 1 for g in layout.grid[1:]) and layout.block[0] * world == layout.shape[0]
        and layout.element_strides is None
    )


def _direct_vote(dt: "DistributedTensor", buf: Buffer | None, engine: "Engine", device: Device) -> bool:
    """Whether this process can all-gather straight from its fragment into ``buf``."""
    if buf is None or not _slab_rows(dt.layout, engine.world_size):
        return False
    frag = dt.fragments[engine.rank]
    if not frag.is_local or frag.is_padded or not same_memory(frag.device, device) or not same_memory(buf.device, device):
        return False
    if tuple(buf.adapter.strides_of(buf.base)) != c_strides(dt.shape):
        return False
    if tuple(frag.adapter.strides_of(frag.array)) != c_strides(frag.shape):
        return False
    return engine.accepts(frag.array, frag.adapter.name) and engine.accepts(buf.base, buf.adapter.name)


def gather(dt: "DistributedTensor", framework: str | None, device: Any, out: Any, root: int | None) -> Any:
    """All-gather (``root=None``) or gather to ``root`` of ``dt``; ``None`` on non-roots."""
    engine = _engine()
    with exclusive(engine, "gather"):
        return _gather(engine, dt, framework, device, out, root)


def _gather(engine: "Engine", dt: "DistributedTensor", framework: str | None, device: Any, out: Any,
            root: int | None) -> Any:
    me = engine.rank
    receivers = tuple(range(engine.world_size)) if root is None else (_root(root, engine, "gather"),)
    comm = _comm_device(dt.layout, engine)
    description = describe("gather", layout=dt.layout, dtype=dt.dtype, root=root)

    def work() -> tuple[Any, bool]:
        check_ranks(dt.layout, "gather")
        verify_fragments(dt.fragments)  # here, so a refusal reaches every process
        if me in receivers:
            buf, finish = destination(dt, framework, device, out)
        else:
            if out is not None:
                raise ValueError(f"gather(root={root}): out= is for the root; rank {me} passes none")
            buf, finish = None, lambda: None
        direct = root is None and _direct_vote(dt, buf, engine, comm)
        if direct:
            return (buf, finish, None), True
        routes = gather_routes(dt.layout, receivers, dt.itemsize, engine)
        geometry = tuple(source_geometry(f) for f in dt.fragments)
        src_eps = {ep.index: ep for ep in source_endpoints(dt.layout, geometry) if dt.fragments[ep.index].is_local}
        dst_eps, dsts = {}, {}
        if buf is not None:
            k = receivers.index(me)
            strides = tuple(int(s) for s in buf.adapter.strides_of(buf.base))
            dst_eps[k] = full_endpoint(dt.shape, strides, buf.device)
            dsts[k] = buf
        packed = pack(engine, routes, src_eps, source_buffers(dt), dst_eps, dsts, dt.dtype, comm)
        return (buf, finish, packed), False

    (buf, finish, packed), votes = prepare_vote(engine, description, work)
    if all(votes):

        def direct() -> Any:
            frag = dt.fragments[me]
            failed = None
            try:
                exchange.ready([Buffer(frag.array, frag.adapter, frag.device), buf])
            except Exception as exc:  # this process still takes its part: its peers wait for it
                failed = exc
            if dt.size:
                engine.all_gather(frag.array, buf.base)
                engine.settle(comm)
            if failed is not None:
                raise failed
            return finish()

        return conclude(engine, description, direct)

    def general() -> Any:
        nonlocal packed
        if packed is None:  # this process could go direct but another could not: the general way
            packed = _repack(dt, buf, receivers, engine, comm)
        deliver(engine, packed)
        return finish()

    return conclude(engine, description, general)


def _repack(dt: "DistributedTensor", buf: Buffer, receivers: tuple[int, ...], engine: "Engine", comm: Device) -> Any:
    routes = gather_routes(dt.layout, receivers, dt.itemsize, engine)
    geometry = tuple(source_geometry(f) for f in dt.fragments)
    src_eps = {ep.index: ep for ep in source_endpoints(dt.layout, geometry) if dt.fragments[ep.index].is_local}
    k = receivers.index(engine.rank)
    strides = tuple(int(s) for s in buf.adapter.strides_of(buf.base))
    dst_eps = {k: full_endpoint(dt.shape, strides, buf.device)}
    return pack(engine, routes, src_eps, source_buffers(dt), dst_eps, {k: buf}, dt.dtype, comm)


# -- redistribute ------------------------------------------------------------------------
def _remote(frag: Any, rank: int) -> Any:
    return Fragment.remote(frag, rank)


def redistribute(dt: "DistributedTensor", layout: "Layout", framework: str | None) -> "DistributedTensor":
    """``dt`` in ``layout`` across processes (see :meth:`dlmg.DistributedTensor.redistribute`)."""
    engine = _engine()
    with exclusive(engine, "redistribute"):
        return _redistribute(engine, dt, layout, framework)


def _redistribute(engine: "Engine", dt: "DistributedTensor", layout: "Layout", framework: str | None) -> Any:
    me = engine.rank
    comm = _comm_device(layout, engine)
    description = describe("redistribute", source=dt.layout, target=layout, dtype=dt.dtype)

    def work() -> Any:
        check_ranks(dt.layout, "redistribute (source)")
        check_ranks(layout, "redistribute (target)")
        verify_fragments(dt.fragments)
        if dt.layout.shape != layout.shape:
            raise LayoutMismatchError(
                f"cannot redistribute a tensor of shape {dt.shape} to a layout of shape {layout.shape}"
            )
        routes = redistribution_routes(dt.layout, layout, dt.itemsize, engine)
        geometry = tuple(source_geometry(f) for f in dt.fragments)
        src_eps = {ep.index: ep for ep in source_endpoints(dt.layout, geometry) if dt.fragments[ep.index].is_local}
        dst_all = layout_endpoints(layout)
        prefer = tuple(dt.frameworks)
        reused: dict[int, int] = {}
        written: dict[int, tuple[Buffer, Any]] = {}
        for frag in layout.fragments:
            if layout.ranks[frag.index] != me:
                continue
            target = _target_framework(dt, frag, framework)
            source = _reusable(dt, src_eps, dst_all[frag.index], target.name)
            if source is not None:
                reused[frag.index] = source
            else:
                written[frag.index] = (allocate(frag, target, dt.dtype, prefer)[0], target)
        dsts = {i: buf for i, (buf, _) in written.items()}
        dst_eps = {i: dst_all[i] for i in dsts}
        return pack(engine, routes, src_eps, source_buffers(dt), dst_eps, dsts, dt.dtype, comm), reused, written

    packed, reused, written = prepare(engine, description, work)

    def run() -> "DistributedTensor":
        deliver(engine, packed)
        out = []
        for frag in layout.fragments:
            i = frag.index
            if i in written:
                buf, target = written[i]
                out.append(finish_fragment(frag, buf, target))
            elif i in reused:
                out.append(reuse(dt.fragments[reused[i]], frag))
            else:
                out.append(_remote(frag, layout.ranks[i]))
        return type(dt)._create(layout, out, dt.dtype)

    return conclude(engine, description, run)


def _target_framework(dt: "DistributedTensor", frag: Any, framework: str | None) -> Any:
    """As in one process; where no framework of the tensor reaches the device here (JAX's
    devices of this process are other ones), a framework that can."""
    try:
        return choose_framework(dt, frag, framework)
    except FrameworkError:
        if framework is not None:
            raise
        return copy_framework(frag.device, dt.dtype)


def _reusable(dt: "DistributedTensor", src_eps: dict[int, Any], d: Any, target: str) -> int | None:
    """A local source fragment a destination can take over unchanged (as in one process)."""
    for s in src_eps.values():
        src = dt.fragments[s.index]
        if src.framework != target or s.device != d.device or s.shape != d.shape or not s.same_indices(d):
            continue
        if d.fixed_memory and not s.same_geometry(d):
            continue
        if src.is_padded and not d.fixed_memory:
            continue
        return s.index
    return None


# -- scatter --------------------------------------------------------------------------------
def scatter(array: Any, layout: "Layout", framework: str | None, root: int) -> "DistributedTensor":
    """Spread process ``root``'s ``array`` over ``layout`` (others pass ``None``)."""
    engine = _engine()
    if not isinstance(layout, Layout):
        raise TypeError(f"scatter needs a dlmg.Layout, got {type(layout).__name__}")
    with exclusive(engine, "scatter"):
        return _scatter(engine, array, layout, framework, root)


def _scatter(engine: "Engine", array: Any, layout: "Layout", framework: str | None, root: int) -> Any:
    me = engine.rank
    root = _root(root, engine, "scatter")
    description = describe("scatter", layout=layout, root=root)

    def inspect() -> tuple[Any, Any]:
        check_ranks(layout, "scatter")
        if me != root:
            if array is not None:
                raise ValueError(f"scatter(root={root}): rank {me} passes None, only the root passes the array")
            return None, None
        a = adapter_for(array)
        shape = a.shape_of(array)
        if shape != layout.shape:
            raise LayoutMismatchError(f"scatter: the array has shape {shape} but the layout {layout.shape} ({layout!r})")
        return a, (canonical(a.dtype_of(array)), a.name)

    a, votes = prepare_vote(engine, description, inspect)
    dtype, root_framework = votes[root]
    comm = _comm_device(layout, engine)

    def work() -> Any:
        target = get_adapter(framework or root_framework)
        mine = [f for f in layout.fragments if layout.ranks[f.index] == me]
        missing = [str(f.device) for f in mine if not target.supports(f.device)]
        if missing:
            raise FragmentError(f"scatter: framework {target.name!r} cannot hold fragments on {', '.join(missing)}")
        routes = scatter_routes(layout, root, info(dtype).itemsize, engine)
        src_eps, sources = {}, {}
        if me == root:
            dev = a.device_of(array)
            src_eps[0] = full_endpoint(layout.shape, tuple(int(s) for s in a.strides_of(array)), dev)
            sources[0] = Buffer(array, a, dev)
        dst_all = layout_endpoints(layout)
        written = {f.index: allocate(f, target, dtype, (target.name,))[0] for f in mine}
        dst_eps = {i: dst_all[i] for i in written}
        return pack(engine, routes, src_eps, sources, dst_eps, written, dtype, comm), written, target

    packed, written, target = prepare(engine, describe("scatter (buffers)", layout=layout, root=root), work)

    def run() -> "DistributedTensor":
        deliver(engine, packed)
        out = [
            finish_fragment(f, written[f.index], target) if f.index in written else _remote(f, layout.ranks[f.index])
            for f in layout.fragments
        ]
        return TensorBase._create(layout, out, dtype)

    return conclude(engine, description, run)
