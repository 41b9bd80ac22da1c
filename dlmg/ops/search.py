"""``searchsorted`` of a distributed sorted tensor: bounds exchanged once, requests routed
to their owner, local binary searches.

The sorted 1-D tensor ``x1`` is a slab (redistributed into one first where it
is dealt out cyclically), so fragment ``j`` holds one run. Its first value and
its offset are shared once (:func:`~dlmg.ops.pieces.share`, two numbers per
fragment). Each fragment of ``x2`` finds, per value, the one run where its
answer lies (a search among the firsts), and sends its values to the owners of
those runs (one all-to-all); each owner answers by a local binary search plus
its offset, and the answers come back by the reverse all-to-all into the
layout of ``x2``. This is the owner-routed request of distributed hash and
range lookups (as in the distributed sorted-array search of Heat's
``searchsorted`` and of PGAS range queries); no fragment of ``x1`` leaves its
owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DtypeError
from ._dtypes import index_dtype, kind_of, narrow_for
from ._executor import array_device, fail
from .contract.pending import settled
from .dispatch import is_distributed, new_tensor
from .pieces import alltoall, host, members, on, share
from .scan import is_slab_along, slab_along
from .sort import work_dtype

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["searchsorted"]



def searchsorted(x1: "DistributedTensor", x2: "DistributedTensor", /, *, side: str = "left") -> "DistributedTensor":
    """Where the values of ``x2`` would go in the sorted 1-D ``x1`` (see the module).

    Parameters
    ----------
    x1 : DistributedTensor
        1-D, sorted increasingly (NaNs last).
    x2 : DistributedTensor
        The values, any shape.
    side : {"left", "right"}
        The first or the last suitable position among equal values.

    Returns
    -------
    DistributedTensor
        Indices into ``x1`` (int64, int32 where a JAX fragment takes part without
        x64), in ``x2``'s layout, on its devices and processes.
    """
    for name, t in (("x1", x1), ("x2", x2)):
        if not is_distributed(t):
            raise TypeError(f"dlmg.searchsorted: {name} must be a DistributedTensor, got {type(t).__name__}")
    if side not in ("left", "right"):
        raise ValueError(f"dlmg.searchsorted: side must be 'left' or 'right', got {side!r}")
    x1, x2 = settled(x1), settled(x2)
    if x1.ndim != 1:
        raise ValueError(f"dlmg.searchsorted: x1 must be 1-D, got shape {x1.shape}")
    if "c" in (kind_of(x1.dtype), kind_of(x2.dtype)):
        raise DtypeError("dlmg.searchsorted is not defined for complex tensors")
    frameworks = (*x1.frameworks, *x2.frameworks)
    common = work_dtype(narrow_for(str(np.result_type(np.dtype(str(x1.dtype)), np.dtype(str(x2.dtype)))),
                                   frameworks), frameworks)
    idx = narrow_for(index_dtype(), (*x1.frameworks, *x2.frameworks))
    if not is_slab_along(x1.layout, 0):
        x1 = x1.redistribute(slab_along(x1.layout, 0))
    lay1 = x1.layout
    slots = members(x1, [lay1.fragment_index((c,), 0) for c in range(lay1.grid[0])])
    sizes = [f.shape[0] for f in (lay1.fragments[m.index] for m in slots)]
    fields = {"x1": lay1, "x2": x2.layout, "side": side}

    def firsts() -> dict[int, Any]:
        found = {}
        for m in slots:
            if m.local and x1.fragments[m.index].shape[0]:
                found[m.index] = host(x1.fragments[m.index].array[:1], m.executor).astype(common).tolist()[0]
        return found

    first = share("dlmg.searchsorted (bounds)", firsts, **fields)
    owners = [k for k, m in enumerate(slots) if sizes[k]]  # positions in slots of runs with elements
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    bounds = np.asarray([first[slots[k].index] for k in owners], dtype=common)
    floating = kind_of(common) == "f"
    # not every framework's searchsorted orders NaNs: they are searched for apart
    numbered = int(np.count_nonzero(~np.isnan(bounds))) if floating else len(bounds)
    total = int(offsets[-1])
    askers = members(x2)
    plan: dict[int, tuple[Any, Any, list[int]]] = {}

    def requests(m: Any) -> list[Any]:
        ex = m.executor
        arr = x2.fragments[m.index].array

        def route(xp: Any, a: Any) -> tuple[Any, Any, Any]:
            v = xp.reshape(a, (-1,))
            if str(v.dtype) != str(ex.dtype(common)):
                v = xp.astype(v, ex.dtype(common))
            if not owners:
                return v, None, None
            if numbered > 1:  # the run of each value: how many runs after the first start at or below it
                where = xp.searchsorted(on(bounds[1:numbered], ex), v, side=side)
            else:
                where = xp.zeros(v.shape, dtype=xp.int32, device=array_device(v))
            if floating and bool(xp.any(xp.isnan(v))):
                where = xp.where(xp.isnan(v), xp.full_like(where, max(numbered - 1, 0)), where)
            perm = xp.argsort(where, stable=True)
            cuts = [0]
            for j in range(len(owners)):
                cuts.append(cuts[-1] + int(xp.sum(xp.astype(where == j, xp.int32))))
            del where
            return xp.take(v, perm), perm, cuts

        ordered, perm, c = ex.run(route, arr)
        pieces: list[Any] = [None] * len(slots)
        plan[m.index] = [perm]
        if perm is None:
            return pieces
        for j, k in enumerate(owners):
            if c[j + 1] > c[j]:
                pieces[k] = ordered[c[j]:c[j + 1]]
        return pieces

    asked = alltoall("dlmg.searchsorted (requests)", askers, slots, requests, common, **fields)
    answers: dict[int, list[Any]] = {}
    for k, m in enumerate(slots):
        if not m.local:
            continue
        ex = m.executor
        got = asked.pop(m.index, [])
        run = x1.fragments[m.index].array
        off = int(offsets[k])

        def answer(xp: Any, r: Any, pieces: list[Any]) -> list[Any]:
            if str(r.dtype) != str(ex.dtype(common)):
                r = xp.astype(r, ex.dtype(common))
            want = getattr(xp, idx)
            numbers = r.shape[0]
            if floating and numbers:
                numbers -= int(host(xp.sum(xp.astype(xp.isnan(r), xp.int32)), ex))
            nan_at = numbers if side == "left" else total - off
            out = []
            for p in pieces:
                if p is None:
                    out.append(None)
                    continue
                found = xp.astype(xp.searchsorted(r[:numbers], p, side=side), want)
                if floating:
                    found = xp.where(xp.isnan(p), xp.full_like(found, nan_at), found)
                out.append(found + off)
            return out

        try:
            answers[m.index] = ex.run(answer, run, got)
        except Exception as exc:
            raise fail("dlmg.searchsorted", m.index, ex, exc) from exc
    asked.clear()
    back = alltoall("dlmg.searchsorted (answers)", slots, askers, lambda m: answers.pop(m.index), idx, joined=True,
                    **fields)
    out: list[Any] = [None] * x2.layout.nfragments
    for m in askers:
        if not m.local:
            continue
        ex = m.executor
        box = plan.pop(m.index) + [back.pop(m.index)]
        shape = x2.layout.fragments[m.index].shape

        def place(xp: Any, box: list[Any]) -> Any:
            want = getattr(xp, idx)
            if box[0] is None:
                return ex.adapter.full(shape, 0, idx, ex.device)
            inverse, box[0] = xp.argsort(box[0]), None  # (the permutation is released once inverted)
            got, box[1] = box[1], None
            return xp.reshape(xp.astype(xp.take(got, inverse), want, copy=False), shape)

        try:
            out[m.index] = ex.run(place, box)
        except Exception as exc:
            raise fail("dlmg.searchsorted", m.index, ex, exc) from exc
    return new_tensor(out, x2.layout.dense, idx)
