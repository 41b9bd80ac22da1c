"""Pending sums: resolving them (a redistribution) and the operations that keep them.

A tensor whose layout says ``partial="sum"`` (``"max"``, ``"min"``) holds in
its replicas the addends (candidates) of its value. :func:`resolve` turns it
into any ordinary layout: the replica mode becomes a leading mode of the
stacked tensor (a view of each fragment), the stacked tensor is redistributed
so that every target fragment receives all addends of its elements (the
phases of :mod:`.phases`), and each fragment reduces over that mode in its own
framework. Everything moves through :meth:`~dlmg.DistributedTensor.redistribute`,
in one process or across processes alike, except one common case: when every
process holds one whole addend and receives one whole copy of the value, the
resolution is the engine's own all-reduce of a host copy of each addend (the
classic collective; the stacking redistribution would move every addend to
every process).
"""

from __future__ import annotations

import builtins
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...distributed.state import current
from ...distributed.agree import conclude, describe, exclusive, prepare, prepare_vote
from ...errors import LayoutError
from ...layout import Layout
from ..dispatch import executor, new_tensor
from .._dtypes import kind_of
from .._executor import fail, move_array
from .._pending import settled
from ..pieces import host
from .api import einsum
from .equation import LETTERS
from .layouts import pair
from .phases import resolve_phases, resolved_layout, stacked_layout, stacked_target

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["resolve", "settled", "relabel", "reduce_pending"]


def relabel(x: "DistributedTensor", layout: Layout) -> "DistributedTensor":
    """``x``'s fragments under ``layout`` (same fragments, in order; no copy)."""
    return new_tensor([f.array if f.is_local else None for f in x.fragments], layout, x.dtype)


def _each_local(x: "DistributedTensor", layout: Layout, order: list[int], fn: Any, what: str) -> "DistributedTensor":
    """A tensor of ``layout`` whose fragment ``i`` is ``fn(xp, array)`` of ``x``'s fragment ``order[i]``."""
    arrays: list[Any] = [None] * layout.nfragments
    for i, f in enumerate(order):
        frag = x.fragments[f]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            result = ex.run(fn, frag.array)
            arrays[i] = result if hasattr(result, "__dlpack__") else ex.xp.asarray(result)  # NumPy's 0-d scalars
        except Exception as exc:
            raise fail(what, f, ex, exc) from exc
    return new_tensor(arrays, layout, x.dtype)


_REDUCE = {
    "sum": lambda xp, a: xp.sum(a, axis=0),
    "max": lambda xp, a: xp.max(a, axis=0),
    "min": lambda xp, a: xp.min(a, axis=0),
}


def _one_phase(x: "DistributedTensor", target: Layout, framework: str | None) -> "DistributedTensor":
    src = x.layout
    k, cells = src.nreplicas, src.ngrid
    order = [c + cells * r for c in range(cells) for r in range(k)]
    stacked = _each_local(x, stacked_layout(src), order, lambda xp, a: xp.expand_dims(a, axis=0),
                          "resolving a pending sum (stacking its addends)")
    gathered = stacked.redistribute(stacked_target(k, target.dense), framework=framework)
    reduce = _REDUCE[src.partial or "sum"]
    out = _each_local(gathered, target.dense, list(range(target.nfragments)), reduce,
                      f"resolving a pending {src.partial}")
    return out if target.element_strides is None else out.redistribute(target)


def resolve(x: "DistributedTensor", target: Layout | None = None, framework: str | None = None) -> "DistributedTensor":
    """The value of a pending tensor ``x`` in ``target`` (default: its own split, one copy).

    Parameters
    ----------
    x : DistributedTensor
        A tensor whose layout has ``partial`` set.
    target : Layout, optional
        Any layout of ``x``'s shape without ``partial`` (or ``x``'s own layout:
        nothing to do).
    framework : str, optional
        The frameworks of the new fragments (as :meth:`redistribute`).
    """
    src = x.layout
    if target is None:
        target = resolved_layout(src)
    if target.partial is not None:
        if target.same_distribution(src):
            return x if framework is None else x.to(framework)
        raise LayoutError(
            f"cannot redistribute a pending {src.partial} into another pending layout {target!r}; "
            f"resolve it first, e.g. x.redistribute({resolved_layout(src)!r})"
        )
    if target.shape != src.shape:
        raise LayoutError(f"redistribute: the target layout has shape {target.shape}, the tensor {src.shape}")
    if src.nreplicas == 1:
        return relabel(x, resolved_layout(src)).redistribute(target, framework=framework)
    if _all_reduces(x, target):
        return _all_reduced(x, target, framework)
    phases = resolve_phases(src, target)
    out = _one_phase(x, phases[0], framework)
    for phase in phases[1:]:
        out = out.redistribute(phase, framework=framework)
    return out


#: dtypes every engine reduces as they are (NumPy holds them; gloo has no unsigned types)
_ENGINE_DTYPES = frozenset({"float32", "float64", "complex64", "complex128", "int32", "int64"})


def _all_reduces(x: "DistributedTensor", target: Layout) -> bool:
    """Whether resolving ``x`` into ``target`` is one all-reduce: every process holds one
    whole addend and receives one whole copy of the value."""
    engine = current()
    if engine is None or engine.world_size < 2:
        return False
    src, everyone = x.layout, list(range(engine.world_size))
    return (src.ngrid == 1 and target.ngrid == 1 and target.element_strides is None
            and sorted(src.ranks) == everyone and sorted(target.ranks) == everyone
            and x.dtype in _ENGINE_DTYPES and (not x.dtype.startswith("complex") or src.partial == "sum"))


def _all_reduced(x: "DistributedTensor", target: Layout, framework: str | None) -> "DistributedTensor":
    """The value of ``x`` in ``target`` by the engine's own all-reduce of each process's
    addend (staged through a host copy: the addend itself stays as it is)."""
    engine = current()
    assert engine is not None
    src = x.layout
    description = describe("resolve a pending reduction by all-reduce", layout=src, target=target,
                           dtype=x.dtype, framework=framework)
    with exclusive(engine, "resolving a pending reduction"):
        def work() -> tuple[np.ndarray, str]:
            (frag,) = x.local_fragments
            ex = executor(frag.framework, frag.device)
            return np.array(host(frag.array, ex), copy=True, order="C"), str(frag.framework)

        (buf, own), _ = prepare_vote(engine, description, lambda: (work(), None))

        def run() -> "DistributedTensor":
            engine.allreduce(buf.reshape(-1), src.partial or "sum")
            arrays: list[Any] = [None] * target.nfragments
            for i in target.fragments_of(engine.rank):
                device = target.fragments[i].device
                arrays[i] = move_array(buf, executor(framework or own, device))
            return new_tensor(arrays, target, x.dtype)

        return conclude(engine, description, run)


def _extremum(x: "DistributedTensor", name: str, axes: tuple[int, ...]) -> "DistributedTensor":
    """``max`` (``min``) over ``axes`` of a pending max (min): each fragment reduces its own
    candidates, and the fragments along split reduced modes become more candidates of the
    result (the layout a sum over those modes gives, with this ``partial``). No communication;
    across processes the processes first agree on the call, as :func:`einsum` does."""
    letters = LETTERS[: x.ndim]
    kept = "".join(c for m, c in enumerate(letters) if m not in axes)
    extents = tuple(zip(letters, x.shape))

    def plan() -> Any:
        pairing = pair((letters, x.layout.replace(partial="sum")), None, kept, extents)
        assert pairing is not None  # (one operand always pairs)
        out = pairing.out if pairing.out.partial is None else pairing.out.replace(partial=x.layout.partial)
        return pairing, out

    engine = current()
    if engine is not None and x.layout.nprocesses > 1:
        pairing, out = prepare(engine, describe(f"dlmg.{name}", axes=axes, layout=x.layout, dtype=x.dtype), plan)
    else:
        pairing, out = plan()
    arrays: list[Any] = [None] * out.nfragments
    for o, f, _ in pairing.triples:
        frag = x.fragments[f]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        shape = out.fragments[o].shape
        try:
            if builtins.any(frag.shape[a] == 0 for a in axes):  # no candidate here: the reduction's identity
                result = ex.adapter.full(shape, _identity(name, x.dtype), x.dtype, frag.device)
            else:
                result = ex.run(lambda xp, a: getattr(xp, name)(a, axis=axes), frag.array)
            arrays[o] = result if hasattr(result, "__dlpack__") else ex.xp.asarray(result)  # NumPy's 0-d scalars
        except Exception as exc:
            raise fail(f"dlmg.{name} of a pending {x.layout.partial}", f, ex, exc) from exc
    return new_tensor(arrays, out, x.dtype)


def _identity(name: str, dtype: str) -> Any:
    """The value no candidate loses to: the lowest of ``dtype`` for ``max``, the highest for ``min``."""
    kind = kind_of(dtype)
    if kind == "b":
        return name == "min"
    if kind == "f":
        return -math.inf if name == "max" else math.inf
    limits = np.iinfo(np.dtype(dtype))
    return int(limits.min if name == "max" else limits.max)


def reduce_pending(x: "DistributedTensor", name: str, axes: tuple[int, ...] | None, keepdims: bool,
                   dtype: str | None) -> "DistributedTensor | None":
    """A reduction of a pending ``x``: a sum over some modes keeps the pending sum (an einsum
    that each replica runs on its own), and so does ``max`` (``min``) of a pending max (min);
    over every mode it resolves first (``None``: the caller goes on with
    :meth:`redistribute`'s result, see :func:`resolve`), as over a mode of extent 0.
    Others resolve first (``None``)."""
    some = axes is not None and not keepdims and dtype in (None, x.dtype)
    if x.layout.partial == "sum" and name == "sum" and some:
        letters = LETTERS[: x.ndim]
        kept = "".join(c for m, c in enumerate(letters) if m not in axes)  # type: ignore[operator]
        return einsum(f"{letters}->{kept}", x, pending=True)
    if x.layout.partial == name and name in ("max", "min") and some and kind_of(x.dtype) != "c":
        assert axes is not None
        if builtins.all(x.shape[a] for a in axes):
            return _extremum(x, name, axes)
        return None  # nothing to reduce over: the ordinary reduction says so
    return None
