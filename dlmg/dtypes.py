"""Element types: NumPy-style names and their DLPack codes.

dlmg names every element type by the string NumPy and ml_dtypes use
(``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"``). :func:`canonical` turns
a NumPy dtype, a ``torch.dtype``, a JAX or CuPy dtype or a string into that
name without importing any framework.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import DtypeError

__all__ = [
    "DataType",
    "DType",
    "DLPACK_CODES",
    "canonical",
    "info",
    "from_dlpack_code",
    "NAMES",
]

#: DLPack ``DLDataTypeCode`` values.
DLPACK_CODES: dict[str, int] = {
    "int": 0,
    "uint": 1,
    "float": 2,
    "opaque_handle": 3,
    "bfloat": 4,
    "complex": 5,
    "bool": 6,
    "float8_e3m4": 7,
    "float8_e4m3": 8,
    "float8_e4m3b11fnuz": 9,
    "float8_e4m3fn": 10,
    "float8_e4m3fnuz": 11,
    "float8_e5m2": 12,
    "float8_e5m2fnuz": 13,
    "float8_e8m0fnu": 14,
    "float6_e2m3fn": 15,
    "float6_e3m2fn": 16,
    "float4_e2m1fn": 17,
}


@dataclass(frozen=True)
class DType:
    """An element type: its name and DLPack ``(code, bits, lanes)``."""

    name: str
    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes per element (sub-byte types occupy whole bytes)."""
        return max(1, (self.bits * self.lanes + 7) // 8)

    @property
    def kind(self) -> str:
        """``"b"``, ``"i"``, ``"u"``, ``"f"`` or ``"c"``, as NumPy's ``dtype.kind``."""
        return {0: "i", 1: "u", 5: "c", 6: "b"}.get(self.code, "f")

    @property
    def dlpack(self) -> tuple[int, int, int]:
        """The DLPack ``(code, bits, lanes)`` triple."""
        return (self.code, self.bits, self.lanes)


def _table() -> dict[str, DType]:
    entries = [DType("bool", 6, 8)]
    entries += [DType(f"int{b}", 0, b) for b in (8, 16, 32, 64)]
    entries += [DType(f"uint{b}", 1, b) for b in (8, 16, 32, 64)]
    entries += [DType(f"float{b}", 2, b) for b in (16, 32, 64)]
    entries += [DType("bfloat16", 4, 16)]
    entries += [DType(f"complex{b}", 5, b) for b in (64, 128)]
    for name, code in DLPACK_CODES.items():
        if name.startswith("float8"):
            entries.append(DType(name, code, 8))
        elif name.startswith("float6"):
            entries.append(DType(name, code, 6))
        elif name.startswith("float4"):
            entries.append(DType(name, code, 4))
            entries.append(DType(name + "_x2", code, 4, 2))
    return {d.name: d for d in entries}


class DataType(str):
    """An element type as the array API sees it: ``dlmg.float32``, ``dt.dtype``...

    A ``str`` holding the dlmg name (so ``dt.dtype == "float32"`` and
    ``getattr(np, dt.dtype)`` keep working) that also compares equal to every
    framework's spelling of the same type: ``dlmg.float32 == np.float32``,
    ``== np.dtype("f4")``, ``== torch.float32``, ``== jnp.float32``.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return str.__eq__(self, _ALIASES.get(other, other))
        try:
            return str.__eq__(self, _canonical_uncached(other))
        except DtypeError:
            return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (canonical, (str(self),))

    @property
    def name(self) -> str:
        """The plain name (``"float32"``)."""
        return str(self)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return _BY_NAME[self].itemsize

    @property
    def kind(self) -> str:
        """``"b"``, ``"i"``, ``"u"``, ``"f"`` or ``"c"``, as NumPy's ``dtype.kind``."""
        return _BY_NAME[self].kind


_BY_NAME: dict[str, DType] = _table()
#: The one :class:`DataType` object of every name (what :func:`canonical` returns).
_OBJECTS: dict[str, DataType] = {name: DataType(name) for name in _BY_NAME}
_BY_CODE: dict[tuple[int, int, int], DType] = {d.dlpack: d for d in _BY_NAME.values()}
#: Every element type name dlmg knows.
NAMES: tuple[str, ...] = tuple(_BY_NAME)
# torch's spellings; "float", "int" and "complex" are left out on purpose:
# torch.float is float32 where NumPy's "float" is float64.
_ALIASES = {
    "bool_": "bool",
    "half": "float16",
    "double": "float64",
    "cfloat": "complex64",
    "cdouble": "complex128",
    "long": "int64",
    "short": "int16",
}
# Cache: canonical() runs on every fragment of every operation: remember its answers
# per (type, value) so that objects of different types that compare equal
# (np.dtype("f8") == "float") never share an entry; a dict, not lru_cache, because
# unhashable dtype objects must fall through. It saves working the name out on every
# call, far slower than the look-up (figure in docs/performance-history.md). At most
# 1024 entries.
_CANONICAL_CACHE: dict[tuple[type, Any], DataType] = {}


def canonical(dtype: Any) -> DataType:
    """The dlmg name of an element type given in any common form.

    Parameters
    ----------
    dtype : str, numpy.dtype, torch.dtype, type or DType
        ``"float32"``, ``np.float32``, ``np.dtype("f4")``, ``torch.float32``,
        ``jnp.bfloat16``, a :class:`DType`...

    Returns
    -------
    DataType
        The NumPy-style name, such as ``"float32"`` or ``"bfloat16"`` (a
        ``str`` that also compares equal to the frameworks' dtype objects).

    Raises
    ------
    DtypeError
        When the type is not one dlmg knows.
    """
    try:
        return _CANONICAL_CACHE[(type(dtype), dtype)]  # type: ignore[return-value]
    except (KeyError, TypeError):  # TypeError: an unhashable object
        pass
    name = _OBJECTS[_canonical_uncached(dtype)]
    if len(_CANONICAL_CACHE) < 1024:
        try:
            _CANONICAL_CACHE[(type(dtype), dtype)] = name
        except TypeError:
            pass
    return name


def _canonical_uncached(dtype: Any) -> str:
    if isinstance(dtype, DType):
        return dtype.name
    if isinstance(dtype, str):  # also a DataType
        text = dtype
    else:
        # numpy dtypes and scalar types (also JAX's and CuPy's, which are NumPy's)
        name = getattr(dtype, "name", None)
        if not isinstance(name, str):
            name = getattr(dtype, "__name__", None)
        if not isinstance(name, str):
            # dtype objects that print as a dotted name of their module (torch.float32)
            module = type(dtype).__module__.partition(".")[0]
            prefix, dot, rest = str(dtype).rpartition(".")
            if not (dot and prefix == module):
                raise DtypeError(f"dtype {dtype!r} of type {type(dtype).__name__} is not an element type")
            name = rest
        text = name
    text = _ALIASES.get(text, text)
    if text not in _BY_NAME:
        raise DtypeError(f"dtype {dtype!r} is not an element type dlmg knows; known: {', '.join(NAMES)}")
    return text


def info(dtype: Any) -> DType:
    """The :class:`DType` record (DLPack code, bits, lanes, itemsize) of ``dtype``."""
    return _BY_NAME[canonical(dtype)]


def from_dlpack_code(code: int, bits: int, lanes: int) -> DType:
    """The :class:`DType` of a DLPack ``(code, bits, lanes)`` triple.

    Raises
    ------
    DtypeError
        For a triple no element type has.
    """
    found = _BY_CODE.get((int(code), int(bits), int(lanes)))
    if found is None:
        raise DtypeError(f"DLPack dtype (code={code}, bits={bits}, lanes={lanes}) is not supported")
    return found
