"""Which elementwise operations keep a pending sum, and the refusal of every other.

A tensor whose layout has ``partial="sum"`` holds its value as the sum of its
replicas. An operation applied replica by replica keeps that meaning only when
it is linear: the sum or difference of two tensors with the same pending
layout, the product (quotient) of one by a scalar, negation. Every other
operation on a pending tensor (and everything on a pending max or min) raises
a :class:`~dlmg.errors.LayoutError` that says how to resolve it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import LayoutError
from ._operands import SCALAR_TYPES, _ZeroD, is_distributed

__all__ = ["check_pending"]

_ADDITIVE = frozenset({"+", "-", "add", "subtract"})
_SIGN = frozenset({"-", "+", "negative", "positive"})
_SCALING = frozenset({"*", "multiply"})
_DIVIDING = frozenset({"/", "divide"})


def _linear(base: str, operands: Sequence[Any], reflected: bool) -> bool:
    tensors = [op for op in operands if is_distributed(op)]
    scalars = [op for op in operands if isinstance(op, (SCALAR_TYPES, _ZeroD)) and not isinstance(op, bool)]
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


def check_pending(name: str, operands: Sequence[Any], reflected: bool = False) -> None:
    """Raise unless the elementwise operation ``name`` on ``operands`` keeps their pending sums.

    ``name`` is an operator label (``"operator +"``, ``"operator *="``) or a function's
    name (``"add"``); ``reflected`` says the tensor stands on the right (``2 / x``)."""
    pending = [op for op in operands if is_distributed(op) and op.layout.partial is not None]
    if not pending:
        return
    base = name.removeprefix("operator ").removesuffix("=") if name.startswith("operator ") else name
    first = pending[0].layout
    if first.partial == "sum" and _linear(base, operands, reflected):
        return
    value = first.replace(devices=first.devices[: first.ngrid], ranks=first.ranks[: first.ngrid], partial=None)
    raise LayoutError(
        f"{name}: an operand holds a pending {first.partial} (its {first.nreplicas} replicas are parts of its "
        f"value), which only sums and differences of pending tensors alike, scaling by a scalar and negation "
        f"keep; resolve it first, e.g. x = x.redistribute({value!r})"
    )
