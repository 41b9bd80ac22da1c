"""``__array_namespace_info__``: what the namespace supports, and its defaults."""

from __future__ import annotations

from typing import Any

from ..device import Device
from ._data_types import canonical, complex64, complex128, float32, isdtype
from ._creation import default_float, default_int
from ._policy import get_default_layout

__all__ = ["__array_namespace_info__", "Info"]


class Info:
    """The standard's inspection object (``xp.__array_namespace_info__()``)."""

    def capabilities(self) -> dict[str, Any]:
        """Boolean indexing and data-dependent shapes are supported (by collecting; see the docs)."""
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}

    def default_device(self) -> Device:
        """The first device of the default layout policy."""
        return get_default_layout().devices[0]

    def devices(self) -> list[Device]:
        """The default layout policy's devices."""
        return list(get_default_layout().devices)

    def default_dtypes(self, *, device: Any = None) -> dict[str, Any]:
        """float64, complex128, int64 and int64 indices (32-bit with JAX fragments without x64)."""
        real = canonical(default_float())
        return {
            "real floating": real,
            "complex floating": complex64 if real == float32 else complex128,
            "integral": canonical(default_int()),
            "indexing": canonical(default_int()),
        }

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, Any]:
        """The standard's dtypes, by name (of ``kind`` when given)."""
        names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float32", "float64", "complex64", "complex128"]
        out = {n: canonical(n) for n in names}
        if kind is None:
            return out
        return {n: d for n, d in out.items() if isdtype(d, kind)}


def __array_namespace_info__() -> Info:
    """The namespace's inspection object."""
    return Info()
