"""The standard's scans, sorting functions, set functions and ``nonzero``, kept distributed.

Each is one of dlmg's distributed algorithms: :mod:`dlmg.ops.scan` (parallel
prefix, halo), :mod:`dlmg.ops.sort` (parallel sample sort), :mod:`dlmg.ops.search`
(routed binary searches) and :mod:`dlmg.ops.unique` (range partitioning, exclusive
scan of counts). ``diff`` with ``prepend``/``append`` differences the distributed
``concat`` of the pieces; ``searchsorted`` with a ``sorter`` searches the routed
``take`` of ``x1`` at ``sorter``. Host operands beside a distributed one are laid
out on its devices first; only calls with no distributed operand at all run on
one fragment (:mod:`._gathered`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ops import scan as _scan, search as _search, sort as _sort, unique as _unique
from ..ops._operands import is_distributed
from ._creation import asarray
from ._gathered import collected
from ._indexing import take
from ._manipulation import concat

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
    """The ``n``-th forward difference along ``axis`` (:func:`dlmg.ops.scan.diff`).

    ``prepend`` and ``append`` (tensors, arrays, or scalars broadcast to one slice as
    NumPy does) are laid out on ``x``'s devices, joined to ``x`` by the distributed
    :func:`concat` (shift placement) and the join differenced by the halo algorithm:
    nothing is collected. With ``n=0`` ``x`` comes back without them, as in NumPy.
    """
    if is_distributed(x):
        parts = [x]
        if n == 0:
            prepend = append = None
        for value, at in ((prepend, 0), (append, 1)):
            if value is None:
                continue
            piece = _piece(value, x, axis)
            parts.insert(len(parts) if at else 0, piece)
        if len(parts) > 1:
            lead = 1 if prepend is not None else 0
            joined = concat(parts, axis=axis)
            if not set(joined.layout.devices) <= set(parts[lead].layout.devices):
                joined = asarray(joined, device=x.device)
            x = joined
        return _scan.diff(x, axis=axis, n=n)
    kwargs: dict[str, Any] = {"axis": axis, "n": n}
    if prepend is not None:
        kwargs["prepend"] = prepend
    if append is not None:
        kwargs["append"] = append
    return _collected_diff(x, **kwargs)


def _piece(value: Any, x: Any, axis: int) -> Any:
    """A ``prepend``/``append`` operand of ``diff`` as a tensor on ``x``'s devices; a scalar
    (a Python one in ``x``'s dtype) broadcast to one slice along ``axis``."""
    if not is_distributed(value) and not hasattr(value, "shape"):
        value = np.asarray(value, dtype=np.dtype(str(x.dtype)) if isinstance(value, (bool, int, float, complex))
                           and str(x.dtype) != "bfloat16" else None)
    if getattr(value, "ndim", 1) == 0:
        if x.ndim == 0:
            raise ValueError("diff: x must have at least one mode")
        shape = list(x.shape)
        shape[axis] = 1
        if is_distributed(value):
            value = value.item()
        value = np.broadcast_to(np.asarray(value), tuple(shape))
    return asarray(value, device=x.device)


def sort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """``x`` sorted along ``axis`` (:func:`dlmg.ops.sort.sort`)."""
    return _sort.sort(x, axis=axis, descending=descending, stable=stable)


def argsort(x: Any, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Any:
    """The indices that sort ``x`` along ``axis`` (:func:`dlmg.ops.sort.argsort`)."""
    return _sort.argsort(x, axis=axis, descending=descending, stable=stable)


def searchsorted(x1: Any, x2: Any, /, *, side: str = "left", sorter: Any = None) -> Any:
    """Where ``x2``'s values go in the sorted ``x1`` (:func:`dlmg.ops.search.searchsorted`).

    With a ``sorter``, ``x1`` sorted is the routed :func:`take` of ``x1`` at ``sorter``
    (each index sent to its owner, nothing collected), searched as a sorted tensor. A
    regular array beside a distributed operand is laid out on that operand's devices.
    """
    if is_distributed(x1) or is_distributed(x2):
        if not is_distributed(x1):
            x1 = asarray(x1, device=x2.device)
        if not is_distributed(x2):
            x2 = asarray(x2, device=x1.device)
        if sorter is not None:
            x1 = take(x1, sorter, axis=0) if x1.ndim == 1 else x1
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
