"""The standard's functions that run on one collected fragment (see :mod:`._collect`).

:func:`collected` makes one namespace function from the name of the
framework's function (through array-api-compat): distributed operands --
positional, keyword, or inside a list such as ``concat``'s -- are collected
onto the first one's first device, the framework's function runs there, and
every array in its result (a tuple, a named tuple) is laid out again by the
default layout policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..ops._operands import is_distributed
from ._collect import Collected, collect, settle
from ._creation import default_int

__all__ = ["collected", "CollectedFunction", "settle_result"]


def _flatten(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    found = []
    for a in (*args, *kwargs.values()):
        if is_distributed(a):
            found.append(a)
        elif isinstance(a, (list, tuple)):
            found.extend(x for x in a if is_distributed(x))
    return found


def _replace(value: Any, by: dict[int, Any]) -> Any:
    if is_distributed(value):
        return by[id(value)]
    if isinstance(value, (list, tuple)) and any(is_distributed(v) for v in value):
        return type(value)(by[id(v)] if is_distributed(v) else v for v in value)
    return value


def settle_result(result: Any, got: Collected) -> Any:
    """Every array in ``result`` laid out again (tuples and named tuples keep their type)."""
    if isinstance(result, tuple) and hasattr(result, "_fields"):
        return type(result)(*(settle(r, got) for r in result))
    if isinstance(result, (tuple, list)):
        return type(result)(settle(r, got) for r in result)
    return settle(result, got)


class CollectedFunction:
    """A namespace function running the framework's function of the same name on collected
    operands (see the module). Its signature is the standard's, as array-api-compat spells it."""

    def __init__(self, name: str, framework_name: str | None = None) -> None:
        self.__name__ = self.__qualname__ = name
        self._target = framework_name or name
        self.__doc__ = (
            f"The standard's ``{self._target}``, computed by the framework of the first operand's first "
            "fragment on its device after collecting every operand there (see docs/array-api.md), and "
            "laid out again by the default layout policy."
        )

    @property
    def __signature__(self) -> inspect.Signature:
        """The signature of array-api-compat's NumPy function of this name (NumPy imported on demand)."""
        return _signature(self._target)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        tensors = _flatten(args, kwargs)
        if not tensors:
            raise TypeError(f"dlmg.array_api.{self._target} needs at least one distributed tensor")
        got = collect(self.__name__, *tensors)
        # this call's operands by identity (tensors compare elementwise, so they cannot be
        # keys): the caller's arguments keep them alive until the call returns, so no other
        # object can take one of their ids while ``by`` exists
        by = {id(t): a for t, a in zip(tensors, got.arrays)}
        call_args = tuple(_replace(a, by) for a in args)
        call_kwargs = {k: _replace(v, by) for k, v in kwargs.items()}
        target = self._target

        def run(xp: Any) -> Any:
            fn = xp
            for part in target.split("."):
                fn = getattr(fn, part)
            return fn(*call_args, **call_kwargs)

        result = got.executor.run(run)
        if self._target in INDEX_RESULTS:
            result = _as_default_index(result, got)
        return settle_result(result, got)

    def __repr__(self) -> str:
        return f"<dlmg.array_api function {self._target}>"


#: functions whose result holds indices, in the default index dtype by the standard
#: (JAX's searchsorted gives int32 even with 64-bit types on)
INDEX_RESULTS = frozenset({"searchsorted", "argsort"})


def _as_default_index(result: Any, got: Collected) -> Any:
    """``result`` (an integer array) in the namespace's default index dtype."""
    ex = got.executor
    wanted = ex.dtype(default_int(ex.framework))
    return result if result.dtype == wanted else ex.xp.astype(result, wanted)


# one entry per function of the namespace (about 60)
@lru_cache(maxsize=128)
def _signature(target: str) -> inspect.Signature:
    import array_api_compat.numpy as compat

    fn: Any = compat
    for part in target.split("."):
        fn = getattr(fn, part)
    return inspect.signature(fn)


def collected(name: str, framework_name: str | None = None) -> Callable[..., Any]:
    """A :class:`CollectedFunction` for the framework's ``framework_name`` (``name`` by default)."""
    return CollectedFunction(name, framework_name)

