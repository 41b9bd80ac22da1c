"""The cost model: bytes and messages a redistribution moves, flops a local step runs.

Moving a tensor from one layout to another sends, for every destination
fragment, the elements it holds that no fragment on its own device holds
already. Elements are counted exactly, per mode, from the blocks each grid
coordinate owns (a fragment's elements are the product of its per-mode index
sets). A pending source sends every replica's part (each is an addend).

The model turns a step into an estimated time on the busiest device::

    seconds = ALPHA * messages + (bytes + held) / BETA + flops / GAMMA

with ``messages`` and ``bytes`` those the busiest device receives, ``held``
the bytes of new operand copies it fills (a moved operand's new fragments,
SUMMA's two panels: what a strategy adds to memory, costed as bytes written)
and ``flops`` the most any device computes. The constants are round figures for
a CPU cluster (10 microseconds a message, 10 GB/s a link, 50 GFLOP/s a
device); only their ratios steer the choice between strategies.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from ...device import Device
from ...layout import Layout

__all__ = ["Traffic", "traffic", "seconds", "held_bytes", "ALPHA", "BETA", "GAMMA"]

ALPHA = 1e-5  # seconds per message
BETA = 1e10  # bytes per second per link
GAMMA = 5e10  # flops per second per device


@dataclass(frozen=True)
class Traffic:
    """What one redistribution moves.

    Attributes
    ----------
    nbytes : int
        Bytes copied from one device to another (or between processes).
    messages : int
        Source-fragment to destination-fragment pieces that cross devices.
    between_processes : int
        The part of ``nbytes`` that crosses from one process to another.
    received, sent : tuple of ((rank, Device), int)
        Bytes per device (with its process), only devices that move any.
    """

    nbytes: int = 0
    messages: int = 0
    between_processes: int = 0
    received: tuple[tuple[tuple[int, Device], int], ...] = field(default=())
    sent: tuple[tuple[tuple[int, Device], int], ...] = field(default=())
    received_messages: tuple[tuple[tuple[int, Device], int], ...] = field(default=())

    def __add__(self, other: "Traffic") -> "Traffic":
        def merged(a: tuple, b: tuple) -> tuple:
            out: dict = defaultdict(int)
            for k, v in (*a, *b):
                out[k] += v
            return tuple(sorted(out.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))))

        return Traffic(self.nbytes + other.nbytes, self.messages + other.messages,
                       self.between_processes + other.between_processes,
                       merged(self.received, other.received), merged(self.sent, other.sent),
                       merged(self.received_messages, other.received_messages))

    def per_process(self) -> dict[int, tuple[int, int]]:
        """``rank -> (bytes received, bytes sent)`` summed over the rank's devices."""
        out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for (rank, _), n in self.received:
            out[rank][0] += n
        for (rank, _), n in self.sent:
            out[rank][1] += n
        return {r: (v[0], v[1]) for r, v in sorted(out.items())}

    @property
    def busiest(self) -> tuple[int, int]:
        """``(bytes, messages)`` received by the device that receives most."""
        nbytes = max((n for _, n in self.received), default=0)
        msgs = max((n for _, n in self.received_messages), default=0)
        return nbytes, msgs


def _owned(layout: Layout, mode: int, coord: int) -> np.ndarray:
    """The global indices grid coordinate ``coord`` owns along ``mode``."""
    n, b, g = layout.shape[mode], layout.block[mode], layout.grid[mode]
    idx = np.arange(n)
    return idx[(idx // b) % g == coord]


def _overlaps(src: Layout, dst: Layout, mode: int) -> np.ndarray:
    """``[dst coordinate, src coordinate]``: elements both own along ``mode``."""
    out = np.zeros((dst.grid[mode], src.grid[mode]), dtype=np.int64)
    srcs = [_owned(src, mode, c) for c in range(src.grid[mode])]
    for d in range(dst.grid[mode]):
        mine = _owned(dst, mode, d)
        for s, theirs in enumerate(srcs):
            out[d, s] = np.intersect1d(mine, theirs, assume_unique=True).size
    return out


@lru_cache(maxsize=1024)  # a plan compares a few candidate moves of the same layouts
def traffic(src: Layout, dst: Layout, itemsize: int) -> Traffic:
    """The bytes moving ``src`` to ``dst`` copies between devices and processes."""
    if src.shape != dst.shape:
        raise ValueError(f"cannot move a tensor of shape {src.shape} to a layout of shape {dst.shape}")
    mats = [_overlaps(src, dst, m) for m in range(src.ndim)]
    cells = [src.coords_of(i)[0] for i in range(src.ngrid)]
    pending = src.partial is not None
    received: dict = defaultdict(int)
    rmsgs: dict = defaultdict(int)
    sent: dict = defaultdict(int)
    nbytes = messages = between = 0
    for t in range(dst.nfragments):
        ct, _ = dst.coords_of(t)
        here = (dst.ranks[t], dst.devices[t])
        for c, cs in enumerate(cells):
            n = math.prod(int(mats[m][ct[m], cs[m]]) for m in range(src.ndim)) * itemsize
            if n == 0:
                continue
            replicas = [c + src.ngrid * r for r in range(src.nreplicas)]
            if not pending:  # one replica sends: ours, else one of our process, else the first
                local = [f for f in replicas if (src.ranks[f], src.devices[f]) == here]
                same = [f for f in replicas if src.ranks[f] == here[0]]
                replicas = local[:1] or same[:1] or replicas[:1]
            for f in replicas:
                there = (src.ranks[f], src.devices[f])
                if there == here:
                    continue
                nbytes += n
                messages += 1
                received[here] += n
                rmsgs[here] += 1
                sent[there] += n
                if there[0] != here[0]:
                    between += n
    key = lambda kv: (kv[0][0], str(kv[0][1]))  # noqa: E731
    return Traffic(nbytes, messages, between, tuple(sorted(received.items(), key=key)),
                   tuple(sorted(sent.items(), key=key)), tuple(sorted(rmsgs.items(), key=key)))


def seconds(moved: Traffic, flops: int, held: int = 0) -> float:
    """The model's time for a step that moves ``moved``, computes ``flops`` and fills ``held``
    bytes of new operand copies on its busiest device."""
    nbytes, msgs = moved.busiest
    return ALPHA * msgs + (nbytes + held) / BETA + flops / GAMMA


def held_bytes(layout: Layout, itemsize: int) -> int:
    """The most bytes of ``layout``'s fragments that one device holds."""
    per: dict = defaultdict(int)
    for f in layout.fragments:
        per[(layout.ranks[f.index], f.device)] += math.prod(f.shape) * itemsize
    return max(per.values(), default=0)
