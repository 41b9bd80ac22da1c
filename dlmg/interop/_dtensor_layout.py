"""DTensor placements and dlmg layouts, as plain data (no framework imported).

A DTensor lays a tensor over a device mesh (an n-d array of process ranks):
mesh dimension ``i`` either shards tensor dimension ``d`` (``("shard", d)``)
or replicates (``("replicate",)``; partial sums, ``("partial", op)``, hold
full-shaped values that still need reducing). Several mesh dimensions may
shard one tensor dimension; they cut it in mesh order, each cutting the
pieces of the one before into ``torch.chunk`` pieces (``ceil(n / k)``
elements each, the last ones smaller or empty).

In dlmg terms the mesh dimensions sharding mode ``d`` make a grid of
``prod(sizes)`` along it (the first of them major) holding one block each,
and the replicating mesh dimensions (row-major, in mesh order) make the
replica mode. A layout is expressible as placements when every mode holds at
most one block per grid coordinate, of ``torch.chunk``'s size, and every
fragment belongs to a different process.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence

from ..device import Device
from ..errors import LayoutError
from ..layout import Layout

__all__ = [
    "chunk_pieces",
    "expressibility_problems",
    "layout_from_placements",
    "nearest_expressible",
    "placements_for_layout",
]

Placement = tuple  # ("shard", d) | ("replicate",) | ("partial", op)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def chunk_pieces(n: int, sizes: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, size)`` of every piece of an extent ``n`` cut in turn into ``sizes[0]``,
    then ``sizes[1]``... ``torch.chunk`` pieces, in row-major order of the cutters."""
    pieces = [(0, n)]
    for k in sizes:
        out = []
        for start, size in pieces:
            step = _ceil_div(size, k) if size else 0
            for c in range(k):
                lo = min(c * step, size)
                hi = min((c + 1) * step, size)
                out.append((start + lo, hi - lo))
        pieces = out
    return pieces


def _row_major(index: Sequence[int], sizes: Sequence[int]) -> int:
    flat = 0
    for i, s in zip(index, sizes):
        flat = flat * s + i
    return flat


def layout_from_placements(
    shape: Sequence[int],
    mesh_ranks: Sequence,
    mesh_shape: Sequence[int],
    placements: Sequence[Placement],
    device_of: Callable[[int], Device],
) -> tuple[Layout, tuple[int, ...]]:
    """The layout of a DTensor and the rank of each of its fragments.

    Parameters
    ----------
    shape : sequence of int
        The global shape.
    mesh_ranks : sequence of int
        The mesh's ranks, flattened row-major.
    mesh_shape : sequence of int
    placements : sequence of tuple
        One per mesh dimension: ``("shard", d)``, ``("replicate",)`` or
        ``("partial", op)`` (read as a replica; reduce first for the values).
    device_of : callable
        The device of a rank.

    Raises
    ------
    LayoutError
        When nested uneven shards leave pieces of unequal size in the middle
        of a mode (no block size describes them).
    """
    shape = tuple(shape)
    mesh_shape = tuple(mesh_shape)
    if len(placements) != len(mesh_shape):
        raise LayoutError(f"{len(placements)} placements for a mesh of {len(mesh_shape)} dimensions {mesh_shape}")
    cutters: list[list[int]] = [[] for _ in shape]
    replica_dims = []
    for i, p in enumerate(placements):
        if p[0] == "shard":
            d = p[1] % len(shape) if shape else p[1]
            if not 0 <= d < len(shape):
                raise LayoutError(f"placements[{i}] shards dimension {p[1]} of a {len(shape)}-d tensor")
            cutters[d].append(i)
        else:
            replica_dims.append(i)
    block, grid = [], []
    for d, (n, dims) in enumerate(zip(shape, cutters)):
        sizes = [mesh_shape[i] for i in dims]
        g = math.prod(sizes)
        pieces = chunk_pieces(n, sizes)
        b = max(pieces[0][1], 1)
        regular = [(min(c * b, n), max(0, min(n, (c + 1) * b) - c * b)) for c in range(g)]
        if pieces != regular:
            raise LayoutError(
                f"dimension {d} (extent {n}) is sharded by mesh dimensions {dims} of sizes {sizes} into "
                f"pieces of sizes {[s for _, s in pieces]}: uneven pieces in the middle of a dimension "
                f"fit no block size; redistribute the DTensor to Shard({d}) on one mesh dimension first"
            )
        block.append(b if g > 1 else max(n, 1))
        grid.append(g)
    rep_sizes = [mesh_shape[i] for i in replica_dims]
    ngrid = math.prod(grid)
    nfrag = ngrid * math.prod(rep_sizes)
    devices: list[Device] = [Device("cpu", 0)] * nfrag  # every slot is set below
    ranks: list[int] = [-1] * nfrag
    flat_ranks = list(mesh_ranks)
    for flat, pos in enumerate(itertools.product(*(range(s) for s in mesh_shape))):
        coords = [_row_major([pos[i] for i in dims], [mesh_shape[i] for i in dims]) for dims in cutters]
        replica = _row_major([pos[i] for i in replica_dims], rep_sizes)
        f = _row_major(list(reversed(coords)), list(reversed(grid))) + ngrid * replica
        rank = int(flat_ranks[flat])
        ranks[f] = rank
        devices[f] = device_of(rank)
    return Layout(shape, block=block, grid=grid, devices=devices), tuple(ranks)  # type: ignore[arg-type]  # every slot filled


def expressibility_problems(layout: Layout) -> list[str]:
    """Why DTensor placements cannot describe ``layout`` (empty when they can)."""
    problems = []
    for m, (n, b, g) in enumerate(zip(layout.shape, layout.block, layout.grid)):
        if g == 1 or n == 0:
            continue
        chunk = _ceil_div(n, g)
        if _ceil_div(n, b) > g:
            problems.append(
                f"mode {m} is block-cyclic ({_ceil_div(n, b)} blocks of {b} dealt round robin to {g} "
                f"grid coordinates); DTensor has no block-cyclic placement"
            )
        elif b != chunk:
            problems.append(
                f"mode {m} has blocks of {b} over {g} grid coordinates; DTensor's Shard({m}) cuts "
                f"{n} elements into pieces of {chunk}"
            )
    if layout.element_strides is not None and not all(f.is_strided for f in layout.fragments):
        problems.append("some fragments lie in padded blocks, which no single local tensor describes")
    return problems


def nearest_expressible(layout: Layout) -> Layout:
    """The layout with the same grid, devices and replicas whose blocks are DTensor's
    ``torch.chunk`` pieces (one per grid coordinate), dense."""
    block = [
        max(_ceil_div(n, g), 1) if g > 1 else max(n, 1)
        for n, g in zip(layout.shape, layout.grid)
    ]
    return Layout(layout.shape, block=block, grid=layout.grid, devices=layout.devices, ranks=layout.ranks)


def placements_for_layout(
    layout: Layout, ranks: Sequence[int]
) -> tuple[list[int], tuple[int, ...], list[Placement]]:
    """A mesh (ranks flattened row-major, and its shape) and placements for ``layout``.

    Mesh dimensions: one per mode with a grid above 1 (in mode order), then
    one replica dimension when the layout has replicas; a layout of one
    fragment gets a 1-element mesh with ``Replicate``.
    """
    mesh_shape = [g for g in layout.grid if g > 1]
    placements: list[Placement] = [("shard", m) for m, g in enumerate(layout.grid) if g > 1]
    if layout.nreplicas > 1 or not mesh_shape:
        mesh_shape.append(layout.nreplicas)
        placements.append(("replicate",))
    split = [m for m, g in enumerate(layout.grid) if g > 1]
    flat = []
    for pos in itertools.product(*(range(s) for s in mesh_shape)):
        coords = [0] * layout.ndim
        for m, c in zip(split, pos):
            coords[m] = c
        replica = pos[len(split)] if len(pos) > len(split) else 0
        flat.append(ranks[layout.fragment_index(coords, replica)])
    return flat, tuple(mesh_shape), placements
