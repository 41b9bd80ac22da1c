"""Which fragments meet: the layout math of a contraction step (no tensor, no framework).

An operand is a letter string and a :class:`~dlmg.layout.Layout`. A step
contracts one operand (the *lead*) with an optional second one (the
*follower*) fragment by fragment, with no communication, when:

* every letter both hold is split identically in both (same extent, effective
  block and grid, or whole in both), and the follower's other letters are whole;
* for every lead fragment, a fragment of the follower holding the same blocks
  of the shared letters sits on the same device of the same process (any of
  its replicas).

The lead fragments are replica 0 of the lead, or every replica when the lead
is a pending sum (its replicas are addends; the contraction is linear in it).
The output is split as the lead along the output letters. Lead letters that
are split but leave the output (contracted with the follower, or summed away)
and a pending lead's replicas become the output's replicas: a pending sum.

:func:`aligned` builds the follower layout that makes such a pairing exist:
the shared letters split as the lead's, the rest whole, one replica per lead
fragment that needs its own copy. Moving the follower there (a redistribution,
possibly a replication) is the *move* strategy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from ...layout import Layout

__all__ = ["Pairing", "pair", "aligned", "split_of", "PENDING"]

#: The pseudo-letter of a pending operand's replica mode.
PENDING = "#"


def split_of(layout: Layout, mode: int) -> tuple[int, int, int] | None:
    """``(extent, effective block, grid)`` of a split mode, ``None`` for a whole one."""
    g = layout.grid[mode]
    if g == 1:
        return None
    n = layout.shape[mode]
    return (n, min(layout.block[mode], max(n, 1)), g)


def _lead_axes(letters: str, layout: Layout) -> tuple[tuple[str, int], ...]:
    """The axes along which the lead's fragments differ: split letters, then a pending lead's replicas."""
    axes = tuple((ch, layout.grid[m]) for m, ch in enumerate(letters) if layout.grid[m] > 1)
    if layout.partial is not None and layout.nreplicas > 1:
        axes += ((PENDING, layout.nreplicas),)
    return axes


def _unravel(index: int, sizes: tuple[int, ...]) -> tuple[int, ...]:
    """Column-major (first fastest) digits of ``index``."""
    out = []
    for n in sizes:
        out.append(index % n)
        index //= n
    return tuple(out)


def _lead_fragment(letters: str, layout: Layout, where: dict[str, int]) -> int:
    """The lead's fragment at the axis coordinates ``where`` (letter -> coordinate)."""
    coords = tuple(where.get(ch, 0) if layout.grid[m] > 1 else 0 for m, ch in enumerate(letters))
    return layout.fragment_index(coords, where.get(PENDING, 0))


@dataclass(frozen=True)
class Pairing:
    """A fragment-by-fragment step: which lead and follower fragments make each output fragment.

    Attributes
    ----------
    out : Layout
        The output's layout (``partial="sum"`` where lead splits leave it).
    triples : tuple of (int, int, int or None)
        ``(output fragment, lead fragment, follower fragment)`` for every output fragment.
    summed : tuple of str
        The lead letters (and ``"#"`` for a pending lead's replicas) whose split makes the output pending.
    """

    out: Layout
    triples: tuple[tuple[int, int, int | None], ...]
    summed: tuple[str, ...]

    @property
    def pending(self) -> bool:
        return self.out.partial is not None


def _out_layout(letters: str, layout: Layout, out_letters: str,
                extents: dict[str, int]) -> tuple[Layout, list[int], tuple[str, ...]]:
    """The output layout and, per output fragment, its lead fragment."""
    axes = _lead_axes(letters, layout)
    summed = [(ch, g) for ch, g in axes if ch not in out_letters]
    shape, block, grid = [], [], []
    for ch in out_letters:
        n = extents[ch]
        shape.append(n)
        if ch in letters and layout.grid[letters.index(ch)] > 1:
            m = letters.index(ch)
            block.append(layout.block[m])
            grid.append(layout.grid[m])
        else:
            block.append(max(n, 1))
            grid.append(1)
    cells = math.prod(grid)
    nrep = math.prod(g for _, g in summed)
    leads = []
    for r in range(nrep):
        rdigits = dict(zip((ch for ch, _ in summed), _unravel(r, tuple(g for _, g in summed))))
        for c in range(cells):
            where = dict(zip(out_letters, _unravel(c, tuple(grid))))
            where.update(rdigits)
            leads.append(_lead_fragment(letters, layout, where))
    partial = "sum" if summed else None
    out = Layout(tuple(shape), block=block, grid=grid, devices=[layout.devices[f] for f in leads],
                 ranks=[layout.ranks[f] for f in leads], partial=partial)
    return out, leads, tuple(ch for ch, _ in summed)


@lru_cache(maxsize=1024)  # a plan asks the same pairs several times (both orders, the cost model)
def pair(lead: tuple[str, Layout], follower: tuple[str, Layout] | None, out_letters: str,
         extents: tuple[tuple[str, int], ...]) -> Pairing | None:
    """The fragment-by-fragment pairing of ``lead`` and ``follower`` into ``out_letters``,
    or ``None`` when the follower's fragments do not sit with the lead's."""
    letters, layout = lead
    sizes = dict(extents)
    if layout.partial not in (None, "sum"):
        return None  # only a sum is linear: a pending max or min is resolved first
    if follower is not None:
        fletters, flayout = follower
        if flayout.partial is not None and flayout.nreplicas > 1:
            return None
        for m, ch in enumerate(fletters):  # shared letters split alike, the follower's others whole
            s = split_of(flayout, m)
            if ch in letters:
                if split_of(layout, letters.index(ch)) != s:
                    return None
            elif s is not None:
                return None
    out, leads, summed = _out_layout(letters, layout, out_letters, sizes)
    triples: list[tuple[int, int, int | None]] = []
    for o, f in enumerate(leads):
        if follower is None:
            triples.append((o, f, None))
            continue
        coords, _ = layout.coords_of(f)
        fc = tuple(coords[letters.index(ch)] if flayout.grid[m] > 1 else 0 for m, ch in enumerate(fletters))
        place = (layout.devices[f], layout.ranks[f])
        for r in range(flayout.nreplicas):
            g = flayout.fragment_index(fc, r)
            if (flayout.devices[g], flayout.ranks[g]) == place:
                triples.append((o, f, g))
                break
        else:
            return None
    return Pairing(out, tuple(triples), summed)


@lru_cache(maxsize=1024)
def aligned(lead: tuple[str, Layout], fletters: str, extents: tuple[tuple[str, int], ...]) -> Layout:
    """The layout a follower with letters ``fletters`` needs to pair with ``lead`` in place:
    shared split letters as the lead's, every other letter whole, one replica per
    combination of the lead's other split letters (and a pending lead's replicas)."""
    letters, layout = lead
    sizes = dict(extents)
    shape, block, grid = [], [], []
    for ch in fletters:
        n = sizes[ch]
        shape.append(n)
        m = letters.index(ch) if ch in letters else -1
        if m >= 0 and layout.grid[m] > 1:
            block.append(layout.block[m])
            grid.append(layout.grid[m])
        else:
            block.append(max(n, 1))
            grid.append(1)
    others = [(ch, g) for ch, g in _lead_axes(letters, layout) if ch not in fletters]
    devices, ranks = [], []
    cells = math.prod(grid)
    for r in range(math.prod(g for _, g in others)):
        where = dict(zip((ch for ch, _ in others), _unravel(r, tuple(g for _, g in others))))
        for c in range(cells):
            where.update(zip(fletters, _unravel(c, tuple(grid))))
            f = _lead_fragment(letters, layout, where)
            devices.append(layout.devices[f])
            ranks.append(layout.ranks[f])
    return Layout(tuple(shape), block=block, grid=grid, devices=devices, ranks=ranks)


def whole_along(layout: Layout, modes: tuple[int, ...]) -> Layout:
    """``layout`` with ``modes`` whole (grid 1), keeping the other splits on the
    devices at coordinate 0 along ``modes`` (no pending sum, replica 0 only)."""
    if not modes:
        return layout
    keep = [f for f in layout.fragments[: layout.ngrid] if all(f.coords[m] == 0 for m in modes)]
    block = [max(n, 1) if m in modes else b for m, (n, b) in enumerate(zip(layout.shape, layout.block))]
    grid = [1 if m in modes else g for m, g in enumerate(layout.grid)]
    return Layout(layout.shape, block=block, grid=grid, devices=[f.device for f in keep],
                  ranks=[layout.ranks[f.index] for f in keep])
