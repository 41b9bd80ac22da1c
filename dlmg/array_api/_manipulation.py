"""The standard's manipulation and linear-algebra functions that run fragment by fragment.

``permute_dims``, ``matrix_transpose``, ``expand_dims``, ``squeeze``,
``moveaxis``, ``unstack`` and ``reshape`` (where the layout allows) move no
data (:mod:`dlmg.ops.shape`, :mod:`dlmg.ops.manipulation`); ``broadcast_to``
gives views where the fragments allow. Where a view is impossible, ``reshape``
redistributes into the nearest layout, as the standard has no notion of layouts
(``copy=False`` and :func:`dlmg.strict` refuse instead). ``concat``,
``stack``, ``flip``, ``roll``, ``repeat`` and ``tile`` keep their operands
distributed (:mod:`dlmg.ops.manipulation`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..construct import empty as _empty, full as _full
from .._shapes import shape_argument
from ..errors import LayoutError
from ..ops import manipulation as _manip
from ..ops import shape as _shape
from ..ops._pending import guard
from ..ops.broadcast import align, broadcast_layout, result_shape, strict_enabled
from ..ops.pointwise import astype as _astype
from ._data_types import result_type
from ._policy import layout_for

__all__ = [
    "astype", "permute_dims", "matrix_transpose", "reshape", "broadcast_to", "broadcast_arrays", "expand_dims",
    "squeeze", "moveaxis", "unstack", "concat", "stack", "flip", "roll", "repeat", "tile",
]


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Any:
    """``x`` converted to ``dtype`` fragment by fragment (then moved to ``device`` when given)."""
    out = _astype(x, dtype, copy=copy)
    return out if device is None else out.to_device(device)  # type: ignore[attr-defined]


def permute_dims(x: Any, /, axes: Sequence[int]) -> Any:
    """The modes of ``x`` reordered (no data moves)."""
    return _shape.permute_dims(x, tuple(axes))


def matrix_transpose(x: Any, /) -> Any:
    """The last two modes swapped (no data moves)."""
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose needs at least 2 modes, got shape {x.shape}")
    axes = tuple(range(x.ndim - 2)) + (x.ndim - 1, x.ndim - 2)
    return _shape.permute_dims(x, axes)


def reshape(x: Any, /, shape: Sequence[int], *, copy: bool | None = None) -> Any:
    """``x`` in ``shape``: fragment by fragment where the layout allows, else one redistribution
    into the nearest layout first (:func:`dlmg.ops.manipulation.reshape`).

    ``copy=False``, and any ``reshape`` inside :func:`dlmg.strict`, refuses to move data
    (:class:`~dlmg.errors.LayoutError` naming the ``redistribute`` that makes the view possible).
    """
    shape = shape_argument(shape, "reshape")
    if copy is None and strict_enabled():
        copy = False  # no implicit move: the view or an error
    if getattr(getattr(x, "layout", None), "partial", None) is not None:
        try:  # a view is linear: it keeps a pending reduction, as the tensor's reshape method does
            return _shape.reshape(x, shape, copy=copy)
        except LayoutError:
            pass  # the moving reshape resolves it first
    return _manip.reshape(x, shape, copy=copy)


def expand_dims(x: Any, /, axis: int = 0) -> Any:
    """``x`` with a mode of extent 1 at ``axis`` (a view of every fragment)."""
    return _manip.expand_dims(x, axis=axis)


def squeeze(x: Any, /, axis: int | tuple[int, ...]) -> Any:
    """``x`` without its modes ``axis`` of extent 1 (a view of every fragment)."""
    return _manip.squeeze(x, axis=axis)


def moveaxis(x: Any, source: int | tuple[int, ...], destination: int | tuple[int, ...], /) -> Any:
    """``x`` with modes ``source`` moved to ``destination`` (no data moves)."""
    return _manip.moveaxis(x, source, destination)


def unstack(x: Any, /, *, axis: int = 0) -> tuple[Any, ...]:
    """The slices of ``x`` along ``axis`` (views of the fragments holding them)."""
    return _manip.unstack(x, axis=axis)


def _promoted(arrays: Sequence[Any]) -> list[Any]:
    """The tensors in their common dtype (the standard's promotion)."""
    arrays = list(arrays)
    if len({a.dtype for a in arrays}) <= 1:
        return arrays
    common = result_type(*arrays)
    return [a if a.dtype == common else _astype(a, common) for a in arrays]


def concat(arrays: Sequence[Any], /, *, axis: int | None = 0) -> Any:
    """The tensors joined along ``axis``, on the first one's devices (shift placement)."""
    return _manip.concat(_promoted(arrays), axis=axis)


def stack(arrays: Sequence[Any], /, *, axis: int = 0) -> Any:
    """The tensors stacked along a new mode ``axis``, on the first one's devices."""
    return _manip.stack(_promoted(arrays), axis=axis)


def flip(x: Any, /, *, axis: int | tuple[int, ...] | None = None) -> Any:
    """``x`` reversed along ``axis`` (local flips and a renumbering of blocks)."""
    return _manip.flip(x, axis=axis)


def roll(x: Any, /, shift: int | tuple[int, ...], *, axis: int | tuple[int, ...] | None = None) -> Any:
    """``x`` rolled by ``shift`` along ``axis`` (local rolls, or a shift plan along a split mode)."""
    return _manip.roll(x, shift, axis=axis)


def repeat(x: Any, repeats: Any, /, *, axis: int | None = None) -> Any:
    """Each element of ``x`` repeated along ``axis`` (locally, blocks growing with the count)."""
    return _manip.repeat(x, repeats, axis=axis)


def tile(x: Any, repetitions: tuple[int, ...], /) -> Any:
    """``x`` repeated along each mode (locally along whole modes, a shift plan along split ones)."""
    return _manip.tile(x, repetitions)


def broadcast_to(x: Any, /, shape: Sequence[int]) -> Any:
    """``x`` broadcast to ``shape``: views where the fragments allow, else moved into place."""
    shape = tuple(shape)
    x = guard(x, "broadcast_to")  # a pending reduction: its value
    if result_shape(x.shape, shape) != shape:
        raise ValueError(f"broadcast_to: shape {x.shape} does not broadcast to {shape}")
    if x.shape == shape:
        return x
    framework = x.frameworks[0] if x.frameworks else "numpy"
    if x.ndim == 0:  # one value everywhere
        return _full(_target_layout(x, shape), x.item(), x.dtype, framework=framework)
    like = _empty(_target_layout(x, shape), x.dtype, framework=x.frameworks[0] if x.frameworks else "numpy")
    return align((like, x), "broadcast_to", communicate=True)[1]


def broadcast_arrays(*arrays: Any) -> list[Any]:
    """The tensors broadcast to their common shape (views where the fragments allow)."""
    shape = result_shape(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def _target_layout(x: Any, shape: tuple[int, ...]) -> Any:
    found = broadcast_layout(x.layout, shape)
    return found if found is not None else layout_for(shape)
