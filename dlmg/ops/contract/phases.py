"""How a pending sum is resolved, as layouts: the phases of the move and their traffic.

Resolving is a redistribution of the addends followed by a local reduction:
the replica mode becomes a real leading mode of extent ``k`` (a *stacked*
layout, each addend one slab), the stacked tensor is redistributed so that each
target fragment receives every addend of its elements, and each fragment sums
(maxes, mins) over that mode. Into a split target this is a reduce-scatter:
each device receives ``(k - 1) / k`` of its part from the others. Into a
target with replicas (an all-reduce) it runs in two phases, a reduce-scatter
into slabs over the target's devices and then an all-gather into the target,
so that no device receives more than ``2 (k - 1) / k`` of the tensor.
"""

from __future__ import annotations

from functools import lru_cache

from ...layout import Layout
from .cost import Traffic, traffic

__all__ = ["resolved_layout", "stacked_layout", "stacked_target", "resolve_phases", "move_traffic"]


@lru_cache(maxsize=256)
def resolved_layout(layout: Layout) -> Layout:
    """A pending layout's value layout: same split, replica 0's devices, nothing pending."""
    return Layout(layout.shape, block=layout.block, grid=layout.grid, devices=layout.devices[: layout.ngrid],
                  ranks=layout.ranks[: layout.ngrid])


@lru_cache(maxsize=256)
def stacked_layout(layout: Layout) -> Layout:
    """The addends of a pending ``layout`` as one tensor with a leading mode of extent ``k``.

    Stacked fragment ``r + k * c`` is replica ``r`` of grid cell ``c``."""
    k, cells = layout.nreplicas, layout.ngrid
    order = [c + cells * r for c in range(cells) for r in range(k)]
    return Layout((k, *layout.shape), block=(1, *layout.block), grid=(k, *layout.grid),
                  devices=[layout.devices[f] for f in order], ranks=[layout.ranks[f] for f in order])


@lru_cache(maxsize=256)
def stacked_target(k: int, target: Layout) -> Layout:
    """``target`` with a leading, whole mode of extent ``k``: every addend of each fragment's elements."""
    return Layout((k, *target.shape), block=(k, *target.block), grid=(1, *target.grid),
                  devices=target.devices, ranks=target.ranks)


@lru_cache(maxsize=256)
def resolve_phases(src: Layout, target: Layout) -> tuple[Layout, ...]:
    """The layouts a pending ``src`` passes through on its way to ``target`` (``target`` last).

    One phase into a target without replicas; into a target with replicas, a
    reduce-scatter into slabs over the target's distinct devices first."""
    if target.nreplicas == 1 or src.nreplicas == 1:
        return (target,)
    places = list(dict.fromkeys(zip(target.devices, target.ranks)))
    axis = max(range(target.ndim), key=lambda m: target.shape[m]) if target.ndim else None
    if axis is None or target.shape[axis] < 2 or len(places) < 2:
        return (target,)
    places = places[: target.shape[axis]]
    slabs = Layout.slab(target.shape, axis, [d for d, _ in places], ranks=[r for _, r in places])
    return (slabs, target)


@lru_cache(maxsize=1024)
def move_traffic(src: Layout, dst: Layout, itemsize: int) -> Traffic:
    """What :func:`redistribute` moves from ``src`` to ``dst``, a pending source resolved on the way."""
    if src.partial is None or src.nreplicas == 1:
        return traffic(src.replace(partial=None) if src.partial else src, dst, itemsize)
    total = Traffic()
    here = src
    for phase in resolve_phases(src, dst):
        total = total + traffic(here, phase, itemsize)
        here = phase
    return total
