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
  holds the elements of its blocks in increasing global order.

Fragment ``f`` has grid coordinates ``c`` and replica ``r`` with
``f = c[0] + grid[0] * (c[1] + grid[1] * (...)) + prod(grid) * r``, the
column-major order of cuTENSORMg's ``devices`` parameter; ``devices[f]`` holds
it.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from .._shapes import c_strides
from ..device import Device, as_device
from ..errors import DeviceError, LayoutError

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

__all__ = ["Layout", "FragmentLayout"]

#: Above this many elements, strides that the quick sufficient test cannot
#: prove free of overlap are rejected instead of checked element by element.
_EXACT_OVERLAP_CHECK_LIMIT = 1 << 22


# --------------------------------------------------------------------------
# validation helpers


def _context(**fields: Any) -> str:
    """``shape=(9, 9), grid=(2, 0)`` for the fields that are known so far."""
    return ", ".join(f"{name}={value!r}" for name, value in fields.items() if value is not None)


def _as_int(value: Any, what: str, context: str) -> int:
    """``operator.index(value)``, refusing bools, floats and strings."""
    if isinstance(value, bool):
        raise LayoutError(f"{what} = {value!r} is a bool, not an int ({context})")
    try:
        return operator.index(value)
    except TypeError:
        raise LayoutError(
            f"{what} = {value!r} of type {type(value).__name__} is not an int ({context})"
        ) from None


def _per_mode(
    name: str, values: Any, ndim: int, context: str, *, minimum: int
) -> tuple[int, ...]:
    """Validate a per-mode sequence of ints of length ``ndim``, each ``>= minimum``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise LayoutError(
            f"{name} must be a sequence of {ndim} ints (one per mode), got {values!r} ({context})"
        )
    values = tuple(values)
    if len(values) != ndim:
        raise LayoutError(
            f"{name} has {len(values)} entries but the layout has {ndim} modes: "
            f"{name}={values!r} ({context})"
        )
    out = []
    for mode, value in enumerate(values):
        number = _as_int(value, f"{name}[{mode}]", context)
        if number < minimum:
            rule = "non-negative" if minimum == 0 else "positive"
            raise LayoutError(
                f"{name}[{mode}] = {number} must be {rule} (mode {mode}; {context})"
            )
        out.append(number)
    return tuple(out)


def _as_shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)):
        raise LayoutError(f"shape must be a sequence of ints, got {shape!r}")
    if not isinstance(shape, Iterable):
        shape = (_as_int(shape, "shape", f"shape={shape!r}"),)
    shape = tuple(shape)
    return _per_mode("shape", shape, len(shape), f"shape={shape!r}", minimum=0)


def _as_devices(devices: Any, context: str) -> tuple[Device, ...]:
    if isinstance(devices, (str, Device)):
        devices = (devices,)
    if not isinstance(devices, Iterable):
        raise LayoutError(f"devices must be a sequence of devices, got {devices!r} ({context})")
    out = []
    for position, device in enumerate(devices):
        try:
            out.append(as_device(device))
        except DeviceError as exc:
            raise LayoutError(f"devices[{position}] = {device!r} is not a device: {exc} ({context})") from None
    return tuple(out)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)




def _mode_local_extent(extent: int, block: int, grid: int, coord: int) -> int:
    """Elements of one mode held by grid coordinate ``coord``."""
    nblocks = _ceil_div(extent, block)
    owned = len(range(coord, nblocks, grid))
    if owned == 0:
        return 0
    size = owned * block
    if (nblocks - 1) % grid == coord:  # the last, possibly partial, block is ours
        size -= nblocks * block - extent
    return size


def _mode_max_offset(local: int, block: int, element_stride: int, block_stride: int) -> int:
    """Largest ``k*block_stride + i*element_stride`` over local indices ``< local``."""
    last = local - 1
    k, i = divmod(last, block)
    best = k * block_stride + i * element_stride
    if k >= 1:  # the end of the previous, full block may reach further
        best = max(best, (k - 1) * block_stride + (block - 1) * element_stride)
    return best


# --------------------------------------------------------------------------
# Layout


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
        mixed.
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

    def __init__(
        self,
        shape: Sequence[int] | int,
        *,
        block: Sequence[int] | None = None,
        grid: Sequence[int] | None = None,
        devices: Sequence[Device | str] | Device | str,
        element_strides: Sequence[int] | None = None,
        block_strides: Sequence[int] | None = None,
    ) -> None:
        shape_t = _as_shape(shape)
        ndim = len(shape_t)
        if block is None:
            block_t = tuple(max(n, 1) for n in shape_t)
        else:
            block_t = _per_mode("block", block, ndim, _context(shape=shape_t), minimum=1)
        if grid is None:
            grid_t = (1,) * ndim
        else:
            grid_t = _per_mode("grid", grid, ndim, _context(shape=shape_t, block=block_t), minimum=1)
        context = _context(shape=shape_t, block=block_t, grid=grid_t)
        devices_t = _as_devices(devices, context)
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
            es_t = _per_mode("element_strides", element_strides, ndim, context, minimum=1)
        if block_strides is not None:
            bs_t = _per_mode("block_strides", block_strides, ndim, context, minimum=1)
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
        if es_t is not None:
            self._check_no_overlap()

    # -- pickling: only the fields travel, never the caches
    def __getstate__(self) -> dict[str, Any]:
        return {
            "shape": self.shape,
            "block": self.block,
            "grid": self.grid,
            "devices": self.devices,
            "element_strides": self.element_strides,
            "block_strides": self.block_strides,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            object.__setattr__(self, name, value)

    # -- constructors ------------------------------------------------------

    @classmethod
    def slab(cls, shape: Sequence[int] | int, axis: int, devices: Sequence[Device | str]) -> "Layout":
        """One contiguous piece per device along ``axis``.

        With ``p = len(devices)`` and ``n = shape[axis]`` the block along
        ``axis`` is ``ceil(n / p)`` and the grid there is ``p``. When ``p``
        does not divide ``n`` the pieces have ``ceil(n / p)`` elements except
        a smaller last one, and trailing devices may get empty pieces (for
        ``n = 5, p = 4``: 2, 2, 1, 0) -- that is what a block-cyclic
        descriptor can express.

        Parameters
        ----------
        shape : sequence of int
        axis : int
            The mode to split; negative values count from the end.
        devices : sequence of Device or str
        """
        shape_t = _as_shape(shape)
        ndim = len(shape_t)
        axis_i = _as_int(axis, "axis", _context(shape=shape_t))
        if not -ndim <= axis_i < ndim:
            raise LayoutError(f"axis = {axis_i} is out of range for shape {shape_t} with {ndim} modes")
        axis_i %= ndim
        devices_t = _as_devices(devices, _context(shape=shape_t, axis=axis_i))
        p = len(devices_t)
        if p == 0:
            raise LayoutError(f"devices is empty; a slab layout needs at least one device (shape={shape_t})")
        block = [max(n, 1) for n in shape_t]
        block[axis_i] = max(_ceil_div(shape_t[axis_i], p), 1)
        grid = [1] * ndim
        grid[axis_i] = p
        return cls(shape_t, block=block, grid=grid, devices=devices_t)

    @classmethod
    def block_cyclic(
        cls,
        shape: Sequence[int] | int,
        block: Sequence[int],
        grid: Sequence[int],
        devices: Sequence[Device | str],
    ) -> "Layout":
        """A block-cyclic layout (the constructor with every field given)."""
        return cls(shape, block=block, grid=grid, devices=devices)

    @classmethod
    def replicated(cls, shape: Sequence[int] | int, devices: Sequence[Device | str]) -> "Layout":
        """One full copy of the tensor on each of ``devices``."""
        return cls(shape, devices=devices)

    @classmethod
    def single(cls, shape: Sequence[int] | int, device: Device | str = "cpu") -> "Layout":
        """The whole tensor as one fragment on ``device``."""
        return cls(shape, devices=(device,))

    def replace(self, **fields: Any) -> "Layout":
        """A copy with some fields changed (validated like a new layout).

        ``block``, ``grid`` and the strides keep their current, concrete values
        unless given, so changing ``shape`` alone keeps the old block sizes.
        """
        unknown = set(fields) - set(self.__getstate__())
        if unknown:
            raise TypeError(f"Layout.replace() got unknown fields {sorted(unknown)}")
        values = {**self.__getstate__(), **fields}
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
            a = _as_int(axis, "axes", self._context())
            if not -self.ndim <= a < self.ndim:
                raise LayoutError(f"axes contains {a}, out of range for {self.ndim} modes ({self._context()})")
            a %= self.ndim
            if a in removed:
                raise LayoutError(f"axes names mode {a} twice ({self._context()})")
            removed.add(a)
        keep = [m for m in range(self.ndim) if m not in removed]
        devices = [f.device for f in self.fragments if all(f.coords[m] == 0 for m in removed)]
        pick = lambda t: None if t is None else tuple(t[m] for m in keep)  # noqa: E731
        return Layout(
            pick(self.shape),
            block=pick(self.block),
            grid=pick(self.grid),
            devices=devices,
            element_strides=pick(self.element_strides),
            block_strides=pick(self.block_strides),
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
        return tuple(_ceil_div(n, b) for n, b in zip(self.shape, self.block))

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
        from ..dtypes import info

        itemsize = info(dtype).itemsize
        return tuple(f.span * itemsize for f in self.fragments)

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
        return f"Layout({', '.join(parts)})"

    def __str__(self) -> str:
        from .render import render_text

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
        from .render import plot_layout

        return plot_layout(self, ax)

    # -- internals ---------------------------------------------------------

    def _context(self) -> str:
        return _context(shape=self.shape, block=self.block, grid=self.grid)

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

    def _check_no_overlap(self) -> None:
        """Raise when two elements of one fragment would share memory.

        The fragment with grid coordinate 0 along every mode holds, per mode,
        a superset of the (local block, in-block index) pairs of any other
        fragment, so checking it covers them all.
        """
        es, bs = self.element_strides, self.block_strides
        assert es is not None and bs is not None
        local = [_mode_local_extent(n, b, g, 0) for n, b, g in zip(self.shape, self.block, self.grid)]
        if math.prod(local) <= 1:
            return
        # quick sufficient test on the box of full blocks: sort the (count, stride)
        # pairs; every stride must step past everything the smaller ones reach
        dims = []
        for m, n_local in enumerate(local):
            b = self.block[m]
            nloc_blocks = _ceil_div(n_local, b)
            if nloc_blocks > 1:
                dims.append((bs[m], nloc_blocks, m, "block_strides"))
            if min(b, n_local) > 1:
                dims.append((es[m], min(b, n_local), m, "element_strides"))
        dims.sort()
        reach = 0
        culprit = None
        for stride, count, mode, name in dims:
            if stride <= reach:
                culprit = (name, mode, stride)
                break
            reach += (count - 1) * stride
        if culprit is None:
            return
        total = math.prod(local)
        exact = total <= _EXACT_OVERLAP_CHECK_LIMIT
        if exact:
            import numpy as np

            offsets = np.zeros((), dtype=np.int64)
            for m, n_local in enumerate(local):
                li = np.arange(n_local, dtype=np.int64)
                along = (li // self.block[m]) * bs[m] + (li % self.block[m]) * es[m]
                offsets = np.add.outer(offsets, along)
            flat = offsets.ravel()
            if np.unique(flat).size == flat.size:
                return
        name, mode, stride = culprit
        verdict = "make elements of a fragment overlap" if exact else (
            f"cannot be proven free of overlap (fragments of more than "
            f"{_EXACT_OVERLAP_CHECK_LIMIT} elements are only checked by sorted strides)"
        )
        raise LayoutError(
            f"element_strides={es} and block_strides={bs} {verdict} in memory: "
            f"{name}[{mode}] = {stride} does not step past the elements of the smaller strides "
            f"(fragment 0 has local shape {tuple(local)}; {self._context()})"
        )


# --------------------------------------------------------------------------
# FragmentLayout


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
        if not isinstance(self.layout, Layout):
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

    @property
    def device(self) -> Device:
        """The device holding it."""
        return self.layout.devices[self.index]

    @cached_property
    def shape(self) -> tuple[int, ...]:
        """Local shape: per mode, the summed sizes of the owned blocks."""
        lay = self.layout
        return tuple(
            _mode_local_extent(n, b, g, c)
            for n, b, g, c in zip(lay.shape, lay.block, lay.grid, self.coords)
        )

    @property
    def ndim(self) -> int:
        return self.layout.ndim

    @property
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
        if lay.element_strides is None:
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
        if lay.element_strides is None:
            return self.size
        return 1 + sum(
            _mode_max_offset(n, b, es, bs)
            for n, b, es, bs in zip(self.shape, lay.block, lay.element_strides, lay.block_strides)
        )

    def memory_offset(self, local_index: Sequence[int]) -> int:
        """Element offset of ``local_index`` in the fragment's memory."""
        idx = self._check_local(local_index)
        lay = self.layout
        if lay.element_strides is None:
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
            f"device='{self.device}', shape={self.shape})"
        )
