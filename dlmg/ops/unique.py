"""Results whose size depends on the data: the ``unique_*`` functions and ``nonzero``.

``unique_values`` and ``unique_counts`` run the classic distributed
duplicate elimination by range partitioning (as the sample sort's
partitioning, Blelloch et al. 1991; the distinct-value plan of parallel
databases, DeWitt and Gray, CACM 1992): each fragment sorts what it holds and
keeps one copy of each value with its count; the fragments' distinct values are
partitioned by splitters drawn from samples so that every copy of a value lands
on one owner (one all-to-all of values and counts,
:func:`~dlmg.ops.sort.sample_sort` with ``mode="value"``); each owner merges and
keeps one copy again, adding the counts; the owners' sizes are shared and the
sorted values are laid out as a balanced slab over the devices and processes of
the tensor's fragments (replica 0), by a second all-to-all
(:func:`~dlmg.ops.sort.rebalance`). Each NaN is its own value, as the standard says.
``unique_inverse`` and ``unique_all`` then find each element's value among the
distinct ones by a distributed :func:`~dlmg.ops.search.searchsorted` (requests
routed to the owner of their range), so the inverse indices come out in the
tensor's own layout; each NaN's own place is found from the NaNs' positions,
shared (one integer per NaN).

``nonzero`` finds each fragment's nonzero elements and their global row-major
positions locally; where the fragments' positions follow fragment order (a slab
along the first mode) an exclusive scan of the counts places them, otherwise
they are sample-sorted; either way one all-to-all lays the positions out as a
balanced slab, and each mode's indices are computed from them fragment by
fragment.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DtypeError
from ..layout import Layout
from ._dtypes import index_dtype, kind_of, narrow_for
from ._executor import array_device, fail
from .contract.pending import settled
from .dispatch import executor, is_distributed, map_fragments, new_tensor
from .pieces import Member, host, members, on, share
from .search import searchsorted
from .scan import is_slab_along
from .sort import rebalance, sample_sort, work_dtype

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["unique_values", "unique_counts", "unique_inverse", "unique_all", "nonzero", "UniqueCountsResult",
           "UniqueInverseResult", "UniqueAllResult"]

UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])
UniqueInverseResult = namedtuple("UniqueInverseResult", ["values", "inverse_indices"])
UniqueAllResult = namedtuple("UniqueAllResult", ["values", "indices", "inverse_indices", "counts"])


def _check(x: Any, name: str) -> Any:
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    return settled(x)


def _slots(x: "DistributedTensor") -> list[Member]:
    return members(x, [f.index for f in x.layout.fragments if f.replica == 0])


def _slab_over(slots: list[Member], n: int) -> tuple[Layout, list[Member]]:
    """The balanced 1-D slab of ``n`` elements over the slots' devices and processes, and its
    fragments as members (each in the framework of the slot it replaces)."""
    layout = Layout.slab((n,), 0, [m.device for m in slots], ranks=[m.rank for m in slots])
    return layout, [Member(j, m.rank, m.device, m.executor) for j, m in enumerate(slots)]



def _runs(xp: Any, v: Any, counts: Any, idx: str, count: bool = True) -> tuple[Any, Any]:
    """The distinct values of the sorted ``v`` and (with ``count``) how many each stands for
    (``counts``: the weight of each element, ``None`` for 1 each), counted in ``idx``. Where
    every value is distinct, ``v`` itself."""
    n = v.shape[0]
    want = getattr(xp, idx)
    if n == 0:
        return v, (xp.zeros((0,), dtype=want, device=array_device(v)) if count else None)
    keep = xp.concat([xp.ones((1,), dtype=xp.bool, device=array_device(v)), v[1:] != v[:-1]])
    if bool(xp.all(keep)):
        if not count:
            return v, None
        return v, (xp.ones((n,), dtype=want, device=array_device(v)) if counts is None else xp.astype(counts, want))
    starts = xp.nonzero(keep)[0]
    del keep
    values = xp.take(v, starts)
    if not count:
        return values, None
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype, device=array_device(starts))])
    if counts is None:
        return values, xp.astype(ends - starts, want)
    total = xp.cumulative_sum(xp.astype(counts, want), include_initial=True)
    return values, xp.astype(xp.take(total, ends) - xp.take(total, starts), want)


def _flat_positions(layout: Layout, index: int) -> np.ndarray:
    """The global row-major positions of fragment ``index``'s elements, in its local order."""
    strides = [math.prod(layout.shape[m + 1:]) for m in range(layout.ndim)]
    pos = np.zeros((), dtype=np.int64)
    for m in range(layout.ndim):
        own = layout.owned_indices(index, m).astype(np.int64) * strides[m]
        pos = np.add.outer(pos, own) if m else own
    return np.ascontiguousarray(pos).reshape(-1)


def _local_runs(xp: Any, a: Any, work: Any, first: Any, idx: str, count: bool) -> tuple[Any, Any, Any]:
    """One fragment's distinct values, (with ``count``) their counts and (given ``first``, the
    elements' global positions) the first position holding each; compared in ``work``."""
    flat = xp.reshape(a, (-1,))
    if flat.dtype != work:
        flat = xp.astype(flat, work)
    if first is None:
        v, c = _runs(xp, xp.sort(flat), None, idx, count)
        return v, c, None
    perm = xp.argsort(flat, stable=True)
    v = xp.take(flat, perm)
    pos = xp.take(first, perm)
    n = v.shape[0]
    if n == 0:
        return v, xp.zeros((0,), dtype=getattr(xp, idx), device=array_device(v)), pos
    keep = xp.concat([xp.ones((1,), dtype=xp.bool, device=array_device(v)), v[1:] != v[:-1]])
    starts = xp.nonzero(keep)[0]
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype, device=array_device(starts))])
    return xp.take(v, starts), xp.astype(ends - starts, getattr(xp, idx)), xp.take(pos, starts)


def _merged_runs(xp: Any, v: Any, counts: Any, first: Any, idx: str, count: bool) -> tuple[Any, Any, Any]:
    """A bucket's distinct values, summed counts and smallest first positions (sorted by
    value, then first position)."""
    values, summed = _runs(xp, v, counts, idx, count)
    if first is None or v.shape[0] == 0:
        return values, summed, first
    keep = xp.concat([xp.ones((1,), dtype=xp.bool, device=array_device(v)), v[1:] != v[:-1]])
    return values, summed, xp.take(first, xp.nonzero(keep)[0])


def _unique(x: "DistributedTensor", name: str, with_counts: bool, with_indices: bool = False) -> Any:
    x = _check(x, name)
    if kind_of(x.dtype) == "c":
        raise DtypeError(f"dlmg.{name} is not defined for complex tensors ({x.dtype})")
    slots = _slots(x)
    dtype = work_dtype(x.dtype, x.frameworks)
    values: dict[int, Any] = {}
    weights: dict[int, Any] = {}
    firsts: dict[int, Any] | None = {} if with_indices else None
    idx = narrow_for(index_dtype(), x.frameworks)
    for m in slots:
        if not m.local:
            continue
        ex = m.executor
        pos = on(_flat_positions(x.layout, m.index).astype(idx), ex) if with_indices else None
        try:
            v, c, f = ex.run(_local_runs, x.fragments[m.index].array, ex.dtype(dtype), pos, idx, with_counts)
        except Exception as exc:
            raise fail(f"dlmg.{name}", m.index, ex, exc) from exc
        values[m.index] = v
        if c is not None:
            weights[m.index] = c
        if firsts is not None:
            firsts[m.index] = f
        v = c = f = pos = None
    fields = {"layout": x.layout, "op": name}
    merged, merged_f, _ = sample_sort(f"dlmg.{name}", slots, values, firsts, "value", dtype, tie_dtype=idx,
                                      ordered=not with_indices,
                                      sorted_already=True, payload=weights if with_counts else None,
                                      payload_dtype=idx, **fields)
    distinct: dict[int, Any] = {}
    counted: dict[int, Any] = {}
    earliest: dict[int, Any] = {}
    for m in slots:
        if m.local:
            ex = m.executor
            distinct[m.index], c, f = ex.run(_merged_runs, merged.pop(m.index), weights.pop(m.index, None),
                                             merged_f.pop(m.index, None), idx, with_counts)
            if c is not None:
                counted[m.index] = c
            if f is not None:
                earliest[m.index] = f
            c = f = None
    sizes = share(f"dlmg.{name} (sizes)", lambda: {i: int(v.shape[0]) for i, v in distinct.items()}, **fields)
    total = sum(sizes.values())
    layout, receivers = _slab_over(slots, total)
    out = rebalance(f"dlmg.{name} (rebalance)", slots, distinct, sizes, layout, receivers, dtype, **fields)
    if dtype != str(x.dtype):
        out = [None if a is None else r.executor.run(lambda xp, v: xp.astype(v, r.executor.dtype(str(x.dtype))), a)
               for a, r in zip(out, receivers)]
    result = new_tensor(out, layout, x.dtype)
    if not with_counts:
        return result

    def laid_out(what: str, store: dict[int, Any]) -> "DistributedTensor":
        got = rebalance(f"dlmg.{name} ({what})", slots, store, sizes, layout, receivers, idx, **fields)
        return new_tensor(got, layout, idx)

    counts = laid_out("counts", counted)
    if not with_indices:
        return UniqueCountsResult(result, counts)
    return result, laid_out("indices", earliest), counts


def _inverse(x: "DistributedTensor", values: "DistributedTensor") -> "DistributedTensor":
    """Each element's position in the distinct ``values`` (a distributed search); each NaN,
    a distinct value, maps to its own place after the numbers, in row-major order."""
    found = searchsorted(values, x, side="left")
    if kind_of(x.dtype) != "f":
        return found
    lay = x.layout

    def nans() -> dict[int, Any]:
        out = {}
        for f in x.fragments:
            if f.is_local and f.replica == 0:
                ex = executor(f.framework, f.device)
                mask = host(ex.run(lambda xp, a: xp.reshape(xp.isnan(a), (-1,)), f.array), ex)
                out[f.index] = _flat_positions(lay, f.index)[np.asarray(mask, dtype=bool)]
        return out

    every = share("dlmg.unique_inverse (NaN positions)", nans, layout=lay)
    where = np.sort(np.concatenate([np.zeros(0, dtype=np.int64), *every.values()]))
    if where.size == 0:
        return found
    numbers = values.shape[0] - where.size
    arrays: list[Any] = [None] * lay.nfragments
    for f in x.fragments:
        if not f.is_local:
            continue
        ex = executor(f.framework, f.device)
        rank = (numbers + np.searchsorted(where, _flat_positions(lay, f.index))).reshape(f.shape)
        rank = on(rank.astype(str(found.dtype)), ex)
        arrays[f.index] = ex.run(lambda xp, a, r, g: xp.where(xp.isnan(a), xp.astype(r, g.dtype), g),
                                 f.array, rank, found.fragments[f.index].array)
    return new_tensor(arrays, found.layout, found.dtype)


def unique_inverse(x: "DistributedTensor", /) -> UniqueInverseResult:
    """The distinct values of ``x`` and, per element, the position of its value among them.

    Returns
    -------
    UniqueInverseResult
        ``(values, inverse_indices)``: the values as :func:`unique_values` gives them, the
        indices in ``x``'s shape and layout (a :func:`~dlmg.ops.search.searchsorted` of
        ``x`` in the values).
    """
    values = _unique(x, "unique_inverse", False)
    return UniqueInverseResult(values, _inverse(settled(x), values))


def unique_all(x: "DistributedTensor", /) -> UniqueAllResult:
    """The distinct values of ``x``, the first position of each, the inverse indices and the
    counts (see :func:`unique_values` and :func:`unique_inverse`).

    The first positions (row-major, into the flattened ``x``) travel beside the values
    during the range partitioning, and each owner keeps the smallest.
    """
    values, indices, counts = _unique(x, "unique_all", True, True)
    return UniqueAllResult(values, indices, _inverse(settled(x), values), counts)


def unique_values(x: "DistributedTensor", /) -> "DistributedTensor":
    """The distinct values of ``x`` (flattened), increasing, by range partitioning (see the module).

    Returns
    -------
    DistributedTensor
        1-D, a balanced slab over the devices and processes of ``x``'s fragments.
    """
    return _unique(x, "unique_values", False)


def unique_counts(x: "DistributedTensor", /) -> UniqueCountsResult:
    """The distinct values of ``x`` and how often each occurs (see :func:`unique_values`).

    Returns
    -------
    UniqueCountsResult
        ``(values, counts)``, both in the layout :func:`unique_values` gives.
    """
    return _unique(x, "unique_counts", True)


def nonzero(x: "DistributedTensor", /) -> tuple["DistributedTensor", ...]:
    """The indices of ``x``'s nonzero elements in row-major order, one tensor per mode (see
    the module).

    Returns
    -------
    tuple of DistributedTensor
        Each 1-D, a balanced slab over the devices and processes of ``x``'s fragments.
    """
    x = _check(x, "nonzero")
    if x.ndim == 0:
        raise ValueError("dlmg.nonzero is not defined for 0-d tensors; use xp.reshape(x, (1,)) first")
    lay = x.layout
    shape = lay.shape
    strides = [math.prod(shape[m + 1:]) for m in range(x.ndim)]
    slots = _slots(x)
    flat: dict[int, Any] = {}
    idx = narrow_for(index_dtype(), x.frameworks)
    for m in slots:
        if not m.local:
            continue
        ex = m.executor
        fl = lay.fragments[m.index]
        # per mode: the first global index of a fragment holding one run there, else its indices
        owned = [fl.coords[k] * lay.block[k] if fl.nblocks[k] <= 1 else
                 on(lay.owned_indices(m.index, k).astype(idx), ex) for k in range(x.ndim)]

        def local(xp: Any, a: Any) -> Any:
            where = xp.nonzero(a)
            pos = None
            for k, w in enumerate(where):
                g = xp.astype(w, getattr(xp, idx), copy=False)
                if not isinstance(owned[k], int):
                    g = xp.take(owned[k], g)
                elif owned[k]:
                    g = g + owned[k]
                if strides[k] != 1:
                    g = g * strides[k]
                pos = g if pos is None else pos + g
            return pos

        try:
            flat[m.index] = ex.run(local, x.fragments[m.index].array)
        except Exception as exc:
            raise fail("dlmg.nonzero", m.index, ex, exc) from exc
    fields = {"layout": lay, "op": "nonzero"}
    in_order = is_slab_along(lay, 0) and all(g == 1 for g in lay.grid[1:])
    if in_order:
        counts = share("dlmg.nonzero (counts)", lambda: {i: int(v.shape[0]) for i, v in flat.items()}, **fields)
    else:
        flat, _, counts = sample_sort("dlmg.nonzero", slots, flat, None, "position", idx, **fields)
    layout, receivers = _slab_over(slots, sum(counts.values()))
    got = rebalance("dlmg.nonzero (rebalance)", slots, flat, counts, layout, receivers, idx, **fields)
    positions = new_tensor(got, layout, idx)
    if x.ndim == 1:
        return (positions,)
    out = []
    for k in range(x.ndim):
        s, n = strides[k], shape[k]
        out.append(map_fragments(lambda xp, p, s=s, n=n: xp.astype((p // s) % n, getattr(xp, idx)), (positions,),
                                 name="dlmg.nonzero"))
    return tuple(out)
