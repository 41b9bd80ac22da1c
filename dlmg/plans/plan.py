"""Copy plans as data: the strided copies that turn one set of fragments into another.

A :class:`RedistributionPlan` lists :class:`Copy` records (devices, fragment
numbers, shapes, offsets and strides in elements) and answers questions about
them: which copies write a destination, and which sets of copies are one
larger copy (a concatenation, a stack, one strided copy over a buffer that
holds all the sources). :mod:`dlmg.plans.build` makes plans from endpoints;
:mod:`dlmg.movement` runs them on arrays.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from ..device import Device

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout

__all__ = ["Copy", "RedistributionPlan", "concatenation", "contiguous", "one_copy", "stacking"]


@dataclass(frozen=True)
class Copy:
    """One strided copy between a source and a destination fragment.

    ``dst_base[view(dst_offset, shape, dst_strides)] = src_base[view(src_offset,
    shape, src_strides)]`` where the views are ``as_strided`` views of the
    fragments' base arrays (offsets and strides in elements).

    Attributes
    ----------
    src, dst : int
        Source and destination fragment numbers.
    shape : tuple of int
        Shape of the strided views (at most two dimensions per mode).
    src_offset, dst_offset : int
        Element offset of the first copied element in each base.
    src_strides, dst_strides : tuple of int
        Element strides of the views.
    src_device, dst_device : Device
    nbytes : int
        Bytes copied.
    """

    src: int
    dst: int
    shape: tuple[int, ...]
    src_offset: int
    src_strides: tuple[int, ...]
    dst_offset: int
    dst_strides: tuple[int, ...]
    src_device: Device
    dst_device: Device
    nbytes: int
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __hash__(self) -> int:
        # Kept once worked out: copies tuples are cache keys in dlmg.movement.copies,
        # and hashing the ten fields anew would repeat that work on every look-up.
        found = self._hash
        if not found:
            found = hash((self.src, self.dst, self.shape, self.src_offset, self.src_strides, self.dst_offset,
                          self.dst_strides, self.src_device, self.dst_device)) or 1
            object.__setattr__(self, "_hash", found)
        return found

    @property
    def size(self) -> int:
        """Elements copied."""
        return math.prod(self.shape)


class CopiesInto(tuple):  # type: ignore[type-arg]
    """A plan's copies into one destination (see
    :meth:`RedistributionPlan.copies_into`): a tuple that keeps its hash once
    worked out. The copy engine looks its caches up by this tuple on every
    call, and a plain tuple hashes each of its copies anew: 512 copies, 512
    Python calls, about 50 us a gather on a 2-core CPU machine."""

    _hash: int

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            self._hash = found = tuple.__hash__(self)
            return found

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled without the kept hash (another process hashes its strings apart)."""
        return (CopiesInto, (tuple(self),))


@dataclass
class RedistributionPlan:
    """An inspectable plan for moving a tensor between two sets of fragments.

    Attributes
    ----------
    src_layout, dst_layout : Layout or None
        The layouts (``None`` where a side is a regular array).
    itemsize : int
        Bytes per element.
    dtype : str or None
    copies : tuple of Copy
        Every strided copy, grouped by destination fragment.
    reused : dict of int to int
        Destination fragment -> the source fragment taken over unchanged.
    sources : dict of int to tuple of int
        Destination fragment -> the source fragments it reads.
    """

    src_layout: "Layout | None"
    dst_layout: "Layout | None"
    itemsize: int
    copies: tuple[Copy, ...]
    reused: dict[int, int]
    sources: dict[int, tuple[int, ...]]
    dtype: str | None = None
    _by_dst: dict[int, tuple[Copy, ...]] = field(default_factory=dict, repr=False)
    # What callers asked of this plan, per question and value key (see remembered):
    # plans are kept per layout pair (build.plan_redistribution) and by the tensors
    # that move, so an answer is worked out once per plan.
    _answers: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        groups: dict[int, list[Copy]] = defaultdict(list)
        for c in self.copies:
            groups[c.dst].append(c)
        self._by_dst = {k: CopiesInto(v) for k, v in groups.items()}

    # -- queries -------------------------------------------------------------
    def copies_into(self, dst: int) -> tuple[Copy, ...]:
        """The copies writing destination fragment ``dst``."""
        return self._by_dst.get(dst, ())

    def joined(self, dsts: Sequence[int], offsets: Sequence[int], sizes: Sequence[int]) -> Copy | None:
        """The copies into destinations ``dsts`` as one copy of contiguous elements,
        where the destinations are parts of one buffer (starting ``offsets``
        elements into it, ``sizes`` elements each) and the copies one source's
        consecutive elements; ``None`` where they are not.

        Each destination must be written whole by one copy whose elements are
        contiguous on both sides, the copies must read one source fragment on
        one device, and each must start where the one before it ended, in the
        source and in the buffer (no gap between the parts). The result copies
        ``sum(sizes)`` elements into the buffer at ``offsets[0]``; its ``dst``
        is ``dsts[0]``. Answers are remembered per argument triple.
        """
        return self.remembered(("joined", tuple(dsts), tuple(offsets), tuple(sizes)), self._join)

    def stacked(self, dsts: Sequence[int], offsets: Sequence[int], sizes: Sequence[int]) -> tuple[Copy, ...] | None:
        """The copies into destinations ``dsts`` as one strided copy per source with
        leading modes that step through the destinations, where the destinations
        are parts of one buffer (``offsets`` and ``sizes`` as for :meth:`joined`)
        and each source's copies into them are one view of it and of the buffer
        repeated at regular steps; ``None`` where they are not.

        A cyclic scatter onto one GPU is such a set: fragment ``k`` holds rows
        ``k, k + n, ...`` of the source, so the fragments together are one view
        of it with a leading mode of ``n`` steps of one row; a block-cyclic grid
        of ``p x q`` fragments gives two leading modes, and row slabs to column
        slabs one per row slab. Every destination must take one copy from each
        of the same sources, of one shape and strides per source; the
        destinations must lie apart, in order, and the steps be positive in the
        buffer and not negative in the source. The results' ``dst`` is
        ``dsts[0]``, their destination offsets count from the buffer's start.
        Answers are remembered per argument triple.
        """
        return self.remembered(("stacked", tuple(dsts), tuple(offsets), tuple(sizes)), self._stack)

    #: The most answers a plan keeps: a plan meets few carvings and layouts.
    MOST_ANSWERS = 64

    def remembered(self, question: tuple[Any, ...], find: Callable[..., Any]) -> Any:
        """``find(*question[1:])``, worked out once per plan: ``question`` is a name
        and hashable values (the one place where what is learnt about a plan's
        copies is kept, so that movement asks the plan rather than keeping tables
        of its own; at most :attr:`MOST_ANSWERS`, cleared when full)."""
        answers = self._answers
        if question in answers:
            return answers[question]
        found = find(*question[1:])
        if len(answers) >= self.MOST_ANSWERS:
            answers.clear()
        answers[question] = found
        return found

    def _stack(self, dsts: tuple[int, ...], offsets: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[Copy, ...] | None:
        if len(dsts) < 2 or not len(dsts) == len(offsets) == len(sizes):
            return None
        if any(offset + size > after for offset, size, after in zip(offsets, sizes, offsets[1:])):
            return None  # parts out of order or overlapping
        by_source: dict[int, list[Copy]] = {}
        for k, dst in enumerate(dsts):
            copies = self.copies_into(dst)
            if len({c.src for c in copies}) != len(copies) or (k and len(copies) != len(by_source)):
                return None
            for c in copies:
                group = by_source.setdefault(c.src, []) if not k else by_source.get(c.src)
                if group is None:
                    return None
                group.append(c)
        stacked = []
        for group in by_source.values():
            first = group[0]
            if any((c.shape, c.src_strides, c.dst_strides, c.src_device, c.dst_device)
                   != (first.shape, first.src_strides, first.dst_strides, first.src_device, first.dst_device)
                   for c in group):
                return None
            modes = _leading_modes([c.src_offset for c in group],
                                   [offset + c.dst_offset for offset, c in zip(offsets, group)])
            if modes is None:
                return None
            extents, src_steps, dst_steps = zip(*modes)
            stacked.append(Copy(first.src, dsts[0], (*extents, *first.shape), first.src_offset,
                                (*src_steps, *first.src_strides), offsets[0] + first.dst_offset,
                                (*dst_steps, *first.dst_strides), first.src_device, first.dst_device,
                                len(group) * first.nbytes))
        return tuple(stacked) or None

    def _join(self, dsts: tuple[int, ...], offsets: tuple[int, ...], sizes: tuple[int, ...]) -> Copy | None:
        if not dsts or not len(dsts) == len(offsets) == len(sizes):
            return None
        first: Copy | None = None
        for dst, offset, size in zip(dsts, offsets, sizes):
            copies = self.copies_into(dst)
            if len(copies) != 1:
                return None
            c = copies[0]
            if c.dst_offset or c.size != size or not (_compact(c.shape, c.src_strides) and _compact(c.shape, c.dst_strides)):
                return None
            if first is None:
                first = c
            elif (c.src, c.src_device, c.dst_device) != (first.src, first.src_device, first.dst_device) or (
                c.src_offset - first.src_offset != offset - offsets[0]
            ):
                return None
        for offset, size, after in zip(offsets, sizes, offsets[1:]):
            if offset + size != after:
                return None
        assert first is not None
        total = sum(sizes)
        return Copy(first.src, first.dst, (total,), first.src_offset, (1,), offsets[0], (1,),
                    first.src_device, first.dst_device, total * self.itemsize)

    @property
    def total_bytes(self) -> int:
        """Bytes copied in all (a reused fragment costs nothing)."""
        return sum(c.nbytes for c in self.copies)

    @property
    def bytes_by_devices(self) -> dict[tuple[Device, Device], int]:
        """Bytes copied per ``(source device, destination device)`` pair."""
        out: dict[tuple[Device, Device], int] = defaultdict(int)
        for c in self.copies:
            out[(c.src_device, c.dst_device)] += c.nbytes
        return dict(sorted(out.items()))

    @property
    def cross_device_bytes(self) -> int:
        """Bytes copied between different devices."""
        return sum(c.nbytes for c in self.copies if c.src_device != c.dst_device)

    @property
    def ncopies(self) -> int:
        """Number of strided copies."""
        return len(self.copies)

    # -- rendering -----------------------------------------------------------
    def _move_lines(self) -> list[str]:
        """The layouts moved between and the bytes per device pair, one line each."""
        lines = []
        if self.src_layout is not None:
            lines.append(f"  from {self.src_layout!r}")
        if self.dst_layout is not None:
            lines.append(f"  to   {self.dst_layout!r}")
        lines += [f"  {a} -> {b}: {n} bytes" for (a, b), n in self.bytes_by_devices.items()]
        return lines

    def summary(self) -> str:
        """A few lines: copies, bytes per device pair, reused fragments."""
        lines = [
            f"RedistributionPlan: {self.ncopies} strided copies, {self.total_bytes} bytes"
            f" ({self.cross_device_bytes} across devices), {len(self.reused)} fragments reused"
        ]
        lines += self._move_lines()
        if self.reused:
            pairs = ", ".join(f"{d}<-{s}" for d, s in sorted(self.reused.items()))
            lines.append(f"  reused (dst<-src): {pairs}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def __repr__(self) -> str:
        return (
            f"<RedistributionPlan copies={self.ncopies} bytes={self.total_bytes} "
            f"cross_device={self.cross_device_bytes} reused={len(self.reused)}>"
        )


def concatenation(copies: Sequence[Copy]) -> tuple[int, tuple[Copy, ...]] | None:
    """``copies`` (into one destination) as a concatenation, where they are one:
    each copies contiguous elements on both sides, and in the order of their
    destination offsets they fill one contiguous range of the destination, one
    after another. Returns ``(offset, flat)``: the range's first element, and
    the copies in that order as 1-D copies (shape ``(size,)``, strides ``(1,)``);
    ``None`` otherwise (or for fewer than two copies).

    A gather of slabs is one: the destination's part for each fragment follows
    the one before, so a framework copies them as one concatenation (one
    ``torch.cat``) into one view instead of one view and copy each.
    """
    if len(copies) < 2:
        return None
    ordered = sorted(copies, key=lambda c: c.dst_offset)
    end = ordered[0].dst_offset
    flat = []
    for c in ordered:
        if c.dst_offset != end or not contiguous(c):
            return None
        size = c.size
        end += size
        flat.append(Copy(c.src, c.dst, (size,), c.src_offset, (1,), c.dst_offset, (1,), c.src_device, c.dst_device,
                         c.nbytes))
    return ordered[0].dst_offset, tuple(flat)


def stacking(copies: Sequence[Copy]) -> tuple[int, tuple[int, ...], tuple[Copy, ...]] | None:
    """``copies`` (into one destination) as pieces stacked along their first axis,
    where they are: each writes a C-contiguous block of the destination, all
    with the same trailing extents, and in the order of their destination
    offsets the blocks follow one another. The sources may have any strides.
    Returns ``(offset, shape, ordered)``: the first element and the shape of
    the C-contiguous block they fill together, and the copies in that order;
    ``None`` otherwise (or for fewer than two copies).

    A redistribution from row slabs to column slabs is one: each row slab
    gives a band of rows of every column slab, which a framework copies as
    one concatenation of strided pieces (one ``torch.cat``) instead of one
    strided copy each.
    """
    if len(copies) < 2:
        return None
    ordered = sorted(copies, key=lambda c: c.dst_offset)
    trailing = ordered[0].shape[1:]
    end = ordered[0].dst_offset
    rows = 0
    for c in ordered:
        if not c.shape or c.shape[1:] != trailing or c.dst_offset != end or not _compact(c.shape, c.dst_strides):
            return None
        end += c.size
        rows += c.shape[0]
    return ordered[0].dst_offset, (rows, *trailing), tuple(ordered)


def contiguous(c: Copy) -> bool:
    """Whether ``c`` copies contiguous elements on both sides (in C order)."""
    return _compact(c.shape, c.src_strides) and _compact(c.shape, c.dst_strides)


def one_copy(
    dsts: Sequence[int], offsets: Sequence[int], places: Mapping[int, tuple[int, int]],
    copies_into: Callable[[int], Sequence[Copy]],
) -> Copy | None:
    """Every copy into destinations ``dsts`` (parts of one buffer, starting
    ``offsets`` elements into it) as one strided copy reading one buffer that
    holds all their sources, where that exists; ``None`` elsewhere.

    ``places`` maps a source fragment to ``(buffer key, element offset)``: the
    fragment's first element lies that many elements into the buffer that
    :mod:`~dlmg.movement.sources` keeps under that key (fragments dlmg carved out of
    one allocation). The copies must all have one shape, strides and pair of
    devices, read sources of one buffer, and their offsets in the two
    buffers, in the order of the destination's, must step regularly (see
    :func:`_leading_modes`): row slabs to column slabs, or one block grid to
    another, on one GPU. The result reads buffer key ``src``, writes from the
    buffer's start (``dst`` is ``dsts[0]``), with a leading mode per step.
    """
    flat: list[tuple[int, int, Copy]] = []  # (destination offset, source offset, copy)
    key: int | None = None
    for dst, offset in zip(dsts, offsets):
        for c in copies_into(dst):
            place = places.get(c.src)
            if place is None or (key is not None and place[0] != key):
                return None
            key = place[0]
            flat.append((offset + c.dst_offset, place[1] + c.src_offset, c))
    if len(flat) < 2 or key is None:
        return None
    first = flat[0][2]
    shape = (first.shape, first.src_strides, first.dst_strides, first.src_device, first.dst_device)
    if any((c.shape, c.src_strides, c.dst_strides, c.src_device, c.dst_device) != shape for _, _, c in flat):
        return None
    flat.sort(key=lambda part: part[0])
    modes = _leading_modes([s for _, s, _ in flat], [d for d, _, _ in flat])
    if modes is None:
        return None
    extents, src_steps, dst_steps = zip(*modes)
    return Copy(key, dsts[0], (*extents, *first.shape), flat[0][1], (*src_steps, *first.src_strides), flat[0][0],
                (*dst_steps, *first.dst_strides), first.src_device, first.dst_device, len(flat) * first.nbytes)


def _leading_modes(src: Sequence[int], dst: Sequence[int]) -> list[tuple[int, int, int]] | None:
    """Modes ``(extent, source step, destination step)``, outermost first, whose
    indices in C order (the last fastest) run through the offset pairs
    ``(src[k], dst[k])`` in order; ``None`` where no such modes exist with source
    steps >= 0 and destination steps > 0."""
    n = len(src)
    modes: list[tuple[int, int, int]] = []  # innermost first
    count = 1
    while count < n:
        a, b = src[count] - src[0], dst[count] - dst[0]
        if a < 0 or b <= 0:
            return None
        extent = 2
        while count * (extent + 1) <= n and (src[count * extent] - src[0], dst[count * extent] - dst[0]) == (
                extent * a, extent * b):
            extent += 1
        if n % (count * extent):
            return None
        modes.append((extent, a, b))
        count *= extent
    for k in range(n):
        rest, s, d = k, src[0], dst[0]
        for extent, a, b in modes:
            rest, digit = divmod(rest, extent)
            s, d = s + digit * a, d + digit * b
        if (s, d) != (src[k], dst[k]):
            return None
    return modes[::-1]


def _compact(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """Whether a view of ``shape`` and element ``strides`` is C-contiguous."""
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expected:
            return False
        expected *= n
    return True
