"""The standard's products (``matmul``, ``tensordot``, ``vecdot``, ``outer``) on
distributed operands.

The contractions are dlmg's own (:mod:`dlmg.ops.contract`), which contract
operands split along any mode, contracted modes included, in the operands'
frameworks and on their devices; this module only adds what the standard
asks beyond them:

* the standard's argument rules (``vecdot``'s ``axis`` counted from the end,
  any mode; ``tensordot``'s contracted extents equal, not broadcast; 0-d
  operands refused), with ``ValueError`` naming the shapes;
* nothing of their own about pending sums: the contractions give the value
  unless asked for a pending sum (the plan's last step resolves it, a
  reduce-scatter onto the operands' devices), so ``@`` is :func:`matmul`.

Beyond the standard, each takes dlmg's keyword-only ``pending=True`` (leave the
pending sum a split contracted mode gives, see :func:`dlmg.einsum`) and
``layout=`` (the result's layout). ``dlmg.matmul is dlmg.array_api.matmul``.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from .._shapes import normalize_axes
from ..errors import AxisError
from ..layout import Layout
from ..ops import contract as _contract
from ..ops.contract import matmul
from ..ops import shape as _shape

__all__ = ["matmul", "tensordot", "vecdot", "outer"]


def _not_scalar(name: str, x1: Any, x2: Any) -> None:
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"{name}: operands must have at least one mode, got shapes {x1.shape} and {x2.shape}")


def tensordot(x1: Any, x2: Any, /, *, axes: int | tuple[Sequence[int], Sequence[int]] = 2,
              pending: bool = False, layout: Layout | None = None) -> Any:
    """The sum of products over ``axes``; the contracted extents must be equal
    (``pending``, ``layout``: dlmg's extensions, as :func:`matmul`'s)."""
    if isinstance(axes, (tuple, list)):
        if len(axes) != 2:
            raise ValueError(f"tensordot: axes must be an int or two sequences of modes, got {axes!r}")
        a1 = normalize_axes(axes[0], x1.ndim, "tensordot (the first operand's axes)")
        a2 = normalize_axes(axes[1], x2.ndim, "tensordot (the second operand's axes)")
        if len(a1) != len(a2):
            raise ValueError(f"tensordot: axes {axes!r} name {len(a1)} and {len(a2)} modes")
        for a, b in zip(a1, a2):
            if x1.shape[a] != x2.shape[b]:
                raise ValueError(f"tensordot: mode {a} of {x1.shape} and mode {b} of {x2.shape} differ in extent")
    else:
        n = operator.index(axes)
        if 0 <= n <= min(x1.ndim, x2.ndim) and x1.shape[x1.ndim - n:] != x2.shape[:n]:
            raise ValueError(f"tensordot: the last {n} modes of {x1.shape} and the first {n} of {x2.shape} differ")
    return _contract.tensordot(x1, x2, axes=axes, pending=pending, layout=layout)


def vecdot(x1: Any, x2: Any, /, *, axis: int = -1, pending: bool = False, layout: Layout | None = None) -> Any:
    """``sum(conj(x1) * x2, axis=axis)`` with broadcast batch modes; ``axis`` counts from
    the last mode of each operand (``pending``, ``layout``: dlmg's extensions, as
    :func:`matmul`'s)."""
    _not_scalar("vecdot", x1, x2)
    axis = operator.index(axis)
    if axis >= 0:  # a mode of the broadcast shape, counted from the front
        axis -= max(x1.ndim, x2.ndim)
    if not -min(x1.ndim, x2.ndim) <= axis <= -1:
        raise AxisError(f"vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"vecdot: extents along axis {axis} differ: {x1.shape} and {x2.shape}")
    x1, x2 = _to_last(x1, axis), _to_last(x2, axis)
    return _contract.vecdot(x1, x2, axis=-1, pending=pending, layout=layout)


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
    return _contract.outer(x1, x2)
