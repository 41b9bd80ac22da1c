"""Checking a Python scalar against an element type before any framework sees it.

Frameworks disagree on a value their type cannot hold: NumPy raises
``OverflowError`` for ``300`` into int8 and turns ``1e300`` into float32 ``inf``
with a warning, torch raises a ``RuntimeError`` for both. dlmg decides once,
here: the value must be representable (integers within range, finite floats
within the finite range, no imaginary part into a real type), else
:class:`~dlmg.errors.DtypeRangeError` names the value, the type and the range.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .dtypes import info
from .errors import DtypeError, DtypeRangeError

__all__ = ["check_scalar"]

# Fraction bits and largest exponent of the floating types dlmg range-checks;
# a finite value at or above (2 - 2**-(fraction + 1)) * 2**emax rounds to inf.
_FLOATS = {"float16": (10, 15), "bfloat16": (7, 127), "float32": (23, 127), "complex64": (23, 127)}


def _limits(name: str) -> tuple[float, float] | None:
    """(largest finite value, smallest magnitude that rounds to infinity)."""
    found = _FLOATS.get(name)
    if found is None:
        return None
    fraction, emax = found
    return (2.0 - 2.0**-fraction) * 2.0**emax, (2.0 - 2.0 ** -(fraction + 1)) * 2.0**emax


def _as_python(value: Any) -> Any:
    """A Python number from a Python or NumPy scalar or a 0-d array of any framework."""
    if isinstance(value, (bool, int, float, complex)):
        return value
    if isinstance(value, numbers.Number) or getattr(value, "ndim", None) == 0:
        item = getattr(value, "item", None)
        if callable(item):
            return item()
    return value


def check_scalar(value: Any, dtype: str, what: str) -> Any:
    """``value`` as a Python number that ``dtype`` represents, or an error.

    Parameters
    ----------
    value : scalar
        A Python or NumPy scalar, or a 0-d array of any framework.
    dtype : str
        A dlmg element type name.
    what : str
        The operation and argument, for messages (``"full: fill_value"``).

    Returns
    -------
    bool, int, float or complex

    Raises
    ------
    TypeError
        ``value`` is ``None`` or not a number.
    DtypeError
        A complex value with an imaginary part for a real type.
    DtypeRangeError
        An integer outside the integer type's range; a NaN or infinity for an
        integer type; a finite value beyond a floating type's finite range.
    """
    if value is None:
        raise TypeError(f"{what} is None; give the value to fill with (dlmg.empty leaves memory uninitialised)")
    value = _as_python(value)
    if not isinstance(value, (bool, int, float, complex)):
        raise TypeError(f"{what} must be a number, got {type(value).__name__} ({value!r})")
    d = info(dtype)
    kind = d.kind
    if isinstance(value, complex) and kind != "c":
        if value.imag:
            raise DtypeError(f"{what} = {value!r} has an imaginary part, which {dtype} cannot hold")
        value = value.real
    if kind == "b" or isinstance(value, bool):
        return value
    if kind in "iu":
        if isinstance(value, float) and not math.isfinite(value):
            raise DtypeRangeError(f"{what} = {value!r} cannot be stored in {dtype} (not a finite number)")
        whole = math.trunc(value)
        low, high = (0, 2**d.bits - 1) if kind == "u" else (-(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1)
        if not low <= whole <= high:
            raise DtypeRangeError(f"{what} = {value!r} is out of range for {dtype} [{low}, {high}]")
        return value
    limits = _limits(dtype)
    if limits is not None:
        largest, threshold = limits
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        for part in parts:
            if isinstance(part, float) and not math.isfinite(part):
                continue  # inf and nan are values of every floating type
            if abs(part) >= threshold:
                raise DtypeRangeError(
                    f"{what} = {value!r} is beyond the finite range of {dtype} (largest magnitude "
                    f"{largest:.8g}); it would become infinite"
                )
    return value
