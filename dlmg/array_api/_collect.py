"""Operations that need a whole tensor in one place, and how their results are laid out again.

Some of the standard's functions have no fragment-by-fragment form that pays
(``unique_*``, ``nonzero`` and boolean masks, whose result shapes depend on
the data; ``take``). The namespace runs
them as three explicit steps:

1. :func:`collect`: every tensor operand is redistributed onto **one
   fragment** on the device (and in the framework) of the first operand's
   first fragment -- a no-op when it already is one fragment there;
2. the framework's own function runs on that fragment (through
   array-api-compat);
3. :func:`settle`: the result is laid out on the first operand's devices (the
   array API's device rule: a result carries its inputs' ``device``) as a creation
   function with ``device=x.device`` lays a new tensor out: one piece per device
   along mode 0 -- again a no-op for an operand on one device.

``docs/array-api.md`` lists which functions take this path. Both moves are
dlmg's movement API (``redistribute``; across processes ``gather`` and
``scatter``), nothing of their own.

Across processes (under :func:`dlmg.distributed.init`, every process calling
the function, as for any collective) step 1 is an all-gather: every process
receives the whole of each operand on its own device
(:func:`dlmg.distributed.local_device`), in the framework of the first
operand's first fragment; step 2 runs on every process on the same data, so
every process computes the same result, shapes that depend on the data
included; step 3 spreads rank 0's result into the policy's layout (one piece
per process by default). It costs an all-gather of the operands and a scatter
of the result: fine for the sizes these functions meet, not a distributed
sort or a distributed factorisation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import distributed as _distributed
from ..construct import from_fragments
from ..distributed import state as process_state
from ..layout import Layout
from ..ops._executor import Executor, executor
from ..ops._operands import is_distributed
from ._creation import spread_host_array, layout_of
from ._policy import get_default_layout, layout_for

__all__ = ["Collected", "collect", "settle"]


@dataclass
class Collected:
    """The operands of one call, each as one array in the lead's framework on its device."""

    arrays: list[Any]
    executor: Executor
    across: bool = False  # every process holds the whole operands (all-gathered)
    device: Any = None  # the lead operand's array API device (a Device or a Placement): the result's

    @property
    def xp(self) -> Any:
        """The array-API namespace of the lead's framework."""
        return self.executor.xp


def _across() -> bool:
    return process_state.current() is not None and process_state.world_size() > 1


def collect(name: str, *operands: Any) -> Collected:
    """The distributed operands as single arrays on the first one's first device, or across
    processes the whole of each on every process's own device, in the framework of the first
    operand's first fragment held there (see the module)."""
    lead = next(op for op in operands if is_distributed(op))
    home = lead.fragments[0]
    if _across():
        mine = [f.framework for f in lead.fragments if f.is_local]
        framework = mine[0] if mine else get_default_layout().framework
        device = _distributed.local_device()
        whole = [op.gather(framework=framework, device=device) if is_distributed(op) else op for op in operands]
        return Collected(whole, executor(framework, device), across=True, device=lead.device)
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
    return Collected(arrays, ex, device=lead.device)


def settle(array: Any, like: Collected) -> Any:
    """A result array of a collected call as a tensor laid out by the policy."""
    xp = like.xp
    if not hasattr(array, "shape") or not hasattr(array, "__dlpack__"):
        array = xp.asarray(array)
    device = like.executor.device
    shape = tuple(int(n) for n in array.shape)
    if like.across:  # every process computed the same result: rank 0's is spread
        return spread_host_array(array, layout_for(shape), like.executor.framework)
    here = Layout.single(shape, device)
    out = from_fragments([array], here)
    wanted = layout_for(shape) if like.device is None else layout_of(shape, like.device)
    if wanted.same_distribution(here):
        return out
    return out.redistribute(wanted)

