"""Moving pieces between processes: pack, one all-to-all(v), unpack.

:func:`pack` (which also allocates the receive buffer) runs on every process before the agreement (so a failure while
packing ends the collective everywhere, see :mod:`~dlmg.distributed.agree`):
it plans this process's side and copies every outgoing
:class:`~dlmg.plans.routes.Piece` into the send buffer, in message order,
with the strided copies of the copy engine. :func:`deliver` runs the engine's
all-to-all(v) (skipped when no process sends anything; a process whose
preparation of it failed still takes its part, then raises) and the copies into the
destinations: local pieces straight from the local source fragments, received
pieces from the receive buffer.

Copies are skipped where memory already is in message order:

* **direct receive** -- when this process fills one C-contiguous destination
  and the incoming pieces, in rank order, are consecutive ranges of it, the
  destination itself is the receive buffer (for row slabs to column slabs every
  piece is a band of rows of the column slab). When this process's own pieces
  sit between the others', they travel in the all-to-all too (a message to
  itself) instead of a local copy;
* **direct send** -- when the outgoing pieces are consecutive ranges of one
  C-contiguous source fragment, that fragment is the send buffer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from .._shapes import c_strides
from ..device import Device
from ..plans.endpoints import same_memory
from .copies import Buffer, run_jobs, synchronize
from ..plans.build import pair_copies
from ..registry import get_adapter
from ..plans.routes import Piece, Routes, box_endpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..plans.endpoints import Endpoint
    from ..plans.segments import ModeMap
    from ..distributed.engine import Engine

__all__ = ["Packed", "pack", "deliver", "ready"]


@dataclass
class Packed:
    """One process's side of an exchange, ready to go."""

    routes: Routes
    send: Any
    send_buffer: Buffer
    send_counts: list[int]
    recv: Any  # the receive buffer when it is the destination itself (direct receive), else None
    recv_counts: list[int]
    incoming: list[list[Piece]]  # per sender, the pieces received (self included when sent to itself)
    local: list[tuple[int, int, Any]]  # (source, destination, box) copied locally
    src_eps: dict[int, "Endpoint"]
    sources: dict[int, Buffer]
    dst_eps: dict[int, "Endpoint"]
    dsts: dict[int, Buffer]
    dtype: str
    device: Device
    cache: dict = field(default_factory=dict)
    scratch: Any = None  # the receive buffer otherwise, allocated while packing
    scratch_adapter: Any = None
    threads: bool = True  # whether host copies may use the copy threads (see copy_threads)


def copy_threads(engine: "Engine") -> bool:
    """Whether this process's copies around an exchange may use the copy threads:
    only with at least two cores per process of the job. Processes that already
    share the cores lose by them: row slabs -> column slabs of 64 MiB on 2 cores
    took 62-72 ms on one thread against 69-76 ms with the threads (MPI, 4
    processes), 95 against 107 ms (gloo, 4), 139 against 157 ms (gloo, 2) and
    59 against 60 ms (MPI, 2)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores >= 2 * engine.world_size


def _displacements(counts: Sequence[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


def _self_piece(s: int, d: int, box: Any) -> Piece:
    return Piece(s, d, box, 0)


def _region(box: Sequence["ModeMap"], owned: Sequence["ModeMap"], shape: Sequence[int]) -> int | None:
    """Where ``box`` starts in a C-contiguous array of ``shape`` holding ``owned`` indices,
    when the box is one contiguous range of it in C order (else ``None``)."""
    starts, lens = [], []
    for idx, own in zip(box, owned):
        start = 0
        if idx.size:
            start, last = (int(k) for k in own.local_positions(np.array([idx.first, idx.last])))
            if last - start + 1 != idx.size:
                return None
        starts.append(start)
        lens.append(int(idx.size))
    partial = [m for m, (n, full) in enumerate(zip(lens, shape)) if n != full]
    if partial and any(lens[m] != 1 for m in range(partial[-1])):
        return None
    return sum(a * s for a, s in zip(starts, c_strides(tuple(shape))))


def _consecutive(pieces: Sequence[Piece], owned: Sequence["ModeMap"], shape: Sequence[int]) -> int | None:
    """The start of ``pieces`` when they lie back to back, in order, in the array (else ``None``)."""
    start = at = None
    for p in pieces:
        where = _region(p.indices, owned, shape)
        if where is None or (at is not None and where != at):
            return None
        if start is None:
            start = where
        at = where + p.size
    return 0 if start is None else start


def _flat(buf: Buffer, shape: Sequence[int], engine: "Engine", device: Device) -> bool:
    """Whether ``buf`` can serve as a message buffer as it is: C-contiguous, viewable, on ``device``."""
    adapter = buf.adapter
    if not adapter.traits.can_view or not same_memory(buf.device, device):
        return False
    return tuple(adapter.strides_of(buf.base)) == c_strides(tuple(shape)) and engine.accepts(buf.base, adapter.name)


def _direct_receive(engine: "Engine", routes: Routes, dst_eps: dict, dsts: dict, device: Device,
                    local: list) -> tuple[Any, bool] | None:
    """``(receive buffer, own pieces travel too)`` when the destination can receive directly."""
    me = engine.rank
    if len(dsts) != 1:
        return None
    (d, buf), = dsts.items()
    ep = dst_eps[d]
    shape = ep.shape
    if not _flat(buf, shape, engine, device):
        return None
    owned = list(ep.modes)
    peers = [list(routes.messages.get((q, me), ())) for q in range(engine.world_size)]
    total = sum(p.size for ps in peers for p in ps)
    if total == 0:
        return None
    mine = [_self_piece(s, dd, box) for s, dd, box in local if dd == d]
    for with_self in (False, True):
        order = [p for q, ps in enumerate(peers) for p in (mine if with_self and q == me else ps)]
        start = _consecutive(order, owned, shape)
        if start is not None:
            n = total + (sum(p.size for p in mine) if with_self else 0)
            return buf.adapter.as_strided(buf.base, (n,), (1,), start), with_self
    return None


def pack(
    engine: "Engine",
    routes: Routes,
    src_eps: dict[int, "Endpoint"],
    sources: dict[int, Buffer],
    dst_eps: dict[int, "Endpoint"],
    dsts: dict[int, Buffer],
    dtype: str,
    device: Device,
) -> Packed:
    """Plan this process's side of the exchange and fill its send buffer on ``device``.

    ``src_eps``/``sources`` are this process's source fragments (endpoints with
    their actual memory geometry, and buffers), ``dst_eps``/``dsts`` its
    destinations, keyed by place number.
    """
    me = engine.rank
    local = list(routes.local.get(me, ()))
    direct = _direct_receive(engine, routes, dst_eps, dsts, device, local)
    recv, with_self = direct if direct is not None else (None, False)
    outgoing = [list(routes.messages.get((me, q), ())) for q in range(engine.world_size)]
    incoming = [list(routes.messages.get((q, me), ())) for q in range(engine.world_size)]
    if with_self:
        (d,) = dsts
        mine = [_self_piece(s, dd, box) for s, dd, box in local if dd == d]
        outgoing[me] = incoming[me] = mine
        local = [t for t in local if t[1] != d]
    send_counts = [sum(p.size for p in ps) for ps in outgoing]
    recv_counts = [sum(p.size for p in ps) for ps in incoming]
    send, name = _send_buffer(engine, outgoing, src_eps, sources, dtype, device)
    adapter = get_adapter(name) if isinstance(name, str) else name
    packed = Packed(routes, send, Buffer(send, adapter, device), send_counts, recv, recv_counts, incoming,
                    local, src_eps, sources, dst_eps, dsts, dtype, device, threads=copy_threads(engine))
    if recv is None:  # allocated now, before the agreement: a failure here ends the collective everywhere
        packed.scratch, scratch_name = engine.empty(sum(recv_counts), dtype, device)
        packed.scratch_adapter = get_adapter(scratch_name)
    if name is not None and isinstance(name, str):  # a fresh buffer: copy the pieces in
        jobs = []
        for q, start in enumerate(_displacements(send_counts)):
            offset = start
            for piece in outgoing[q]:
                box = box_endpoint(piece, -1, device)
                copies = pair_copies(src_eps[piece.src], box, packed.cache, routes.itemsize)
                view = adapter.as_strided(send, (piece.size,), (1,), offset)
                jobs.append((copies, sources, Buffer(view, adapter, device)))
                offset += piece.size
        if jobs:
            run_jobs(jobs, dtype, threads=packed.threads)
    return packed


def _send_buffer(engine: "Engine", outgoing: list[list[Piece]], src_eps: dict, sources: dict,
                 dtype: str, device: Device) -> tuple[Any, Any]:
    """The send buffer: a view of the one source fragment holding the pieces in message order
    (returned with its adapter), or a fresh engine buffer (returned with its framework name)."""
    order = [p for ps in outgoing for p in ps]
    total = sum(p.size for p in order)
    srcs = {p.src for p in order}
    if len(srcs) == 1:
        (s,) = srcs
        buf, ep = sources.get(s), src_eps[s]
        if buf is not None and _flat(buf, ep.shape, engine, device):
            start = _consecutive(order, list(ep.modes), ep.shape)
            if start is not None:
                return buf.adapter.as_strided(buf.base, (total,), (1,), start), buf.adapter
    return engine.empty(total, dtype, device)


def ready(buffers: list[Buffer]) -> None:
    """The local work between the agreement and the exchange: wait until the queued
    work writing ``buffers`` is done."""
    synchronize(buffers)


def deliver(engine: "Engine", packed: Packed) -> None:
    """Exchange the messages and write every destination of this process.

    Local copies run while the all-to-all is under way; received pieces are
    copied in once it completes.
    """
    routes = packed.routes
    recv = packed.recv
    if recv is None:
        recv, adapter = packed.scratch, packed.scratch_adapter
    else:
        adapter = packed.dsts[next(iter(packed.dsts))].adapter
    wait = None
    failed: BaseException | None = None
    if routes.total_bytes:  # the same on every process
        try:
            ready([packed.send_buffer])
        except Exception as exc:  # this process still takes its part: its peers wait for it
            failed = exc
        wait = engine.start_alltoallv(packed.send, packed.send_counts, recv, packed.recv_counts)
    try:
        if failed is None:
            _copy_local(packed)
    finally:
        if wait is not None:
            wait()
            engine.settle(packed.device)
    if failed is not None:
        raise failed
    if packed.recv is not None:  # received straight into the destination
        return
    sources = dict(packed.sources)
    incoming: dict[int, list["Endpoint"]] = {}
    next_id = max([*sources, *packed.src_eps, -1]) + 1
    for q, start in enumerate(_displacements(packed.recv_counts)):
        offset = start
        for piece in packed.incoming[q]:
            view = adapter.as_strided(recv, (piece.size,), (1,), offset)  # type: ignore[union-attr]
            offset += piece.size
            sources[next_id] = Buffer(view, adapter, packed.device)
            incoming.setdefault(piece.dst, []).append(box_endpoint(piece, next_id, packed.device))
            next_id += 1
    jobs = []
    for d, boxes in incoming.items():
        copies = []
        for box in boxes:
            copies += pair_copies(box, packed.dst_eps[d], packed.cache, routes.itemsize)
        jobs.append((copies, sources, packed.dsts[d]))
    if jobs:
        run_jobs(jobs, packed.dtype, threads=packed.threads)


def _copy_local(packed: Packed) -> None:
    """The pieces this process copies from its own source fragments."""
    local: dict[int, list[int]] = {}
    for s, d, _ in packed.local:
        if d in packed.dsts:  # (a destination taken over unchanged has no buffer)
            local.setdefault(d, []).append(s)
    jobs = []
    for d, srcs in local.items():
        copies = []
        for s in srcs:
            copies += pair_copies(packed.src_eps[s], packed.dst_eps[d], packed.cache, packed.routes.itemsize)
        if copies:
            jobs.append((copies, packed.sources, packed.dsts[d]))
    if jobs:
        run_jobs(jobs, packed.dtype, threads=packed.threads)
