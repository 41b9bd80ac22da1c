"""Arithmetic operators on all of a tensor's fragments at once, through a
framework's list operations (:meth:`~dlmg.adapters.capabilities.ListOperators.list_operator`:
torch's ``_foreach_*``, one kernel for every fragment on a CUDA device instead
of one launch per fragment). Internal to :mod:`dlmg.ops`; the per-fragment
path of :func:`~dlmg.ops.dispatch.map_fragments` remains for everything these
lists do not cover."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..adapters.capabilities import ListOperators
from ._executor import _fail, executor
from ._operands import is_distributed
from ._writes import partial_note
from .dispatch import _inherit, local_groups, new_tensor, placement

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

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


def on_lists(name: str, lead: "DistributedTensor", other: Any, in_place: bool, label: str,
             checked: bool = False) -> Any:
    """``lead <op> other`` as one list operation per framework and device.

    ``other`` is a Python scalar or a tensor of ``lead``'s distribution. Returns
    the new tensor (``lead`` itself when ``in_place``), or ``None`` when list
    operations do not apply: a framework without them, padded fragments,
    operands of different layouts or frameworks, other scalars, arrays recording
    gradients, or (not in place) a refusal by the framework, which the caller's
    per-fragment path then reports with the fragment it concerns. ``checked``: the
    caller's :func:`~dlmg.ops.dispatch.collect` checked the operands' fragments.
    """
    placed = placement(lead, check=not checked)
    groups = _lists(placed)
    if not groups:
        return None
    frags = lead.fragments
    if is_distributed(other):
        if not lead.layout.same_distribution(other.layout):
            return None  # the per-fragment path says the layouts differ
        other_placed = placement(other, check=not checked)
        if other_placed.frameworks != placed.frameworks or not _lists(other_placed):
            return None
        other_frags = other.fragments
    elif type(other) not in _SCALARS:
        return None
    else:
        other_frags = None
    # one framework (see _groups), and every local fragment an array, kept on the placement
    adapter = groups[0][0]
    call = adapter.list_operator(name, in_place)
    if call is None:
        return None
    if adapter.tracks_any_gradients(placed.arrays) or (
        other_frags is not None and adapter.tracks_any_gradients(other_placed.arrays)
    ):
        return None  # autograd records the per-fragment operators
    calls = []
    for _, indices in groups:
        xs = [frags[i]._array for i in indices]
        ys = other if other_frags is None else [other_frags[i]._array for i in indices]
        calls.append((call, xs, ys, indices))
    results: list[Any] = [None] * len(frags)
    for call, xs, ys, indices in calls:
        try:
            out = call(xs, ys)
        except Exception as exc:
            if in_place:  # nothing to fall back on: some fragments may be written
                failed = indices[getattr(exc, "list_position", 0)]
                order = [i for _, _, _, group in calls for i in group]
                ex = executor(frags[failed].framework, frags[failed].device)
                raise _fail(label + partial_note(order, failed), failed, ex, exc) from exc
            return None
        if not in_place:
            for i, r in zip(indices, out):
                results[i] = r
    if in_place:
        return lead
    result = new_tensor(results, lead.layout.dense)
    _inherit(result, placed)
    return result
