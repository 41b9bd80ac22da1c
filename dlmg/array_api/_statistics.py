"""The standard's reductions (statistical, searching and utility functions).

``sum``, ``prod``, ``min``, ``max``, ``mean``, ``all``, ``any`` are
:mod:`dlmg.ops.reductions`'s and ``var``, ``std`` :mod:`dlmg.ops.statistics`'s
(one function each: ``dlmg.sum is dlmg.array_api.sum``), which combine
per-fragment partials (no tensor is collected); ``axis=None`` gives a 0-d
*distributed* tensor. Beyond the standard: ``mean(dtype=)`` and
``var``/``std``'s ``ddof`` (NumPy's). ``argmax``, ``argmin`` and
``count_nonzero`` are defined here.
"""

from __future__ import annotations

from typing import Any

from ..construct import from_fragments
from ..layout import Layout
from ..ops import reductions as _r, statistics as _s
from ..ops.reductions import all, any, max, mean, min, prod, sum  # noqa: A004
from ..ops.statistics import std, var
from ..ops._operands import is_distributed
from ..ops.pointwise import astype as _astype
from ..registry import adapter_for
from ._elementwise import not_equal
from ._policy import layout_for

__all__ = ["sum", "prod", "min", "max", "mean", "var", "std", "all", "any", "argmax", "argmin",
           "count_nonzero", "as_tensor"]


def as_tensor(value: Any) -> Any:
    """A regular (0-d) array as a one-fragment tensor on its device, laid out by the policy."""
    if is_distributed(value):
        return value
    adapter = adapter_for(value)
    shape = tuple(int(n) for n in value.shape)
    here = Layout.single(shape, adapter.device_of(value))
    out = from_fragments([value], here)
    wanted = layout_for(shape)
    return out if wanted.same_distribution(here) else out.redistribute(wanted)


def argmax(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the largest element (flat, row-major, for ``axis=None``)."""
    return as_tensor(_r.argmax(x, axis=axis, keepdims=keepdims))


def argmin(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the smallest element (flat, row-major, for ``axis=None``)."""
    return as_tensor(_s.argmin(x, axis=axis, keepdims=keepdims))


def count_nonzero(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements over ``axis`` are not zero (int64)."""
    if not is_distributed(x):
        raise TypeError(f"count_nonzero: expected a DistributedTensor, got {type(x).__name__}")
    nonzero = not_equal(x, 0) if x.dtype.kind != "b" else x
    return sum(_astype(nonzero, "int64"), axis=axis, dtype="int64", keepdims=keepdims)
