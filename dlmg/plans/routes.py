"""Which elements travel between which processes: the per-pair plan of a collective.

Every process computes the same :class:`Routes` from the layouts alone (no
communication): for every destination piece of memory (a fragment, or a whole
array for gathers) and every group of replicated source fragments, one source
is chosen -- a replica on the destination's process when there is one (on its
device if possible), else a fixed one -- and the elements both hold become a
:class:`Piece`. Pieces between two different processes are packed, in a fixed
order, into **one message per pair of processes**; pieces within a process are
plain local copies.

A piece is the box of the global indices both hold along every mode (the
cartesian product of per-mode index sets) in C order, so sender and receiver
agree on its element order without knowing each other's memory layout.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._shapes import c_strides
from ..device import Device
from .endpoints import Endpoint, fragment_modes
from .segments import ModeMap, cyclic_mode, intersection

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout

__all__ = ["Place", "Piece", "Routes", "layout_places", "full_places", "plan_routes", "box_endpoint"]


@dataclass(frozen=True, eq=False)
class Place:
    """A source or destination piece of memory as the router sees it.

    Attributes
    ----------
    index : int
        Fragment number (or rank, for whole-array destinations).
    rank : int
        The process holding it.
    device : Device
    group : object
        Sources with equal ``group`` are replicas of each other.
    indices : tuple of ModeMap
        The global indices held, per mode (as runs; ``numpy.asarray`` of one
        gives the sorted indices).
    """

    index: int
    rank: int
    device: Device
    group: Any
    indices: tuple[ModeMap, ...]

    @property
    def size(self) -> int:
        return math.prod(int(i.size) for i in self.indices)


@dataclass(frozen=True, eq=False)
class Piece:
    """Elements one source sends to one destination, as a C-ordered box.

    Attributes
    ----------
    src, dst : int
        Source and destination place numbers.
    indices : tuple of ModeMap
        The global indices of the box, per mode, each as the mode map of a
        plain array holding just them (``numpy.asarray`` of one gives the
        sorted indices).
    offset : int
        Elements before it in its message.
    """

    src: int
    dst: int
    indices: tuple[ModeMap, ...]
    offset: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(i.size) for i in self.indices)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class Routes:
    """The communication plan of one collective (identical on every process).

    Attributes
    ----------
    world_size : int
    itemsize : int
    messages : dict
        ``(sender, receiver) -> pieces`` (a tuple of :class:`Piece`) for every
        pair of different processes exchanging data, in message order.
    local : dict
        ``rank -> (source, destination, box)`` copied within that process (the
        box: the global indices both hold, per mode).
    transport : str
        How the messages travel (``"gloo"``, ``"nccl"``, ``"mpi"``, ``"mpi, staged
        through host memory"``).
    """

    world_size: int
    itemsize: int
    messages: dict[tuple[int, int], tuple[Piece, ...]]
    local: dict[int, tuple[tuple[int, int, tuple[ModeMap, ...]], ...]]
    transport: str = ""
    _counts: dict[tuple[int, int], int] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._counts = {pair: sum(p.size for p in pieces) for pair, pieces in self.messages.items()}

    def count(self, sender: int, receiver: int) -> int:
        """Elements ``sender`` sends to ``receiver`` (0 for the same process)."""
        return self._counts.get((sender, receiver), 0)

    def send_counts(self, rank: int) -> list[int]:
        return [self.count(rank, r) for r in range(self.world_size)]

    def recv_counts(self, rank: int) -> list[int]:
        return [self.count(r, rank) for r in range(self.world_size)]

    @property
    def bytes_by_ranks(self) -> dict[tuple[int, int], int]:
        """Bytes per ``(sender, receiver)`` pair of processes."""
        return {pair: n * self.itemsize for pair, n in sorted(self._counts.items()) if n}

    @property
    def total_bytes(self) -> int:
        """Bytes sent between processes in all."""
        return sum(self.bytes_by_ranks.values())

    @property
    def nmessages(self) -> int:
        """Messages sent (one per pair of processes that exchange anything)."""
        return len(self.bytes_by_ranks)

    def summary(self) -> str:
        lines = [f"Routes: {self.nmessages} messages, {self.total_bytes} bytes between processes"
                 + (f" over {self.transport}" if self.transport else "")]
        for (a, b), n in self.bytes_by_ranks.items():
            lines.append(f"  rank {a} -> rank {b}: {n} bytes in {len(self.messages[(a, b)])} pieces")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def layout_places(layout: "Layout") -> list[Place]:
    """One place per fragment of ``layout``; replicas share their grid coordinates as group."""
    out = []
    for frag in layout.fragments:
        modes, _ = fragment_modes(frag)
        out.append(Place(frag.index, layout.ranks[frag.index], frag.device, frag.coords, modes))
    return out


def full_places(shape: Sequence[int], ranks: Sequence[int], devices: Sequence[Device]) -> list[Place]:
    """One whole-array place per given rank (all-gather and root-gather destinations,
    scatter sources); place ``k`` is ``ranks[k]``'s."""
    indices = tuple(cyclic_mode(max(int(n), 1), 1, 0, int(n)) for n in shape)
    return [Place(k, int(r), d, "all", indices) for k, (r, d) in enumerate(zip(ranks, devices))]


def _choose(members: Sequence[Place], dst: Place) -> Place:
    here = [m for m in members if m.rank == dst.rank]
    for m in here:
        if m.device == dst.device:
            return m
    if here:
        return here[0]
    return members[dst.index % len(members)]


def plan_routes(sources: Sequence[Place], destinations: Sequence[Place], world_size: int,
                itemsize: int, transport: str = "") -> Routes:
    """The :class:`Routes` filling ``destinations`` from ``sources`` (see the module docstring)."""
    groups: dict[Any, list[Place]] = {}
    for s in sources:
        groups.setdefault(s.group, []).append(s)
    pieces: dict[tuple[int, int], list[tuple[int, int, tuple[ModeMap, ...]]]] = defaultdict(list)
    local: dict[int, list[tuple[int, int, tuple[ModeMap, ...]]]] = defaultdict(list)
    for d in destinations:
        if d.size == 0:
            continue
        for members in groups.values():
            s = _choose(members, d)
            if s.size == 0:
                continue
            box = tuple(intersection(a, b) for a, b in zip(s.indices, d.indices))
            if any(i.size == 0 for i in box):
                continue
            if s.rank == d.rank:
                local[d.rank].append((s.index, d.index, box))
            else:
                pieces[(s.rank, d.rank)].append((d.index, s.index, box))
    messages: dict[tuple[int, int], tuple[Piece, ...]] = {}
    for pair, items in pieces.items():
        items.sort(key=lambda t: (t[0], t[1]))
        offset = 0
        out: list[Piece] = []
        for dst, src, box in items:
            piece = Piece(src, dst, box, offset)
            out.append(piece)
            offset += piece.size
        messages[pair] = tuple(out)
    return Routes(world_size, itemsize, messages, {r: tuple(v) for r, v in local.items()}, transport)


def box_endpoint(piece: Piece, index: int, device: Device) -> Endpoint:
    """The endpoint of a piece packed densely (C order) in a message buffer."""
    return Endpoint(index, device, piece.indices, c_strides(piece.shape), ("piece", index))
