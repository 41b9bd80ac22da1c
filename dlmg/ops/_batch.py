"""Checks and layouts shared by the batch-local transforms (matmul, Cholesky, FFT).

A batch-local transform runs each fragment's own framework routine on the
whole matrices (or signals) the fragment holds: the *operated* modes must be
complete in every fragment (grid 1 along them), the leading *batch* modes
may be distributed. When that does not hold, :func:`require_whole` raises a
:class:`~dlmg.errors.LayoutError` with a layout to ``redistribute`` to.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from ..errors import LayoutError
from ..layout import Layout

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout

__all__ = ["require_whole", "suggest_whole", "with_modes", "batch_key"]


@lru_cache(maxsize=256)
def suggest_whole(layout: "Layout", modes: tuple[int, ...]) -> "Layout":
    """``layout`` with ``modes`` made whole in every fragment, keeping the rest.

    The batch distribution stays as it is; the devices are those of the
    fragments at grid coordinate 0 along ``modes`` (replicas kept). If that
    leaves a single device but ``layout`` used several, the first batch mode
    (if any) is cut into slabs over all of ``layout``'s replica-0 devices
    instead.
    """
    dropped = layout.drop_modes(modes) if modes else layout
    shape = layout.shape
    block = list(layout.block)
    grid = list(layout.grid)
    for m in modes:
        block[m] = max(shape[m], 1)
        grid[m] = 1
    devices = list(dropped.devices)
    ranks = list(dropped.ranks)
    batch = [m for m in range(layout.ndim) if m not in modes]
    if all(grid[m] == 1 for m in batch) and layout.ngrid > 1 and batch:
        first = batch[0]
        p = layout.ngrid
        block[first] = max(-(-shape[first] // p), 1)
        grid[first] = p
        devices = [layout.devices[r * p + i] for r in range(layout.nreplicas) for i in range(p)]
        ranks = [layout.ranks[r * p + i] for r in range(layout.nreplicas) for i in range(p)]
    return Layout(shape, block=block, grid=grid, devices=devices, ranks=ranks)


def require_whole(name: str, layout: "Layout", modes: Sequence[int], operand: str = "x") -> None:
    """Raise :class:`LayoutError` unless ``modes`` have grid 1 in ``layout``.

    The message names the distributed modes and suggests a target layout
    for ``redistribute``.
    """
    split = [m for m in modes if layout.grid[m] != 1]
    if not split:
        return
    target = suggest_whole(layout, tuple(modes))
    raise LayoutError(
        f"{name}: the operated modes {tuple(modes)} of {operand} must be whole in every fragment "
        f"(grid 1), but mode(s) {tuple(split)} are distributed with grid "
        f"{tuple(layout.grid[m] for m in split)} in {layout!r}. Only leading batch modes may be "
        f"distributed; redistribute first, e.g. {operand} = {operand}.redistribute({target!r})"
    )


@lru_cache(maxsize=256)
def with_modes(layout: "Layout", extents: tuple[tuple[int, int], ...], replicas: bool = True) -> "Layout":
    """``layout`` (dense) with the whole modes given as ``(mode, new extent)``
    pairs, optionally without its replicas."""
    shape = list(layout.shape)
    block = list(layout.block)
    for mode, extent in extents:
        shape[mode] = extent
        block[mode] = max(extent, 1)
    devices = layout.devices if replicas else layout.devices[: layout.ngrid]
    ranks = layout.ranks if replicas else layout.ranks[: layout.ngrid]
    return Layout(shape, block=block, grid=layout.grid, devices=devices, ranks=ranks)


def batch_key(layout: "Layout", nbatch: int) -> tuple:
    """What must agree between two operands' batch distributions (replica 0)."""
    blocks = tuple(
        None if g == 1 else min(b, max(n, 1))
        for n, b, g in zip(layout.shape[:nbatch], layout.block[:nbatch], layout.grid[:nbatch])
    )
    return (layout.shape[:nbatch], blocks, layout.grid[:nbatch], layout.devices[: layout.ngrid],
            layout.ranks[: layout.ngrid])
