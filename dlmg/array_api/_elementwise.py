"""The standard's elementwise functions, with its broadcasting: ``dlmg.add`` is ``dlmg.array_api.add``.

Each function aligns its operands (:func:`dlmg.ops.broadcast.align`: one shape
and one layout, as per-fragment views where the fragments allow, otherwise by
moving the operand that does not fit, which :func:`dlmg.explain` shows before and
:func:`dlmg.strict` refuses), then runs :func:`dlmg.ops.pointwise.elementwise`
fragment by fragment in each fragment's framework. The operators are these
functions: ``x + y`` gives what ``add(x, y)`` gives.

Beyond the standard: NumPy's names for the same functions (``absolute``,
``power``, ``arctan2``...) are bound to them, and :func:`round` takes NumPy's
``decimals``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..ops import like as _like, selection as _selection
from ..ops._operands import is_distributed
from ..ops.broadcast import align
from ..ops.pointwise import FUNCTIONS, elementwise

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = list(FUNCTIONS) + ["where", "clip"]
#: NumPy's names of the functions above, beyond the standard (``dlmg.absolute``...).
NUMPY_NAMES = ["around", "absolute", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh", "arctan2", "conjugate", "invert", "left_shift", "right_shift", "power", "true_divide", "mod"]


def _binary(name: str, x1: Any, x2: Any) -> "DistributedTensor":
    """``name`` on ``x1`` and ``x2`` after aligning them (the standard's broadcasting)."""
    a, b = align((_as_kind(x1, x2), _as_kind(x2, x1)), name, communicate=True)
    return elementwise(name, a, b)


def _as_kind(scalar: Any, other: Any) -> Any:
    """A Python int next to a floating tensor as a float (the standard lets it take the tensor's kind)."""
    if type(scalar) is int and is_distributed(other) and other.dtype.kind in "fc":
        return float(scalar)
    return scalar


def abs(x: Any, /) -> "DistributedTensor":  # noqa: A001
    """Absolute value, elementwise (array API ``abs``)."""
    return elementwise("abs", x)

def acos(x: Any, /) -> "DistributedTensor":
    """Inverse cosine, elementwise (array API ``acos``)."""
    return elementwise("acos", x)

def acosh(x: Any, /) -> "DistributedTensor":
    """Inverse hyperbolic cosine, elementwise (array API ``acosh``)."""
    return elementwise("acosh", x)

def asin(x: Any, /) -> "DistributedTensor":
    """Inverse sine, elementwise (array API ``asin``)."""
    return elementwise("asin", x)

def asinh(x: Any, /) -> "DistributedTensor":
    """Inverse hyperbolic sine, elementwise (array API ``asinh``)."""
    return elementwise("asinh", x)

def atan(x: Any, /) -> "DistributedTensor":
    """Inverse tangent, elementwise (array API ``atan``)."""
    return elementwise("atan", x)

def atanh(x: Any, /) -> "DistributedTensor":
    """Inverse hyperbolic tangent, elementwise (array API ``atanh``)."""
    return elementwise("atanh", x)

def bitwise_invert(x: Any, /) -> "DistributedTensor":
    """Bitwise NOT, elementwise (array API ``bitwise_invert``)."""
    return elementwise("bitwise_invert", x)

def ceil(x: Any, /) -> "DistributedTensor":
    """Ceiling, elementwise (array API ``ceil``)."""
    return elementwise("ceil", x)

def conj(x: Any, /) -> "DistributedTensor":
    """Complex conjugate, elementwise (array API ``conj``)."""
    return elementwise("conj", x)

def cos(x: Any, /) -> "DistributedTensor":
    """Cosine, elementwise (array API ``cos``)."""
    return elementwise("cos", x)

def cosh(x: Any, /) -> "DistributedTensor":
    """Hyperbolic cosine, elementwise (array API ``cosh``)."""
    return elementwise("cosh", x)

def exp(x: Any, /) -> "DistributedTensor":
    """Exponential, elementwise (array API ``exp``)."""
    return elementwise("exp", x)

def expm1(x: Any, /) -> "DistributedTensor":
    """exp(x) - 1, elementwise (array API ``expm1``)."""
    return elementwise("expm1", x)

def floor(x: Any, /) -> "DistributedTensor":
    """Floor, elementwise (array API ``floor``)."""
    return elementwise("floor", x)

def imag(x: Any, /) -> "DistributedTensor":
    """Imaginary part, elementwise (array API ``imag``)."""
    return elementwise("imag", x)

def isfinite(x: Any, /) -> "DistributedTensor":
    """Test for finite values, elementwise (array API ``isfinite``)."""
    return elementwise("isfinite", x)

def isinf(x: Any, /) -> "DistributedTensor":
    """Test for infinities, elementwise (array API ``isinf``)."""
    return elementwise("isinf", x)

def isnan(x: Any, /) -> "DistributedTensor":
    """Test for NaN, elementwise (array API ``isnan``)."""
    return elementwise("isnan", x)

def log(x: Any, /) -> "DistributedTensor":
    """Natural logarithm, elementwise (array API ``log``)."""
    return elementwise("log", x)

def log1p(x: Any, /) -> "DistributedTensor":
    """log(1 + x), elementwise (array API ``log1p``)."""
    return elementwise("log1p", x)

def log2(x: Any, /) -> "DistributedTensor":
    """Base-2 logarithm, elementwise (array API ``log2``)."""
    return elementwise("log2", x)

def log10(x: Any, /) -> "DistributedTensor":
    """Base-10 logarithm, elementwise (array API ``log10``)."""
    return elementwise("log10", x)

def logical_not(x: Any, /) -> "DistributedTensor":
    """Logical NOT, elementwise (array API ``logical_not``)."""
    return elementwise("logical_not", x)

def negative(x: Any, /) -> "DistributedTensor":
    """Numerical negative, elementwise (array API ``negative``)."""
    return elementwise("negative", x)

def positive(x: Any, /) -> "DistributedTensor":
    """Numerical positive (a copy), elementwise (array API ``positive``)."""
    return elementwise("positive", x)

def real(x: Any, /) -> "DistributedTensor":
    """Real part, elementwise (array API ``real``)."""
    return elementwise("real", x)

def reciprocal(x: Any, /) -> "DistributedTensor":
    """1 / x, elementwise (array API ``reciprocal``)."""
    return elementwise("reciprocal", x)

def round(x: Any, /, decimals: int = 0) -> "DistributedTensor":  # noqa: A001
    """Round half to even, elementwise (array API ``round``); ``decimals`` (NumPy's, beyond
    the standard) rounds to that many places after the point (negative: before it)."""
    return _like.round(x, decimals)

def sign(x: Any, /) -> "DistributedTensor":
    """Sign, elementwise (array API ``sign``)."""
    return elementwise("sign", x)

def signbit(x: Any, /) -> "DistributedTensor":
    """Whether the sign bit is set, elementwise (array API ``signbit``)."""
    return elementwise("signbit", x)

def sin(x: Any, /) -> "DistributedTensor":
    """Sine, elementwise (array API ``sin``)."""
    return elementwise("sin", x)

def sinh(x: Any, /) -> "DistributedTensor":
    """Hyperbolic sine, elementwise (array API ``sinh``)."""
    return elementwise("sinh", x)

def square(x: Any, /) -> "DistributedTensor":
    """Square, elementwise (array API ``square``)."""
    return elementwise("square", x)

def sqrt(x: Any, /) -> "DistributedTensor":
    """Square root, elementwise (array API ``sqrt``)."""
    return elementwise("sqrt", x)

def tan(x: Any, /) -> "DistributedTensor":
    """Tangent, elementwise (array API ``tan``)."""
    return elementwise("tan", x)

def tanh(x: Any, /) -> "DistributedTensor":
    """Hyperbolic tangent, elementwise (array API ``tanh``)."""
    return elementwise("tanh", x)

def trunc(x: Any, /) -> "DistributedTensor":
    """Truncation toward zero, elementwise (array API ``trunc``)."""
    return elementwise("trunc", x)

def add(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Sum, elementwise, ``x1`` and ``x2`` broadcast together (array API ``add``)."""
    return _binary("add", x1, x2)

def atan2(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Quadrant-aware inverse tangent of x1 / x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``atan2``)."""
    return _binary("atan2", x1, x2)

def bitwise_and(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Bitwise AND, elementwise, ``x1`` and ``x2`` broadcast together (array API ``bitwise_and``)."""
    return _binary("bitwise_and", x1, x2)

def bitwise_left_shift(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Left shift, elementwise, ``x1`` and ``x2`` broadcast together (array API ``bitwise_left_shift``)."""
    return _binary("bitwise_left_shift", x1, x2)

def bitwise_or(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Bitwise OR, elementwise, ``x1`` and ``x2`` broadcast together (array API ``bitwise_or``)."""
    return _binary("bitwise_or", x1, x2)

def bitwise_right_shift(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Right shift, elementwise, ``x1`` and ``x2`` broadcast together (array API ``bitwise_right_shift``)."""
    return _binary("bitwise_right_shift", x1, x2)

def bitwise_xor(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Bitwise XOR, elementwise, ``x1`` and ``x2`` broadcast together (array API ``bitwise_xor``)."""
    return _binary("bitwise_xor", x1, x2)

def copysign(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 with the sign of x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``copysign``)."""
    return _binary("copysign", x1, x2)

def divide(x1: Any, x2: Any, /) -> "DistributedTensor":
    """True division, elementwise, ``x1`` and ``x2`` broadcast together (array API ``divide``)."""
    return _binary("divide", x1, x2)

def equal(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 == x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``equal``)."""
    return _binary("equal", x1, x2)

def floor_divide(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Floor division, elementwise, ``x1`` and ``x2`` broadcast together (array API ``floor_divide``)."""
    return _binary("floor_divide", x1, x2)

def greater(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 > x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``greater``)."""
    return _binary("greater", x1, x2)

def greater_equal(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 >= x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``greater_equal``)."""
    return _binary("greater_equal", x1, x2)

def hypot(x1: Any, x2: Any, /) -> "DistributedTensor":
    """sqrt(x1**2 + x2**2), elementwise, ``x1`` and ``x2`` broadcast together (array API ``hypot``)."""
    return _binary("hypot", x1, x2)

def less(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 < x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``less``)."""
    return _binary("less", x1, x2)

def less_equal(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 <= x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``less_equal``)."""
    return _binary("less_equal", x1, x2)

def logaddexp(x1: Any, x2: Any, /) -> "DistributedTensor":
    """log(exp(x1) + exp(x2)), elementwise, ``x1`` and ``x2`` broadcast together (array API ``logaddexp``)."""
    return _binary("logaddexp", x1, x2)

def logical_and(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Logical AND, elementwise, ``x1`` and ``x2`` broadcast together (array API ``logical_and``)."""
    return _binary("logical_and", x1, x2)

def logical_or(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Logical OR, elementwise, ``x1`` and ``x2`` broadcast together (array API ``logical_or``)."""
    return _binary("logical_or", x1, x2)

def logical_xor(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Logical XOR, elementwise, ``x1`` and ``x2`` broadcast together (array API ``logical_xor``)."""
    return _binary("logical_xor", x1, x2)

def maximum(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Elementwise maximum (NaN propagates), elementwise, ``x1`` and ``x2`` broadcast together (array API ``maximum``)."""
    return _binary("maximum", x1, x2)

def minimum(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Elementwise minimum (NaN propagates), elementwise, ``x1`` and ``x2`` broadcast together (array API ``minimum``)."""
    return _binary("minimum", x1, x2)

def multiply(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Product, elementwise, ``x1`` and ``x2`` broadcast together (array API ``multiply``)."""
    return _binary("multiply", x1, x2)

def nextafter(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Next representable value after x1 toward x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``nextafter``)."""
    return _binary("nextafter", x1, x2)

def not_equal(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 != x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``not_equal``)."""
    return _binary("not_equal", x1, x2)

def pow(x1: Any, x2: Any, /) -> "DistributedTensor":
    """x1 raised to x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``pow``)."""
    return _binary("pow", x1, x2)

def remainder(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Remainder with the sign of x2, elementwise, ``x1`` and ``x2`` broadcast together (array API ``remainder``)."""
    return _binary("remainder", x1, x2)

def subtract(x1: Any, x2: Any, /) -> "DistributedTensor":
    """Difference, elementwise, ``x1`` and ``x2`` broadcast together (array API ``subtract``)."""
    return _binary("subtract", x1, x2)


def where(condition: Any, x1: Any, x2: Any, /) -> "DistributedTensor":
    """``x1`` where ``condition`` is true, else ``x2`` (the three broadcast together)."""
    c, a, b = align((condition, x1, x2), "where", communicate=True)
    return _selection.where(c, a, b)


def clip(x: Any, /, min: Any = None, max: Any = None) -> "DistributedTensor":  # noqa: A002
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
    if isinstance(bound, int) and not isinstance(bound, bool):
        info = np.iinfo(str(x.dtype))
        if bound > info.max:
            return None if max_ else int(info.max)
        if bound < info.min:
            return int(info.min) if max_ else None
    return bound


# NumPy's names (each the function above, as NumPy's own aliases are)
around = round
absolute = abs
arccos = acos
arccosh = acosh
arcsin = asin
arcsinh = asinh
arctan = atan
arctanh = atanh
arctan2 = atan2
conjugate = conj
invert = bitwise_invert
left_shift = bitwise_left_shift
right_shift = bitwise_right_shift
power = pow
true_divide = divide
mod = remainder
