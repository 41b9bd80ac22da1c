"""The standard's manipulation and linear-algebra functions that run fragment by fragment.

``permute_dims``, ``matrix_transpose`` and ``reshape`` (where the layout
allows) move no data (:mod:`dlmg.ops.shape`); ``broadcast_to`` gives views
where the fragments allow. Where dlmg's own function
refuses because data would have to move, the namespace collects instead
(:mod:`._gathered`), as the standard has no notion of layouts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..construct import empty as _empty, full as _full
from .._shapes import shape_argument
from ..errors import LayoutError, LayoutMismatchError
from ..ops import shape as _shape
from ..ops.broadcast import align, broadcast_layout, result_shape
from ..ops.pointwise import astype as _astype
from ._gathered import collected
from ._policy import layout_for

__all__ = ["astype", "permute_dims", "matrix_transpose", "reshape", "broadcast_to", "broadcast_arrays"]

_collected_reshape = collected("reshape")
_collected_permute = collected("permute_dims")


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
    """``x`` in ``shape``: fragment by fragment where the layout allows, else through a collected copy."""
    shape = shape_argument(shape, "reshape")
    try:
        return _shape.reshape(x, shape, copy=copy)
    except LayoutError:
        if copy is False:
            raise
    return _collected_reshape(x, shape)


def broadcast_to(x: Any, /, shape: Sequence[int]) -> Any:
    """``x`` broadcast to ``shape``: views where the fragments allow, else moved into place."""
    shape = tuple(shape)
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
