"""Checks before dlmg writes into existing fragments: all of them or none.

In-place operators (``x += y``) and ``apply(..., out=t)`` write into
fragments one after another. Everything that can be known beforehand is
checked for every fragment first (read-only memory here; dtypes and layouts
by the callers), so that a refusal leaves every fragment as it was. What only
a device can report half-way (an out-of-memory, a failed kernel) is said to
have happened half-way: :func:`partial_note` names the fragments already
written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import ReadOnlyError
from ._operands import is_distributed

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["check_writable", "partial_note", "overlaps", "unalias"]


def check_writable(tensor: "DistributedTensor", indices: Sequence[int], name: str) -> None:
    """Raise :class:`~dlmg.errors.ReadOnlyError` before any write when a
    fragment of ``indices`` must not be written.

    Fragments of immutable frameworks (JAX) are replaced, not written, and
    pass.
    """
    frags = tensor.fragments
    for i in indices:
        frag = frags[i]
        if not frag.adapter.traits.mutable or not frag.readonly:
            continue
        if frag.inherits_readonly:
            why = ("its memory was handed on without a copy from a read-only source (a read-only NumPy "
                   "array, a JAX array or a DLPack tensor marked READ_ONLY)")
        else:
            why = f"the {frag.framework} array is read-only"
        raise ReadOnlyError(
            f"{name}: fragment {i} ({frag.framework} on {frag.device}) is read-only: {why}; nothing was "
            f"written. Work on a copy: t = t.to({frag.framework!r}, copy=True)"
        )


def partial_note(indices: Sequence[int], failed: int) -> str:
    """`` after fragments [...] were already written`` for a failure at
    fragment ``failed``, or ``""`` when it was the first."""
    done = []
    for i in indices:
        if i == failed:
            break
        done.append(i)
    if not done:
        return ""
    return f" (half-way: fragments {done} were already written, fragment {failed} and later were not)"


def _span(adapter: Any, array: Any) -> tuple[Any, int, int] | None:
    """``(device, first byte, one past the last byte)`` an array's elements occupy."""
    described = adapter.describe(array)
    if not described.size:
        return None
    lo = hi = 0
    for n, s in zip(described.shape, described.strides):
        step = (n - 1) * s
        if step < 0:
            lo += step
        else:
            hi += step
    size = described.itemsize
    return described.device, described.ptr + lo * size, described.ptr + (hi + 1) * size


def overlaps(target: "DistributedTensor", operand: "DistributedTensor") -> bool:
    """Whether a local fragment of ``operand`` shares memory with one of ``target``'s
    (byte ranges on one device intersect; a view of the same elements in the same order
    counts as overlapping too)."""
    spans = []
    for frag in target.fragments:
        if frag.is_local and frag.adapter.traits.mutable:
            span = _span(frag.adapter, frag.array)
            if span is not None:
                spans.append(span)
    if not spans:
        return False
    for frag in operand.fragments:
        if not frag.is_local or not frag.adapter.traits.mutable:
            continue
        span = _span(frag.adapter, frag.array)
        if span is None:
            continue
        for device, lo, hi in spans:
            if device == span[0] and lo < span[2] and span[1] < hi:
                return True
    return False


def unalias(target: "DistributedTensor", operand: Any) -> Any:
    """``operand``, or a copy of it where it shares memory with ``target``, which is about
    to be written: NumPy reads such operands as they were before the write (it buffers
    overlapping operands); frameworks writing in place element by element (torch) would
    read values already written. An operand that is ``target`` itself with its own layout
    is kept (each element reads only itself)."""
    if not is_distributed(operand) or operand is target:
        return operand
    if (operand.layout == target.layout and all(
            a.array is b.array for a, b in zip(operand.fragments, target.fragments) if a.is_local)):
        return operand
    return operand.copy() if overlaps(target, operand) else operand
