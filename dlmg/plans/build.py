"""Planning: which strided copies fill a set of destination endpoints from sources.

:func:`build_plan` pairs every destination endpoint with the source endpoints
holding its elements, reading replicated sources from one replica (the one
on the destination's device when there is one), and turns every pair into a
few strided copies: per mode it decomposes the intersection of the two index
sets into segments (:func:`~dlmg.plans.segments.decompose`), and each element
of the cartesian product of the per-mode segment lists is one copy. A
destination holding exactly what a source on its device holds is *reused*
(no copy at all). The result is a :class:`~dlmg.plans.plan.RedistributionPlan`.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Any, Callable, Sequence

from ..dtypes import canonical, info
from ..errors import LayoutMismatchError
from ..layout import Layout
from .endpoints import Endpoint, layout_endpoints
from .plan import Copy, RedistributionPlan
from .segments import Segment, decompose

__all__ = ["build_plan", "pair_copies", "plan_redistribution"]


def _simplify(shape: list[int], a: list[int], b: list[int]) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Drop dimensions of extent 1 and merge neighbours that are contiguous on both sides."""
    dims = [(n, s, t) for n, s, t in zip(shape, a, b) if n != 1]
    merged: list[tuple[int, int, int]] = []
    for n, s, t in dims:
        if merged:
            pn, ps, pt = merged[-1]
            if ps == n * s and pt == n * t:
                merged[-1] = (pn * n, s, t)
                continue
        merged.append((n, s, t))
    return (
        tuple(d[0] for d in merged),
        tuple(d[1] for d in merged),
        tuple(d[2] for d in merged),
    )


def _pair_copies(src: Endpoint, dst: Endpoint, cache: dict, itemsize: int) -> list[Copy]:
    per_mode: list[list[Segment]] = []
    for a, b in zip(src.modes, dst.modes):
        key = (id(a), id(b))
        segs = cache.get(key)
        if segs is None:
            segs = decompose(a, b)
            cache[key] = (segs, a, b)  # keep the maps alive so ids stay unique
        else:
            segs = segs[0]
        if not segs:
            return []
        per_mode.append(segs)
    out = []
    for combo in itertools.product(*per_mode):
        shape: list[int] = []
        ss: list[int] = []
        ds: list[int] = []
        so = do = 0
        for seg, a, b, sa, sb in zip(combo, src.modes, dst.modes, src.scales, dst.scales):
            shape += [seg.count, seg.run]
            ss += [seg.src_step * sa, a.unit * sa]
            ds += [seg.dst_step * sb, b.unit * sb]
            so += seg.src_start * sa
            do += seg.dst_start * sb
        shp, s_str, d_str = _simplify(shape, ss, ds)
        size = 1
        for n in shp:
            size *= n
        out.append(Copy(src.index, dst.index, shp, so, s_str, do, d_str, src.device, dst.device, size * itemsize))
    return out


#: The copies between one source and one destination endpoint (``cache`` keeps
#: per-mode decompositions across calls of one plan). ``cache`` is keyed on the
#: maps' ``id()`` because a map holds index arrays that do not hash by value;
#: that is safe only because each entry keeps its two maps alive (no other
#: object can take their ids while the entry exists) and because the caller
#: drops the dict with the plan or exchange it was made for.
pair_copies = _pair_copies


class _Overlaps:
    """Which sources share at least one global index with a destination.

    Sources are grouped per mode by their mode map (fragments in one grid row
    share one map object), and a pair of maps is intersected once, so a
    destination costs one check per distinct source map and mode instead of
    one per source: planning stays near-linear in the fragment count.
    """

    def __init__(self, sources: Sequence[Endpoint], cache: dict) -> None:
        self.count = len(sources)
        self.cache = cache
        ndim = len(sources[0].modes) if sources else 0
        # sources grouped by their maps' ids: each entry keeps its map, and the object lives for one build
        self.by_mode: list[dict[int, tuple[Any, set[int]]]] = [{} for _ in range(ndim)]
        for p, s in enumerate(sources):
            for m, a in enumerate(s.modes):
                entry = self.by_mode[m].get(id(a))
                if entry is None:
                    self.by_mode[m][id(a)] = (a, {p})
                else:
                    entry[1].add(p)

    def _meet(self, a: Any, b: Any) -> bool:
        key = (id(a), id(b))
        segs = self.cache.get(key)
        if segs is None:
            found = decompose(a, b)
            segs = self.cache[key] = (found, a, b)  # keep the maps alive so ids stay unique
        return bool(segs[0])

    def __call__(self, dst: Endpoint) -> list[int]:
        near: set[int] | None = None
        for m, b in enumerate(dst.modes):
            hits: set[int] = set()
            for a, positions in self.by_mode[m].values():
                if self._meet(a, b):
                    hits |= positions
            near = hits if near is None else near & hits
            if not near:
                return []
        return list(range(self.count)) if near is None else sorted(near)


def _pick_replica(candidates: Sequence[Endpoint], dst: Endpoint) -> Endpoint:
    for c in candidates:
        if c.device == dst.device:
            return c
    for c in candidates:
        if c.device.is_host and dst.device.is_host:
            return c
    return candidates[dst.index % len(candidates)]


def build_plan(
    sources: Sequence[Endpoint],
    destinations: Sequence[Endpoint],
    itemsize: int,
    *,
    can_reuse: Callable[[Endpoint, Endpoint], bool] | None = None,
    src_layout: "Layout | None" = None,
    dst_layout: "Layout | None" = None,
    dtype: str | None = None,
) -> RedistributionPlan:
    """Plan the copies filling ``destinations`` from ``sources``.

    Parameters
    ----------
    sources, destinations : sequence of Endpoint
        Source endpoints with equal ``group`` are replicas of each other.
    itemsize : int
        Bytes per element.
    can_reuse : callable, optional
        ``can_reuse(src, dst)`` may veto taking a source over unchanged
        (a framework change, for example). By default a source is reused when
        it is on the destination's device, holds the same indices and, for a
        prescribed destination geometry, lays them out the same way.
    """
    groups: dict[Any, list[Endpoint]] = {}
    position: dict[Any, int] = {}
    group_of: list[int] = []  # each source's group, numbered in order of appearance
    for s in sources:
        if s.group not in groups:
            position[s.group] = len(groups)
            groups[s.group] = []
        groups[s.group].append(s)
        group_of.append(position[s.group])
    group_list = list(groups.values())
    # decompositions by the maps' ids, for this call only (see pair_copies for why that is safe)
    cache: dict = {}
    overlapping = _Overlaps(sources, cache)
    copies: list[Copy] = []
    reused: dict[int, int] = {}
    used: dict[int, tuple[int, ...]] = {}
    for d in destinations:
        if d.size == 0:
            used[d.index] = ()
            continue
        near = overlapping(d)  # positions of the sources sharing an index with d, in order
        taken = None
        for p in near:
            s = sources[p]
            if (
                s.device == d.device
                and s.shape == d.shape
                and s.same_indices(d)
                and (not d.fixed_memory or s.same_geometry(d))
                and (can_reuse is None or can_reuse(s, d))
            ):
                taken = s
                break
        if taken is not None:
            reused[d.index] = taken.index
            used[d.index] = (taken.index,)
            continue
        read = []
        for g in sorted({group_of[p] for p in near}):
            s = _pick_replica(group_list[g], d)
            pair = _pair_copies(s, d, cache, itemsize)
            if pair:
                copies.extend(pair)
                read.append(s.index)
        used[d.index] = tuple(read)
    return RedistributionPlan(src_layout, dst_layout, itemsize, tuple(copies), reused, used, dtype)


@lru_cache(maxsize=128)
def _cached_layout_plan(src: "Layout", dst: "Layout", dtype: str) -> RedistributionPlan:
    itemsize = info(dtype).itemsize
    return build_plan(
        layout_endpoints(src), layout_endpoints(dst), itemsize,
        src_layout=src, dst_layout=dst, dtype=dtype,
    )


def plan_redistribution(src_layout: "Layout", dst_layout: "Layout", dtype: Any = "float32") -> RedistributionPlan:
    """The copy plan moving a tensor of ``dtype`` from ``src_layout`` to ``dst_layout``.

    Parameters
    ----------
    src_layout, dst_layout : Layout
        Layouts of the same global shape (any blocks, grids, replicas,
        devices and strides).
    dtype : str or dtype, optional
        Element type, for the byte counts.

    Returns
    -------
    RedistributionPlan
        Inspect ``copies``, ``bytes_by_devices``, ``total_bytes``,
        ``reused``; ``print(plan)`` gives a summary.

    Raises
    ------
    LayoutMismatchError
        When the shapes differ.

    Examples
    --------
    >>> import dlmg
    >>> a = dlmg.Layout.slab((8, 8), 0, ["cpu"] * 2)
    >>> b = dlmg.Layout.slab((8, 8), 1, ["cpu"] * 2)
    >>> dlmg.plan_redistribution(a, b, "float32").total_bytes
    256
    """

    for field, value in (("src_layout", src_layout), ("dst_layout", dst_layout)):
        if not isinstance(value, Layout):
            hint = (" (for a tensor x, pass x.layout, or call x.plan_redistribution(layout))"
                    if isinstance(getattr(value, "layout", None), Layout) else "")
            raise TypeError(f"plan_redistribution: {field} must be a dlmg.Layout, got {type(value).__name__}{hint}")
    if src_layout.shape != dst_layout.shape:
        raise LayoutMismatchError(
            f"cannot redistribute between shapes {src_layout.shape} and {dst_layout.shape}: "
            f"source {src_layout!r}, destination {dst_layout!r}"
        )
    return _cached_layout_plan(src_layout, dst_layout, canonical(dtype))
