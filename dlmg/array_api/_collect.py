"""Operations that need a whole tensor in one place, and how their results are laid out again.

Some of the standard's functions have no fragment-by-fragment form that pays
(``unique_*``, ``nonzero`` and boolean masks, whose result shapes depend on
the data; ``concat``; ``take``; the ``linalg`` functions). The namespace runs
them as three explicit steps:

1. :func:`collect`: every tensor operand is redistributed onto **one
   fragment** on the device (and in the framework) of the first operand's
   first fragment -- a no-op when it already is one fragment there;
2. the framework's own function runs on that fragment (through
   array-api-compat);
3. :func:`settle`: the result is laid out by the default layout policy
   (:func:`dlmg.default_layout`) -- again a no-op under the default policy.

``docs/array-api.md`` lists which functions take this path. Across processes
these functions refuse (their result shapes would be known to one process
only).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..construct import from_fragments
from ..distributed import _state
from ..layout import Layout
from ..ops._executor import Executor, executor
from ..ops._operands import is_distributed
from ._policy import layout_for

__all__ = ["Collected", "collect", "settle", "run_collected"]


@dataclass
class Collected:
    """The operands of one call, each as one array in the lead's framework on its device."""

    arrays: list[Any]
    executor: Executor

    @property
    def xp(self) -> Any:
        """The array-API namespace of the lead's framework."""
        return self.executor.xp


def _refuse_across(name: str) -> None:
    if _state.current() is not None and _state.world_size() > 1:
        raise NotImplementedError(
            f"dlmg.array_api.{name} collects the tensor onto one device, which is not available across "
            "processes yet: gather() the tensor and use its framework's function"
        )


def collect(name: str, *operands: Any) -> Collected:
    """The distributed operands as single arrays on the first one's first device (see the module)."""
    _refuse_across(name)
    lead = next(op for op in operands if is_distributed(op))
    home = lead.fragments[0]
    framework, device = home.framework, home.layout.device
    ex = executor(framework, device)
    arrays = []
    for op in operands:
        if not is_distributed(op):
            arrays.append(op)
            continue
        target = Layout.single(op.shape, device)
        if not (op.layout.same_distribution(target) and op.fragments[0].framework == framework):
            op = op.redistribute(target, framework=framework)
        arrays.append(op.fragments[0].array)
    return Collected(arrays, ex)


def settle(array: Any, like: Collected) -> Any:
    """A result array of a collected call as a tensor laid out by the policy."""
    xp = like.xp
    if not hasattr(array, "shape") or not hasattr(array, "__dlpack__"):
        array = xp.asarray(array)
    device = like.executor.device
    shape = tuple(int(n) for n in array.shape)
    here = Layout.single(shape, device)
    out = from_fragments([array], here)
    wanted = layout_for(shape)
    if wanted.same_distribution(here):
        return out
    return out.redistribute(wanted)


def run_collected(name: str, fn: Any, operands: Sequence[Any], *, results: int = 1) -> Any:
    """``fn(xp, *arrays)`` on the collected operands; its result (or tuple of ``results``
    results) settled into tensors."""
    got = collect(name, *operands)
    out = got.executor.run(fn, *got.arrays)
    if results == 1:
        return settle(out, got)
    return tuple(settle(o, got) for o in out)
