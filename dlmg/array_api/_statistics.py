"""The standard's reductions (statistical, searching and utility functions).

They are :mod:`dlmg.ops.reductions`'s, which combine per-fragment partials
(no tensor is collected), with one difference the standard asks for:
``axis=None`` gives a 0-d *distributed* tensor, not a regular array.
"""

from __future__ import annotations

from typing import Any

from ..construct import from_fragments
from ..layout import Layout
from ..ops import reductions as _r, statistics as _s
from ..ops._operands import is_distributed
from ..ops.pointwise import astype as _astype, not_equal  # type: ignore[attr-defined]
from ..registry import adapter_for
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


def _axes(x: Any, axis: Any) -> Any:
    if not is_distributed(x):
        raise TypeError(f"expected a DistributedTensor, got {type(x).__name__}")
    return tuple(range(x.ndim)) if axis is None else axis


def sum(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """The sum over ``axis`` (every mode by default)."""
    return _r.sum(x, axis=_axes(x, axis), dtype=dtype, keepdims=keepdims)


def prod(x: Any, /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """The product over ``axis``."""
    return _r.prod(x, axis=_axes(x, axis), dtype=dtype, keepdims=keepdims)


def min(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """The smallest element over ``axis``."""
    return _r.min(x, axis=_axes(x, axis), keepdims=keepdims)


def max(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """The largest element over ``axis``."""
    return _r.max(x, axis=_axes(x, axis), keepdims=keepdims)


def mean(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    """The arithmetic mean over ``axis``."""
    return _r.mean(x, axis=_axes(x, axis), keepdims=keepdims)


def var(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False) -> Any:
    """The variance over ``axis`` with ``correction`` degrees of freedom subtracted."""
    return _s.var(x, axis=_axes(x, axis), correction=correction, keepdims=keepdims)


def std(x: Any, /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False) -> Any:
    """The standard deviation over ``axis``."""
    return _s.std(x, axis=_axes(x, axis), correction=correction, keepdims=keepdims)


def all(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether every element over ``axis`` is true."""
    return _r.all(x, axis=_axes(x, axis), keepdims=keepdims)


def any(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether some element over ``axis`` is true."""
    return _r.any(x, axis=_axes(x, axis), keepdims=keepdims)


def argmax(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the largest element (flat, row-major, for ``axis=None``)."""
    return as_tensor(_r.argmax(x, axis=axis, keepdims=keepdims))


def argmin(x: Any, /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """The index of the smallest element (flat, row-major, for ``axis=None``)."""
    return as_tensor(_s.argmin(x, axis=axis, keepdims=keepdims))


def count_nonzero(x: Any, /, *, axis: Any = None, keepdims: bool = False) -> Any:
    """How many elements over ``axis`` are not zero (int64)."""
    nonzero = not_equal(x, 0) if x.dtype.kind != "b" else x
    return _r.sum(_astype(nonzero, "int64"), axis=_axes(x, axis), dtype="int64", keepdims=keepdims)
