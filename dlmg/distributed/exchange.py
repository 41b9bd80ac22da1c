"""Moving pieces between processes: pack, one all-to-all(v), unpack.

:func:`pack` runs on every process before the agreement (so a failure while
packing ends the collective everywhere, see :mod:`~dlmg.distributed.agree`):
it allocates the send buffer in memory the engine can communicate and copies
every outgoing :class:`~dlmg.distributed.routes.Piece` into it, in message
order, with the strided copies of the copy engine. :func:`deliver` runs the
engine's all-to-all(v) (skipped when no process sends anything) and then the
copies into the destinations: local pieces straight from the local source
fragments, received pieces from the receive buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..plans.execute import Buffer, run_jobs, synchronize
from ..plans.plan import pair_copies
from ..registry import get_adapter
from .routes import Routes, box_endpoint

if TYPE_CHECKING:  # pragma: no cover
    from ..plans.endpoints import Endpoint
    from .engine import Engine

__all__ = ["Packed", "pack", "deliver"]


@dataclass
class Packed:
    """One process's side of an exchange, ready to go."""

    routes: Routes
    send: Any
    send_buffer: Buffer
    src_eps: dict[int, "Endpoint"]
    sources: dict[int, Buffer]
    dst_eps: dict[int, "Endpoint"]
    dsts: dict[int, Buffer]
    dtype: str
    device: Device
    cache: dict = field(default_factory=dict)


def _displacements(counts: list[int]) -> list[int]:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out


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
    """Allocate this process's send buffer on ``device`` and copy its outgoing pieces into it.

    ``src_eps``/``sources`` are this process's source fragments (endpoints with
    their actual memory geometry, and buffers), ``dst_eps``/``dsts`` its
    destinations, keyed by place number.
    """
    me = engine.rank
    counts = routes.send_counts(me)
    send, name = engine.empty(sum(counts), dtype, device)
    adapter = get_adapter(name)
    packed = Packed(routes, send, Buffer(send, adapter, device), src_eps, sources, dst_eps, dsts, dtype, device)
    jobs = []
    for peer, start in enumerate(_displacements(counts)):
        for piece in routes.messages.get((me, peer), ()):
            box = box_endpoint(piece, -1, device)
            copies = pair_copies(src_eps[piece.src], box, packed.cache, routes.itemsize)
            view = send[start + piece.offset: start + piece.offset + piece.size]
            jobs.append((copies, sources, Buffer(view, adapter, device)))
    if jobs:
        run_jobs(jobs, dtype)
    return packed


def deliver(engine: "Engine", packed: Packed) -> None:
    """Exchange the messages and write every destination of this process."""
    me = engine.rank
    routes = packed.routes
    recv_counts = routes.recv_counts(me)
    recv, name = engine.empty(sum(recv_counts), packed.dtype, packed.device)
    adapter = get_adapter(name)
    if routes.total_bytes:
        if not packed.device.is_host:
            synchronize([packed.send_buffer])
        engine.alltoallv(packed.send, routes.send_counts(me), recv, recv_counts)
        engine.settle(packed.device)
    sources = dict(packed.sources)
    incoming: dict[int, list["Endpoint"]] = {}
    next_id = max([*sources, *packed.src_eps, -1]) + 1
    for peer, start in enumerate(_displacements(recv_counts)):
        for piece in routes.messages.get((peer, me), ()):
            key = next_id
            next_id += 1
            view = recv[start + piece.offset: start + piece.offset + piece.size]
            sources[key] = Buffer(view, adapter, packed.device)
            incoming.setdefault(piece.dst, []).append(box_endpoint(piece, key, packed.device))
    local: dict[int, list[int]] = {}
    for s, d in routes.local.get(me, ()):
        local.setdefault(d, []).append(s)
    jobs = []
    for d, buf in packed.dsts.items():
        dst_ep = packed.dst_eps[d]
        copies = []
        for s in local.get(d, ()):
            copies += pair_copies(packed.src_eps[s], dst_ep, packed.cache, routes.itemsize)
        for box in incoming.get(d, ()):
            copies += pair_copies(box, dst_ep, packed.cache, routes.itemsize)
        if copies:
            jobs.append((copies, sources, buf))
    if jobs:
        run_jobs(jobs, packed.dtype)
