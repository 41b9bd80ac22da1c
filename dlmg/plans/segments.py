"""Per-mode copy math: intersect two owned index sets and cut the intersection
into a few strided segments.

Along one mode a fragment holds a sorted set of global indices; the memory of
the ``k``-th of them sits at ``offsets[k]`` (in *mode units*: multiplied later
by the fragment's element stride of that mode, see :class:`ModeMap`). Two
consecutive held elements of one block are ``unit`` apart.

For a source and a destination mode map, :func:`decompose` finds the global
indices both hold and describes the element pairs with a handful of
**segments**. A segment is ``count`` runs of ``run`` elements; inside a run both
sides advance by their ``unit``, from one run to the next the source advances by
``src_step`` and the destination by ``dst_step``. A segment is therefore a
two-dimensional strided view ``(count, run)`` on each side, and a copy between
two fragments is the cartesian product of one segment per mode: one strided
assignment. The work is vectorised NumPy over the held indices; the only Python
loop runs once per produced segment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

__all__ = ["ModeMap", "Segment", "decompose", "dense_mode", "blocked_mode", "streaks"]


@dataclass(frozen=True, eq=False)
class ModeMap:
    """Where one fragment keeps its elements along one mode.

    Attributes
    ----------
    indices : numpy.ndarray
        Sorted, unique int64 global indices held along the mode.
    offsets : numpy.ndarray
        Int64 memory offset of each held index, in mode units.
    unit : int
        Offset between two consecutive elements of one block, in mode units.
    """

    indices: np.ndarray
    offsets: np.ndarray
    unit: int

    def __len__(self) -> int:
        return int(self.indices.size)


def dense_mode(indices: np.ndarray) -> ModeMap:
    """The mode map of a plain strided array: local index ``k`` at offset ``k``."""
    indices = np.asarray(indices, dtype=np.int64)
    return ModeMap(indices, np.arange(indices.size, dtype=np.int64), 1)


def blocked_mode(indices: np.ndarray, block: int, element_stride: int, block_stride: int) -> ModeMap:
    """The mode map of padded block storage.

    Local index ``k`` lies in the fragment's local block ``k // block`` at
    position ``k % block``; its offset is
    ``(k // block) * block_stride + (k % block) * element_stride`` (in elements,
    so the fragment's scale for this mode is 1).
    """
    indices = np.asarray(indices, dtype=np.int64)
    k = np.arange(indices.size, dtype=np.int64)
    offsets = (k // block) * int(block_stride) + (k % block) * int(element_stride)
    return ModeMap(indices, offsets, int(element_stride))


class Segment(NamedTuple):
    """``count`` runs of ``run`` element pairs (see the module docstring)."""

    count: int  # type: ignore[assignment]  # shadows tuple.count, on purpose
    run: int
    src_start: int
    src_step: int
    dst_start: int
    dst_step: int

    @property
    def size(self) -> int:
        """Number of elements the segment covers."""
        return self.count * self.run


def streaks(flags: np.ndarray) -> np.ndarray:
    """For each position, how many consecutive ``True`` start there."""
    flags = np.asarray(flags, dtype=bool)
    pos = np.arange(flags.size, dtype=np.int64)
    falses = np.flatnonzero(~flags)
    next_false = np.append(falses, flags.size)[np.searchsorted(falses, pos)]
    return next_false - pos


def decompose(src: ModeMap, dst: ModeMap) -> list[Segment]:
    """Segments covering every global index held by both ``src`` and ``dst``.

    Parameters
    ----------
    src, dst : ModeMap
        The source's and the destination's mode maps.

    Returns
    -------
    list of Segment
        Empty when the two hold no common index. Offsets are in each side's
        mode units.

    Examples
    --------
    A cyclic source (indices 1, 3, 5, 7) into a slab holding 0..7:

    >>> s = dense_mode(np.array([1, 3, 5, 7]))
    >>> d = dense_mode(np.arange(8))
    >>> decompose(s, d)
    [Segment(count=4, run=1, src_start=0, src_step=1, dst_start=1, dst_step=2)]
    """
    if src.indices.size == 0 or dst.indices.size == 0:
        return []
    if src.indices is dst.indices or (
        src.indices.size == dst.indices.size and np.array_equal(src.indices, dst.indices)
    ):
        so, do = src.offsets, dst.offsets
    else:
        _, si, di = np.intersect1d(src.indices, dst.indices, assume_unique=True, return_indices=True)
        if si.size == 0:
            return []
        so, do = src.offsets[si], dst.offsets[di]
    n = so.size
    if n == 1:
        return [Segment(1, 1, int(so[0]), src.unit, int(do[0]), dst.unit)]
    breaks = (np.diff(so) != src.unit) | (np.diff(do) != dst.unit)
    starts = np.flatnonzero(np.concatenate(([True], breaks)))
    lengths = np.diff(np.append(starts, n))
    s0, d0 = so[starts], do[starts]
    nruns = starts.size
    if nruns == 1:
        return [Segment(1, int(n), int(s0[0]), int(n) * src.unit, int(d0[0]), int(n) * dst.unit)]
    period = _period(lengths, s0, d0)
    out: list[Segment] = []
    for phase in range(period):
        pick = slice(phase, None, period)
        out += _progressions(lengths[pick], s0[pick], d0[pick], src.unit, dst.unit)
    return out


#: the longest period (in runs) looked for between two block-cyclic index sets
MAX_PERIOD = 64


def _period(lengths: np.ndarray, s0: np.ndarray, d0: np.ndarray) -> int:
    """The run period ``p`` that groups the runs into the fewest progressions.

    Two block-cyclic distributions with different blocks or grids intersect in
    a pattern of runs that repeats every ``p`` runs (``p`` is 1 when one side
    is a slab or both share their blocks). Runs ``j, j + p, j + 2p, ...`` then
    form one progression each. ``p`` is chosen to minimise the estimate
    ``p + 2 * (runs breaking the period-p pattern)`` of the segment count.
    """
    nruns = lengths.size
    best, best_cost = 1, None
    for p in range(1, min(MAX_PERIOD, nruns - 1) + 1):
        same = lengths[p:] == lengths[:-p]
        ds, dd = s0[p:] - s0[:-p], d0[p:] - d0[:-p]
        # the most common step of each phase is what a progression would use
        phase = np.arange(ds.size) % p
        steps = np.stack([phase, ds, dd], axis=1)
        _, inverse, counts = np.unique(steps, axis=0, return_inverse=True, return_counts=True)
        row_count = counts[inverse.ravel()]
        common = np.zeros(p, dtype=np.int64)
        np.maximum.at(common, phase, row_count)
        good = int(np.count_nonzero(same & (row_count == common[phase])))
        cost = p + 2 * (ds.size - good)
        if best_cost is None or cost < best_cost:
            best, best_cost = p, cost
        if best_cost <= p + 1:  # no longer period can do better
            break
    return best


def _progressions(lengths: np.ndarray, s0: np.ndarray, d0: np.ndarray, su: int, du: int) -> list[Segment]:
    """Greedy grouping of consecutive runs into progressions of equal-length runs
    with constant steps (one Python iteration per produced segment)."""
    nruns = lengths.size
    if nruns == 1:
        run = int(lengths[0])
        return [Segment(1, run, int(s0[0]), run * su, int(d0[0]), run * du)]
    ds, dd = np.diff(s0), np.diff(d0)
    same_len = lengths[1:] == lengths[:-1]  # gap j: runs j and j + 1 have one length
    # gap k extends the progression that used gap k - 1
    cont = np.zeros(nruns - 1, dtype=bool)
    cont[1:] = same_len[1:] & (ds[1:] == ds[:-1]) & (dd[1:] == dd[:-1])
    ahead = streaks(cont)
    out: list[Segment] = []
    j = 0
    while j < nruns:
        run = int(lengths[j])
        if j == nruns - 1 or not same_len[j]:
            out.append(Segment(1, run, int(s0[j]), run * su, int(d0[j]), run * du))
            j += 1
            continue
        last_gap = j + (int(ahead[j + 1]) if j + 1 < nruns - 1 else 0)
        count = last_gap - j + 2
        out.append(Segment(count, run, int(s0[j]), int(ds[j]), int(d0[j]), int(dd[j])))
        j = last_gap + 2
    return out
