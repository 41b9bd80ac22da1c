"""The standard's elementwise functions, with its broadcasting.

Each function is :mod:`dlmg.ops.pointwise`'s of the same name, fragment by
fragment, after :func:`dlmg.ops.broadcast.align` has brought the operands
to one shape and one layout: as per-fragment views where the fragments
allow, otherwise by moving the operand that does not fit (the standard
broadcasts whatever the layout; dlmg's own functions refuse instead).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops import pointwise as _pointwise, selection as _selection
from ..ops._operands import is_distributed
from ..ops.broadcast import align

__all__ = list(_pointwise._FUNCTIONS) + ["where", "clip"]


def _wrap(name: str) -> Callable[..., Any]:
    core = getattr(_pointwise, name)
    nargs = _pointwise._FUNCTIONS[name][1]
    if nargs == 1:
        return core

    def function(x1: Any, x2: Any, /) -> Any:
        a, b = align((_as_kind(x1, x2), _as_kind(x2, x1)), name, communicate=True)
        return core(a, b)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = core.__doc__
    return function


def _as_kind(scalar: Any, other: Any) -> Any:
    """A Python int next to a floating tensor as a float (the standard lets it take the tensor's kind)."""
    if type(scalar) is int and is_distributed(other) and other.dtype.kind in "fc":
        return float(scalar)
    return scalar


for _name in _pointwise._FUNCTIONS:
    globals()[_name] = _wrap(_name)
del _name


def where(condition: Any, x1: Any, x2: Any, /) -> Any:
    """``x1`` where ``condition`` is true, else ``x2`` (broadcast together)."""
    c, a, b = align((condition, x1, x2), "where", communicate=True)
    return _selection.where(c, a, b)


def clip(x: Any, /, min: Any = None, max: Any = None) -> Any:  # noqa: A002
    """``x`` limited to ``[min, max]``; tensor bounds broadcast to ``x``'s shape."""
    a, lo, hi = align((x, min, max), "clip", communicate=True)
    if a is not x:
        raise ValueError(f"clip: the bounds must broadcast to x's shape {x.shape}")
    if x.dtype.kind in "iu":
        lo = _int_bound(lo, x, max_=False)
        hi = _int_bound(hi, x, max_=True)
    return _selection.clip(a, lo, hi)


def _int_bound(bound: Any, x: Any, max_: bool) -> Any:
    """Python int bounds outside an integer dtype's range clip nothing on that side."""
    import numpy as np

    if isinstance(bound, int) and not isinstance(bound, bool):
        info = np.iinfo(str(x.dtype))
        if bound > info.max:
            return None if max_ else int(info.max)
        if bound < info.min:
            return int(info.min) if max_ else None
    return bound
