"""Block-cyclic layouts: the descriptor, its validation and its index math.

A :class:`Layout` says how one logical tensor is cut into fragments and which
device holds each fragment, following cuTENSORMg's tensor descriptor. It is a
frozen value: built and validated once, compared and hashed by its fields, and
free of any framework or communication. :class:`FragmentLayout` describes one
fragment (its grid coordinates, device, local shape, owned blocks and memory
geometry).

The model, per mode ``m``:

* the extent ``shape[m]`` is cut into blocks of ``block[m]`` elements (the
  last block may be partial), ``nblocks[m] = ceil(shape[m] / block[m])``;
* block ``j`` goes to grid coordinate ``j % grid[m]`` (round robin);
* a fragment exists for every grid coordinate and replica; along every mode it
  holds the elements of its blocks in increasing global order (fragment
  numbering: the class's Notes).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._hooks import Hook
from .._shapes import c_strides
from ..device import Device
from ..errors import LayoutError
from ._validate import (
    as_devices,
    as_int,
    as_partial,
    as_ranks,
    as_shape,
    ceil_div,
    check_no_overlap,
    check_span,
    context_of,
    per_mode,
)
from .fragment import FragmentLayout
from ..dtypes import info
from .render import render_text
from .render import plot_layout

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["Layout"]

#: :meth:`Layout.to_sharding`'s answer, provided by :mod:`dlmg.interop.jax`.
sharding_of_layout: Hook = Hook("a JAX sharding of a layout", "dlmg.interop.jax")

#: Cache: interned distribution keys (see ``Layout._distribution_key``), keyed on the
#: key's value. Layouts built apart with one distribution then compare by identity
#: instead of element by element, which saves time growing with the fragments on every
#: elementwise operation, which compares its operands' layouts (figure in
#: docs/performance-history.md). Cleared when full, which costs only speed.
_KEYS: dict[tuple, tuple] = {}
_KEYS_KEPT = 4096


@dataclass(frozen=True, init=False, eq=True, repr=False)
class Layout:
    """How a tensor is split into fragments over devices (cuTENSORMg model).

    Parameters
    ----------
    shape : sequence of int
        The global extent of every mode (``()`` for a scalar). An int is taken
        as a 1-D shape.
    block : sequence of int, optional
        The block size of every mode. ``None`` gives one block per mode (the
        extent itself, or 1 for a zero extent). A block larger than its extent
        is allowed (one partial block).
    grid : sequence of int, optional
        How many grid coordinates the blocks of each mode are dealt to, round
        robin: block ``j`` of mode ``m`` goes to coordinate ``j % grid[m]``.
        ``None`` is 1 for every mode.
    devices : sequence of Device or str
        One device per fragment, column-major over the grid (mode 0 varies
        fastest). ``k * prod(grid)`` devices add a final replica mode: ``k``
        full copies. A device may appear several times (several fragments on
        it), but host devices (``cpu`` kinds) and other devices may not be
        mixed. Strings such as ``"cpu:3"`` or ``"cuda:1"`` name devices; a
        plain int is a CUDA ordinal (``0`` is ``cuda:0``).
    element_strides, block_strides : sequence of int, optional
        cuTENSORMg's ``elementStride`` and ``blockStride``: the local element
        in local block ``k[m]`` at in-block index ``i[m]`` sits at memory
        offset ``sum(k[m] * block_strides[m] + i[m] * element_strides[m])``
        (in elements) in every fragment. Both ``None`` (the default) means
        dense: every fragment is a C-contiguous array of its local shape.
        Only ``element_strides`` given: ``block_strides[m] = block[m] *
        element_strides[m]`` (each fragment is one strided array). Only
        ``block_strides`` given: every block is C-contiguous
        (``element_strides`` are the C strides of ``block``). Strides must be
        positive and no two elements of a fragment may share memory.
    ranks : sequence of int or int, optional
        The process holding each fragment, in the order of ``devices``
        (replica mode included), as cuTENSORMp's descriptor gives a rank per
        grid cell. An int puts every fragment on that process. All 0 by
        default (one process). Devices name each process's own devices.
    partial : {"sum", "max", "min"}, optional
        A pending reduction: the replicas hold addends (or candidates) of the
        true value, which is their sum (max, min), as DTensor's ``Partial``
        and JAX's unreduced arrays. ``redistribute`` resolves it.

    Raises
    ------
    LayoutError
        For any invalid field; the message names the field, the mode and the
        value, with the rest of the descriptor as context.

    Notes
    -----
    Fragment ``f`` has grid coordinates ``c`` and replica ``r`` where
    ``f = c[0] + grid[0] * (c[1] + grid[1] * (...)) + prod(grid) * r``.
    The worked 9x9 example of the cuTENSORMg documentation numbers its devices
    row-major; dlmg follows the documented parameter (column-major).

    Examples
    --------
    >>> lay = Layout((9, 9), block=(4, 2), grid=(2, 2),
    ...              devices=["cuda:0", "cuda:1", "cuda:2", "cuda:3"])
    >>> [f.shape for f in lay.fragments]
    [(5, 5), (4, 5), (5, 4), (4, 4)]
    >>> lay.owners((4, 2))
    (3,)
    """

    shape: tuple[int, ...]
    block: tuple[int, ...]
    grid: tuple[int, ...]
    devices: tuple[Device, ...]
    element_strides: tuple[int, ...] | None = None
    block_strides: tuple[int, ...] | None = None
    ranks: tuple[int, ...] = ()
    partial: str | None = None

    def __init__(
        self,
        shape: Sequence[int] | int,
        *,
        block: Sequence[int] | None = None,
        grid: Sequence[int] | None = None,
        devices: Sequence[Device | str] | Device | str,
        element_strides: Sequence[int] | None = None,
        block_strides: Sequence[int] | None = None,
        ranks: Sequence[int] | int | None = None,
        partial: str | None = None,
    ) -> None:
        shape_t = as_shape(shape)
        ndim = len(shape_t)
        if block is None:
            block_t = tuple(max(n, 1) for n in shape_t)
        else:
            block_t = per_mode("block", block, ndim, context_of(shape=shape_t), minimum=1)
        if grid is None:
            grid_t = (1,) * ndim
        else:
            grid_t = per_mode("grid", grid, ndim, context_of(shape=shape_t, block=block_t), minimum=1)
        context = context_of(shape=shape_t, block=block_t, grid=grid_t)
        devices_t = as_devices(devices, context)
        cells = math.prod(grid_t)
        if len(devices_t) == 0:
            raise LayoutError(f"devices is empty; a layout needs at least prod(grid) = {cells} devices ({context})")
        if len(devices_t) % cells:
            raise LayoutError(
                f"devices has {len(devices_t)} entries, not a multiple of prod(grid) = {cells} "
                f"(k * {cells} devices give k replicas) ({context})"
            )
        hosts = {d.is_host for d in devices_t}
        if len(hosts) > 1:
            host = next(d for d in devices_t if d.is_host)
            other = next(d for d in devices_t if not d.is_host)
            raise LayoutError(
                f"devices mixes host ({host}) and non-host ({other}) devices; a layout lies "
                f"fully on the host or fully on devices ({context})"
            )
        es_t = bs_t = None
        if element_strides is not None:
            es_t = per_mode("element_strides", element_strides, ndim, context, minimum=1)
        if block_strides is not None:
            bs_t = per_mode("block_strides", block_strides, ndim, context, minimum=1)
        if es_t is not None and bs_t is None:
            bs_t = tuple(b * s for b, s in zip(block_t, es_t))
        elif bs_t is not None and es_t is None:
            es_t = c_strides(block_t)
        object.__setattr__(self, "shape", shape_t)
        object.__setattr__(self, "block", block_t)
        object.__setattr__(self, "grid", grid_t)
        object.__setattr__(self, "devices", devices_t)
        object.__setattr__(self, "element_strides", es_t)
        object.__setattr__(self, "block_strides", bs_t)
        object.__setattr__(self, "ranks", as_ranks(ranks, len(devices_t), context))
        object.__setattr__(self, "partial", as_partial(partial, context))
        if es_t is not None and bs_t is not None:
            check_span(shape_t, block_t, grid_t, es_t, bs_t, context)
            check_no_overlap(shape_t, block_t, grid_t, es_t, bs_t, context)

    def __hash__(self) -> int:
        # computed once: layouts key plan caches, and hashing hundreds of devices
        # on every lookup would cost more than the lookup saves
        found = self.__dict__.get("_hash")
        if found is None:
            found = self.__dict__["_hash"] = hash(tuple(getattr(self, f.name) for f in fields(self)))
        return found

    # -- pickling: only the fields travel, never the caches
    def __getstate__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "block": self.block,
            "grid": self.grid,
            "devices": self.devices,
            "element_strides": self.element_strides,
            "block_strides": self.block_strides,
            "ranks": self.ranks,
            "partial": self.partial,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        state.setdefault("ranks", (0,) * len(state["devices"]))
        state.setdefault("partial", None)
        for name, value in state.items():
            object.__setattr__(self, name, value)

    # -- constructors ------------------------------------------------------

    @classmethod
    def slab(cls, shape: Sequence[int] | int, axis: int, devices: Sequence[Device | str], *,
             ranks: Sequence[int] | int | None = None) -> "Layout":
        """One contiguous piece per device along ``axis``.

        With ``p = len(devices)`` and ``n = shape[axis]`` the block along
        ``axis`` is ``ceil(n / p)`` and the grid there is ``p``. When ``p``
        does not divide ``n`` the pieces have ``ceil(n / p)`` elements except
        a smaller last one, and trailing devices may get empty pieces (for
        ``n = 5, p = 4``: 2, 2, 1, 0) -- that is what a block-cyclic
        descriptor can express.

        ``axis`` may count from the end; ``ranks`` gives the process of each
        piece (see :class:`Layout`).
        """
        shape_t = as_shape(shape)
        ndim = len(shape_t)
        axis_i = as_int(axis, "axis", context_of(shape=shape_t))
        if not -ndim <= axis_i < ndim:
            raise LayoutError(f"axis = {axis_i} is out of range for shape {shape_t} with {ndim} modes")
        axis_i %= ndim
        devices_t = as_devices(devices, context_of(shape=shape_t, axis=axis_i))
        p = len(devices_t)
        if p == 0:
            raise LayoutError(f"devices is empty; a slab layout needs at least one device (shape={shape_t})")
        block = [max(n, 1) for n in shape_t]
        block[axis_i] = max(ceil_div(shape_t[axis_i], p), 1)
        grid = [1] * ndim
        grid[axis_i] = p
        return cls(shape_t, block=block, grid=grid, devices=devices_t, ranks=ranks)

    @classmethod
    def cyclic(cls, shape: Sequence[int] | int, axis: int, devices: Sequence[Device | str], *,
               ranks: Sequence[int] | int | None = None) -> "Layout":
        """Elements dealt to the devices round-robin along ``axis``, one at a time.

        Element ``i`` along ``axis`` sits on ``devices[i % p]`` (``p = len(devices)``):
        a block of 1 and a grid of ``p`` there, every other mode whole. The
        block-cyclic layout with blocks of 1 (:meth:`block_cyclic`), as
        :meth:`slab` is the one with blocks of ``ceil(n / p)``.
        """
        slab = cls.slab(shape, axis, devices, ranks=ranks)
        axis_i = next(m for m, g in enumerate(slab.grid) if g > 1) if any(g > 1 for g in slab.grid) else None
        if axis_i is None:  # one device: the whole tensor there
            return slab
        block = list(slab.block)
        block[axis_i] = 1
        return cls(slab.shape, block=block, grid=slab.grid, devices=slab.devices, ranks=ranks)

    @classmethod
    def block_cyclic(
        cls,
        shape: Sequence[int] | int,
        block: Sequence[int],
        grid: Sequence[int],
        devices: Sequence[Device | str],
        *,
        ranks: Sequence[int] | int | None = None,
    ) -> "Layout":
        """A block-cyclic layout (the constructor with every field given)."""
        return cls(shape, block=block, grid=grid, devices=devices, ranks=ranks)

    @classmethod
    def replicated(cls, shape: Sequence[int] | int, devices: Sequence[Device | str], *,
                   ranks: Sequence[int] | int | None = None) -> "Layout":
        """One full copy of the tensor on each of ``devices`` (of processes ``ranks``)."""
        return cls(shape, devices=devices, ranks=ranks)

    @classmethod
    def single(cls, shape: Sequence[int] | int, device: Device | str = "cpu", *,
               ranks: Sequence[int] | int | None = None) -> "Layout":
        """The whole tensor as one fragment on ``device`` (of process ``ranks``, 0 by default)."""
        return cls(shape, devices=(device,), ranks=ranks)

    def replace(self, **fields: Any) -> "Layout":
        """A copy with some fields changed (validated like a new layout).

        ``block``, ``grid`` and the strides keep their current, concrete values
        unless given, so changing ``shape`` alone keeps the old block sizes.
        """
        unknown = set(fields) - set(self.__getstate__())
        if unknown:
            raise TypeError(f"Layout.replace() got unknown fields {sorted(unknown)}")
        values = {**self.__getstate__(), **fields}
        if "devices" in fields and "ranks" not in fields and len(values["ranks"]) != len(as_devices(fields["devices"], "")):
            values["ranks"] = None  # another fragment count: every fragment on process 0 again
        if "element_strides" in fields and "block_strides" not in fields:
            values["block_strides"] = None  # derive them again from the new element strides
        shape = values.pop("shape")
        return Layout(shape, **values)

    def with_devices(self, devices: Sequence[Device | str]) -> "Layout":
        """The same layout on other devices (the count decides the replicas)."""
        return self.replace(devices=devices)

    def drop_modes(self, axes: int | Iterable[int]) -> "Layout":
        """The layout with the modes ``axes`` removed, as a reduction over them leaves.

        The result keeps the fragments whose grid coordinate along every
        removed mode is 0, in their order (so replicas stay replicas), and
        their devices become the new layout's devices. Explicit strides of
        the kept modes are kept; a dense layout stays dense.

        Parameters
        ----------
        axes : int or iterable of int
            Modes to remove; negative values count from the end.
        """
        if isinstance(axes, bool) or not isinstance(axes, Iterable):
            axes = (axes,)
        removed = set()
        for axis in axes:
            a = as_int(axis, "axes", self._context())
            if not -self.ndim <= a < self.ndim:
                raise LayoutError(f"axes contains {a}, out of range for {self.ndim} modes ({self._context()})")
            a %= self.ndim
            if a in removed:
                raise LayoutError(f"axes names mode {a} twice ({self._context()})")
            removed.add(a)
        keep = [m for m in range(self.ndim) if m not in removed]
        kept = [f for f in self.fragments if all(f.coords[m] == 0 for m in removed)]
        devices = [f.device for f in kept]
        pick = lambda t: None if t is None else tuple(t[m] for m in keep)  # noqa: E731
        return Layout(
            tuple(self.shape[m] for m in keep),
            block=pick(self.block),
            grid=pick(self.grid),
            devices=devices,
            element_strides=pick(self.element_strides),
            block_strides=pick(self.block_strides),
            ranks=[self.ranks[f.index] for f in kept],
        )

    # -- derived values ----------------------------------------------------

    @property
    def ndim(self) -> int:
        """The number of modes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements of the global tensor."""
        return math.prod(self.shape)

    @property
    def nblocks(self) -> tuple[int, ...]:
        """Blocks per mode, ``ceil(shape / block)``."""
        return tuple(ceil_div(n, b) for n, b in zip(self.shape, self.block))

    @property
    def ngrid(self) -> int:
        """``prod(grid)``: fragments per replica."""
        return math.prod(self.grid)

    @property
    def nreplicas(self) -> int:
        """How many full copies the layout holds (the replica mode's extent)."""
        return len(self.devices) // self.ngrid

    @property
    def nfragments(self) -> int:
        """``prod(grid) * nreplicas``, the length of :attr:`devices`."""
        return len(self.devices)

    @property
    def is_replicated(self) -> bool:
        """Whether there is more than one copy."""
        return self.nreplicas > 1

    @property
    def on_host(self) -> bool:
        """Whether every fragment lies in host memory."""
        return self.devices[0].is_host

    @property
    def is_dense(self) -> bool:
        """Whether every fragment is a C-contiguous array of its local shape
        (no explicit strides were given)."""
        return self.element_strides is None

    @cached_property
    def fragments(self) -> tuple["FragmentLayout", ...]:
        """Every fragment, numbered like :attr:`devices`."""
        return tuple(FragmentLayout(self, i) for i in range(self.nfragments))

    @property
    def local_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The local shape of every fragment, numbered like :attr:`devices`."""
        return tuple(f.shape for f in self.fragments)

    def fragment(self, index: int) -> "FragmentLayout":
        """Fragment ``index`` (negative values count from the end)."""
        i = self._fragment_index(index)
        return self.fragments[i]

    def coords_of(self, index: int) -> tuple[tuple[int, ...], int]:
        """``(grid coordinates, replica)`` of fragment ``index``."""
        i = self._fragment_index(index)
        replica, rest = divmod(i, self.ngrid)
        coords = []
        for g in self.grid:
            rest, c = divmod(rest, g)
            coords.append(c)
        return tuple(coords), replica

    def fragment_index(self, coords: Sequence[int], replica: int = 0) -> int:
        """The fragment number of grid coordinates ``coords`` in ``replica``."""
        coords = tuple(coords)
        if len(coords) != self.ndim:
            raise IndexError(f"coords {coords} have {len(coords)} entries, the grid {self.grid} has {self.ndim}")
        f = 0
        for c, g in zip(reversed(coords), reversed(self.grid)):
            if not 0 <= c < g:
                raise IndexError(f"coords {coords} lie outside the grid {self.grid}")
            f = f * g + c
        if not 0 <= replica < self.nreplicas:
            raise IndexError(f"replica {replica} out of range for {self.nreplicas} replicas")
        return f + self.ngrid * replica

    # -- index math --------------------------------------------------------

    def owners(self, global_index: Sequence[int]) -> tuple[int, ...]:
        """The fragments holding element ``global_index``, one per replica."""
        idx = self._check_global(global_index)
        f = 0
        for i, b, g in zip(reversed(idx), reversed(self.block), reversed(self.grid)):
            f = f * g + (i // b) % g
        return tuple(f + self.ngrid * r for r in range(self.nreplicas))

    def global_to_local(
        self, global_index: Sequence[int]
    ) -> tuple[tuple[int, tuple[int, ...]], ...]:
        """``(fragment, local index)`` of element ``global_index``, one pair per replica."""
        idx = self._check_global(global_index)
        local = tuple(
            (i // b) // g * b + i % b for i, b, g in zip(idx, self.block, self.grid)
        )
        return tuple((f, local) for f in self.owners(idx))

    def local_to_global(self, fragment: int, local_index: Sequence[int]) -> tuple[int, ...]:
        """The global index of element ``local_index`` of ``fragment``."""
        frag = self.fragment(fragment)
        idx = frag._check_local(local_index)
        return tuple(
            (c + (i // b) * g) * b + i % b
            for i, c, b, g in zip(idx, frag.coords, self.block, self.grid)
        )

    def owned_indices(self, fragment: int, mode: int) -> "np.ndarray":
        """Sorted global indices along ``mode`` held by ``fragment`` (int64 array)."""
        import numpy as np

        frag = self.fragment(fragment)
        m = self._check_mode(mode)
        b, g, c = self.block[m], self.grid[m], frag.coords[m]
        local = np.arange(frag.shape[m], dtype=np.int64)
        return (c + (local // b) * g) * b + local % b

    def nbytes(self, dtype: Any) -> tuple[int, ...]:
        """Bytes of memory per fragment for elements of ``dtype`` (padding included)."""
        itemsize = info(dtype).itemsize
        return tuple(f.span * itemsize for f in self.fragments)

    def fragments_of(self, rank: int) -> tuple[int, ...]:
        """The fragments process ``rank`` holds, in order."""
        return tuple(i for i, r in enumerate(self.ranks) if r == rank)

    @property
    def nprocesses(self) -> int:
        """``max(ranks) + 1``: the processes the layout names."""
        return max(self.ranks) + 1

    # -- rendering ---------------------------------------------------------

    def __repr__(self) -> str:
        parts = [repr(self.shape)]
        if self.block != tuple(max(n, 1) for n in self.shape):
            parts.append(f"block={self.block!r}")
        if any(g != 1 for g in self.grid):
            parts.append(f"grid={self.grid!r}")
        parts.append(f"devices={tuple(str(d) for d in self.devices)!r}")
        if self.element_strides is not None:
            parts.append(f"element_strides={self.element_strides!r}")
            parts.append(f"block_strides={self.block_strides!r}")
        if any(self.ranks):
            parts.append(f"ranks={self.ranks!r}")
        if self.partial is not None:
            parts.append(f"partial={self.partial!r}")
        return f"Layout({', '.join(parts)})"

    def __str__(self) -> str:
        return render_text(self)

    def plot(self, ax: Any = None) -> Any:
        """Draw the block-to-device map with matplotlib, coloured by device.

        Parameters
        ----------
        ax : matplotlib.axes.Axes, optional
            Where to draw; a new figure (through ``pyplot``) when ``None``.

        Returns
        -------
        matplotlib.figure.Figure
            The figure drawn into.

        Raises
        ------
        ImportError
            When matplotlib is missing (``pip install 'dlmg[plot]'``).
        """
        return plot_layout(self, ax)

    # -- equivalence -------------------------------------------------------

    @cached_property
    def _distribution_key(self) -> tuple:
        blocks = tuple(None if g == 1 else min(b, max(n, 1)) for n, b, g in zip(self.shape, self.block, self.grid))
        key = (self.shape, blocks, self.grid, self.devices, self.ranks, self.partial)
        # interned, so that layouts built apart with one distribution compare by identity
        # (every elementwise operation compares its operands' layouts)
        if len(_KEYS) >= _KEYS_KEPT:
            _KEYS.clear()
        return _KEYS.setdefault(key, key)

    def distribution_key(self) -> tuple:
        """What decides which element sits in which fragment on which device.

        Two layouts with the same key place every element in the same
        fragment at the same local position; they may differ in memory strides
        only (and in block sizes that make no difference, such as any block
        along a mode with a grid of 1).
        """
        return self._distribution_key

    def same_distribution(self, other: "Layout") -> bool:
        """Whether this layout and ``other`` distribute elements identically."""
        if self is other:
            return True
        mine, theirs = self._distribution_key, other._distribution_key
        return mine is theirs or mine == theirs

    @cached_property
    def dense(self) -> "Layout":
        """This layout without explicit memory strides (itself when it has none)."""
        if self.element_strides is None:
            return self
        return self.replace(element_strides=None, block_strides=None)

    def to_sharding(self, mesh: Any = None) -> Any:
        """The sharding of :mod:`dlmg.interop.jax` that places data as this layout does.

        See :func:`dlmg.interop.jax.sharding_from_layout`; the framework is
        imported only when this is called.
        """
        return sharding_of_layout(self, mesh)

    # -- internals ---------------------------------------------------------

    def _context(self) -> str:
        return context_of(shape=self.shape, block=self.block, grid=self.grid)

    def _fragment_index(self, index: int) -> int:
        i = operator.index(index)
        n = self.nfragments
        if not -n <= i < n:
            raise IndexError(f"fragment {i} out of range for a layout of {n} fragments")
        return i % n

    def _check_mode(self, mode: int) -> int:
        m = operator.index(mode)
        if not -self.ndim <= m < self.ndim:
            raise IndexError(f"mode {m} out of range for {self.ndim} modes")
        return m % self.ndim

    def _check_global(self, global_index: Sequence[int]) -> tuple[int, ...]:
        idx = tuple(operator.index(i) for i in global_index)
        if len(idx) != self.ndim:
            raise IndexError(f"index {idx} has {len(idx)} entries; the shape {self.shape} has {self.ndim}")
        for m, (i, n) in enumerate(zip(idx, self.shape)):
            if not 0 <= i < n:
                raise IndexError(f"index {idx} is out of bounds in mode {m} for shape {self.shape}")
        return idx
