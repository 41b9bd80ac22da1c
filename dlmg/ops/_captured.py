"""What a function reads besides its arguments, as a compiler would bake it in.

A tracing compiler (``jax.jit``) reads the values of a function's closure cells
and of the globals it names once, when it traces, and keeps them as constants;
NumPy and torch, running the function eagerly, read them at every call. So
that every fragment of a fused result sees the same values, :func:`dlmg.fuse`
compares these values before each call and traces again when one changed; a
value it cannot compare (an array, whose contents may change in place) makes
the function run eagerly everywhere. Other objects are not compared.
"""

from __future__ import annotations

import types
from typing import Any, Callable

__all__ = ["captured", "UNCOMPARABLE"]

#: :func:`captured`'s answer for a function reading a value that cannot be compared.
UNCOMPARABLE = object()

_SCALARS = (bool, int, float, complex, str, bytes, type(None))
_FIXED = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type, types.MethodType)
_ARRAY_PROTOCOLS = ("__dlpack__", "__array__", "__array_interface__", "__cuda_array_interface__")


def captured(fn: Callable[..., Any]) -> Any:
    """The scalars ``fn`` reads from its closure and the globals it names, as a tuple,
    or :data:`UNCOMPARABLE` when it reads an array. Other objects (modules,
    functions, lists used for side effects...) are left out: a compiler does not
    bake them into the traced arithmetic."""
    code = getattr(fn, "__code__", None)
    if code is None:  # a builtin or a callable object: nothing dlmg can read
        return ()
    values: list[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:  # a cell not yet filled
            values.append(None)
    names = getattr(fn, "__globals__", {})
    values += [names[n] for n in code.co_names if n in names]
    out = []
    for value in values:
        if isinstance(value, _SCALARS):
            out.append((type(value), value))
        elif not isinstance(value, _FIXED) and any(hasattr(value, a) for a in _ARRAY_PROTOCOLS):
            return UNCOMPARABLE
    return tuple(out)
