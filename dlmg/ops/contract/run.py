"""Running a contraction plan on tensors: moves, local einsums, SUMMA panels.

Every local product runs in the framework of the lead fragment (which the
output fragment keeps), on its device, through the adapter's
:meth:`~dlmg.adapters.Adapter.einsum`; a follower fragment of another
framework is handed over through DLPack first (:func:`move_array`). Moves are
:meth:`~dlmg.DistributedTensor.redistribute` calls, so that they run in one
process or across processes through the engine's collectives alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..dispatch import executor, move_array, new_tensor
from .._executor import fail
from .equation import LETTERS
from .plan import EinsumPlan, Local, Move
from .summa import Summa, run_summa

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["run_plan", "run_local"]


def _compact(subscripts: str) -> str:
    """The same subscripts with letters renamed from ``a`` on (the plan's letters stay valid
    but a short, canonical string reads better in errors and lets frameworks cache)."""
    mapping: dict[str, str] = {}
    for ch in subscripts:
        if ch in LETTERS and ch not in mapping:
            mapping[ch] = LETTERS[len(mapping)]
    return "".join(mapping.get(ch, ch) for ch in subscripts)


def run_local(step: Local, lead: "DistributedTensor", follower: "DistributedTensor | None",
              dtype: str) -> "DistributedTensor":
    """``step`` on the local fragments: one einsum per output fragment this process holds."""
    subscripts = _compact(step.subscripts)
    arrays: list[Any] = [None] * step.pairing.out.nfragments
    for o, f, g in step.pairing.triples:
        frag = lead.fragments[f]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            a = frag.array
            operands = [a if lead.dtype == dtype else ex.xp.astype(a, ex.dtype(dtype))]
            if follower is not None and g is not None:
                other = follower.fragments[g]
                b = other.array
                if other.framework != ex.framework:
                    b = move_array(b, ex, other.adapter)
                operands.append(b if follower.dtype == dtype else ex.xp.astype(b, ex.dtype(dtype)))
            result = ex.run(lambda xp, *ops: ex.adapter.einsum(subscripts, *ops), *operands)
            arrays[o] = result if hasattr(result, "__dlpack__") else ex.xp.asarray(result)  # NumPy's 0-d scalars
        except Exception as exc:
            raise fail(f"dlmg.einsum ({subscripts!r})", f, ex, exc) from exc
    return new_tensor(arrays, step.pairing.out, dtype)


def run_plan(plan: EinsumPlan, operands: list["DistributedTensor"], dtype: str) -> "DistributedTensor":
    """Run ``plan`` on ``operands`` (named ``x0``, ``x1``... in the plan)."""
    values: dict[str, Any] = {f"x{i}": t for i, t in enumerate(operands)}
    last = None
    for step in plan.steps:
        if isinstance(step, Move):
            values[step.name] = last = values[step.name].redistribute(step.dst)
        elif isinstance(step, Local):
            follower = None if step.follower is None else values[step.follower]
            values[step.out] = last = run_local(step, values[step.lead], follower, dtype)
        elif isinstance(step, Summa):
            values[step.out_name] = last = run_summa(step, values[step.a], values[step.b], dtype,
                                                     _compact(step.subscripts))
        else:  # pragma: no cover - the plan makes only these
            raise AssertionError(type(step))
    assert last is not None
    return last
