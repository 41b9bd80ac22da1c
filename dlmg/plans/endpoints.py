"""Fragments as the copy planner sees them: index sets and memory geometry.

An :class:`Endpoint` is one source or destination piece of memory: which
global indices it holds along every mode (a :class:`~dlmg.plans.segments.ModeMap`
per mode), how its memory is laid out (mode-unit offsets times a per-mode
``scale`` in elements, relative to the first element of its *base* array),
and which device holds it. Endpoints come from a layout's fragments
(:func:`layout_endpoints`), from the actual arrays of a tensor
(:func:`array_endpoint`) or from a regular array (gather destinations,
scatter sources).

Mode maps are runs, one per local block, cached per (block, grid, coordinate,
local extent, strides), so that
every fragment sharing a grid coordinate along a mode shares one map object,
and the planner decomposes each pair of maps once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Sequence


from .._shapes import c_strides
from ..device import Device
from .segments import ModeMap, cyclic_mode

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import FragmentLayout, Layout

__all__ = ["Endpoint", "layout_endpoints", "array_endpoint", "full_endpoint", "same_memory"]


@dataclass(frozen=True, eq=False)
class Endpoint:
    """One piece of memory taking part in a copy plan.

    Attributes
    ----------
    index : int
        The fragment number (0 for a regular array).
    device : Device
        Where the memory lives.
    modes : tuple of ModeMap
        Held global indices and their mode-unit offsets, per mode.
    scales : tuple of int
        Element stride that one mode unit stands for, per mode.
    group : object
        Endpoints with equal ``group`` hold the same elements (replicas).
    fixed_memory : bool
        Whether the memory geometry is prescribed (explicit layout strides);
        a fragment is reused for such an endpoint only with equal geometry.
    rank : int
        The process holding it.
    """

    index: int
    device: Device
    modes: tuple[ModeMap, ...]
    scales: tuple[int, ...]
    group: object
    fixed_memory: bool = False
    rank: int = 0

    @property
    def shape(self) -> tuple[int, ...]:
        """Local shape."""
        return tuple(len(m) for m in self.modes)

    @property
    def size(self) -> int:
        """Elements held."""
        n = 1
        for m in self.modes:
            n *= len(m)
        return n

    def same_indices(self, other: "Endpoint") -> bool:
        """Whether ``other`` holds exactly the same global indices, mode by mode."""
        return all(a.same_indices(b) for a, b in zip(self.modes, other.modes))

    def same_geometry(self, other: "Endpoint") -> bool:
        """Whether every held element sits at the same memory offset in both."""
        for a, b, sa, sb in zip(self.modes, other.modes, self.scales, other.scales):
            if len(a) > 1 and not a.same_offsets(b, sa, sb):
                return False
        return True


def same_memory(a: Device, b: Device) -> bool:
    """Whether two devices address the same memory (equal, or both the host)."""
    return a == b or (a.is_host and b.is_host)


@lru_cache(maxsize=512)
def _mode_map(block: int, grid: int, coord: int, local: int,
              element_stride: int | None, block_stride: int | None) -> ModeMap:
    # one run per local block: the map's size follows the block count, not the extent
    return cyclic_mode(block, grid, coord, local, element_stride, block_stride)


def fragment_modes(frag: "FragmentLayout") -> tuple[tuple[ModeMap, ...], tuple[int, ...]]:
    """Mode maps and scales of a layout fragment's prescribed memory."""
    lay = frag.layout
    es, bs = lay.element_strides, lay.block_strides
    modes = tuple(
        _mode_map(
            lay.block[m], lay.grid[m], frag.coords[m], frag.shape[m],
            None if es is None else es[m], None if bs is None else bs[m],
        )
        for m in range(lay.ndim)
    )
    scales = c_strides(frag.shape) if es is None else (1,) * lay.ndim
    return modes, scales


def layout_endpoints(layout: "Layout", ranks: Sequence[int] | None = None) -> list[Endpoint]:
    """One endpoint per fragment of ``layout``, with the layout's own memory geometry."""
    out = []
    for frag in layout.fragments:
        modes, scales = fragment_modes(frag)
        out.append(
            Endpoint(
                frag.index, frag.device, modes, scales, frag.coords,
                fixed_memory=layout.element_strides is not None,
                rank=0 if ranks is None else int(ranks[frag.index]),
            )
        )
    return out


def array_endpoint(frag: "FragmentLayout", strides: Sequence[int], device: Device | None = None,
                   rank: int = 0) -> Endpoint:
    """The endpoint of a fragment held as one strided array with element ``strides``."""
    lay = frag.layout
    modes = tuple(
        _mode_map(lay.block[m], lay.grid[m], frag.coords[m], frag.shape[m], None, None)
        for m in range(lay.ndim)
    )
    return Endpoint(frag.index, device or frag.device, modes, tuple(int(s) for s in strides),
                    frag.coords, fixed_memory=lay.element_strides is not None, rank=rank)


def full_endpoint(shape: Sequence[int], strides: Sequence[int], device: Device) -> Endpoint:
    """The endpoint of a regular array holding the whole tensor."""
    modes = tuple(_mode_map(max(int(n), 1), 1, 0, int(n), None, None) for n in shape)
    return Endpoint(0, device, modes, tuple(int(s) for s in strides), "all")
