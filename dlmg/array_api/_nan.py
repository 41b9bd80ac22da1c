"""NumPy's NaN-ignoring reductions and cumulative functions, which array libraries call
beyond the standard (xarray's default ``skipna=True``; scikit-learn's ``_nanmean``).

Each is the standard's own reduction of a masked tensor, so it runs as the reductions
do, fragment by fragment with the partials combined (an all-reduce over split modes),
and nothing is collected: ``nansum(x)`` is ``sum(where(isnan(x), 0, x))``, ``nanmean``
divides by the count of non-NaN elements (a second reduction of the same kind),
``nanmax`` reduces with ``-inf`` in place of NaN and puts NaN back where a slice held
only NaN, ``nanvar`` subtracts the NaN-ignoring mean. The semantics are NumPy's: integer
and bool tensors hold no NaN and reduce as they are; an all-NaN slice gives NaN (with
NumPy's ``RuntimeWarning``) for ``nanmean``, ``nanmax``, ``nanmin``, ``nanvar`` and
``nanstd``, 0 for ``nansum`` and 1 for ``nanprod``; ``ddof`` is NumPy's name for the
standard's ``correction``; ``axis=None`` reduces every element (a 0-d tensor);
``nancumsum`` and ``nancumprod`` with ``axis=None`` run over the flattened tensor.

The arguments follow NumPy's signatures, so ``np.nanmean(dt, axis=0)`` reaches these
functions through NumPy's ``__array_function__``; ``out=`` is refused (dlmg tensors are
never written into by a reduction), naming what to do instead.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..ops._operands import is_distributed
from ._elementwise import conj, isnan, logical_not, real, sqrt, where
from ._statistics import all as all_of, any as any_of, max as max_of, mean as mean_of, min as min_of, prod as prod_of, sum as sum_of, var as var_of
from ._manipulation import astype, reshape

__all__ = ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd", "nancumsum", "nancumprod"]


def _check(x: Any, name: str, out: Any) -> bool:
    """Whether ``x`` can hold NaN (a floating or complex tensor); refuses ``out=``."""
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    if out is not None:
        raise TypeError(f"dlmg.{name}: out= is not supported; assign the result instead: "
                        f"result = dlmg.{name}(x, ...)")
    return x.dtype.kind in "fc"


def _filled(x: Any, value: float) -> Any:
    """``x`` with its NaNs replaced by ``value`` (elementwise, where the fragments are)."""
    return where(isnan(x), value, x)


def _counts(x: Any, axis: Any, keepdims: bool) -> Any:
    """How many elements that are not NaN each result reduces, in ``x``'s dtype."""
    return sum_of(astype(logical_not(isnan(x)), x.dtype), axis=axis, keepdims=keepdims)


def _warn(what: str) -> None:
    warnings.warn(what, RuntimeWarning, stacklevel=3)


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The sum over ``axis`` treating NaN as 0 (``numpy.nansum``)."""
    if not _check(a, "nansum", out):
        return sum_of(a, axis=axis, dtype=dtype, keepdims=keepdims)
    return sum_of(_filled(a, 0.0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The product over ``axis`` treating NaN as 1 (``numpy.nanprod``)."""
    if not _check(a, "nanprod", out):
        return prod_of(a, axis=axis, dtype=dtype, keepdims=keepdims)
    return prod_of(_filled(a, 1.0), axis=axis, dtype=dtype, keepdims=keepdims)


def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The mean over ``axis`` of the elements that are not NaN (``numpy.nanmean``); NaN
    where a slice holds only NaN."""
    if not _check(a, "nanmean", out):
        mean = mean_of(astype(a, "float64") if a.dtype.kind in "biu" else a, axis=axis, keepdims=keepdims)
        return mean if dtype is None else astype(mean, dtype)
    total = sum_of(_filled(a, 0.0), axis=axis, keepdims=keepdims)
    count = _counts(a, axis, keepdims)
    if bool(any_of(count == 0)):
        _warn("Mean of empty slice")
    mean = total / count
    return mean if dtype is None else astype(mean, dtype)


def _extreme(a: Any, axis: Any, keepdims: bool, out: Any, name: str, fill: float) -> Any:
    reduce = max_of if name == "nanmax" else min_of
    if not _check(a, name, out):
        return reduce(a, axis=axis, keepdims=keepdims)
    nan = isnan(a)
    best = reduce(where(nan, fill, a), axis=axis, keepdims=keepdims)
    empty = all_of(nan, axis=axis, keepdims=keepdims)
    if bool(any_of(empty)):
        _warn("All-NaN slice encountered")
        best = where(empty, float("nan"), best)
    return best


def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The largest element over ``axis`` ignoring NaN (``numpy.nanmax``); NaN where a
    slice holds only NaN."""
    return _extreme(a, axis, keepdims, out, "nanmax", float("-inf"))


def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    """The smallest element over ``axis`` ignoring NaN (``numpy.nanmin``)."""
    return _extreme(a, axis, keepdims, out, "nanmin", float("inf"))


def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False) -> Any:
    """The variance over ``axis`` of the elements that are not NaN, ``ddof`` degrees of
    freedom subtracted (``numpy.nanvar``); NaN where ``count - ddof <= 0``."""
    if not _check(a, "nanvar", out):
        x = astype(a, "float64") if a.dtype.kind in "biu" else a
        v = var_of(x, axis=axis, correction=ddof, keepdims=keepdims)
        return v if dtype is None else astype(v, dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (NumPy warns once, below)
        mean = nanmean(a, axis=axis, keepdims=True)
    deviation = _filled(a - mean, 0.0)
    squares = deviation * conj(deviation) if a.dtype.kind == "c" else deviation * deviation
    total = sum_of(squares, axis=axis, keepdims=keepdims)
    dof = _counts(a, axis, keepdims) - ddof
    if bool(any_of(dof <= 0)):
        _warn("Degrees of freedom <= 0 for slice.")
    v = where(dof > 0, total / where(dof > 0, dof, 1.0), float("nan"))
    if a.dtype.kind == "c":
        v = real(v)
    return v if dtype is None else astype(v, dtype)


def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: float = 0,
           keepdims: bool = False) -> Any:
    """The standard deviation over ``axis`` ignoring NaN (``numpy.nanstd``)."""
    return sqrt(nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims))


def _cumulative(a: Any, axis: Any, dtype: Any, out: Any, name: str, fill: float, standard: str) -> Any:
    can_hold_nan = _check(a, name, out)
    if axis is None:  # NumPy's: over the flattened tensor
        a = reshape(a, (-1,))
        axis = 0
    x = _filled(a, fill) if can_hold_nan else a
    # the namespace's own function (x.__array_namespace__()), whichever algorithm it runs
    return getattr(x.__array_namespace__(), standard)(x, axis=axis, dtype=dtype)


def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """The cumulative sum along ``axis`` treating NaN as 0 (``numpy.nancumsum``): the
    namespace's ``cumulative_sum`` of ``where(isnan(a), 0, a)``."""
    return _cumulative(a, axis, dtype, out, "nancumsum", 0.0, "cumulative_sum")


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
    """The cumulative product along ``axis`` treating NaN as 1 (``numpy.nancumprod``)."""
    return _cumulative(a, axis, dtype, out, "nancumprod", 1.0, "cumulative_prod")
