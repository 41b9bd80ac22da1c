"""The standard's scans, sorting functions, set functions and ``nonzero``, kept distributed.

Each is one of dlmg's distributed algorithms: :mod:`dlmg.ops.scan` (parallel
prefix, halo), :mod:`dlmg.ops.sort` (parallel sample sort) and
:mod:`dlmg.ops.unique` (range partitioning, exclusive scan of counts). Forms those
do not cover yet (``diff`` with ``prepend``/``append``, ``searchsorted`` with a
``sorter`` or of a regular array) run on collected operands (:mod:`._gathered`).
"""

from __future__ import annotations

from typing import Any

from ..ops import scan as _scan, search as _search, sort as _sort, unique as _unique
from ..ops._operands import is_distributed
from ._gathered import collected

__all__ = ["cumulative_sum", "cumulative_prod", "diff", "sort", "argsort", "searchsorted", "unique_values",
           "unique_counts", "unique_inverse", "unique_all", "nonzero"]

_collected_diff = collected("diff")
_collected_searchsorted = collected("searchsorted")


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


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    """Where ``x2``'s values go in the sorted ``x1`` (:func:`dlmg.ops.search.searchsorted`);
    with a ``sorter``, or where an operand is a regular array, on collected operands."""
    if sorter is None and is_distributed(x1) and is_distributed(x2):
        return _search.searchsorted(x1, x2, side=side)
    return _collected_searchsorted(x1, x2, side=side, sorter=sorter)


def unique_values(x: Any, /) -> Any:
    """The distinct values of ``x``, sorted (:func:`dlmg.ops.unique.unique_values`)."""
    return _unique.unique_values(x)


def unique_counts(x: Any, /) -> Any:
    """The distinct values of ``x`` and their counts (:func:`dlmg.ops.unique.unique_counts`)."""
    return _unique.unique_counts(x)


def unique_inverse(x: Any, /) -> Any:
    """The distinct values and each element's index among them (:func:`dlmg.ops.unique.unique_inverse`)."""
    return _unique.unique_inverse(x)


def unique_all(x: Any, /) -> Any:
    """Distinct values, first indices, inverse indices and counts (:func:`dlmg.ops.unique.unique_all`)."""
    return _unique.unique_all(x)


def nonzero(x: Any, /) -> Any:
    """The indices of the nonzero elements, one tensor per mode (:func:`dlmg.ops.unique.nonzero`)."""
    return _unique.nonzero(x)
