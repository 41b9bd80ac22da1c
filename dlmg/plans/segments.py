"""Per-mode copy math: intersect two owned index sets and cut the intersection
into a few strided segments.

Along one mode a fragment holds a sorted set of global indices, described as
**runs**: a run is ``length`` consecutive global indices from ``start`` whose
memory lies ``unit`` apart from ``origin`` on (offsets in *mode units*:
multiplied later by the fragment's element stride of that mode, see
:class:`ModeMap`). A block-cyclic fragment holds one run per local block, so
a mode map costs memory and time in the number of blocks, not of elements.

For a source and a destination mode map, :func:`decompose` finds the global
indices both hold and describes the element pairs with a handful of
**segments**. A segment is ``count`` runs of ``run`` elements; inside a run both
sides advance by their ``unit``, from one run to the next the source advances by
``src_step`` and the destination by ``dst_step``. A segment is therefore a
two-dimensional strided view ``(count, run)`` on each side, and a copy between
two fragments is the cartesian product of one segment per mode: one strided
assignment. The intersection is a merge of the two sorted run lists
(vectorised NumPy over the runs); the only Python loop runs once per produced
segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = ["ModeMap", "Segment", "decompose", "dense_mode", "blocked_mode", "cyclic_mode", "runs_mode", "intersection",
           "streaks"]


def _exclusive_cumsum(values: np.ndarray) -> np.ndarray:
    out = np.zeros(values.size, dtype=np.int64)
    if values.size > 1:
        np.cumsum(values[:-1], out=out[1:])
    return out


@dataclass(frozen=True, eq=False)
class ModeMap:
    """Where one fragment keeps its elements along one mode, as runs.

    Run ``r`` holds the global indices ``starts[r] .. starts[r] + lengths[r] - 1``;
    the first sits at offset ``origins[r]``, each next one ``unit`` further.
    Runs are sorted by ``starts``, disjoint and non-empty; local element ``k``
    of the fragment is the ``k``-th held index in that order. Build one with
    :func:`runs_mode`, :func:`cyclic_mode`, :func:`dense_mode` or
    :func:`blocked_mode`.

    Attributes
    ----------
    starts, lengths, origins : numpy.ndarray
        Int64 first global index, element count and first offset (in mode
        units) of each run.
    unit : int
        Offset between two consecutive elements of one run, in mode units.
    """

    starts: np.ndarray
    lengths: np.ndarray
    origins: np.ndarray
    unit: int
    size: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", int(self.lengths.sum()))

    def __len__(self) -> int:
        return self.size

    @property
    def first(self) -> int:
        """The lowest held global index (the map must not be empty)."""
        return int(self.starts[0])

    @property
    def last(self) -> int:
        """The highest held global index (the map must not be empty)."""
        return int(self.starts[-1] + self.lengths[-1] - 1)

    @property
    def run_positions(self) -> np.ndarray:
        """Local position of each run's first element."""
        return _exclusive_cumsum(self.lengths)

    @property
    def indices(self) -> np.ndarray:
        """Every held global index, in local order (one int64 per element: for inspection)."""
        step = np.repeat(self.starts - self.run_positions, self.lengths)
        return step + np.arange(self.size, dtype=np.int64)

    @property
    def offsets(self) -> np.ndarray:
        """The offset of every held element, in local order (one int64 per element: for inspection)."""
        base = np.repeat(self.origins - self.run_positions * self.unit, self.lengths)
        return base + np.arange(self.size, dtype=np.int64) * self.unit

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """The held global indices, as NumPy sees the map (``numpy.asarray(m)``)."""
        return np.asarray(self.indices, dtype=dtype)

    def local_positions(self, indices: np.ndarray) -> np.ndarray:
        """The local position of each of the given held global ``indices``."""
        indices = np.asarray(indices, dtype=np.int64)
        r = np.maximum(np.searchsorted(self.starts, indices, side="right") - 1, 0)
        return self.run_positions[r] + indices - self.starts[r]

    def index_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """``(starts, lengths)`` of the held indices as maximal ranges of consecutive indices."""
        if self.starts.size <= 1:
            return self.starts, self.lengths
        keep = np.concatenate(([True], self.starts[1:] != self.starts[:-1] + self.lengths[:-1]))
        first = np.flatnonzero(keep)
        return self.starts[first], np.add.reduceat(self.lengths, first)

    def same_indices(self, other: "ModeMap") -> bool:
        """Whether ``other`` holds exactly the same global indices."""
        if self is other:
            return True
        if self.size != other.size:
            return False
        (a, n), (b, m) = self.index_runs(), other.index_runs()
        return bool(np.array_equal(a, b) and np.array_equal(n, m))

    def same_offsets(self, other: "ModeMap", scale: int = 1, other_scale: int = 1) -> bool:
        """Whether the ``k``-th element sits at the same offset in both, for every ``k``
        (offsets times ``scale`` here and ``other_scale`` in ``other``)."""
        if self.size != other.size:
            return False
        if self.size == 0:
            return True
        ka, kb = self.run_positions, other.run_positions
        cuts = np.union1d(ka, kb)  # local positions where either side starts a run
        ia = np.searchsorted(ka, cuts, side="right") - 1
        ib = np.searchsorted(kb, cuts, side="right") - 1
        oa = (self.origins[ia] + (cuts - ka[ia]) * self.unit) * scale
        ob = (other.origins[ib] + (cuts - kb[ib]) * other.unit) * other_scale
        if not np.array_equal(oa, ob):
            return False
        longer = bool(np.any(np.diff(np.append(cuts, self.size)) > 1))
        return not longer or self.unit * scale == other.unit * other_scale


def runs_mode(starts: np.ndarray, lengths: np.ndarray, origins: np.ndarray, unit: int) -> ModeMap:
    """The mode map of the given runs, sorted by start and disjoint; empty runs are
    dropped and neighbours continuing each other in index and memory joined."""
    # copies: the map's arrays are made read-only, the caller's are left as they were
    starts = np.array(starts, dtype=np.int64)
    lengths = np.array(lengths, dtype=np.int64)
    origins = np.array(origins, dtype=np.int64)
    unit = int(unit)
    full = lengths > 0
    if not full.all():
        starts, lengths, origins = starts[full], lengths[full], origins[full]
    if starts.size > 1:
        joins = (starts[1:] == starts[:-1] + lengths[:-1]) & (origins[1:] == origins[:-1] + lengths[:-1] * unit)
        if joins.any():
            first = np.flatnonzero(np.concatenate(([True], ~joins)))
            starts, origins = starts[first], origins[first]
            lengths = np.add.reduceat(lengths, first)
    for a in (starts, lengths, origins):
        a.setflags(write=False)
    return ModeMap(starts, lengths, origins, unit)


def _elements_mode(indices: np.ndarray, offsets: np.ndarray, unit: int) -> ModeMap:
    """The mode map of explicit per-element indices and offsets."""
    if indices.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return runs_mode(empty, empty, empty, unit)
    breaks = (np.diff(indices) != 1) | (np.diff(offsets) != unit)
    first = np.flatnonzero(np.concatenate(([True], breaks)))
    lengths = np.diff(np.append(first, indices.size))
    return runs_mode(indices[first], lengths, offsets[first], unit)


def dense_mode(indices: np.ndarray) -> ModeMap:
    """The mode map of a plain strided array holding the sorted global ``indices``:
    local index ``k`` at offset ``k``."""
    indices = np.asarray(indices, dtype=np.int64)
    return _elements_mode(indices, np.arange(indices.size, dtype=np.int64), 1)


def blocked_mode(indices: np.ndarray, block: int, element_stride: int, block_stride: int) -> ModeMap:
    """The mode map of padded block storage holding the sorted global ``indices``.

    Local index ``k`` lies in the fragment's local block ``k // block`` at
    position ``k % block``; its offset is
    ``(k // block) * block_stride + (k % block) * element_stride`` (in elements,
    so the fragment's scale for this mode is 1).
    """
    indices = np.asarray(indices, dtype=np.int64)
    k = np.arange(indices.size, dtype=np.int64)
    offsets = (k // block) * int(block_stride) + (k % block) * int(element_stride)
    return _elements_mode(indices, offsets, int(element_stride))


def cyclic_mode(block: int, grid: int, coord: int, local: int,
                element_stride: int | None = None, block_stride: int | None = None) -> ModeMap:
    """The mode map of a block-cyclic fragment, built from its blocks alone.

    The fragment at grid coordinate ``coord`` (of ``grid``) holds ``local``
    elements: its ``j``-th block of ``block`` elements is the global block
    ``coord + j * grid`` (the last one possibly partial). Without strides the
    memory is a plain array (local index ``k`` at offset ``k``); with them it
    is padded block storage as in :func:`blocked_mode`.
    """
    block, grid, coord, local = int(block), int(grid), int(coord), int(local)
    nblocks = -(-local // block) if local > 0 else 0
    j = np.arange(nblocks, dtype=np.int64)
    starts = (coord + j * grid) * block
    lengths = np.full(nblocks, block, dtype=np.int64)
    if nblocks:
        lengths[-1] = local - (nblocks - 1) * block
    if element_stride is None or block_stride is None:
        return runs_mode(starts, lengths, j * block, 1)
    return runs_mode(starts, lengths, j * int(block_stride), int(element_stride))


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


def _overlaps(a: ModeMap, b: ModeMap) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lo, hi, ia, ib)``: the ranges ``[lo, hi)`` of global indices both hold, in
    global order, each inside run ``ia`` of ``a`` and run ``ib`` of ``b``. The merge of
    two sorted run lists, in time linear in the runs."""
    a_lo, a_hi = a.starts, a.starts + a.lengths
    b_lo, b_hi = b.starts, b.starts + b.lengths
    first = np.searchsorted(b_hi, a_lo, side="right")  # the first run of b ending after each run of a starts
    stop = np.searchsorted(b_lo, a_hi, side="left")  # the first starting at or after its end
    count = np.maximum(stop - first, 0)
    total = int(count.sum())
    ia = np.repeat(np.arange(a_lo.size, dtype=np.int64), count)
    ib = np.repeat(first - _exclusive_cumsum(count), count) + np.arange(total, dtype=np.int64)
    return np.maximum(a_lo[ia], b_lo[ib]), np.minimum(a_hi[ia], b_hi[ib]), ia, ib


def _meet(src: ModeMap, dst: ModeMap) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lengths, source offsets, destination offsets)`` of the ranges both hold, in global order."""
    lo, hi, ia, ib = _overlaps(src, dst)
    so = src.origins[ia] + (lo - src.starts[ia]) * src.unit
    do = dst.origins[ib] + (lo - dst.starts[ib]) * dst.unit
    return hi - lo, so, do


def intersection(a: ModeMap, b: ModeMap) -> ModeMap:
    """The global indices both ``a`` and ``b`` hold, as the mode map of a plain array
    holding just them (local index ``k`` at offset ``k``)."""
    if a is b or a.same_indices(b):
        starts, lengths = a.index_runs()
    elif a.size == 0 or b.size == 0 or a.last < b.first or b.last < a.first:
        starts = lengths = np.zeros(0, dtype=np.int64)
    else:
        lo, hi, _, _ = _overlaps(a, b)
        starts, lengths = lo, hi - lo
    return runs_mode(starts, lengths, _exclusive_cumsum(lengths), 1)


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
    if src.size == 0 or dst.size == 0 or src.last < dst.first or dst.last < src.first:
        return []
    pieces, so, do = _meet(src, dst)
    if pieces.size == 0:
        return []
    # consecutive pieces whose offsets go on by one unit on both sides form one run
    joins = (so[1:] == so[:-1] + pieces[:-1] * src.unit) & (do[1:] == do[:-1] + pieces[:-1] * dst.unit)
    starts = np.flatnonzero(np.concatenate(([True], ~joins)))
    lengths = np.add.reduceat(pieces, starts)
    s0, d0 = so[starts], do[starts]
    n = int(lengths.sum())
    if n == 1:
        return [Segment(1, 1, int(s0[0]), src.unit, int(d0[0]), dst.unit)]
    nruns = starts.size
    if nruns == 1:
        return [Segment(1, n, int(s0[0]), n * src.unit, int(d0[0]), n * dst.unit)]
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
