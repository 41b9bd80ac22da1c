"""Elementwise kernels: the Python operators and the array API's elementwise functions.

:func:`elementwise` runs one of the standard's elementwise functions through
:func:`dlmg.ops.dispatch.map_fragments`: fragment by fragment, in the framework
of the first distributed operand's fragment, on that fragment's device, with no
communication. Its operands must share one layout
(:class:`~dlmg.errors.LayoutMismatchError` otherwise); Python scalars and 0-d
arrays of any framework broadcast. The public functions (``dlmg.add``,
``dlmg.sin``...) are :mod:`dlmg.array_api`'s: they align their operands first
(:func:`dlmg.explain`), as the operators do.

Result dtypes follow the framework's own promotion rules; where the
fragments of one tensor belong to different frameworks and those rules
disagree (``int32 / int32`` is float64 in NumPy, float32 in torch), every
fragment is cast to the first local fragment's result dtype.

In-place operators (``x += y``) write into the fragments' memory for NumPy,
torch and CuPy fragments (the data pointers stay the same). JAX arrays are
immutable: their fragments are *replaced* by new arrays in the same tensor
object, which every holder of the tensor sees, while arrays exported from
the old fragments keep the old values (JAX's own ``x += y`` rebinds too).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from .._element import read_element
from ..dtypes import canonical
from ..errors import DtypeError
from ..registry import adapter_for
from ._operands import is_framework_array
from ._dtypes import INEXACT, INT, NUMERIC, REAL, check_inplace, kind_of, narrow_for, require
from ._writes import check_writable, unalias
from ..base import TensorBase
from .dispatch import SCALAR_TYPES, ZeroD, classify_operand, collect, is_distributed, local_groups, map_fragments
from ._lists import LIST_NAMES, on_lists
from ._pending import guard, keep_or_settle, keeps_pending
from .broadcast import align, align_to, result_shape as broadcast_shapes
from .fused import FusedFunction, batches_operators

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["elementwise", "FUNCTIONS", "ALIASES", "astype", "conj", "real", "imag"]

_SIGNED = frozenset("iufc")  # numeric but not bool
_UINT_INT = frozenset("iu")
_REAL_NOT_BOOL = frozenset("iuf")


def _dtype_of(op: Any) -> Any:
    """The dlmg dtype of a classified operand, or the Python scalar itself."""
    if isinstance(op, ZeroD):
        return op.adapter.dtype_of(op.array)
    if op is None or isinstance(op, SCALAR_TYPES):
        return op
    return op.dtype


def classify_all(args: tuple[Any, ...]) -> list[Any]:
    return [a if a is None or isinstance(a, SCALAR_TYPES) or is_distributed(a) else classify_operand(a) for a in args]


def check_operands(name: str, ops: list[Any], kinds: frozenset[str] | None, hint: str = "") -> None:
    if kinds is None or kinds == NUMERIC:
        return
    require(name, [_dtype_of(op) for op in ops if op is not None], kinds, hint)


# --------------------------------------------------------------------------
# elementwise functions of the array API standard


def _zeros_like(xp: Any, a: Any) -> Any:
    return xp.zeros_like(a)


def elementwise(name: str, *operands: Any) -> "DistributedTensor":
    """The array API's elementwise function ``name`` on operands of one layout, fragment by fragment.

    The per-fragment kernel behind :mod:`dlmg.array_api`'s elementwise functions
    (``dlmg.add``, ``dlmg.sin``...), which align their operands first; here the
    distributed operands must already share one layout.

    Parameters
    ----------
    name : str
        A key of :data:`FUNCTIONS` (``"add"``, ``"sin"``...).
    *operands : DistributedTensor, scalar or 0-d array
        As many as the function takes; at least one distributed tensor.

    Returns
    -------
    DistributedTensor
        A new tensor of the operands' layout.

    Raises
    ------
    LayoutMismatchError
        When the distributed operands' layouts differ.
    DtypeError
        For element types the operation is not defined for.
    """
    std, nargs, kinds, _ = FUNCTIONS[name]
    if len(operands) != nargs:
        raise TypeError(f"{name} takes {nargs} operand{'s' if nargs > 1 else ''}, got {len(operands)}")
    ops = classify_all(operands)
    check_operands(name, ops, kinds)
    ops = keep_or_settle(name, ops)
    fn = _kernel(std)
    if name == "imag" and is_distributed(operands[0]) and kind_of(operands[0].dtype) != "c":
        fn = _zeros_like  # torch has no imag of real tensors; NumPy gives zeros
    out = map_fragments(fn, ops, name=name, pending=True)
    assert out is not None
    return out


@lru_cache(maxsize=None)  # one kernel per array-API name (a bounded set), so each keeps its identity
def _kernel(std: str) -> Callable[..., Any]:
    """The per-fragment call of the array-API function ``std`` in the fragment's namespace."""

    def per_fragment(xp: Any, *arrays: Any) -> Any:
        return getattr(xp, std)(*arrays)

    per_fragment.__name__ = std
    return per_fragment


#: The array API's elementwise functions: public name -> (array-API name, number of
#: operands, allowed kinds, summary). :mod:`dlmg.array_api` defines one function of each.
FUNCTIONS: dict[str, tuple[str, int, frozenset[str] | None, str]] = {
    "abs": ("abs", 1, _SIGNED, "Absolute value"),
    "acos": ("acos", 1, _SIGNED, "Inverse cosine"),
    "acosh": ("acosh", 1, _SIGNED, "Inverse hyperbolic cosine"),
    "asin": ("asin", 1, _SIGNED, "Inverse sine"),
    "asinh": ("asinh", 1, _SIGNED, "Inverse hyperbolic sine"),
    "atan": ("atan", 1, _SIGNED, "Inverse tangent"),
    "atanh": ("atanh", 1, _SIGNED, "Inverse hyperbolic tangent"),
    "bitwise_invert": ("bitwise_invert", 1, INT, "Bitwise NOT"),
    "ceil": ("ceil", 1, _REAL_NOT_BOOL, "Ceiling"),
    "conj": ("conj", 1, NUMERIC, "Complex conjugate"),
    "cos": ("cos", 1, _SIGNED, "Cosine"),
    "cosh": ("cosh", 1, _SIGNED, "Hyperbolic cosine"),
    "exp": ("exp", 1, _SIGNED, "Exponential"),
    "expm1": ("expm1", 1, _SIGNED, "exp(x) - 1"),
    "floor": ("floor", 1, _REAL_NOT_BOOL, "Floor"),
    "imag": ("imag", 1, NUMERIC, "Imaginary part"),
    "isfinite": ("isfinite", 1, NUMERIC, "Test for finite values"),
    "isinf": ("isinf", 1, NUMERIC, "Test for infinities"),
    "isnan": ("isnan", 1, NUMERIC, "Test for NaN"),
    "log": ("log", 1, _SIGNED, "Natural logarithm"),
    "log1p": ("log1p", 1, _SIGNED, "log(1 + x)"),
    "log2": ("log2", 1, _SIGNED, "Base-2 logarithm"),
    "log10": ("log10", 1, _SIGNED, "Base-10 logarithm"),
    "logical_not": ("logical_not", 1, NUMERIC, "Logical NOT"),
    "negative": ("negative", 1, _SIGNED, "Numerical negative"),
    "positive": ("positive", 1, NUMERIC, "Numerical positive (a copy)"),
    "real": ("real", 1, NUMERIC, "Real part"),
    "reciprocal": ("reciprocal", 1, INEXACT, "1 / x"),
    "round": ("round", 1, _SIGNED, "Round half to even"),
    "sign": ("sign", 1, _SIGNED, "Sign"),
    "signbit": ("signbit", 1, _REAL_NOT_BOOL, "Whether the sign bit is set"),
    "sin": ("sin", 1, _SIGNED, "Sine"),
    "sinh": ("sinh", 1, _SIGNED, "Hyperbolic sine"),
    "square": ("square", 1, _SIGNED, "Square"),
    "sqrt": ("sqrt", 1, _SIGNED, "Square root"),
    "tan": ("tan", 1, _SIGNED, "Tangent"),
    "tanh": ("tanh", 1, _SIGNED, "Hyperbolic tangent"),
    "trunc": ("trunc", 1, _REAL_NOT_BOOL, "Truncation toward zero"),
    "add": ("add", 2, NUMERIC, "Sum"),
    "atan2": ("atan2", 2, _REAL_NOT_BOOL, "Quadrant-aware inverse tangent of x1 / x2"),
    "bitwise_and": ("bitwise_and", 2, INT, "Bitwise AND"),
    "bitwise_left_shift": ("bitwise_left_shift", 2, _UINT_INT, "Left shift"),
    "bitwise_or": ("bitwise_or", 2, INT, "Bitwise OR"),
    "bitwise_right_shift": ("bitwise_right_shift", 2, _UINT_INT, "Right shift"),
    "bitwise_xor": ("bitwise_xor", 2, INT, "Bitwise XOR"),
    "copysign": ("copysign", 2, _REAL_NOT_BOOL, "x1 with the sign of x2"),
    "divide": ("divide", 2, NUMERIC, "True division"),
    "equal": ("equal", 2, NUMERIC, "x1 == x2"),
    "floor_divide": ("floor_divide", 2, REAL, "Floor division"),
    "greater": ("greater", 2, REAL, "x1 > x2"),
    "greater_equal": ("greater_equal", 2, REAL, "x1 >= x2"),
    "hypot": ("hypot", 2, _REAL_NOT_BOOL, "sqrt(x1**2 + x2**2)"),
    "less": ("less", 2, REAL, "x1 < x2"),
    "less_equal": ("less_equal", 2, REAL, "x1 <= x2"),
    "logaddexp": ("logaddexp", 2, _REAL_NOT_BOOL, "log(exp(x1) + exp(x2))"),
    "logical_and": ("logical_and", 2, NUMERIC, "Logical AND"),
    "logical_or": ("logical_or", 2, NUMERIC, "Logical OR"),
    "logical_xor": ("logical_xor", 2, NUMERIC, "Logical XOR"),
    "maximum": ("maximum", 2, REAL, "Elementwise maximum (NaN propagates)"),
    "minimum": ("minimum", 2, REAL, "Elementwise minimum (NaN propagates)"),
    "multiply": ("multiply", 2, NUMERIC, "Product"),
    "nextafter": ("nextafter", 2, frozenset("f"), "Next representable value after x1 toward x2"),
    "not_equal": ("not_equal", 2, NUMERIC, "x1 != x2"),
    "pow": ("pow", 2, NUMERIC, "x1 raised to x2"),
    "remainder": ("remainder", 2, REAL, "Remainder with the sign of x2"),
    "subtract": ("subtract", 2, NUMERIC, "Difference"),
}

#: NumPy's names for the same functions (:mod:`dlmg.array_api` binds each to its target).
ALIASES: dict[str, str] = {
    "absolute": "abs",
    "arccos": "acos",
    "arccosh": "acosh",
    "arcsin": "asin",
    "arcsinh": "asinh",
    "arctan": "atan",
    "arctanh": "atanh",
    "arctan2": "atan2",
    "conjugate": "conj",
    "invert": "bitwise_invert",
    "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift",
    "power": "pow",
    "true_divide": "divide",
    "mod": "remainder",
}


def astype(x: "DistributedTensor", dtype: Any, /, *, copy: bool = True) -> "DistributedTensor":
    """``x`` converted to element type ``dtype``, fragment by fragment.

    Parameters
    ----------
    x : DistributedTensor
    dtype : str or any framework's dtype
        The target type (``"float32"``, ``torch.float32``, ``np.int8``...).
    copy : bool
        With ``False``, ``x`` itself is returned when it already has ``dtype``.

    Returns
    -------
    DistributedTensor

    Raises
    ------
    DtypeError
        For a 64-bit type when JAX fragments take part and ``jax_enable_x64``
        is off (JAX would narrow it silently).
    """
    name = canonical(dtype)
    if not copy and x.dtype == name:
        return x
    if narrow_for(name, x.frameworks) != name:
        raise DtypeError(
            f"astype({name}): the tensor has JAX fragments and JAX has 64-bit types disabled "
            "(jax_enable_x64 is off), so it would silently narrow them; enable x64 or choose a 32-bit type"
        )

    def per_fragment(xp: Any, a: Any) -> Any:
        # (NumPy fragments' bfloat16 and float8 types come from ml_dtypes, through the adapter)
        return xp.astype(a, getattr(xp, name, None) or adapter_for(a).native_dtype(name))

    out = map_fragments(per_fragment, (x,), name=f"astype({name})")
    assert out is not None
    return out


# --------------------------------------------------------------------------
# Python operators


def _forward(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda xp, a, b: op(a, b)


def _backward(op: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    return lambda xp, a, b: op(b, a)


def _operator_kernel(op: Callable[[Any, Any], Any], reflected: bool, label: str) -> FusedFunction:
    """``op`` on every fragment as one compiled call per device (frameworks that
    batch operators, see :func:`~dlmg.ops.fused.batches_operators`)."""
    fused = FusedFunction((lambda a, b: op(b, a)) if reflected else op)
    fused._name = label  # errors name the operator
    fused._operands_checked = True  # the operator collected (checked) its operands first
    return fused


def _temporary_refcount() -> int | None:
    """The reference count ``self`` has inside a binary operator's function (called
    by the tensor's method, ``DistributedTensor.__add__`` calling :data:`operator_add`)
    when the left operand is a temporary (the result of another operation), or
    ``None`` when this interpreter does not tell temporaries from named values apart
    (then temporaries are never reused)."""
    getrefcount = getattr(sys, "getrefcount", None)
    if getrefcount is None:  # not CPython
        return None

    def counted(self: Any, other: Any) -> int:
        return getrefcount(self)

    class Probe:  # called as the tensor's operators are: a method calling the operator's function
        def __add__(self, other: Any) -> int:
            return counted(self, other)

    temporary = Probe() + 0
    named = Probe()
    held = named + 0
    return temporary if held == temporary + 1 else None


_TEMPORARY_REFS = _temporary_refcount()
#: The operands a binary operator takes as they are (a Python scalar, a distributed tensor).
_COMMON = (*SCALAR_TYPES, TensorBase)
#: How many operator results had their memory reused for the next operation: a
#: diagnostic counter for users and tests ("Temporaries" in docs/operations.md).
ELIDED = [0]


def _keeps_dtype(symbol: str, dtype: str, other: Any) -> bool:
    """Whether ``tensor(dtype) <symbol> other`` has ``dtype`` again, so the
    result fits in the left operand's memory."""
    kind = kind_of(dtype)
    if symbol == "/" and kind not in "fc":
        return False
    if is_distributed(other):
        return str.__eq__(other.dtype, dtype)  # (both dlmg names: no other spelling to allow for)
    if isinstance(other, bool) or not isinstance(other, (int, float, complex)):
        return False
    if isinstance(other, int):
        return kind in "iufc"
    return kind in ("fc" if isinstance(other, float) else "c")


def _reusable(tensor: "DistributedTensor", placed: Any) -> bool:
    """Whether ``tensor``'s fragments are fresh operator results nobody else
    sees (and no autograd graph records); ``placed``: its placement, as the
    operator asking collected it, checking its fragments."""
    if not tensor._fresh or tensor.ndim == 0:
        return False
    if not placed.mutable:  # JAX: a new array either way, and replacing costs more
        return False
    groups = local_groups(placed)
    if len(groups) == 1:  # one framework and device: the placement's list of the arrays
        return not groups[0][0].tracks_gradients(placed.arrays)
    frags = tensor.fragments
    for adapter, _, indices in groups:  # one call per framework and device
        if adapter.tracks_gradients([frags[i]._array for i in indices]):
            return False
    return True


def _binary_method(
    symbol: str,
    op: Callable[[Any, Any], Any],
    kinds: frozenset[str] | None,
    reflected: bool,
    iop: Callable[[Any, Any], Any] | None = None,
) -> Callable[..., Any]:
    per_fragment = _backward(op) if reflected else _forward(op)
    label = f"operator {symbol}"
    batched = _operator_kernel(op, reflected, label)
    reuse = _inplace_fragment(iop) if iop is not None and not reflected else None
    # list operations take the tensor on the left: reflected, only where the order
    # cannot matter (+ and * are exactly commutative)
    list_name = LIST_NAMES.get(symbol) if not reflected or symbol in ("+", "*") else None

    def method(self: "DistributedTensor", other: Any) -> Any:
        refs = sys.getrefcount(self) if reuse is not None else 0  # first: nothing else may hold self yet
        if not isinstance(other, _COMMON):
            try:
                other = classify_operand(other)
            except TypeError:
                if is_framework_array(other):
                    raise  # a framework's array: the message says to scatter it
                return NotImplemented  # another type may know how to combine with us
        if kinds is not None:
            require(label, (self.dtype, _dtype_of(other)), kinds)
        if self.layout.partial is not None or getattr(getattr(other, "layout", None), "partial", None) is not None:
            self, other = keep_or_settle(label, (self, other), reflected)  # resolved unless kept
        # pending sums, fragments and layouts, checked once for every path below
        ops = collect((self, other), label, reflected=reflected, broadcasting=True)
        if ops.broadcast:
            a, b = align((self, other), label, communicate=True)
            return map_fragments(per_fragment, (a, b), name=label, new_arrays=True)
        if (
            refs == _TEMPORARY_REFS
            and reuse is not None
            and _reusable(self, ops.placed)
            and _keeps_dtype(symbol, self.dtype, other)
        ):
            # ``self`` is a temporary (``a * b`` in ``a * b + c``): write into its
            # memory instead of allocating, as NumPy does for its own temporaries.
            # (_reusable has just asked whether its arrays record gradients.)
            if list_name is None or on_lists(list_name, ops, True, label, lead_untracked=True) is None:
                map_fragments(reuse, (self, other), name=label, in_place=True, pending=True, collected=ops)
            ELIDED[0] += 1
            return self
        out: Any = None
        if not ops.zero_d:  # a Python scalar or a tensor of self's distribution (collect checked it)
            if batches_operators(self) and not (symbol == "**" and isinstance(other, SCALAR_TYPES)):
                # (a scalar exponent stays eager: JAX takes a concrete integer one to
                # lax.integer_pow, refusing negative ones, and a traced one to the
                # general power)
                out = batched(self, other)  # one compiled call per device (JAX): a new tensor
            elif list_name is not None:
                out = on_lists(list_name, ops, False, label)  # torch, NumPy: one call per device
        if out is None:
            out = map_fragments(per_fragment, (self, other), name=label, new_arrays=True, collected=ops)
        if reuse is not None and out is not None:
            out._fresh = True
        return out

    return method


def _unary_method(symbol: str, op: Callable[[Any], Any], kinds: frozenset[str] | None) -> Callable[..., Any]:
    label = f"operator {symbol}"

    def per_fragment(xp: Any, a: Any) -> Any:
        return op(a)

    def method(self: "DistributedTensor") -> "DistributedTensor":
        if kinds is not None:
            require(label, (self.dtype,), kinds)
        (x,) = keep_or_settle(label, (self,))
        out = map_fragments(per_fragment, (x,), name=label, pending=True)
        assert out is not None
        return out

    return method


def _inplace_fragment(iop: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    def per_fragment(xp: Any, a: Any, b: Any) -> Any:
        r = iop(a, b)  # in place for NumPy/torch/CuPy (r is a); a new array for JAX
        if r is not a and r.dtype != a.dtype:
            r = xp.astype(r, a.dtype)
        return r

    return per_fragment


def _inplace_method(symbol: str, iop: Callable[[Any, Any], Any], kinds: frozenset[str] | None) -> Callable[..., Any]:
    label = f"operator {symbol}"
    per_fragment = _inplace_fragment(iop)

    def method(self: "DistributedTensor", other: Any) -> Any:
        if not (isinstance(other, SCALAR_TYPES) or is_distributed(other)):
            try:
                other = classify_operand(other)
            except TypeError:
                if is_framework_array(other):
                    raise
                return NotImplemented
        if not keeps_pending(label, (self, other)):
            guard(self, label, writes=True)  # a write into a pending tensor is refused
            other = keep_or_settle(label, (self, other))[1]  # a pending operand is read as its value
        dtype = _dtype_of(other)
        if kinds is not None:
            require(label, (self.dtype, dtype), kinds)
        if is_distributed(other) and not (other.shape == self.shape and other.layout.same_distribution(self.layout)):
            if broadcast_shapes(self.shape, other.shape) != self.shape:  # only into self's shape
                raise ValueError(f"{label}: an operand of shape {other.shape} does not broadcast to {self.shape}")
            other = align_to(other, self.layout.dense, label)
        other = unalias(self, other)  # read as it was before the write (NumPy buffers overlap)
        check_inplace("truediv" if symbol == "/=" else label, self.dtype, (dtype,))
        indices = _distinct_memory(self) if self.layout.is_replicated else None
        check_writable(self, indices if indices is not None else _local(self), label)
        map_fragments(per_fragment, (self, other), name=label, in_place=True, indices=indices, pending=True)
        return self

    return method


def _local(tensor: "DistributedTensor") -> list[int]:
    return [f.index for f in tensor.fragments if f.is_local]


def _distinct_memory(tensor: "DistributedTensor") -> list[int]:
    """Local fragments of a replicated tensor, leaving out those whose memory
    another one already is (the same array wrapped as two replicas must be
    updated in place once, not twice)."""
    seen: set[tuple[str | None, int]] = set()
    out = []
    for frag in tensor.fragments:
        if not frag.is_local:
            continue
        adapter = frag.adapter
        if adapter.traits.mutable and frag.size:
            key = (frag.framework, adapter.data_ptr(frag.array))
            if key in seen:
                continue
            seen.add(key)
        out.append(frag.index)
    return out


# The operators of :class:`~dlmg.DistributedTensor`: its method ``__add__`` calls
# ``operator_add``, ``__radd__`` ``operator_radd``, ``__iadd__`` ``operator_iadd``... (dlmg/tensor.py).
# Each broadcasts its operands (aligning their layouts, see dlmg.ops.broadcast); ``kinds``
# are the element kinds the operator takes (``None``: every kind).
operator_add = _binary_method("+", operator.add, None, reflected=False, iop=operator.iadd)
operator_radd = _binary_method("+", operator.add, None, reflected=True)
operator_iadd = _inplace_method("+=", operator.iadd, None)
operator_sub = _binary_method("-", operator.sub, None, reflected=False, iop=operator.isub)
operator_rsub = _binary_method("-", operator.sub, None, reflected=True)
operator_isub = _inplace_method("-=", operator.isub, None)
operator_mul = _binary_method("*", operator.mul, None, reflected=False, iop=operator.imul)
operator_rmul = _binary_method("*", operator.mul, None, reflected=True)
operator_imul = _inplace_method("*=", operator.imul, None)
operator_truediv = _binary_method("/", operator.truediv, None, reflected=False, iop=operator.itruediv)
operator_rtruediv = _binary_method("/", operator.truediv, None, reflected=True)
operator_itruediv = _inplace_method("/=", operator.itruediv, None)
operator_floordiv = _binary_method("//", operator.floordiv, REAL, reflected=False, iop=operator.ifloordiv)
operator_rfloordiv = _binary_method("//", operator.floordiv, REAL, reflected=True)
operator_ifloordiv = _inplace_method("//=", operator.ifloordiv, REAL)
operator_mod = _binary_method("%", operator.mod, REAL, reflected=False, iop=operator.imod)
operator_rmod = _binary_method("%", operator.mod, REAL, reflected=True)
operator_imod = _inplace_method("%=", operator.imod, REAL)
operator_pow = _binary_method("**", operator.pow, None, reflected=False, iop=operator.ipow)
operator_rpow = _binary_method("**", operator.pow, None, reflected=True)
operator_ipow = _inplace_method("**=", operator.ipow, None)
operator_and = _binary_method("&", operator.and_, INT, reflected=False, iop=operator.iand)
operator_rand = _binary_method("&", operator.and_, INT, reflected=True)
operator_iand = _inplace_method("&=", operator.iand, INT)
operator_or = _binary_method("|", operator.or_, INT, reflected=False, iop=operator.ior)
operator_ror = _binary_method("|", operator.or_, INT, reflected=True)
operator_ior = _inplace_method("|=", operator.ior, INT)
operator_xor = _binary_method("^", operator.xor, INT, reflected=False, iop=operator.ixor)
operator_rxor = _binary_method("^", operator.xor, INT, reflected=True)
operator_ixor = _inplace_method("^=", operator.ixor, INT)
operator_lshift = _binary_method("<<", operator.lshift, _UINT_INT, reflected=False, iop=operator.ilshift)
operator_rlshift = _binary_method("<<", operator.lshift, _UINT_INT, reflected=True)
operator_ilshift = _inplace_method("<<=", operator.ilshift, _UINT_INT)
operator_rshift = _binary_method(">>", operator.rshift, _UINT_INT, reflected=False, iop=operator.irshift)
operator_rrshift = _binary_method(">>", operator.rshift, _UINT_INT, reflected=True)
operator_irshift = _inplace_method(">>=", operator.irshift, _UINT_INT)
operator_eq = _binary_method("==", operator.eq, None, reflected=False)
operator_ne = _binary_method("!=", operator.ne, None, reflected=False)
operator_lt = _binary_method("<", operator.lt, REAL, reflected=False)
operator_le = _binary_method("<=", operator.le, REAL, reflected=False)
operator_gt = _binary_method(">", operator.gt, REAL, reflected=False)
operator_ge = _binary_method(">=", operator.ge, REAL, reflected=False)
operator_neg = _unary_method("-", operator.neg, _SIGNED)
operator_pos = _unary_method("+", operator.pos, NUMERIC)
operator_abs = _unary_method("abs", operator.abs, _SIGNED)
operator_invert = _unary_method("~", operator.invert, INT)


def truth(self: "DistributedTensor") -> bool:
    """The truth value of a one-element tensor; others raise like NumPy arrays."""
    if self.size != 1:
        raise ValueError(
            f"the truth value of a distributed tensor of {self.size} elements is ambiguous; "
            "use dlmg.any(x) or dlmg.all(x)"
        )
    if self.layout.partial is not None:  # its value, on every process alike
        return bool(guard(self, "bool()").item())
    return bool(read_element(self, (0,) * self.ndim))


def conj(x: "DistributedTensor") -> "DistributedTensor":
    """The complex conjugate, elementwise (array API ``conj``)."""
    return elementwise("conj", x)


def real(x: "DistributedTensor") -> "DistributedTensor":
    """The real part (a new tensor)."""
    return elementwise("real", x)


def imag(x: "DistributedTensor") -> "DistributedTensor":
    """The imaginary part (a new tensor)."""
    return elementwise("imag", x)
