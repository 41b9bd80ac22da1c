"""The standard's reductions (statistical, searching and utility functions).

``sum``, ``prod``, ``min``, ``max``, ``mean``, ``all``, ``any``, ``argmax``, ``argmin`` are
:mod:`dlmg.ops.reductions`'s and ``var`` and ``std`` :mod:`dlmg.ops.statistics`'s
(one function each: ``dlmg.sum is dlmg.array_api.sum``), which combine
per-fragment partials (no tensor is collected); ``axis=None`` gives a 0-d
*distributed* tensor. Beyond the standard: ``mean(dtype=)`` and
``var``/``std``'s ``ddof`` (NumPy's). ``count_nonzero`` is defined here.
"""

from __future__ import annotations

from typing import Any

from ..ops.reductions import all, any, max, mean, min, prod, sum  # noqa: A004
from ..ops.reductions import argmax, argmin
from ..ops.statistics import std, var
from ..ops._operands import is_distributed
from ..ops.pointwise import astype as _astype
from ._elementwise import not_equal

__all__ = ["sum", "prod", "min", "max", "mean", "var", "std", "all", "any", "argmax", "argmin",
           "count_nonzero"]


def count_nonzero(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements over ``axis`` are not zero (int64)."""
    if not is_distributed(x):
        raise TypeError(f"count_nonzero: expected a DistributedTensor, got {type(x).__name__}")
    nonzero = not_equal(x, 0) if x.dtype.kind != "b" else x
    return sum(_astype(nonzero, "int64"), axis=axis, dtype="int64", keepdims=keepdims)
