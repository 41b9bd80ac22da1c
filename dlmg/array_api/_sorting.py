"""The standard's scans, sorting functions, set functions and ``nonzero``, kept distributed.

Each is one of dlmg's distributed algorithms: :mod:`dlmg.ops.scan` (parallel
prefix, halo), :mod:`dlmg.ops.sort` (parallel sample sort) and
:mod:`dlmg.ops.unique` (range partitioning, exclusive scan of counts). Forms those
do not cover yet (``diff`` with ``prepend``/``append``, ``searchsorted`` and the
index-returning set functions) run on collected operands (:mod:`._gathered`).
"""

from __future__ import annotations

from typing import Any

from ..ops import scan as _scan, sort as _sort, unique as _unique
from ..ops._operands import is_distributed
from ._gathered import collected

__all__ = ["cumulative_sum", "cumulative_prod", "diff", "sort", "argsort", "unique_values", "unique_counts",
           "nonzero"]

_collected_diff = collected("diff")


def cumulative_sum(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """The cumulative sum along ``axis`` (:func:`dlmg.ops.scan.cumulative_sum`)."""
    return _scan.cumulative_sum(x, axis=axis, dtype=dtype, include_initial=include_initial)


def cumulative_prod(x: Any, /, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Any:
    """The cumulative product along ``axis`` (:func:`dlmg.ops.scan.cumulative_prod`)."""
    return _scan.cumulative_prod(x, axis=axis, dtype=dtype, include_initial=include_initial)


def diff(x: Any, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Any:
    """The ``n``-th forward difference along ``axis`` (:func:`dlmg.ops.scan.diff`); with
    ``prepend`` or ``append``, on collected operands."""
    if prepend is None and append is None and is_distributed(x):
        return _scan.diff(x, axis=axis, n=n)
    kwargs: dict[str, Any] = {"axis": axis, "n": n}
    if prepend is not None:
        kwargs["prepend"] = prepend
    if append is not None:
        kwargs["append"] = append
    return _collected_diff(x, **kwargs)


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """``x`` sorted along ``axis`` (:func:`dlmg.ops.sort.sort`)."""
    return _sort.sort(x, axis=axis, descending=descending, stable=stable)


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """The indices that sort ``x`` along ``axis`` (:func:`dlmg.ops.sort.argsort`)."""
    return _sort.argsort(x, axis=axis, descending=descending, stable=stable)


def unique_values(x: Any, /) -> Any:
    """The distinct values of ``x``, sorted (:func:`dlmg.ops.unique.unique_values`)."""
    return _unique.unique_values(x)


def unique_counts(x: Any, /) -> Any:
    """The distinct values of ``x`` and their counts (:func:`dlmg.ops.unique.unique_counts`)."""
    return _unique.unique_counts(x)


def nonzero(x: Any, /) -> Any:
    """The indices of the nonzero elements, one tensor per mode (:func:`dlmg.ops.unique.nonzero`)."""
    return _unique.nonzero(x)
