"""Changing a tensor's shape without moving data between devices.

``permute_dims`` (``transpose``, ``.T``) permutes the layout's modes and takes a
transposed view of each fragment: no element moves. ``reshape`` works where
every fragment's piece stays one piece of the new shape (merging or splitting
modes that are whole in each fragment, merging a distributed mode with whole
modes after it, adding or dropping unit modes); otherwise it says which
``redistribute`` makes it possible.

Both apply to every replica alike, so a tensor holding a pending reduction
(``layout.partial``: its replicas are the addends, or candidates, of its value)
stays pending: the permuted (reshaped) addends are the addends of the permuted
(reshaped) value.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Sequence

from .._shapes import normalize_axis, shape_argument
from ..errors import LayoutError
from .dispatch import is_distributed, new_tensor
from ..layout import Layout

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["permute_dims", "transpose", "reshape", "complete_shape", "transpose_matrix"]


def _tensor(x: Any, name: str) -> None:
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")


def _arrays_of(x: "DistributedTensor", name: str) -> list[Any]:
    arrays = []
    for frag in x.fragments:
        if frag.is_local and frag.is_padded:
            raise LayoutError(
                f"dlmg.{name}: fragment {frag.index} lies in padded memory (block strides), which no single "
                "array view describes; redistribute to a dense layout first: "
                "x.redistribute(x.layout.replace(element_strides=None, block_strides=None))"
            )
        arrays.append(frag.array if frag.is_local else None)
    return arrays


def permuted_layout(layout: "Layout", axes: tuple[int, ...]) -> tuple["Layout", list[int]]:
    """The layout with its modes in the order ``axes``, and where each old fragment goes."""
    def pick(values: Sequence[int] | None) -> tuple[int, ...] | None:
        return None if values is None else tuple(values[a] for a in axes)

    def order(values: Sequence[int]) -> tuple[int, ...]:
        return tuple(values[a] for a in axes)

    draft = Layout(order(layout.shape), block=order(layout.block), grid=order(layout.grid), devices=layout.devices,
                   partial=layout.partial)  # a permutation of every addend (candidate) keeps a pending reduction
    where = [draft.fragment_index(order(f.coords), f.replica) for f in layout.fragments]
    devices: list[Any] = [None] * layout.nfragments
    ranks: list[int] = [0] * layout.nfragments  # each fragment stays with its process
    for f, new in zip(layout.fragments, where):
        devices[new] = f.device
        ranks[new] = layout.ranks[f.index]
    if layout.element_strides is None:
        return draft.replace(devices=devices, ranks=ranks), where
    return draft.replace(devices=devices, ranks=ranks, element_strides=pick(layout.element_strides),
                         block_strides=pick(layout.block_strides)), where


def permute_dims(x: "DistributedTensor", /, axes: Sequence[int]) -> "DistributedTensor":
    """``x`` with its modes in the order ``axes`` (array API ``permute_dims``).

    The layout's shape, blocks and grid are permuted and each fragment becomes
    a transposed view of itself, on its own device (NumPy, torch and CuPy
    views share memory; JAX, whose arrays are values, makes a transposed
    array). No element moves between devices.

    Parameters
    ----------
    x : DistributedTensor
    axes : sequence of int
        A permutation of ``range(x.ndim)``; negative entries count from the end.

    Returns
    -------
    DistributedTensor
        Fragment ``i`` of ``x`` becomes the fragment at the permuted grid
        coordinates, on the same device.
    """
    _tensor(x, "permute_dims")
    axes = tuple(normalize_axis(a, x.ndim, "dlmg.permute_dims") for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"dlmg.permute_dims: axes {axes!r} are not a permutation of the {x.ndim} modes")
    arrays = _arrays_of(x, "permute_dims")
    layout, where = permuted_layout(x.layout, axes)
    out: list[Any] = [None] * layout.nfragments
    for frag, array, new in zip(x.fragments, arrays, where):
        if array is not None:
            xp = frag.adapter.namespace()
            out[new] = xp.permute_dims(array, axes)
    return new_tensor(out, layout, x.dtype)


def transpose(x: "DistributedTensor", /, axes: Sequence[int] | None = None) -> "DistributedTensor":
    """NumPy's ``transpose``: :func:`permute_dims`, reversing the modes by default."""
    _tensor(x, "transpose")
    return permute_dims(x, tuple(reversed(range(x.ndim))) if axes is None else axes)


def transpose_matrix(self: "DistributedTensor") -> "DistributedTensor":
    """The transpose of a 2-D tensor (array API ``.T``); other ranks use :func:`permute_dims`."""
    if self.ndim != 2:
        raise ValueError(
            f".T is defined for 2-D tensors (array API); this one has {self.ndim} modes: "
            "use dlmg.permute_dims(x, axes) or x.transpose()"
        )
    return permute_dims(self, (1, 0))


# --------------------------------------------------------------------------
# reshape


def _groups(old: tuple[int, ...], new: tuple[int, ...]) -> list[tuple[list[int], list[int]]] | None:
    """Pair runs of old and new modes of equal product (unit modes stand alone)."""
    groups: list[tuple[list[int], list[int]]] = []
    i = j = 0
    while i < len(old) or j < len(new):
        if i < len(old) and old[i] == 1 and (j >= len(new) or new[j] != 1):
            groups.append(([i], []))
            i += 1
            continue
        if j < len(new) and new[j] == 1 and (i >= len(old) or old[i] != 1):
            groups.append(([], [j]))
            j += 1
            continue
        if i >= len(old) or j >= len(new):
            return None
        a, b = [i], [j]
        pa, pb = old[i], new[j]
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                if i >= len(old):
                    return None
                pa *= old[i]
                a.append(i)
                i += 1
            else:
                if j >= len(new):
                    return None
                pb *= new[j]
                b.append(j)
                j += 1
        groups.append((a, b))
    return groups


def reshaped_layout(layout: "Layout", shape: tuple[int, ...]) -> "Layout | str":
    """The layout of ``reshape`` when every fragment stays one piece, else why not."""
    if layout.element_strides is not None:
        return "the layout has explicit strides"
    if 0 in layout.shape:
        return "the tensor is empty"
    groups = _groups(layout.shape, shape)
    if groups is None:
        return "the shapes do not pair up"
    block = [1] * len(shape)
    grid = [1] * len(shape)
    for olds, news in groups:
        split = [m for m in olds if layout.grid[m] > 1]
        if not news:  # a unit mode dropped
            if split:
                return f"mode {olds[0]} of extent 1 is split over {layout.grid[olds[0]]} grid positions"
            continue
        if not olds:  # a unit mode added
            continue
        if split and split != [olds[0]]:
            return f"mode {split[-1]} is split over devices but is not the first of the modes {olds} it merges with"
        first = olds[0]
        if any(layout.block[m] != layout.shape[m] for m in olds[1:]):
            return f"modes {olds[1:]} are cut into blocks inside a fragment"
        inner = math.prod(layout.shape[m] for m in olds[1:])
        if layout.grid[first] == 1 and layout.block[first] == layout.shape[first]:
            for m in news:  # a whole group: every new mode is whole too
                block[m] = shape[m]
            continue
        piece = layout.block[first] * inner  # elements of one block of the first mode, with the modes after
        trailing = math.prod(shape[m] for m in news[1:])
        if piece % trailing:
            return f"a block of {piece} elements does not hold whole rows of the new modes {news}"
        block[news[0]] = piece // trailing
        grid[news[0]] = layout.grid[first]
        for m in news[1:]:
            block[m] = shape[m]
    # (a reshape of every addend, or candidate, keeps a pending reduction)
    return Layout(shape, block=block, grid=grid, devices=layout.devices, ranks=layout.ranks, partial=layout.partial)


def complete_shape(have: tuple[int, ...], shape: tuple[int, ...], name: str) -> tuple[int, ...]:
    """``shape`` for a tensor of shape ``have``, its one ``-1`` filled in.

    Raises
    ------
    ValueError
        For more than one ``-1``, or a shape with another number of elements.
    """
    size = math.prod(have)
    if shape.count(-1) > 1:
        raise ValueError(f"dlmg.{name}: shape {shape} has more than one -1")
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known == 0 or size % known:
            raise ValueError(f"dlmg.{name}: cannot reshape {have} into {shape}")
        shape = tuple(size // known if n == -1 else n for n in shape)
    if math.prod(shape) != size or any(n < 0 for n in shape):
        raise ValueError(f"dlmg.{name}: cannot reshape a tensor of shape {have} ({size} elements) into {shape}")
    return shape


def reshape(x: "DistributedTensor", /, shape: Sequence[int] | int, *, copy: bool | None = None) -> "DistributedTensor":
    """``x`` with another shape of the same size, where the layout allows it (array API ``reshape``).

    Works when every fragment stays one piece of the new shape: modes whole in
    each fragment merge or split freely, a distributed mode merges with whole
    modes after it (``(8, 4)`` rows over 2 devices becomes ``(32,)`` over 2),
    a distributed mode splits when its blocks hold whole rows of the new
    trailing modes, and unit modes come and go. Each fragment is reshaped on
    its device (a view where the framework can); no element moves between
    devices.

    Parameters
    ----------
    shape : sequence of int
        The new shape; one entry may be -1.
    copy : bool, optional
        ``True`` copies every fragment; ``False`` and ``None`` reshape in
        place where the framework can.

    Raises
    ------
    LayoutError
        When the layout does not allow it; the message names the reason and
        the ``redistribute`` call that makes it possible.
    """
    _tensor(x, "reshape")
    shape = shape_argument(shape, "dlmg.reshape")  # np.reshape(dt, 24) too; (2.0, 3) refused as NumPy does
    shape = complete_shape(x.shape, shape, "reshape")
    layout = reshaped_layout(x.layout, shape)
    if isinstance(layout, str):
        target = Layout.slab(x.shape, 0, list(dict.fromkeys(x.layout.devices))) if x.ndim else x.layout
        raise LayoutError(
            f"dlmg.reshape {x.shape} -> {shape} would move elements between fragments ({layout}); "
            f"redistribute first to a layout whose fragments stay whole pieces, e.g. "
            f"x.redistribute({target!r}).reshape({shape})"
        )
    arrays = _arrays_of(x, "reshape")
    out: list[Any] = [None] * layout.nfragments
    for frag, array, new in zip(x.fragments, arrays, layout.fragments):
        if array is not None:
            xp = frag.adapter.namespace()
            local = xp.reshape(array, new.shape)
            out[frag.index] = xp.asarray(local, copy=True) if copy else local
    return new_tensor(out, layout, x.dtype)
