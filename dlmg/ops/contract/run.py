"""Running a contraction plan on tensors: moves, local einsums, SUMMA panels.

Every local product runs in the framework of the lead fragment (which the
output fragment keeps), on its device, through the adapter's
:meth:`~dlmg.adapters.Adapter.einsum`; a follower fragment of another
framework is handed over through DLPack first (:func:`move_array`). Moves are
:meth:`~dlmg.DistributedTensor.redistribute` calls, so that they run in one
process or across processes through the engine's collectives alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...adapters.capabilities import Delegating, Delegation
from ...layout import Layout
from ..dispatch import executor, move_array, new_tensor
from .._executor import fail
from .equation import LETTERS
from .merge import Join, joins
from .plan import EinsumPlan, Local, Move
from .summa import Summa, run_summa

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["delegation", "run_delegated", "run_plan", "run_local"]


def _compact(subscripts: str) -> str:
    """The same subscripts with letters renamed from ``a`` on (the plan's letters stay valid
    but a short, canonical string reads better in errors and lets frameworks cache)."""
    mapping: dict[str, str] = {}
    for ch in subscripts:
        if ch in LETTERS and ch not in mapping:
            mapping[ch] = LETTERS[len(mapping)]
    return "".join(mapping.get(ch, ch) for ch in subscripts)


def _operand(frag: Any, ex: Any, tensor_dtype: str, dtype: str) -> Any:
    """A fragment's array in ``ex``'s framework (handed over through DLPack) and ``dtype``."""
    a = frag.array
    if frag.framework != ex.framework:
        a = move_array(a, ex, frag.adapter)
    return a if tensor_dtype == dtype else ex.xp.astype(a, ex.dtype(dtype))


def _run_join(join: Join, subscripts: str, lead: "DistributedTensor", follower: "DistributedTensor",
              dtype: str, arrays: list[Any]) -> bool:
    """One einsum over the joined lead fragments of ``join``, its result cut into their output
    fragments; ``False`` (nothing done) where they are not all of one framework here."""
    first = lead.fragments[join.triples[0][1]]
    if not first.is_local or any(lead.fragments[f].framework != first.framework for _, f, _ in join.triples):
        return False
    ex = executor(first.framework, first.device)
    try:
        parts = [_operand(lead.fragments[f], ex, lead.dtype, dtype) for _, f, _ in join.triples]
        other = _operand(follower.fragments[join.triples[0][2]], ex, follower.dtype, dtype)
        joined = ex.xp.concat(parts, axis=join.lead_axis)
        result = ex.run(lambda xp, a, b: ex.adapter.einsum(subscripts, a, b), joined, other)
    except Exception as exc:
        raise fail(f"dlmg.einsum ({subscripts!r})", join.triples[0][1], ex, exc) from exc
    start = 0
    for (o, f, _), part in zip(join.triples, parts):
        stop = start + ex.adapter.shape_of(part)[join.lead_axis]
        cut = [slice(None)] * len(ex.adapter.shape_of(result))
        cut[join.out_axis] = slice(start, stop)
        arrays[o] = result[tuple(cut)]
        start = stop
    return True


def run_local(step: Local, lead: "DistributedTensor", follower: "DistributedTensor | None",
              dtype: str) -> "DistributedTensor":
    """``step`` on the local fragments: one einsum per output fragment this process holds, or
    one per device for fragments that join (:mod:`.merge`)."""
    subscripts = _compact(step.subscripts)
    arrays: list[Any] = [None] * step.pairing.out.nfragments
    done: frozenset[int] = frozenset()
    if follower is not None:
        found, done = joins(step.subscripts, lead.layout, follower.layout, step.pairing)
        for join in found:
            if not _run_join(join, subscripts, lead, follower, dtype, arrays):
                done = done - {o for o, _, _ in join.triples}
    for o, f, g in step.pairing.triples:
        if o in done:
            continue
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


def _whole_framework(tensors: Sequence["DistributedTensor"]) -> Delegating | None:
    """The adapter of every fragment of ``tensors`` when it is one and takes whole operations."""
    if not tensors or any(not t.fragments or not all(f.is_local for f in t.fragments) for t in tensors):
        return None  # one controller only: every fragment here (another process's are not)
    adapter = tensors[0].fragments[0].adapter
    if not isinstance(adapter, Delegating):
        return None
    if any(f.adapter is not adapter for t in tensors for f in t.fragments):
        return None
    return adapter


def delegation(tensors: Sequence["DistributedTensor"], equation: str, dtype: str, out: Layout) -> Delegation | None:
    """The one framework operation that would run the whole contraction of ``tensors`` into
    ``out`` (:meth:`~dlmg.adapters.capabilities.Delegating.delegated_einsum`), or ``None``:
    operands of mixed frameworks or dtypes, pending sums, several processes, layouts the
    framework cannot express."""
    adapter = _whole_framework(tensors)
    if adapter is None or any(t.dtype != dtype or t.layout.partial is not None for t in tensors) \
            or out.partial is not None:
        return None
    return adapter.delegated_einsum(_compact(equation), tuple(t.layout for t in tensors), out, dtype)


def run_delegated(plan: EinsumPlan, tensors: Sequence["DistributedTensor"], dtype: str) -> "DistributedTensor | None":
    """``plan`` run as its one delegated operation; ``None`` where the framework declines."""
    found = delegation(tensors, plan.equation, dtype, plan.out)
    if found is None:
        return None
    arrays = found.run([f.array for t in tensors for f in t.fragments])
    return None if arrays is None else new_tensor(list(arrays), plan.out, dtype)


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
