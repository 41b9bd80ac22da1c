"""Element-type rules of dlmg's operations, checked once per operation.

Frameworks disagree on what some operations accept (torch has no ``argmax``
of bools, NumPy no bitwise ``and`` of floats...), and fail deep inside with
messages that do not name the tensor. dlmg checks the dlmg dtype names of the
operands before any fragment is touched and raises
:class:`~dlmg.errors.DtypeError` saying what is allowed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ..adapters import holds_dtype
from ..dtypes import NAMES, info
from ..errors import DtypeError
from ..registry import get_adapter

__all__ = [
    "BOOL",
    "INT",
    "REAL",
    "NUMERIC",
    "FLOAT",
    "INEXACT",
    "kind_of",
    "require",
    "check_inplace",
    "sum_dtype",
    "float_dtype",
    "index_dtype",
    "narrow_for",
]

#: dtype kinds, as NumPy's ``dtype.kind``: bool, signed, unsigned, float, complex.
BOOL = frozenset("b")
INT = frozenset("biu")  # bool counts as an integer for bitwise work
REAL = frozenset("biuf")
NUMERIC = frozenset("biufc")
FLOAT = frozenset("f")
INEXACT = frozenset("fc")

_KIND_WORDS = {"b": "bool", "i": "signed integer", "u": "unsigned integer", "f": "real floating", "c": "complex"}
_NARROW = {"int64": "int32", "uint64": "uint32", "float64": "float32", "complex128": "complex64"}


#: The kind of every dlmg dtype name, found by the plain string: a dlmg dtype (a ``str``
#: subclass) compares through Python in the dtype tables, and operators ask this of
#: their operands on every call: the plain string is found faster than through :func:`info`.
_KINDS: Mapping[str, str] = MappingProxyType({name: info(name).kind for name in NAMES})


def kind_of(dtype: str) -> str:
    """``"b"``, ``"i"``, ``"u"``, ``"f"`` or ``"c"`` for a dlmg dtype name."""
    try:
        return _KINDS[str(dtype)]
    except KeyError:  # another spelling of a type (np.float32): the full lookup
        return info(dtype).kind


def _scalar_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "b"
    if isinstance(value, int):
        return "i"
    if isinstance(value, float):
        return "f"
    return "c"


def require(name: str, dtypes: Iterable[Any], kinds: frozenset[str], hint: str = "") -> None:
    """Raise :class:`DtypeError` unless every operand's kind is in ``kinds``.

    Parameters
    ----------
    name : str
        The operation, for the message.
    dtypes : iterable
        dlmg dtype names of the array operands, or Python scalars.
    kinds : frozenset of str
        The allowed kinds.
    hint : str
        Appended to the message (``"cast with astype first"``).
    """
    for dtype in dtypes:
        if isinstance(dtype, str):
            kind = kind_of(dtype)
            what = dtype
        else:
            kind = _scalar_kind(dtype)
            what = f"Python {type(dtype).__name__} {dtype!r}"
        if kind not in kinds:
            allowed = ", ".join(_KIND_WORDS[k] for k in "biufc" if k in kinds)
            raise DtypeError(
                f"{name} is not defined for {what} operands (allowed: {allowed})" + (f"; {hint}" if hint else "")
            )


def check_inplace(name: str, target: str, operands: Iterable[Any]) -> None:
    """Raise :class:`DtypeError` when an in-place result cannot keep ``target``'s dtype.

    The rule is NumPy's: the result type of the operation must cast to the
    target's dtype within its kind (``same_kind``), so ``int32 += float`` and
    ``int32 /= 2`` are refused and ``float32 += float64`` is allowed. Types
    NumPy does not know (bfloat16, float8) are not checked here.
    """
    try:
        import numpy as np

        parts: list[Any] = [np.dtype(target)]
        for op in operands:
            parts.append(np.dtype(op) if isinstance(op, str) else op)
        if name in ("truediv", "/="):
            parts.append(1.0)
        result = np.result_type(*parts)
        ok = np.can_cast(result, np.dtype(target), "same_kind")
    except TypeError:
        return
    if not ok:
        raise DtypeError(
            f"in-place {name} would produce {result} values, which cannot be stored in the {target} "
            f"tensor without changing their kind; use the out-of-place form or astype() first"
        )


def sum_dtype(dtype: str) -> str:
    """The accumulation dtype of ``sum``/``prod`` (NumPy's): bool and signed
    integers sum in int64, unsigned ones in uint64, others in their own type."""
    kind = kind_of(dtype)
    if kind in "bi":
        return "int64"
    if kind == "u":
        return "uint64"
    return dtype


def float_dtype(dtype: str) -> str:
    """The dtype ``mean`` computes in: floating types keep theirs, others use float64."""
    return dtype if kind_of(dtype) in INEXACT else "float64"


def index_dtype() -> str:
    """The dtype of indices (``argmax``)."""
    return "int64"


def narrow_for(dtype: str, frameworks: Iterable[str]) -> str:
    """``dtype``, or its 32-bit counterpart when a framework taking part cannot
    hold it now (JAX without ``jax_enable_x64``; see
    :func:`~dlmg.adapters.holds_dtype`).

    Accumulating in 32 bits there is what such a framework itself does.
    """
    if dtype not in _NARROW:
        return dtype
    if all(holds_dtype(get_adapter(name), dtype) for name in set(frameworks)):
        return dtype
    return _NARROW[dtype]
