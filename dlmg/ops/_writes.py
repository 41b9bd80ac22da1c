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
from typing import TYPE_CHECKING

from ..errors import ReadOnlyError

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["check_writable", "partial_note"]


def check_writable(tensor: "DistributedTensor", indices: Sequence[int], name: str) -> None:
    """Raise :class:`~dlmg.errors.ReadOnlyError` before any write when a
    fragment of ``indices`` must not be written.

    Fragments of immutable frameworks (JAX) are replaced, not written, and
    pass.
    """
    frags = tensor.fragments
    for i in indices:
        frag = frags[i]
        if not frag.adapter.mutable or not frag.readonly:
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
