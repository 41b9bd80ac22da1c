"""The tensor's methods that parts above it run: declared here, provided there.

:class:`~dlmg.DistributedTensor` names these mixins, so its whole surface is
visible from the class (``help()``, ``dir()``, editors, the API reference).
Each method hands the call to the part that implements it, which lies above the
tensor and provides its functions when ``import dlmg`` imports it
(:func:`provide_methods`):

* :class:`Operators`, :class:`ElementMethods`, :class:`ReductionMethods`,
  :class:`ShapeMethods` -- :mod:`dlmg.ops`;
* :class:`ConversionMethods` -- :mod:`dlmg.interop`;
* :class:`PrintingMethods` -- :mod:`dlmg._printing`.

A framework's protocol methods (``__torch_function__``, ``__jax_array__``...)
are declared the same way in :class:`dlmg._protocols.FrameworkProtocols`;
the adapters provide their answers (``Adapter.tensor_protocols``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from ._hooks import Hook

__all__ = [
    "operations", "conversions", "printing", "provide_methods", "delegate", "MIXINS",
    "Operators", "ElementMethods", "ReductionMethods", "ShapeMethods", "ConversionMethods", "PrintingMethods",
    "ArrayApiMethods", "array_api",
]

#: name -> function of the tensor (properties: their getter), provided by :mod:`dlmg.ops`.
operations: Hook[Mapping[str, Callable[..., Any]]] = Hook("the tensor's operators and methods", "dlmg.ops")
#: The conversions to other distributed arrays, provided by :mod:`dlmg.interop`.
conversions: Hook[Mapping[str, Callable[..., Any]]] = Hook("the tensor's conversions", "dlmg.interop")
#: The array object's side of the Array API standard and NumPy's conversions, provided by
#: :mod:`dlmg.array_api`.
array_api: Hook[Mapping[str, Callable[..., Any]]] = Hook("the tensor's array API methods", "dlmg.array_api")
#: ``__repr__`` and ``__str__``, provided by :mod:`dlmg._printing`.
printing: Hook[Mapping[str, Callable[..., Any]]] = Hook("the tensor's repr and str", "dlmg._printing")

def delegate(hook: Hook, name: str) -> Any:
    """A method handing its call to function ``name`` of ``hook``'s answer."""
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return hook.get()[name](self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.hook = hook  # type: ignore[attr-defined]  # see provide_methods
    return method


def _property(hook: Hook, name: str) -> Any:
    def get(self: Any) -> Any:
        return hook.get()[name](self)

    get.__name__ = get.__qualname__ = name
    get.hook = hook  # type: ignore[attr-defined]  # see provide_methods
    return property(get)


def provide_methods(hook: Hook, functions: Mapping[str, Callable[..., Any]]) -> None:
    """Provide the functions behind ``hook``'s methods (name -> function taking the
    tensor first; a property's getter), and give the methods their docstrings.

    Raises
    ------
    AttributeError
        When a method declared here has no function, or a function no method.
    """
    declared = {}
    for cls in MIXINS:
        for name, attr in vars(cls).items():
            fn = attr.fget if isinstance(attr, property) else attr
            if getattr(fn, "hook", None) is hook:
                declared[name] = fn
    if set(declared) != set(functions):
        raise AttributeError(
            f"{hook.question}: declared {sorted(set(declared) - set(functions))} without a function, "
            f"functions {sorted(set(functions) - set(declared))} without a declaration"
        )
    for name, fn in functions.items():
        declared[name].__doc__ = getattr(fn, "__doc__", None)
        try:  # the function's parameters, for inspect.signature and editors (the array API checks them)
            setattr(declared[name], "__signature__", inspect.signature(fn))
        except (TypeError, ValueError):  # a callable without a signature keeps (*args, **kwargs)
            pass
    hook.provide(dict(functions))


class Operators:
    """Python's operators: elementwise (:mod:`dlmg.ops.pointwise`) and ``round()``."""

    __slots__ = ()
    __hash__ = object.__hash__  # defining __eq__ would otherwise make tensors unhashable
    __add__ = delegate(operations, '__add__')
    __radd__ = delegate(operations, '__radd__')
    __iadd__ = delegate(operations, '__iadd__')
    __sub__ = delegate(operations, '__sub__')
    __rsub__ = delegate(operations, '__rsub__')
    __isub__ = delegate(operations, '__isub__')
    __mul__ = delegate(operations, '__mul__')
    __rmul__ = delegate(operations, '__rmul__')
    __imul__ = delegate(operations, '__imul__')
    __truediv__ = delegate(operations, '__truediv__')
    __rtruediv__ = delegate(operations, '__rtruediv__')
    __itruediv__ = delegate(operations, '__itruediv__')
    __floordiv__ = delegate(operations, '__floordiv__')
    __rfloordiv__ = delegate(operations, '__rfloordiv__')
    __ifloordiv__ = delegate(operations, '__ifloordiv__')
    __mod__ = delegate(operations, '__mod__')
    __rmod__ = delegate(operations, '__rmod__')
    __imod__ = delegate(operations, '__imod__')
    __pow__ = delegate(operations, '__pow__')
    __rpow__ = delegate(operations, '__rpow__')
    __ipow__ = delegate(operations, '__ipow__')
    __and__ = delegate(operations, '__and__')
    __rand__ = delegate(operations, '__rand__')
    __iand__ = delegate(operations, '__iand__')
    __or__ = delegate(operations, '__or__')
    __ror__ = delegate(operations, '__ror__')
    __ior__ = delegate(operations, '__ior__')
    __xor__ = delegate(operations, '__xor__')
    __rxor__ = delegate(operations, '__rxor__')
    __ixor__ = delegate(operations, '__ixor__')
    __lshift__ = delegate(operations, '__lshift__')
    __rlshift__ = delegate(operations, '__rlshift__')
    __ilshift__ = delegate(operations, '__ilshift__')
    __rshift__ = delegate(operations, '__rshift__')
    __rrshift__ = delegate(operations, '__rrshift__')
    __irshift__ = delegate(operations, '__irshift__')
    __eq__ = delegate(operations, '__eq__')
    __ne__ = delegate(operations, '__ne__')
    __lt__ = delegate(operations, '__lt__')
    __le__ = delegate(operations, '__le__')
    __gt__ = delegate(operations, '__gt__')
    __ge__ = delegate(operations, '__ge__')
    __neg__ = delegate(operations, '__neg__')
    __pos__ = delegate(operations, '__pos__')
    __abs__ = delegate(operations, '__abs__')
    __invert__ = delegate(operations, '__invert__')
    __bool__ = delegate(operations, '__bool__')
    __round__ = delegate(operations, '__round__')


class ElementMethods:
    """Element types, complex parts, placement and waiting (:mod:`dlmg.ops`)."""

    __slots__ = ()
    astype = delegate(operations, 'astype')
    conj = delegate(operations, 'conj')
    real = _property(operations, 'real')
    imag = _property(operations, 'imag')
    device = _property(operations, 'device')
    synchronize = delegate(operations, 'synchronize')


class ReductionMethods:
    """Reductions and statistics (:mod:`dlmg.ops.reductions`, :mod:`dlmg.ops.statistics`)."""

    __slots__ = ()
    sum = delegate(operations, 'sum')
    prod = delegate(operations, 'prod')
    min = delegate(operations, 'min')
    max = delegate(operations, 'max')
    mean = delegate(operations, 'mean')
    all = delegate(operations, 'all')
    any = delegate(operations, 'any')
    argmax = delegate(operations, 'argmax')
    argmin = delegate(operations, 'argmin')
    var = delegate(operations, 'var')
    std = delegate(operations, 'std')
    cumsum = delegate(operations, 'cumsum')


class ShapeMethods:
    """Mode permutations and reshapes (:mod:`dlmg.ops.shape`)."""

    __slots__ = ()
    T = _property(operations, 'T')
    permute_dims = delegate(operations, 'permute_dims')
    transpose = delegate(operations, 'transpose')
    reshape = delegate(operations, 'reshape')


class ConversionMethods:
    """Other libraries' distributed arrays (:mod:`dlmg.interop`)."""

    __slots__ = ()
    to_jax = delegate(conversions, 'to_jax')
    to_dtensor = delegate(conversions, 'to_dtensor')
    __partitioned__ = _property(conversions, '__partitioned__')


class PrintingMethods:
    """``repr()``, ``str()`` and ``format()``: values beside the layout (:mod:`dlmg._printing`)."""

    __slots__ = ()
    __repr__ = delegate(printing, '__repr__')
    __str__ = delegate(printing, '__str__')
    __format__ = delegate(printing, '__format__')


class ArrayApiMethods:
    """Indexing, ``@`` (the namespace's ``matmul``), the namespace, conversions, copies and DLPack
    (:mod:`dlmg.array_api`)."""

    __slots__ = ()
    __array_namespace__ = delegate(array_api, '__array_namespace__')
    __getitem__ = delegate(array_api, '__getitem__')
    __setitem__ = delegate(array_api, '__setitem__')
    __iter__ = delegate(array_api, '__iter__')
    __matmul__ = delegate(array_api, '__matmul__')
    __rmatmul__ = delegate(array_api, '__rmatmul__')
    to_device = delegate(array_api, 'to_device')
    mT = _property(array_api, 'mT')
    item = delegate(array_api, 'item')
    __int__ = delegate(array_api, '__int__')
    __float__ = delegate(array_api, '__float__')
    __complex__ = delegate(array_api, '__complex__')
    __index__ = delegate(array_api, '__index__')
    tolist = delegate(array_api, 'tolist')
    copy = delegate(array_api, 'copy')
    flatten = delegate(array_api, 'flatten')
    ravel = delegate(array_api, 'ravel')
    __copy__ = delegate(array_api, '__copy__')
    __deepcopy__ = delegate(array_api, '__deepcopy__')
    __dlpack__ = delegate(array_api, '__dlpack__')
    __dlpack_device__ = delegate(array_api, '__dlpack_device__')


#: The mixins :class:`~dlmg.DistributedTensor` names, in its bases' order.
MIXINS = (Operators, ElementMethods, ReductionMethods, ShapeMethods, ConversionMethods, PrintingMethods,
          ArrayApiMethods)
