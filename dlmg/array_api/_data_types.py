"""The array API's data types and data type functions.

The dtype objects are :class:`dlmg.dtypes.DataType` values (``dlmg.float32``
is ``dt.dtype`` of a float32 tensor, equal to ``"float32"``, ``np.float32``,
``torch.float32`` and ``jnp.float32``). Type promotion follows the
standard's table (NumPy's rules for the types the table names).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..dtypes import DataType, canonical
from ..errors import DtypeError
from ..ops._operands import is_distributed

__all__ = [
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "complex64", "complex128",
    "finfo", "iinfo", "isdtype", "result_type", "can_cast", "astype_name", "dtype_of",
    "REAL_FLOATING", "COMPLEX_FLOATING", "SIGNED", "UNSIGNED",
]

bool = canonical("bool")  # noqa: A001
int8, int16, int32, int64 = (canonical(f"int{b}") for b in (8, 16, 32, 64))
uint8, uint16, uint32, uint64 = (canonical(f"uint{b}") for b in (8, 16, 32, 64))
float32, float64 = canonical("float32"), canonical("float64")
complex64, complex128 = canonical("complex64"), canonical("complex128")

SIGNED = (int8, int16, int32, int64)
UNSIGNED = (uint8, uint16, uint32, uint64)
REAL_FLOATING = (float32, float64)
COMPLEX_FLOATING = (complex64, complex128)
_KINDS = {
    "bool": (bool,),
    "signed integer": SIGNED,
    "unsigned integer": UNSIGNED,
    "integral": SIGNED + UNSIGNED,
    "real floating": REAL_FLOATING,
    "complex floating": COMPLEX_FLOATING,
    "numeric": SIGNED + UNSIGNED + REAL_FLOATING + COMPLEX_FLOATING,
}


def dtype_of(x: Any) -> DataType:
    """The dtype of a tensor, or ``x`` itself read as a dtype."""
    return x.dtype if is_distributed(x) else canonical(x)


def astype_name(dtype: Any) -> DataType:
    """``dtype`` as a dlmg dtype, refusing ``None``."""
    if dtype is None:
        raise DtypeError("dtype None is not a data type here")
    return canonical(dtype)


@dataclass(frozen=True)
class finfo_object:  # noqa: N801  (the standard's name)
    """Machine limits of a floating-point type (the standard's ``finfo`` object)."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: DataType


@dataclass(frozen=True)
class iinfo_object:  # noqa: N801
    """Limits of an integer type (the standard's ``iinfo`` object)."""

    bits: int
    max: int
    min: int
    dtype: DataType


def finfo(type: Any, /) -> finfo_object:  # noqa: A002
    """Machine limits of a floating-point dtype, or of a floating-point tensor's dtype."""
    import numpy as np

    name = dtype_of(type)
    info = np.finfo(_numpy_dtype(name))
    real = {"complex64": float32, "complex128": float64}.get(name, name)
    return finfo_object(int(info.bits), float(info.eps), float(info.max), float(info.min),
                        float(info.smallest_normal), canonical(real))


def iinfo(type: Any, /) -> iinfo_object:  # noqa: A002
    """Limits of an integer dtype, or of an integer tensor's dtype."""
    import numpy as np

    name = dtype_of(type)
    info = np.iinfo(_numpy_dtype(name))
    return iinfo_object(int(info.bits), int(info.max), int(info.min), name)


def _numpy_dtype(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def isdtype(dtype: Any, kind: Any) -> Any:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the standard's kind names
    (``"real floating"``...), or a tuple of those."""
    name = canonical(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(name, k) for k in kind)
    if isinstance(kind, str) and kind in _KINDS:
        return name in _KINDS[kind]
    if isinstance(kind, str) and kind not in _KINDS and not _is_dtype_name(kind):
        raise ValueError(f"isdtype: kind {kind!r} is not a dtype or one of {', '.join(_KINDS)}")
    return name == canonical(kind)


def _is_dtype_name(text: str) -> Any:
    try:
        canonical(text)
    except DtypeError:
        return False
    return True


def result_type(*arrays_and_dtypes: Any) -> DataType:
    """The dtype the standard's promotion rules give these tensors, dtypes and Python scalars."""
    import numpy as np

    dtypes = [dtype_of(a) for a in arrays_and_dtypes if not isinstance(a, (int, float, complex))]
    scalars = [a for a in arrays_and_dtypes if isinstance(a, (int, float, complex))]
    if not dtypes:
        raise TypeError("result_type needs at least one tensor or dtype")
    out = dtypes[0]
    for d in dtypes[1:]:
        out = canonical(np.result_type(_numpy_dtype(out), _numpy_dtype(d)).name)
    for s in scalars:
        out = _with_scalar(out, s)
    return out


def _with_scalar(dtype: DataType, scalar: Any) -> DataType:
    kind = dtype.kind
    if isinstance(scalar, complex) and not isinstance(scalar, (int, float)):
        if kind == "c":
            return dtype
        if kind == "f":
            return complex128 if dtype == float64 else complex64
        raise TypeError(f"a complex scalar does not combine with {dtype}")
    if isinstance(scalar, float) and kind not in "fc":
        raise TypeError(f"a float scalar does not combine with {dtype}")
    if isinstance(scalar, int) and not isinstance(scalar, type(True)) and kind == "b":
        raise TypeError(f"an int scalar does not combine with {dtype}")
    return dtype


def can_cast(from_: Any, to: Any, /) -> Any:
    """Whether the standard's promotion rules allow casting ``from_`` to ``to`` (a tensor or a dtype)."""
    import numpy as np

    a, b = dtype_of(from_), canonical(to)
    if a == b:
        return True
    if a.kind == "b" or b.kind == "b":
        return False
    if a.kind in "iu" and b.kind in "fc":
        return False  # the standard leaves mixed kinds out
    if a.kind in "fc" and b.kind in "iu":
        return False
    if a.kind == "c" and b.kind == "f":
        return False
    return np.can_cast(_numpy_dtype(a), _numpy_dtype(b), casting="safe")
