"""The standard's functions that run on one collected fragment (see :mod:`._collect`).

:func:`collected` makes one namespace function from the name of the
framework's function (through array-api-compat): distributed operands --
positional, keyword, or inside a list such as ``concat``'s -- are collected
onto the first one's first device, the framework's function runs there, and
every array in its result (a tuple, a named tuple) is laid out again by the
default layout policy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops._operands import is_distributed
from ._collect import Collected, collect, settle

__all__ = ["collected", "settle_result", "COLLECTED"]


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


def collected(name: str, framework_name: str | None = None, doc: str = "") -> Callable[..., Any]:
    """A namespace function running the framework's ``framework_name`` on collected operands."""
    target = framework_name or name

    def function(*args: Any, **kwargs: Any) -> Any:
        tensors = _flatten(args, kwargs)
        if not tensors:
            raise TypeError(f"dlmg.array_api.{name} needs at least one distributed tensor")
        got = collect(name, *tensors)
        by = {id(t): a for t, a in zip(tensors, got.arrays)}
        call_args = tuple(_replace(a, by) for a in args)
        call_kwargs = {k: _replace(v, by) for k, v in kwargs.items()}

        def run(xp: Any) -> Any:
            fn = xp
            for part in target.split("."):
                fn = getattr(fn, part)
            return fn(*call_args, **call_kwargs)

        return settle_result(got.executor.run(run), got)

    function.__name__ = function.__qualname__ = name
    function.__doc__ = (doc or f"The standard's ``{name}``") + (
        ", computed by the framework of the first operand's first fragment on its device after collecting "
        "every operand there (see docs/array-api.md), and laid out again by the default layout policy."
    )
    return function


#: the namespace's functions that run on one collected fragment, by module
COLLECTED: dict[str, tuple[str, ...]] = {
    "": (
        "concat", "stack", "unstack", "roll", "flip", "repeat", "tile", "squeeze", "expand_dims", "moveaxis",
        "broadcast_arrays", "take", "take_along_axis", "nonzero", "searchsorted", "unique_all",
        "unique_counts", "unique_inverse", "unique_values", "diff", "cumulative_sum", "cumulative_prod",
        "tensordot", "vecdot", "sort", "argsort",
    ),
    "linalg": (
        "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matrix_norm", "matrix_power",
        "matrix_rank", "outer", "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "trace", "vector_norm",
        "tensordot", "vecdot", "matmul", "matrix_transpose",
    ),
    "fft": (
        "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft", "fftshift",
        "ifftshift",
    ),
}
