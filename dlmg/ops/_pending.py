"""Which elementwise operations keep a pending reduction; the one guard of every read and write.

A tensor whose layout has ``partial="sum"`` holds its value as the sum of its
replicas. An operation applied replica by replica keeps that meaning only when
it is linear: the sum or difference of two tensors with the same pending
layout, the product (quotient) of one by a scalar, negation.

With ``partial="max"`` (``"min"``) the value is the largest (smallest) replica.
An operation applied replica by replica keeps that when it commutes with the
maximum: ``maximum`` (``minimum``) of tensors with the same pending layout or
with a real scalar, and, on real floating types, adding or subtracting a finite
scalar and multiplying or dividing by a positive finite one (each is monotone
over every value, infinities included, and rounding keeps the order). On
integers those would wrap around and break the order, so they do not keep it.
Negation and negative factors turn a maximum into a minimum: they do not keep
it either, as they would need the result's layout to change.

Every other elementwise operation resolves its pending operands first
(:func:`keep_or_settle`); an in-place one that would not keep the pending
reduction of its target is refused (:func:`guard` with ``writes``).

:func:`guard` is the one gate every read or write of a tensor's values passes
(indexing, iteration, ``item`` and the conversions, printing, copies, exports,
saving, assignment): a read gets the value of a pending tensor
(:func:`settled`, a redistribution, collective across processes), a write into
one is refused with a :class:`~dlmg.errors.LayoutError` naming the
``redistribute`` call that resolves it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..errors import LayoutError
from ..layout import Layout
from ._dtypes import kind_of
from ._operands import SCALAR_TYPES, ZeroD, is_distributed

__all__ = ["keeps_pending", "keep_or_settle", "guard", "settled", "value_layout", "spread_value_layout"]

_ADDITIVE = frozenset({"+", "-", "add", "subtract"})
_SIGN = frozenset({"-", "+", "negative", "positive"})
_SCALING = frozenset({"*", "multiply"})
_DIVIDING = frozenset({"/", "divide"})
_ADDING = frozenset({"+", "add"})
_SUBTRACTING = frozenset({"-", "subtract"})
_SAME_SIGN = frozenset({"+", "positive"})
#: The elementwise function that keeps each pending extremum.
_EXTREMUM = {"max": "maximum", "min": "minimum"}


def _linear(base: str, operands: Sequence[Any], reflected: bool) -> bool:
    tensors = [op for op in operands if is_distributed(op)]
    scalars = [op for op in operands if isinstance(op, (SCALAR_TYPES, ZeroD)) and not isinstance(op, bool)]
    if len(operands) == 1:
        return base in _SIGN
    if base in _ADDITIVE and len(tensors) == len(operands):
        return all(t.layout.partial is not None for t in tensors)
    if len(tensors) == 1 and len(scalars) == len(operands) - 1:
        if base in _SCALING:
            return True
        if base in _DIVIDING:
            return not reflected and is_distributed(operands[0])
    return False


def _real_value(op: Any) -> float | None:
    """A scalar operand's value as a float, ``None`` for a complex one (or anything else)."""
    if isinstance(op, ZeroD):
        if kind_of(op.adapter.dtype_of(op.array)) == "c":
            return None
        return float(op.array.item())  # (the value is needed on the host: the pending path only)
    return None if isinstance(op, complex) or op is None else float(op)


def _keeps_order(kind: str, base: str, operands: Sequence[Any], reflected: bool) -> bool:
    """Whether ``base`` on ``operands`` commutes with the pending ``kind`` ("max" or "min")."""
    tensors = [op for op in operands if is_distributed(op)]
    if any(kind_of(t.dtype) == "c" for t in tensors):
        return False
    scalars = [_real_value(op) for op in operands if not is_distributed(op)]
    if any(v is None for v in scalars):
        return False
    if base == _EXTREMUM[kind]:
        return all(t.layout.partial == kind for t in tensors)
    if len(tensors) != 1 or kind_of(tensors[0].dtype) != "f":
        return False  # integers wrap around, which breaks the order
    if len(operands) == 1:
        return base in _SAME_SIGN
    (value,) = scalars
    assert value is not None
    if not math.isfinite(value):
        return False  # an infinite scalar meets an infinite replica as NaN
    tensor_first = is_distributed(operands[0]) and not reflected
    if base in _ADDING:
        return True
    if base in _SUBTRACTING:
        return tensor_first  # c - x turns a maximum into a minimum
    if base in _SCALING:
        return value > 0
    if base in _DIVIDING:
        return tensor_first and value > 0
    return False


def value_layout(layout: Layout) -> Layout:
    """A pending ``layout``'s value layout: its split, replica 0's devices, nothing pending
    (where :func:`settled` puts the value)."""
    return layout.replace(devices=layout.devices[: layout.ngrid], ranks=layout.ranks[: layout.ngrid], partial=None)


def spread_value_layout(layout: Layout) -> Layout:
    """Where a contraction puts the value of the pending sum it ends with: for a sum whose
    addends each hold the whole result (grid 1), one slab per addend's device along the first
    mode with an element for each (a reduce-scatter: the value stays on the operands'
    devices and processes, split, and each device receives ``(k - 1) / k`` of its slab);
    otherwise :func:`value_layout`."""
    k = layout.nreplicas
    if layout.ngrid == 1 and k > 1:
        for mode, extent in enumerate(layout.shape):
            if extent >= k:
                return Layout.slab(layout.shape, mode, layout.devices, ranks=layout.ranks)
    return value_layout(layout)


def _is_pending(x: Any) -> bool:
    return getattr(getattr(x, "layout", None), "partial", None) is not None


def settled(x: Any, into: Layout | None = None) -> Any:
    """``x`` itself, or its value when it is a tensor holding a pending reduction, in ``into``
    (default :func:`value_layout`; a redistribution, so across processes every process calls it)."""
    if not _is_pending(x):
        return x
    return x.redistribute(into if into is not None else value_layout(x.layout))  # (resolves it)


def guard(x: Any, what: str, *, writes: bool = False, into: Layout | None = None) -> Any:
    """The one gate of every read and write of a tensor's values.

    Parameters
    ----------
    x : Any
        A tensor (anything else passes unchanged).
    what : str
        The operation, for the error (``"assignment"``, ``"operator +="``).
    writes : bool
        The operation writes into ``x``.
    into : Layout, optional
        Where a read puts the value (a layout of ``x``'s shape, nothing pending):
        an operand's layout, so that the value meets it without another move.

    Returns
    -------
    Any
        ``x`` when it holds no pending reduction; otherwise, for a read, its
        value (:func:`settled`).

    Raises
    ------
    LayoutError
        For a write into a pending tensor: each of its replicas holds a part of
        every element, so no write into them means what it says.
    """
    if not _is_pending(x):
        return x
    if writes:
        lay = x.layout
        raise LayoutError(
            f"{what}: the tensor holds a pending {lay.partial} (each of its {lay.nreplicas} replicas holds a part "
            f"of every element), so a write into it is refused; resolve it first, e.g. "
            f"x = x.redistribute({value_layout(lay)!r})"
        )
    return settled(x, into)


def keeps_pending(name: str, operands: Sequence[Any], reflected: bool = False) -> bool:
    """Whether the elementwise operation ``name`` on ``operands`` keeps their pending reductions
    (applied to the replicas, it gives the replicas of the result).

    ``name`` is an operator label (``"operator +"``, ``"operator *="``) or a function's
    name (``"add"``); ``reflected`` says the tensor stands on the right (``2 / x``)."""
    pending = [op for op in operands if is_distributed(op) and op.layout.partial is not None]
    if not pending:
        return True
    base = name.removeprefix("operator ").removesuffix("=") if name.startswith("operator ") else name
    first = pending[0].layout
    if first.partial == "sum" and _linear(base, operands, reflected):
        return True
    return first.partial in _EXTREMUM and _keeps_order(first.partial, base, operands, reflected)


def keep_or_settle(name: str, operands: Sequence[Any], reflected: bool = False) -> list[Any]:
    """``operands`` as they are where ``name`` keeps their pending reductions
    (:func:`keeps_pending`), else with every pending one resolved (:func:`guard`)."""
    if keeps_pending(name, operands, reflected):
        return list(operands)
    # a value meets an operand of its shape in that operand's layout (a reduce-scatter into it)
    partners = {op.shape: op.layout for op in reversed(operands) if is_distributed(op)
                and op.layout.partial is None and op.layout.element_strides is None}
    return [guard(op, name, into=partners.get(op.shape)) if _is_pending(op) else op for op in operands]
