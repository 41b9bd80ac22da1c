"""How a distributed tensor meets other frameworks' own functions.

A :class:`~dlmg.DistributedTensor` is never turned into one regular array
behind the user's back, and a regular array is never scattered implicitly.
Frameworks ask an unknown object through a protocol before they fail with a
message of their own (NumPy's ``__array_ufunc__`` and ``__array_function__``,
JAX's ``__jax_array__``, torch's ``__torch_function__``). The tensor carries
these methods itself (:class:`FrameworkProtocols`, a base of
:class:`~dlmg.DistributedTensor`); each looks up, when called, how the framework
asks (the :class:`~dlmg.adapters.ProtocolHook` its adapter declares in
``Traits.protocols``, found by :func:`dlmg.registry.protocol_hook`) and answers
with the policy built here (:func:`protocol_answer`), so that importing dlmg loads
no adapter module and the adapters state facts only. The answers:

* a function dlmg has under the same (or the array API's) name, called with
  arguments dlmg accepts, runs as dlmg's function (``np.sqrt(dt)``,
  ``np.sum(dt, axis=0)``);
* anything else raises ``TypeError`` saying what to call instead:
  ``dlmg.scatter(array, dt.layout)`` for a regular array next to a tensor, or
  ``dt.gather(framework=...)`` for the tensor;
* a framework asking for one array of its own (``__jax_array__``) gets an
  object that is no array (:class:`NotConverted`): its operators then go on to
  the tensor's reflected operator, its conversions refuse, saying what to call;
* a framework asking about every function and method (``__torch_function__``)
  is refused, naming dlmg's function of the same name where there is one.
"""

from __future__ import annotations

import inspect
from functools import lru_cache
from typing import Any, Callable

from ._hooks import Hook
from .adapters import ProtocolHook
from .registry import protocol_hook

__all__ = [
    "FrameworkProtocols",
    "regular_array_message",
    "is_regular_array",
    "dlmg_function",
    "accepts",
    "ufunc_hook",
    "function_hook",
    "conversion_refused",
    "function_refused",
    "dispatch_hook",
    "array_hook",
    "NotConverted",
    "protocol_answer",
]


class FrameworkProtocols:
    """The protocols of other frameworks a distributed tensor answers: each method
    calls dlmg's answer to the protocol as the framework's adapter declares it, found
    when it is first called (:func:`protocol_answer`)."""

    __slots__ = ()
    #: NumPy asks the operand of the highest priority to answer mixed operators first.
    __array_priority__ = 1000

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        """NEP 13: NumPy's ufuncs meeting the tensor (``np.sqrt(dt)``)."""
        return protocol_answer("__array_ufunc__")(self, ufunc, method, *inputs, **kwargs)

    def __array_function__(self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """NEP 18: NumPy's functions meeting the tensor (``np.sum(dt, axis=0)``)."""
        return protocol_answer("__array_function__")(self, func, types, args, kwargs)

    def __jax_array__(self) -> Any:
        """JAX asking for one ``jax.Array`` (``jnp.asarray(dt)``, ``jax_array + dt``)."""
        return protocol_answer("__jax_array__")(self)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        """torch's functions and tensor methods meeting the tensor (``torch.sum(dt)``)."""
        return protocol_answer("__torch_function__")(cls, func, types, args, kwargs)


#: The ``dlmg`` namespace, whose public functions the protocols run (see :func:`install`).
_public: Hook = Hook("dlmg's public functions", "dlmg")


def _is_distributed(obj: Any) -> bool:
    return isinstance(obj, FrameworkProtocols)


def is_regular_array(obj: Any) -> bool:
    """A framework's array of rank > 0 (what must be scattered before it meets a tensor)."""
    if _is_distributed(obj) or isinstance(obj, (bool, int, float, complex, type)) or obj is None:
        return False  # (a type such as np.float32 has shape and ndim descriptors)
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


def refuse_regular(where: str, values: Any) -> None:
    """Raise :func:`regular_array_message`'s ``TypeError`` for the first regular array in ``values``."""
    for x in values:
        if is_regular_array(x):
            raise TypeError(regular_array_message(x, where))


def dlmg_function(name: str) -> Any:
    """dlmg's public function ``name``, or None."""
    fn = getattr(_public.get(), name, None)
    if fn is None or not callable(fn) or inspect.isclass(fn) or inspect.ismodule(fn):
        return None
    return fn if getattr(fn, "__module__", "").startswith("dlmg") else None


def accepts(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn(*args, **kwargs)`` binds to ``fn``'s signature."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


#: NumPy's ufuncs whose ``out=`` the same tensor is an in-place operator of the tensor
_IN_PLACE = {
    "add": "+=", "subtract": "-=", "multiply": "*=", "true_divide": "/=", "divide": "/=", "floor_divide": "//=",
    "power": "**=", "remainder": "%=", "bitwise_and": "&=", "bitwise_or": "|=", "bitwise_xor": "^=",
    "left_shift": "<<=", "right_shift": ">>=", "matmul": "@=",
}

#: Functions of other namespaces whose dlmg counterpart has another name
_RENAMED = {
    "norm": "dlmg.array_api.linalg.vector_norm(x, axis=...) for vectors, "
            "dlmg.array_api.linalg.matrix_norm(x) for matrices",
    "concatenate": "dlmg.array_api.concat([...], axis=...)",
    "transpose": "dlmg.permute_dims(x, axes)",
}


def _out_hint(name: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What to call instead of a ufunc writing into ``out=`` (dlmg's functions take no ``out=``)."""
    out = kwargs.get("out")
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if set(kwargs) != {"out"} or not _is_distributed(target):
        return None
    op = _IN_PLACE.get(name)
    if op is not None and inputs and inputs[0] is target:
        return (f"the tensor's in-place operator, x {op} y (fragment by fragment, into x's memory), or "
                f"x = dlmg.{name}(x, y)")
    return f"result = dlmg.{name}(...) (dlmg's functions return a new tensor and take no out=)"


def _renamed_hint(func: Any) -> str | None:
    """dlmg's function for a function of another namespace that it names otherwise."""
    name = func.__name__
    if name in _RENAMED:
        return _RENAMED[name]
    module = getattr(func, "__module__", "") or ""
    for sub in ("linalg", "fft"):
        if sub in module.split(".") or module.endswith(sub):
            if hasattr(getattr(_public.get().array_api, sub), name):
                return f"dlmg.array_api.{sub}.{name}(...)"
    return None


def ufunc_hook(framework: str) -> Callable[..., Any]:
    """An ``__array_ufunc__`` (NEP 13): dlmg's elementwise function of the same name, or a refusal.

    dlmg exports NumPy's names (``absolute``, ``power``, ...) beside the array API's.
    """

    def __array_ufunc__(self: Any, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        call = f"{framework}.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        refuse_regular(call, inputs)
        name = ufunc.__name__
        fn = dlmg_function(name)
        if method == "__call__" and not kwargs and fn is not None and accepts(fn, inputs, {}):
            return fn(*inputs)
        hint = f"dlmg.{name}(...)" if fn is not None and method == "__call__" else "dlmg's own functions"
        better = _out_hint(name, inputs, kwargs) if fn is not None and method == "__call__" else None
        if better is not None:
            hint = better
        raise TypeError(
            f"{call} with {', '.join(sorted(kwargs)) or 'these arguments'} does not run on a "
            f"DistributedTensor; use {hint} (fragment by fragment, no copy), or gather the tensor "
            f"first: dt.gather(framework={framework!r})"
        )

    return __array_ufunc__


def function_hook(framework: str) -> Callable[..., Any]:
    """An ``__array_function__`` (NEP 18): dlmg's function of the same name where it takes the arguments."""

    def __array_function__(self: Any, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        call = f"{framework}.{func.__name__}"
        refuse_regular(call, (*args, *kwargs.values()))
        fn = dlmg_function(func.__name__)
        if fn is not None and accepts(fn, args, kwargs):
            return fn(*args, **kwargs)
        if fn is not None:
            given = ", ".join([type(a).__name__ for a in args] + [f"{k}=" for k in kwargs])
            hint = f"dlmg.{func.__name__} does not take ({given}): see help(dlmg.{func.__name__})"
        else:
            renamed = _renamed_hint(func)
            hint = f"use {renamed}" if renamed else f"dlmg has no {func.__name__}"
        raise TypeError(
            f"{call} does not run on a DistributedTensor ({hint}); gather the tensor for one array: "
            f"dt.gather(framework={framework!r})"
        )

    return __array_function__


def conversion_refused(framework: str, extra: str = "") -> TypeError:
    """The error for a framework asking to turn a distributed tensor into one of its arrays."""
    return TypeError(
        f"a DistributedTensor is not turned into a {framework} array implicitly. For one array: "
        f"dt.gather(framework={framework!r}){extra}; to combine a regular {framework} array with the "
        "tensor, scatter the array: dlmg.scatter(array, dt.layout)"
    )


def function_refused(framework: str, name: str, args: Any) -> TypeError:
    """The error for a framework function handed a distributed tensor."""
    for x in args:
        if is_regular_array(x):
            return TypeError(regular_array_message(x, f"{framework} {name}"))
    own = dlmg_function(name.strip("_"))
    hint = f"dlmg.{name.strip('_')}(dt)" if own is not None else "dlmg's own functions"
    return TypeError(
        f"{framework} {name} does not take a DistributedTensor; use {hint}, or gather the tensor into "
        f"one array: dt.gather(framework={framework!r}), or hand single fragments over through DLPack "
        "(dt.fragments[i])"
    )


def dispatch_hook(framework: str) -> Callable[..., Any]:
    """A class-level dispatch protocol (``__torch_function__``): every function and method
    of the framework refuses a distributed tensor, naming dlmg's function and the gather."""

    def dispatch(cls: type, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
        raise function_refused(framework, getattr(func, "__name__", str(func)), (*args, *(kwargs or {}).values()))

    return dispatch


class NotConverted:
    """What a distributed tensor gives a framework asking for one array of its own
    (``__jax_array__``): no array.

    The framework's operators (``jax_array + dt``) take an answer that is no array as
    ``NotImplemented``, so that Python goes on to the tensor's reflected operator
    (which takes 0-d arrays and refuses larger ones, saying to scatter them). Its
    conversions (``jnp.asarray(dt)``) turn the answer into an array through
    ``__array__``, which refuses here, saying what to call. Both through the
    framework's public protocols: nothing asks who called.
    """

    __slots__ = ("framework", "hint")

    def __init__(self, framework: str, hint: str = "") -> None:
        self.framework = framework
        self.hint = hint

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise conversion_refused(self.framework, self.hint)

    def __repr__(self) -> str:
        return (f"<a DistributedTensor, not converted to a {self.framework} array: "
                f"dt.gather(framework={self.framework!r}){self.hint}>")


def array_hook(framework: str, hint: str = "") -> Callable[..., Any]:
    """A protocol asking for one array of the framework: answered with a :class:`NotConverted`."""
    answer = NotConverted(framework, hint)

    def to_array(self: Any) -> Any:
        return answer

    return to_array


def _answer(framework: str, hook: ProtocolHook) -> Callable[..., Any]:
    """dlmg's answer to ``hook`` of ``framework``, by how the framework asks."""
    if hook.asks == "ufunc":
        return ufunc_hook(framework)
    if hook.asks == "function":
        return function_hook(framework)
    if hook.asks == "dispatch":
        return dispatch_hook(framework)
    if hook.asks == "array":
        return array_hook(framework, hook.hint)
    raise TypeError(f"the {framework} adapter declares {hook.name} asking {hook.asks!r}, which dlmg does not answer")


# The answer per (framework, declaration), both values: a protocol call does not build
# its answer again, and an adapter registered with another declaration is another key.
@lru_cache(maxsize=16)
def _built(framework: str, hook: ProtocolHook) -> Callable[..., Any]:
    return _answer(framework, hook)


def protocol_answer(name: str) -> Callable[..., Any]:
    """dlmg's answer to protocol ``name`` (``"__array_function__"``...): built from the
    declaration of the framework that asks (:func:`dlmg.registry.protocol_hook`). A
    function taking the tensor first (its class for ``"dispatch"`` protocols).

    Raises
    ------
    FrameworkError
        For a protocol no adapter declares.
    """
    return _built(*protocol_hook(name))


def install(public: Any) -> None:
    """Provide ``public``, the ``dlmg`` namespace, whose functions the protocols run."""
    _public.provide(public)
