"""Results whose size depends on the data: ``unique_values``, ``unique_counts``, ``nonzero``.

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
from ._executor import fail
from .contract.pending import settled
from .dispatch import is_distributed, map_fragments, new_tensor
from .pieces import Member, members, on, share
from .scan import is_slab_along
from .sort import rebalance, sample_sort

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["unique_values", "unique_counts", "nonzero", "UniqueCountsResult"]

UniqueCountsResult = namedtuple("UniqueCountsResult", ["values", "counts"])


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


def _runs(xp: Any, v: Any, counts: Any) -> tuple[Any, Any]:
    """The distinct values of the sorted ``v`` and how many each stands for (``counts``: the
    weight of each element, ``None`` for 1 each)."""
    n = v.shape[0]
    if n == 0:
        return v, xp.zeros((0,), dtype=xp.int64)
    keep = xp.concat([xp.ones((1,), dtype=xp.bool), v[1:] != v[:-1]])
    starts = xp.nonzero(keep)[0]
    if counts is None:
        ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
        return xp.take(v, starts), xp.astype(ends - starts, xp.int64)
    total = xp.cumulative_sum(xp.astype(counts, xp.int64), include_initial=True)
    ends = xp.concat([starts[1:], xp.asarray([n], dtype=starts.dtype)])
    return xp.take(v, starts), xp.take(total, ends) - xp.take(total, starts)


def _unique(x: "DistributedTensor", name: str, with_counts: bool) -> Any:
    x = _check(x, name)
    if kind_of(x.dtype) == "c":
        raise DtypeError(f"dlmg.{name} is not defined for complex tensors ({x.dtype})")
    slots = _slots(x)
    boolean = x.dtype == "bool"
    dtype = "uint8" if boolean else str(x.dtype)
    values: dict[int, Any] = {}
    weights: dict[int, Any] = {}
    for m in slots:
        if not m.local:
            continue
        ex = m.executor
        try:
            def local(xp: Any, a: Any) -> tuple[Any, Any]:
                flat = xp.reshape(a, (-1,))
                if boolean:
                    flat = xp.astype(flat, xp.uint8)
                return _runs(xp, xp.sort(flat), None)

            values[m.index], weights[m.index] = ex.run(local, x.fragments[m.index].array)
        except Exception as exc:
            raise fail(f"dlmg.{name}", m.index, ex, exc) from exc
    fields = {"layout": x.layout, "op": name}
    merged, merged_w, _ = sample_sort(f"dlmg.{name}", slots, values, weights, "value", dtype,
                                      order=list(range(len(slots))), sorted_already=True, **fields)
    distinct: dict[int, Any] = {}
    counted: dict[int, Any] = {}
    for m in slots:
        if m.local:
            ex = m.executor
            distinct[m.index], counted[m.index] = ex.run(_runs, merged.pop(m.index), merged_w.pop(m.index))
    sizes = share(f"dlmg.{name} (sizes)", lambda: {i: int(v.shape[0]) for i, v in distinct.items()}, **fields)
    total = sum(sizes.values())
    layout, receivers = _slab_over(slots, total)
    out = rebalance(f"dlmg.{name} (rebalance)", slots, distinct, sizes, layout, receivers, dtype, **fields)
    if boolean:
        out = [None if a is None else r.executor.run(lambda xp, v: xp.astype(v, xp.bool), a)
               for a, r in zip(out, receivers)]
    result = new_tensor(out, layout, x.dtype)
    if not with_counts:
        return result
    idx = narrow_for(index_dtype(), x.frameworks)
    got = rebalance(f"dlmg.{name} (counts)", slots, counted, sizes, layout, receivers, "int64", **fields)
    got = [None if a is None else r.executor.run(lambda xp, v: xp.astype(v, getattr(xp, idx)), a)
           for a, r in zip(got, receivers)]
    return UniqueCountsResult(result, new_tensor(got, layout, idx))


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
    for m in slots:
        if not m.local:
            continue
        ex = m.executor
        owned = [on(lay.owned_indices(m.index, k).astype(np.int64), ex) for k in range(x.ndim)]

        def local(xp: Any, a: Any) -> Any:
            where = xp.nonzero(a if a.ndim else xp.reshape(a, (1,)))
            pos = None
            for k, w in enumerate(where):
                g = xp.take(owned[k], xp.astype(w, xp.int64)) * strides[k]
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
        flat, _, counts = sample_sort("dlmg.nonzero", slots, flat, None, "position", "int64", **fields)
    layout, receivers = _slab_over(slots, sum(counts.values()))
    got = rebalance("dlmg.nonzero (rebalance)", slots, flat, counts, layout, receivers, "int64", **fields)
    positions = new_tensor(got, layout, "int64")
    idx = narrow_for(index_dtype(), x.frameworks)
    out = []
    for k in range(x.ndim):
        s, n = strides[k], shape[k]
        out.append(map_fragments(lambda xp, p, s=s, n=n: xp.astype((p // s) % n, getattr(xp, idx)), (positions,),
                                 name="dlmg.nonzero"))
    return tuple(out)
