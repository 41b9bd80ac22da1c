"""The standard's products (``matmul``, ``tensordot``, ``vecdot``, ``outer``) on
distributed operands.

The contractions are dlmg's own (:mod:`dlmg.ops.contract`), which contract
operands split along any mode, contracted modes included, in the operands'
frameworks and on their devices; this module only adds what the standard
asks beyond them:

* the standard's argument rules (``vecdot``'s ``axis`` counted from the end,
  any mode; ``tensordot``'s contracted extents equal, not broadcast; 0-d
  operands refused), with ``ValueError`` naming the shapes;
* a result that is a value, never a pending sum: where the contraction
  leaves one (``layout.partial == "sum"``: a split mode was contracted), it
  is resolved into the layout the default layout policy gives its shape.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from ..ops import contract as _contract
from ..ops import shape as _shape
from ._policy import layout_for

__all__ = ["matmul", "tensordot", "vecdot", "outer"]

def _value(x: Any) -> Any:
    """``x`` itself, or the value of a pending sum in the policy's layout for its shape."""
    if x.layout.partial is None:
        return x
    return _contract.resolve(x, layout_for(x.shape))


def _not_scalar(name: str, x1: Any, x2: Any) -> None:
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"{name}: operands must have at least one mode, got shapes {x1.shape} and {x2.shape}")


def matmul(x1: Any, x2: Any, /) -> Any:
    """The matrix product with the standard's rules (1-D operands, broadcast batch modes),
    over any layouts (:func:`dlmg.matmul`)."""
    _not_scalar("matmul", x1, x2)
    k1 = x1.shape[-1]
    k2 = x2.shape[-2] if x2.ndim > 1 else x2.shape[0]
    if k1 != k2:
        raise ValueError(f"matmul: inner extents differ: {x1.shape} @ {x2.shape}")
    return _value(_contract.matmul(x1, x2))


def tensordot(x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2) -> Any:
    """The sum of products over ``axes`` (:func:`dlmg.tensordot`); the contracted extents must be equal."""
    if isinstance(axes, tuple) or isinstance(axes, list):
        if len(axes) != 2:
            raise ValueError(f"tensordot: axes must be an int or two sequences of modes, got {axes!r}")
        pairs = list(zip(axes[0], axes[1]))
        if len(axes[0]) != len(axes[1]):
            raise ValueError(f"tensordot: axes {axes!r} name {len(axes[0])} and {len(axes[1])} modes")
        for a, b in pairs:
            a, b = operator.index(a), operator.index(b)
            if not (-x1.ndim <= a < x1.ndim and -x2.ndim <= b < x2.ndim):
                raise ValueError(f"tensordot: axes {axes!r} out of range for shapes {x1.shape} and {x2.shape}")
            if x1.shape[a] != x2.shape[b]:
                raise ValueError(f"tensordot: mode {a} of {x1.shape} and mode {b} of {x2.shape} differ in extent")
    else:
        n = operator.index(axes)
        if 0 <= n <= min(x1.ndim, x2.ndim) and x1.shape[x1.ndim - n:] != x2.shape[:n]:
            raise ValueError(f"tensordot: the last {n} modes of {x1.shape} and the first {n} of {x2.shape} differ")
    return _value(_contract.tensordot(x1, x2, axes=axes))


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """``sum(conj(x1) * x2, axis=axis)`` with broadcast batch modes (:func:`dlmg.vecdot`);
    ``axis`` counts from the last mode of each operand."""
    _not_scalar("vecdot", x1, x2)
    axis = operator.index(axis)
    if axis >= 0:  # a mode of the broadcast shape, counted from the front
        axis -= max(x1.ndim, x2.ndim)
    if not -min(x1.ndim, x2.ndim) <= axis <= -1:
        raise ValueError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: extents along axis {axis} differ: {x1.shape} and {x2.shape}")
    x1, x2 = _to_last(x1, axis), _to_last(x2, axis)
    return _value(_contract.vecdot(x1, x2, axis=-1))


def _to_last(x: Any, axis: int) -> Any:
    """``x`` with mode ``axis`` (negative) moved last: a view."""
    if axis == -1:
        return x
    mode = x.ndim + axis
    return _shape.permute_dims(x, tuple(m for m in range(x.ndim) if m != mode) + (mode,))


def outer(x1: Any, x2: Any, /) -> Any:
    """The outer product of two vectors (:func:`dlmg.outer`)."""
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer takes vectors (1-D), got shapes {x1.shape} and {x2.shape}")
    return _value(_contract.outer(x1, x2))
