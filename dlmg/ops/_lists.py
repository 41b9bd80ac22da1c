"""Arithmetic operators on all of a tensor's fragments at once, through a
framework's list operations (:meth:`~dlmg.adapters.capabilities.ListOperators.list_operator`:
torch's ``_foreach_*``, one kernel for every fragment on a CUDA device instead
of one launch per fragment). Internal to :mod:`dlmg.ops`; the per-fragment
path of :func:`~dlmg.ops.dispatch.map_fragments` remains for everything these
lists do not cover."""

from __future__ import annotations

from typing import Any

from ..adapters.capabilities import ListOperators
from ._executor import fail, executor
from ._writes import partial_note
from ._placement import local_groups, result_tensor

__all__ = ["LIST_NAMES", "on_lists"]

#: Python operator symbol -> the name :meth:`~dlmg.adapters.capabilities.ListOperators.list_operator` takes.
LIST_NAMES = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "**": "pow", "//": "floor_divide",
              "%": "remainder"}
_SCALARS = (int, float, bool, complex)


def _groups(placed: Any) -> tuple[tuple[Any, tuple[int, ...]], ...]:
    """The local fragments by (framework, device), each with its adapter; empty
    where a fragment is padded, its framework has no list operations, or the
    fragments are of several frameworks (whose type promotions differ: the
    per-fragment path gives their results one dtype)."""
    groups = local_groups(placed)
    if (
        not placed.dense
        or len({adapter.name for adapter, _, _ in groups}) > 1
        or any(not isinstance(adapter, ListOperators) or adapter.list_operator("add") is None
               for adapter, _, _ in groups)
    ):
        return ()
    return tuple((adapter, indices) for adapter, _, indices in groups)


def _lists(placed: Any) -> tuple[tuple[Any, tuple[int, ...]], ...]:
    groups = placed.lists
    if groups is None:
        groups = placed.lists = _groups(placed)
    return groups


def on_lists(name: str, ops: Any, in_place: bool, label: str, lead_untracked: bool = False) -> Any:
    """``lead <op> other`` as one list operation per framework and device, for the
    operands of one operator as :func:`~dlmg.ops.dispatch.collect` sorted and
    checked them (``ops``: fragments against their layouts, the layouts alike, no
    broadcasting), whose placements it reads.

    ``other`` (the second operand) is a Python scalar or a tensor of the lead's
    distribution. Returns the new tensor (the lead itself when ``in_place``), or
    ``None`` when list operations do not apply: a framework without them,
    padded fragments, operands of different frameworks, other scalars, arrays
    recording gradients (``lead_untracked``: the caller has just asked that of
    the lead's arrays), or (not in place) a refusal by the framework, which the
    caller's per-fragment path then reports with the fragment it concerns.
    """
    placed = ops.placed
    groups = _lists(placed)
    if not groups:
        return None
    lead = ops.lead
    frags = lead.fragments
    if ops.others:
        other_placed = ops.placements[0]
        if other_placed.frameworks != placed.frameworks or not _lists(other_placed):
            return None
        other = ops.others[0]
        other_frags = other.fragments
    else:
        other = ops.args[1]
        if type(other) not in _SCALARS:
            return None
        other_frags = None
    # one framework (see _groups), and every local fragment an array, kept on the placement
    adapter = groups[0][0]
    call = adapter.list_operator(name, in_place)
    if call is None:
        return None
    if (not lead_untracked and adapter.tracks_gradients(placed.arrays)) or (
        other_frags is not None and adapter.tracks_gradients(other_placed.arrays)
    ):
        return None  # autograd records the per-fragment operators
    if len(groups) == 1:  # one device: the placements' arrays are the lists (their order, every local fragment)
        xs = list(placed.arrays)
        ys = other if other_frags is None else list(other_placed.arrays)
        try:
            outs = call(xs, ys)
        except Exception as exc:
            if in_place:
                _refused(exc, groups, frags, label)
            return None
        return lead if in_place else result_tensor(outs, lead.layout.dense, placed, adapter)
    found: dict[int, Any] = {}
    for _, indices in groups:
        xs = [frags[i]._array for i in indices]
        ys = other if other_frags is None else [other_frags[i]._array for i in indices]
        try:
            out = call(xs, ys)
        except Exception as exc:
            if in_place:
                _refused(exc, groups, frags, label, indices)
            return None
        if not in_place:
            found.update(zip(indices, out))
    if in_place:
        return lead
    return result_tensor([found[i] for i in placed.indices], lead.layout.dense, placed, adapter)


def _refused(exc: Exception, groups: Any, frags: Any, label: str, indices: Any = None) -> None:
    """Raise the failure of an in place list operation (nothing to fall back on: some
    fragments may be written), naming the fragment it concerns and those written."""
    failed = (indices if indices is not None else groups[0][1])[getattr(exc, "list_position", 0)]
    order = [i for _, group in groups for i in group]
    ex = executor(frags[failed].framework, frags[failed].device)
    raise fail(label + partial_note(order, failed), failed, ex, exc) from exc
