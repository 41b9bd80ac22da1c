"""One fragment of a :class:`~dlmg.layout.Layout`: its grid coordinates,
device, local shape, owned blocks and memory geometry."""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from .._shapes import c_strides
from ..device import Device
from ..errors import LayoutError
from ._validate import mode_local_extent, mode_max_offset

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from .layout import Layout

__all__ = ["FragmentLayout"]


@dataclass(frozen=True, eq=True, repr=False)
class FragmentLayout:
    """One fragment of a :class:`Layout`: where it sits and what it holds.

    Built by :attr:`Layout.fragments`; compared and hashed by its layout and
    index. Along every mode the fragment holds the elements of its blocks in
    increasing global order (the ScaLAPACK local layout), so its local block
    ``k`` along mode ``m`` is global block ``coords[m] + k * grid[m]``.

    Attributes
    ----------
    layout : Layout
    index : int
        Its number, the position of its device in ``layout.devices``.
    """

    layout: Layout
    index: int

    def __post_init__(self) -> None:
        if not (hasattr(self.layout, "coords_of") and hasattr(self.layout, "nfragments")):  # a Layout
            raise TypeError(f"FragmentLayout needs a Layout, got {type(self.layout).__name__}")
        index = operator.index(self.index)
        if not 0 <= index < self.layout.nfragments:
            raise IndexError(f"fragment {index} out of range for a layout of {self.layout.nfragments} fragments")
        object.__setattr__(self, "index", index)

    # geometry ------------------------------------------------------------

    @cached_property
    def _coords_replica(self) -> tuple[tuple[int, ...], int]:
        return self.layout.coords_of(self.index)

    @property
    def coords(self) -> tuple[int, ...]:
        """Grid coordinates, one per mode."""
        return self._coords_replica[0]

    @property
    def replica(self) -> int:
        """Which copy this fragment belongs to (0 when not replicated)."""
        return self._coords_replica[1]

    @cached_property  # read for every fragment of every operation
    def device(self) -> Device:
        """The device holding it."""
        return self.layout.devices[self.index]

    @cached_property
    def rank(self) -> int:
        """The process holding it."""
        return self.layout.ranks[self.index]

    @cached_property
    def shape(self) -> tuple[int, ...]:
        """Local shape: per mode, the summed sizes of the owned blocks."""
        lay = self.layout
        return tuple(
            mode_local_extent(n, b, g, c)
            for n, b, g, c in zip(lay.shape, lay.block, lay.grid, self.coords)
        )

    @property
    def ndim(self) -> int:
        return self.layout.ndim

    @cached_property  # read for every fragment allocated
    def size(self) -> int:
        """Number of elements held."""
        return math.prod(self.shape)

    @property
    def nblocks(self) -> tuple[int, ...]:
        """Number of owned blocks per mode."""
        return tuple(
            len(range(c, nb, g)) for c, nb, g in zip(self.coords, self.layout.nblocks, self.layout.grid)
        )

    @cached_property
    def blocks(self) -> tuple[tuple[int, ...], ...]:
        """Per mode, the global block indices owned, increasing."""
        return tuple(
            tuple(range(c, nb, g)) for c, nb, g in zip(self.coords, self.layout.nblocks, self.layout.grid)
        )

    @cached_property
    def ranges(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        """Per mode, the global ``(start, stop)`` of each owned block."""
        lay = self.layout
        return tuple(
            tuple((j * b, min((j + 1) * b, n)) for j in blocks)
            for blocks, b, n in zip(self.blocks, lay.block, lay.shape)
        )

    # memory ----------------------------------------------------------------

    @property
    def is_strided(self) -> bool:
        """Whether the memory is one strided array of :attr:`shape` (see :attr:`strides`)."""
        return self._strides_or_none is not None

    @cached_property
    def _strides_or_none(self) -> tuple[int, ...] | None:
        lay = self.layout
        if lay.element_strides is None or lay.block_strides is None:
            return c_strides(self.shape)
        out = []
        for m, n_local in enumerate(self.shape):
            b, es, bs = lay.block[m], lay.element_strides[m], lay.block_strides[m]
            if n_local <= b:  # at most one local block: only the element stride matters
                out.append(es)
            elif b == 1:  # one element per block: blocks are the elements
                out.append(bs)
            elif bs == b * es:
                out.append(es)
            else:
                return None
        return tuple(out)

    @property
    def strides(self) -> tuple[int, ...]:
        """Element strides of the fragment's memory as a strided array of :attr:`shape`.

        Dense layouts give the C-contiguous strides of the local shape.
        Explicit strides give ``element_strides`` where every mode either
        holds at most one block or has ``block_strides[m] == block[m] *
        element_strides[m]`` (and ``block_strides`` where blocks are single
        elements).

        Raises
        ------
        LayoutError
            When padding between blocks makes the memory no single strided
            array; use :meth:`memory_offset` or :meth:`block_slices` then
            (:attr:`is_strided` tells beforehand).
        """
        strides = self._strides_or_none
        if strides is None:
            lay = self.layout
            raise LayoutError(
                f"fragment {self.index} (local shape {self.shape}) is no single strided array: "
                f"block_strides={lay.block_strides} are not block * element_strides "
                f"(block={lay.block}, element_strides={lay.element_strides}); address its "
                f"blocks through memory_offset() or block_slices()"
            )
        return strides

    @cached_property
    def span(self) -> int:
        """Elements the fragment's memory must hold (largest offset + 1; padding included)."""
        if self.size == 0:
            return 0
        lay = self.layout
        if lay.element_strides is None or lay.block_strides is None:
            return self.size
        return 1 + sum(
            mode_max_offset(n, b, es, bs)
            for n, b, es, bs in zip(self.shape, lay.block, lay.element_strides, lay.block_strides)
        )

    def memory_offset(self, local_index: Sequence[int]) -> int:
        """Element offset of ``local_index`` in the fragment's memory."""
        idx = self._check_local(local_index)
        lay = self.layout
        if lay.element_strides is None or lay.block_strides is None:
            return sum(i * s for i, s in zip(idx, c_strides(self.shape)))
        return sum(
            (i // b) * bs + (i % b) * es
            for i, b, es, bs in zip(idx, lay.block, lay.element_strides, lay.block_strides)
        )

    # block iteration ------------------------------------------------------

    def block_slices(self) -> Iterator[tuple[tuple[slice, ...], tuple[slice, ...]]]:
        """Every owned block as ``(global slices, local slices)``.

        The blocks come in C order of their per-mode positions; for rank 0 a
        single ``((), ())``; nothing when the fragment holds no element.
        """
        per_mode = []
        for ranges in self.ranges:
            pairs = []
            start_local = 0
            for start, stop in ranges:
                n = stop - start
                pairs.append((slice(start, stop), slice(start_local, start_local + n)))
                start_local += n
            per_mode.append(pairs)
        for combo in itertools.product(*per_mode):
            yield tuple(p[0] for p in combo), tuple(p[1] for p in combo)

    def global_slices(self) -> tuple[slice, ...]:
        """The held elements as one basic-indexing key: ``global[key]`` is this fragment.

        Possible when, along every mode, the fragment holds one block, all
        blocks (``grid == 1``), or single-element blocks (``block == 1``,
        giving a step of ``grid``).

        Raises
        ------
        LayoutError
            When some mode holds several blocks with gaps between them.
        """
        lay = self.layout
        out = []
        for m, ranges in enumerate(self.ranges):
            if not ranges:
                out.append(slice(0, 0))
            elif len(ranges) == 1 or lay.grid[m] == 1:
                out.append(slice(ranges[0][0], ranges[-1][1]))
            elif lay.block[m] == 1:
                out.append(slice(ranges[0][0], ranges[-1][1], lay.grid[m]))
            else:
                raise LayoutError(
                    f"fragment {self.index} holds {len(ranges)} separated blocks along mode {m} "
                    f"(block={lay.block[m]}, grid={lay.grid[m]}); no single slice selects them"
                )
        return tuple(out)

    def owned_indices(self, mode: int) -> "np.ndarray":
        """Sorted global indices along ``mode`` held by this fragment."""
        return self.layout.owned_indices(self.index, mode)

    # internals -------------------------------------------------------------

    def _check_local(self, local_index: Sequence[int]) -> tuple[int, ...]:
        idx = tuple(operator.index(i) for i in local_index)
        if len(idx) != self.ndim:
            raise IndexError(
                f"local index {idx} has {len(idx)} entries; fragment {self.index} has {self.ndim} modes"
            )
        for m, (i, n) in enumerate(zip(idx, self.shape)):
            if not 0 <= i < n:
                raise IndexError(
                    f"local index {idx} is out of bounds in mode {m} for fragment {self.index} "
                    f"of local shape {self.shape}"
                )
        return idx

    def __repr__(self) -> str:
        return (
            f"FragmentLayout(index={self.index}, coords={self.coords}, replica={self.replica}, "
            f"device='{self.device}', shape={self.shape}"
            + (f", rank={self.rank})" if self.rank else ")")
        )
