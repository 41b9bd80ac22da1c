"""Where a tensor's fragments run (:class:`Placement`), the check every
operation makes before it reads them (:func:`check_fragments`), and the
tensors operations build from their per-fragment results
(:func:`result_tensor`). Internal to :mod:`dlmg.ops`.

A placement is worked out once per fragments tuple and kept on the tensor;
results of an operation inherit their lead's, so that an expression such as
``a * b + c`` finds every placement it needs without working one out.
"""

from __future__ import annotations

from operator import attrgetter
from typing import TYPE_CHECKING, Any, Sequence

from ..distributed.state import rank as process_rank
from ..dtypes import canonical
from ..fragment import Fragment, verify_fragments
from ..base import TensorBase
from ._executor import Executor, executor

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["Placement", "placement", "check_fragments", "local_groups", "inherit", "result_tensor"]

_SHAPE = attrgetter("shape")


class Placement:
    """Where a tensor's fragments run: its local fragment indices, the executor of
    each and every fragment's framework. Computed once per fragments tuple and
    kept on the tensor (results of an operation inherit their lead's)."""

    __slots__ = ("fragments", "indices", "executors", "frameworks", "by_device", "groups", "lists", "batched",
                 "mutable", "dense", "rank", "arrays", "shapes", "foreign")

    def __init__(self, tensor: "DistributedTensor") -> None:
        frags = tensor.fragments
        self.fragments = frags
        self.indices = [f.index for f in frags if f.is_local]
        self.executors: list[Executor | None] = [None] * len(frags)
        for i in self.indices:
            self.executors[i] = executor(frags[i].framework, frags[i].device)
        self.frameworks = tuple(f.framework for f in frags)
        # whether every local fragment can be written in place (none is JAX's)
        self.mutable = all(self.executors[i].traits.mutable for i in self.indices)  # type: ignore[union-attr]
        # whether every local fragment is one array (none padded): its slot is then read directly
        self.dense = all(frags[i]._array is not None for i in self.indices)
        self.by_device: Any = None  # the local fragments by framework and device, found when first asked
        self.groups: Any = None  # what dlmg.fuse runs as one call per device, found when first asked
        self.lists: Any = None  # what operators run as list operations on, found when first asked
        self.batched: bool | None = None  # whether operators run as one compiled call per device, when asked
        # what check_fragments compares, gathered once: an array's shape can change (``resize_``)
        me = self.rank = process_rank()
        checked = [f for f in frags if f._array is not None and f.rank == me]
        self.arrays = [f._array for f in checked]
        self.shapes = [f.layout.shape for f in checked]
        self.foreign = any(f._array is not None and f.rank != me for f in frags)


def placement(tensor: "DistributedTensor", check: bool = True) -> Placement:
    """Where ``tensor``'s fragments run (kept on the tensor while its fragments stay).

    A call first checks that the fragments still fit the layout
    (:func:`check_fragments`): operations read them next. ``check=False`` is
    for questions about the placement only, asked before the call that runs
    the work (which checks) or after the operation's
    :func:`~dlmg.ops.dispatch.collect` checked them."""
    found = tensor._placement
    kept = found is not None and found.fragments is tensor.fragments
    if check:
        check_fragments(tensor.fragments, found if kept else None)
    if not kept:
        found = tensor._placement = Placement(tensor)
    return found  # type: ignore[no-any-return]


def check_fragments(fragments: Any, kept: "Placement | None") -> None:
    """Raise :class:`~dlmg.errors.FragmentError` (naming the fragment and the field)
    unless every local fragment still has its layout's shape.

    With ``kept``, the placement found for ``fragments``, that is one list
    comparison of the arrays' shapes with the layout's (a torch.Size equals the
    tuple; ``map``: no Python frame per array); the full
    :func:`~dlmg.fragment.verify_fragments` (no strides) runs without it, when
    that comparison fails, or where a fragment belongs to another process."""
    if kept is not None and not kept.foreign and kept.rank == process_rank():
        try:
            if list(map(_SHAPE, kept.arrays)) == kept.shapes:
                return
        except AttributeError:  # an array without the array API's shape: verify_fragments says so
            pass
    verify_fragments(fragments, strides=False)


def local_groups(placed: Placement) -> tuple[tuple[Any, Any, tuple[int, ...]], ...]:
    """The local fragments of a placement by (framework, device): ``(adapter,
    device, fragment indices)`` in the order of their first fragment, kept on the
    placement (what batched work, compiled or list operations, runs one call of)."""
    groups = placed.by_device
    if groups is None:
        found: dict[tuple[str, Any], tuple[Any, Any, list[int]]] = {}
        for i in placed.indices:
            ex = placed.executors[i]
            found.setdefault((ex.framework, ex.device), (ex.adapter, ex.device, []))[2].append(i)  # type: ignore[union-attr]
        groups = placed.by_device = tuple((adapter, device, tuple(ix)) for adapter, device, ix in found.values())
    return groups


def inherit(result: "DistributedTensor", lead: Placement, same_frameworks: bool = False) -> None:
    """Give a result built fragment by fragment from ``lead``'s executors its placement
    (``same_frameworks``: the caller knows every fragment is of the lead's framework)."""
    frags = result.fragments
    if same_frameworks or (len(frags) == len(lead.fragments) and all(
        f.framework == fw for f, fw in zip(frags, lead.frameworks)
    )):
        me = lead.rank
        local = lead.indices if lead.dense else [f.index for f in frags if f._array is not None and f.rank == me]
        # (dense: the lead's shapes, same layout; results exist for the lead's local fragments only)
        _inherited(result, lead, [frags[i]._array for i in local],
                   lead.shapes if lead.dense else [frags[i].layout.shape for i in local])


def _inherited(result: "DistributedTensor", lead: Placement, arrays: list[Any], shapes: list[Any]) -> None:
    placed = Placement.__new__(Placement)
    placed.fragments, placed.indices = result.fragments, lead.indices
    placed.executors, placed.frameworks, placed.groups = lead.executors, lead.frameworks, lead.groups
    placed.by_device, placed.lists, placed.batched = lead.by_device, lead.lists, lead.batched
    placed.mutable, placed.rank, placed.foreign = lead.mutable, lead.rank, False
    placed.dense = True  # results are arrays
    placed.arrays, placed.shapes = arrays, shapes
    result._placement = placed


def result_tensor(outs: Sequence[Any], layout: "Layout", lead: Placement, adapter: Any) -> "DistributedTensor":
    """A new tensor of ``layout`` (the lead's distribution, without explicit strides)
    whose local fragments are ``outs``, one for each local fragment of the ``lead``
    placement (dense) in the order of its indices, every one an array of
    ``adapter``'s framework (the lead's) made for that fragment's device (a list
    operation's results): the tensor and its placement in one pass, trusted, as
    :meth:`~dlmg.DistributedTensor._from_arrays` is."""
    name = adapter.name
    of_result = Fragment.of_result
    slots = layout.fragments
    if len(outs) == len(slots):  # every fragment held here (in order, then)
        frags = [of_result(slot, out, name, adapter) for slot, out in zip(slots, outs)]
    else:
        held = dict(zip(lead.indices, outs))
        frags = [of_result(slot, held[slot.index], name, adapter) if slot.index in held else Fragment.remote(slot)
                 for slot in slots]
    dtype = canonical(adapter.dtype_of(outs[0])) if outs else canonical("float32")
    result = TensorBase._create(layout, frags, dtype)
    _inherited(result, lead, outs if type(outs) is list else list(outs), lead.shapes)
    return result
