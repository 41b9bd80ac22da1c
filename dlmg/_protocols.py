"""How a distributed tensor meets NumPy's, JAX's and torch's own functions.

A :class:`~dlmg.DistributedTensor` is never turned into one regular array
behind the user's back, and a regular array is never scattered implicitly.
NumPy, JAX and torch each ask an unknown object through a protocol before they
fail with a message of their own; dlmg answers those protocols:

* ``np.sqrt(dt)``, ``np.sum(dt, axis=0)``, ``np.where(c, dt, 0)``: NumPy
  functions and ufuncs that dlmg has under the same (or the array API's) name,
  called with arguments dlmg accepts, run as dlmg's function;
* everything else -- a regular array of rank > 0 next to a distributed tensor
  (``np.ones((8, 4)) + dt``, ``torch.ones(8, 4) + dt``), ``jnp.asarray(dt)``,
  ``torch.sum(dt)`` -- raises ``TypeError`` saying what to call instead:
  ``dlmg.scatter(array, dt.layout)`` for the array, or ``dt.gather()`` for
  the tensor.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

__all__ = ["install", "regular_array_message"]

#: NumPy ufunc names whose array-API (and dlmg) name differs.
_UFUNC_NAMES = {
    "absolute": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctan2": "atan2",
    "arctanh": "atanh",
    "power": "pow",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "true_divide": "divide",
    "conjugate": "conj",
}


def _is_distributed(obj: Any) -> bool:
    from .tensor import DistributedTensor

    return isinstance(obj, DistributedTensor)


def _regular(obj: Any) -> bool:
    """A framework's array of rank > 0 (what must be scattered before it meets a tensor)."""
    if _is_distributed(obj) or isinstance(obj, (bool, int, float, complex)) or obj is None:
        return False
    return bool(getattr(obj, "ndim", 0)) and hasattr(obj, "shape")


def regular_array_message(array: Any, where: str) -> str:
    """The message for a regular array met next to a distributed tensor."""
    kind = type(array).__module__.partition(".")[0]
    return (
        f"{where}: a regular {kind} array of shape {tuple(array.shape)} cannot be combined with a "
        "DistributedTensor (dlmg scatters nothing implicitly). Scatter the array into the tensor's "
        "layout first, dlmg.scatter(array, dt.layout), or gather the tensor into one array, "
        "dt.gather(framework=...)"
    )


def _dlmg_function(name: str) -> Any:
    import dlmg

    fn = getattr(dlmg, name, None)
    if fn is None or not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
        return None
    return fn if getattr(fn, "__module__", "").startswith("dlmg") else None


def _accepts(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


def __array_ufunc__(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
    """NumPy ufuncs: dlmg's elementwise function of the same name, or a clear refusal."""
    call = f"numpy.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    for x in inputs:
        if _regular(x):
            raise TypeError(regular_array_message(x, call))
    name = _UFUNC_NAMES.get(ufunc.__name__, ufunc.__name__)
    fn = _dlmg_function(name)
    if method == "__call__" and not kwargs and fn is not None and _accepts(fn, inputs, {}):
        return fn(*inputs)
    hint = f"dlmg.{name}(...)" if fn is not None and method == "__call__" else "dlmg's own functions"
    raise TypeError(
        f"{call} with {', '.join(sorted(kwargs)) or 'these arguments'} does not run on a DistributedTensor; "
        f"use {hint} (fragment by fragment, no copy), or gather the tensor first: dt.gather(framework='numpy')"
    )


def __array_function__(self: Any, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """NumPy functions: dlmg's function of the same name where it takes these arguments."""
    call = f"numpy.{func.__name__}"
    for x in (*args, *kwargs.values()):
        if _regular(x):
            raise TypeError(regular_array_message(x, call))
    fn = _dlmg_function(func.__name__)
    if fn is not None and _accepts(fn, args, kwargs):
        return fn(*args, **kwargs)
    hint = (
        f"dlmg.{func.__name__} does not take ({_describe(args, kwargs)}): see help(dlmg.{func.__name__})"
        if fn is not None else f"dlmg has no {func.__name__}"
    )
    raise TypeError(
        f"{call} does not run on a DistributedTensor ({hint}); gather the tensor for one NumPy array: "
        "dt.gather(framework='numpy')"
    )


def _describe(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    parts = [type(a).__name__ for a in args] + [f"{k}=" for k in kwargs]
    return ", ".join(parts)


def __jax_array__(self: Any) -> Any:
    """JAX asks for one ``jax.Array``; a distributed tensor is not converted implicitly.

    JAX's operators (``jax_array + dt``) ask too, and return ``NotImplemented``
    when the answer is not an array: there the tensor answers itself, so that
    Python goes on to the tensor's reflected operator (which takes 0-d arrays
    and refuses larger ones with its own message).
    """
    if sys._getframe(1).f_code.co_name.startswith("_operator_"):
        return self
    raise TypeError(
        "a DistributedTensor is not turned into a jax.Array implicitly. For one array: "
        "dt.gather(framework='jax'); for a sharded jax.Array on the same buffers: dt.to_jax(); to combine "
        "a regular JAX array with the tensor, scatter the array: dlmg.scatter(array, dt.layout)"
    )


@classmethod  # type: ignore[misc]
def __torch_function__(cls: type, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
    """torch functions and tensor methods meeting a distributed tensor: refuse, naming the fix."""
    kwargs = kwargs or {}
    name = getattr(func, "__name__", str(func))
    for x in (*args, *kwargs.values()):
        if _regular(x):
            raise TypeError(regular_array_message(x, f"torch {name}"))
    own = _dlmg_function(name.strip("_"))
    hint = f"dlmg.{name.strip('_')}(dt)" if own is not None else "dlmg's own functions"
    raise TypeError(
        f"torch {name} does not take a DistributedTensor; use {hint}, or gather the tensor into one "
        "torch tensor: dt.gather(framework='torch'), or hand single fragments over: "
        "torch.from_dlpack(dt.fragments[i])"
    )


def install(cls: Any) -> None:
    """Attach the protocol methods to ``cls``."""
    cls.register_method("__array_ufunc__", __array_ufunc__)
    cls.register_method("__array_function__", __array_function__)
    cls.register_method("__jax_array__", __jax_array__)
    cls.register_method("__torch_function__", __torch_function__)
    cls.__array_priority__ = 1000  # type: ignore[attr-defined]
