"""Sorting along one mode: ``sort`` and ``argsort``.

Along a mode that is not split each fragment sorts what it holds, in its own
framework. Along a split mode of a 1-D tensor, dlmg runs the parallel sample
sort (Blelloch, Leiserson, Maggs, Plaxton, Smith and Zagha, "A comparison of
sorting algorithms for the Connection Machine CM-2", SPAA 1991; as Heat's
``manipulations.sort``), in its form with regular samples of locally sorted runs
(PSRS: Shi and Schaeffer, "Parallel sorting by regular sampling", JPDC 1992):

1. every fragment sorts its elements locally;
2. each draws regular samples of its sorted keys; the samples of all fragments
   are shared (:func:`~dlmg.ops.pieces.share`, a few hundred keys per fragment)
   and every process picks the same ``p - 1`` splitters, weighting each sample
   by the elements it stands for;
3. each fragment cuts its sorted run at the splitters (binary searches) and one
   all-to-all (:func:`~dlmg.ops.pieces.alltoall`) sends bucket ``j`` to fragment
   ``j``;
4. each fragment merges what it received by a local sort;
5. the bucket sizes are shared and a second all-to-all rebalances the sorted
   sequence into the tensor's own layout (a redistribution by global position).

Keys are ``(value, global index)`` when the order of equal values matters
(``argsort``; ``stable=True`` is then always honoured), else ``(value, fragment,
position)``, so runs of equal values split between buckets and every bucket
stays near ``n / p``. NaNs sort last, as NumPy's. ``descending`` sorts the
reversed sequence ascending and reverses the result, as array-api-compat does for
NumPy, so equal values keep their order. ``sort(..., stable=False)`` lets step 1
use each framework's fastest sort (NumPy's introsort rather than its timsort);
step 4 stays a stable sort, which finds the received runs and merges them.

A split mode of a tensor of several modes is made whole first: one
redistribution moves its split onto the longest other mode (the same devices and
processes), each fragment sorts locally, and a second redistribution restores
the tensor's layout.
"""

from __future__ import annotations


from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DtypeError
from ..layout import Layout
from ._dtypes import index_dtype, kind_of, narrow_for
from ._executor import array_device, fail
from .contract.pending import settled
from .dispatch import is_distributed, map_fragments, new_tensor
from .pieces import Member, alltoall, host, members, on, share
from .scan import is_slab_along

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["sort", "argsort", "sample_sort", "rebalance", "whole_along", "work_dtype", "OVERSAMPLE"]

#: samples drawn per fragment and per bucket: more samples, buckets nearer ``n / p``
OVERSAMPLE = 32



def sort(x: "DistributedTensor", /, *, axis: int = -1, descending: bool = False,
         stable: bool = True) -> "DistributedTensor":
    """``x`` sorted along ``axis`` (see the module for the algorithm).

    Returns
    -------
    DistributedTensor
        In ``x``'s layout, on its devices and processes.
    """
    return _sort(x, axis, descending, stable, "sort")


def argsort(x: "DistributedTensor", /, *, axis: int = -1, descending: bool = False,
            stable: bool = True) -> "DistributedTensor":
    """The global indices that sort ``x`` along ``axis`` (always stable; see the module).

    Returns
    -------
    DistributedTensor
        int64 indices (int32 where a JAX fragment takes part without x64), in
        ``x``'s layout.
    """
    return _sort(x, axis, descending, stable, "argsort")


def _check(x: Any, axis: int, name: str) -> int:
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError(f"dlmg.{name} needs at least one mode, got a 0-d tensor")
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"dlmg.{name}: axis must be an int, got {axis!r}")
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"dlmg.{name}: axis {axis} is out of bounds for shape {x.shape}")
    if kind_of(x.dtype) == "c":
        raise DtypeError(f"dlmg.{name} is not defined for complex tensors ({x.dtype}); sort .real or abs() of it")
    return axis % x.ndim


#: the element type the sample sort compares and moves, where it is not the tensor's own: bools
#: as bytes, and unsigned 16- and 32-bit integers in the signed type twice as wide (same order),
#: since frameworks lack comparisons, takes or searches for them (torch)
_WORK = {"bool": "uint8", "uint16": "int32", "uint32": "int64"}


def work_dtype(dtype: str, frameworks: Sequence[str]) -> str:
    """The element type the distributed sort, unique and search algorithms work in for
    ``dtype`` (see ``_WORK``), where every framework taking part holds it."""
    wider = _WORK.get(str(dtype), str(dtype))
    return wider if narrow_for(wider, frameworks) == wider else str(dtype)


def whole_along(layout: Layout, axis: int) -> Layout:
    """``layout`` with mode ``axis`` whole: its split moved onto the longest other mode."""
    others = [m for m in range(layout.ndim) if m != axis]
    m = max(others, key=lambda k: (layout.shape[k], -k))
    grid = list(layout.grid)
    block = list(layout.block)
    grid[m] *= grid[axis]
    grid[axis] = 1
    block[axis] = max(layout.shape[axis], 1)
    block[m] = max(-(-layout.shape[m] // grid[m]), 1)
    return Layout(layout.shape, block=block, grid=grid, devices=layout.devices, ranks=layout.ranks)


def _sort(x: "DistributedTensor", axis: int, descending: bool, stable: bool, name: str) -> "DistributedTensor":
    x = settled(x)
    a = _check(x, axis, name)
    idx = narrow_for(index_dtype(), x.frameworks)
    if x.layout.grid[a] == 1:
        return _local(x, a, descending, stable, name, idx)
    if x.ndim > 1:
        moved = x.redistribute(whole_along(x.layout, a))
        done = _local(moved, a, descending, stable, name, idx)
        del moved
        return done.redistribute(x.layout.dense)
    return _sample_sort_1d(x, descending, name, idx, stable)


def _local(x: "DistributedTensor", a: int, descending: bool, stable: bool, name: str,
           idx: str) -> "DistributedTensor":
    """Each fragment sorts along the whole mode ``a`` it holds."""
    if name == "sort":
        return map_fragments(lambda xp, v: xp.sort(v, axis=a, descending=descending, stable=stable), (x,),
                             name="dlmg.sort")

    def one(xp: Any, v: Any) -> Any:
        got = xp.argsort(v, axis=a, descending=descending, stable=True)
        want = getattr(xp, idx)
        return got if got.dtype == want else xp.astype(got, want)

    return map_fragments(one, (x,), name="dlmg.argsort")


# --------------------------------------------------------------------------
# the sample sort of 1-D pieces


def _key(value: Any, t1: int, t2: int) -> tuple:
    nan = value != value
    return (bool(nan), 0 if nan else value, t1, t2)


def sample_sort(what: str, slots: Sequence[Member], values: dict[int, Any], ties: dict[int, Any] | None,
                mode: str, dtype: str, tie_dtype: str = "int64", ordered: bool = False,
                sorted_already: bool = False, payload: dict[int, Any] | None = None,
                payload_dtype: str = "int64", need_values: bool = True, stable: bool = True,
                **fields: Any) -> tuple[dict[int, Any], dict[int, Any], dict[int, int]]:
    """Steps 1 to 4 of the sample sort (see the module) of 1-D pieces.

    Parameters
    ----------
    slots : sequence of Member
        The members that hold the pieces and receive the buckets.
    values : dict
        Per local slot, its 1-D values (its framework).
    ties : dict, optional
        Per local slot, an int array of global tie keys beside the values, increasing
        along each slot's pieces (``mode="index"``), or an int: the keys are the local
        positions plus it; they travel with the values.
    mode : {"index", "position", "value"}
        How equal values order: by the tie keys, by (slot, position) (they may then
        split between buckets), or not at all (every copy of a value lands in one
        bucket: the unique values' range partitioning).
    ordered : bool
        The tie keys increase along ``slots``: one stable sort merges what a slot
        receives (else two).
    sorted_already : bool
        The pieces are sorted (by value, then tie key) already.
    payload : dict, optional
        Per local slot, one more 1-D array (``payload_dtype``) that travels beside the
        values and is permuted with them; it comes back in ``payload`` itself.
    need_values : bool
        Whether the sorted values are wanted back (``argsort`` keeps only the keys).
    stable : bool
        Whether step 1 sorts values without tie keys or payload stably (equal values then
        keep their order, e.g. ``-0.0`` and ``0.0``); ``False`` lets each framework use its
        fastest sort. Values with tie keys are always sorted stably.

    Returns
    -------
    tuple
        ``(values, ties, counts)``: per local slot its sorted bucket (and its tie keys,
        empty without ``ties``), and every slot's bucket size.
    """
    local = [m for m in slots if m.local]
    runs, keys, extra = _sorted_runs(what, local, values, ties, payload, sorted_already, tie_dtype, stable)
    splitters = _splitters(what, slots, runs, keys, mode, fields)
    cuts: dict[int, list[int]] = {}
    for pos, m in enumerate(slots):
        if m.local:
            try:
                cuts[m.index] = _cuts(m, pos, runs[m.index], keys.get(m.index), splitters, mode)
            except Exception as exc:
                raise fail(f"{what} (cutting at the splitters)", m.index, m.executor, exc) from exc

    def pieces_of(store: dict[int, Any]) -> Any:
        def send(m: Member) -> list[Any]:
            arr, c = store.pop(m.index), cuts[m.index]  # handed over: released once packed
            return [arr[c[d]:c[d + 1]] for d in range(len(slots))]

        return send

    got_v = alltoall(f"{what} (buckets)", slots, slots, pieces_of(runs), dtype, joined=True, **fields)
    got_t = alltoall(f"{what} (bucket keys)", slots, slots, pieces_of(keys), tie_dtype, joined=True, **fields) \
        if ties is not None else {}
    got_e = alltoall(f"{what} (bucket payload)", slots, slots, pieces_of(extra), payload_dtype, joined=True,
                     **fields) if payload is not None else {}
    out_v, out_t = _merged(what, local, (got_v, got_t, got_e), ordered, need_values, payload)
    sizes = {i: int((v if v is not None else out_t[i]).shape[0]) for i, v in out_v.items()}
    counts = share(f"{what} (bucket sizes)", lambda: sizes, **fields)
    return out_v, out_t, counts


def _merged(what: str, local: Sequence[Member], got: tuple[dict[int, Any], ...], ordered: bool,
            need_values: bool, payload: dict[int, Any] | None) -> tuple[dict[int, Any], dict[int, Any]]:
    """Step 4: each local bucket merged from what it received (``got``: values, tie keys and
    payload per slot, popped as merged). Returns the sorted values and tie keys per slot; the
    payload comes back in ``payload``."""
    out_v: dict[int, Any] = {}
    out_t: dict[int, Any] = {}
    for m in local:
        ex = m.executor
        assert ex is not None
        box = [got[0].pop(m.index), got[1].pop(m.index, None), got[2].pop(m.index, None)]
        try:
            v, t, e = ex.run(_merge, box, ordered, need_values)
        except Exception as exc:
            raise fail(f"{what} (merging)", m.index, ex, exc) from exc
        out_v[m.index] = v
        if t is not None:
            out_t[m.index] = t
        if e is not None:
            assert payload is not None
            payload[m.index] = e
        v = t = e = None
    return out_v, out_t


def _sorted_runs(what: str, local: Sequence[Member], values: dict[int, Any], ties: dict[int, Any] | None,
                 payload: dict[int, Any] | None, sorted_already: bool, tie_dtype: str,
                 stable: bool = True) -> tuple[dict[int, Any], dict[int, Any], dict[int, Any]]:
    """Step 1: each local slot's values sorted (its tie keys and payload permuted with them),
    each input popped as its sorted copy replaces it. Returns ``(runs, keys, payload)``."""
    runs: dict[int, Any] = {}
    keys: dict[int, Any] = {}
    extra: dict[int, Any] = {}
    for m in local:
        ex = m.executor
        assert ex is not None
        v = values.pop(m.index)
        t = None if ties is None else ties.pop(m.index)
        e = None if payload is None else payload.pop(m.index)
        try:
            if not sorted_already:
                if t is None and e is None:
                    v = ex.run(lambda xp, a: xp.sort(a, stable=stable), v)
                else:
                    perm = ex.run(lambda xp, a: xp.argsort(a, stable=True), v)
                    v = ex.run(lambda xp, a, o: xp.take(a, o), v, perm)
                    e = None if e is None else ex.run(lambda xp, a, o: xp.take(a, o), e, perm)
                    if isinstance(t, int):  # keys are positions plus an offset: the permutation itself
                        t = ex.run(_shifted, perm, t, ex.dtype(tie_dtype))
                    elif t is not None:
                        t = ex.run(lambda xp, a, o: xp.take(a, o), t, perm)
                    del perm  # (last: the keys of a slab may be the permutation itself, shifted in place)
            elif isinstance(t, int):
                t = ex.run(lambda xp, n, k, a: xp.arange(n, dtype=ex.dtype(tie_dtype), device=array_device(a)) + k,
                           int(v.shape[0]), t, v)
        except Exception as exc:
            raise fail(what, m.index, ex, exc) from exc
        runs[m.index] = v
        if t is not None:
            keys[m.index] = t
        if e is not None:
            extra[m.index] = e
        v = t = e = None
    return runs, keys, extra


def _splitters(what: str, slots: Sequence[Member], runs: dict[int, Any], keys: dict[int, Any], mode: str,
               fields: dict[str, Any]) -> list[tuple]:
    """Step 2: the ``p - 1`` splitters every process agrees on, from regular samples of the
    sorted runs, each sample weighted by the elements it stands for."""
    p = len(slots)

    def samples() -> dict[int, Any]:
        found = {}
        for pos, m in enumerate(slots):
            if not m.local:
                continue
            v = runs[m.index]
            n = int(v.shape[0])
            k = min(n, OVERSAMPLE * p)
            if k == 0:
                found[m.index] = (0, [])
                continue
            at = ((np.arange(k) + 0.5) * n / k).astype(np.int32 if n < 2**31 else np.int64)
            ex = m.executor
            got = host(ex.run(lambda xp, a, i: xp.take(a, i), v, on(at, ex)), ex).tolist()
            if mode == "index":
                tie = host(ex.run(lambda xp, a, i: xp.take(a, i), keys[m.index], on(at, ex)), ex).tolist()
                found[m.index] = (n, [(g, int(tk), 0) for g, tk in zip(got, tie)])
            elif mode == "position":
                found[m.index] = (n, [(g, pos, int(i)) for g, i in zip(got, at)])
            else:
                found[m.index] = (n, [(g, 0, 0) for g in got])
        return found

    drawn = share(f"{what} (samples)", samples, **fields)
    total = sum(n for n, _ in drawn.values())
    weighted = []
    for n, pts in drawn.values():
        w = n / len(pts) if pts else 0.0
        weighted.extend((_key(*s), s, w) for s in pts)
    weighted.sort(key=lambda e: e[0])
    splitters = []
    acc, j = 0.0, 1
    for _, s, w in weighted:
        acc += w
        while j < p and acc >= j * total / p:
            splitters.append(s)
            j += 1
    while len(splitters) < p - 1:
        splitters.append(splitters[-1] if splitters else (0, 0, 0))
    return splitters


def _shifted(xp: Any, perm: Any, by: int, dtype: Any) -> Any:
    """``perm + by`` in ``dtype``, in place where the framework allows (no second array)."""
    keys = xp.astype(perm, dtype, copy=False)
    if by:
        keys += by
    return keys


def _cuts(m: Member, pos: int, v: Any, t: Any, splitters: list[tuple], mode: str) -> list[int]:
    """Where slot ``m``'s sorted run splits into the buckets: ``p + 1`` positions. The binary
    searches run on the run's numbers only (NaNs, at its end, are counted apart: not every
    framework's ``searchsorted`` orders them)."""
    ex = m.executor
    n = int(v.shape[0])
    out = [0]
    nans = 0
    if n and "float" in str(v.dtype):
        nans = int(host(ex.run(lambda xp, a: xp.sum(xp.astype(xp.isnan(a), xp.int32)), v), ex))
    numbers = n - nans
    plain = [s[0] for s in splitters if s[0] == s[0]]
    if plain and numbers:
        probe = on(np.asarray(plain, dtype=host(v[:1], ex).dtype), ex)
        lo_all = host(ex.run(lambda xp, a, b: xp.searchsorted(a, b, side="left"), v[:numbers], probe), ex).tolist()
        hi_all = host(ex.run(lambda xp, a, b: xp.searchsorted(a, b, side="right"), v[:numbers], probe), ex).tolist()
    else:
        lo_all = hi_all = [0] * len(plain)
    k = 0
    for s in splitters:
        sv, t1, t2 = s
        if sv != sv:  # a NaN splitter: the run of NaNs at the end
            lo, hi = numbers, n
        else:
            lo, hi = int(lo_all[k]), int(hi_all[k])
            k += 1
        if mode == "value" or lo == hi:
            cut = lo
        elif mode == "position":
            cut = lo if pos > t1 else hi if pos < t1 else max(lo, min(hi, t2))
        else:
            below = ex.run(lambda xp, a: xp.sum(xp.astype(a < t1, a.dtype)), t[lo:hi])
            cut = lo + int(host(below, ex))
        out.append(max(cut, out[-1]))
    out.append(n)
    return out


def _merge(xp: Any, box: list[Any], ordered: bool, need_values: bool) -> tuple[Any, Any, Any]:
    """One bucket sorted from what it received: ``box`` holds the values, the tie keys and the
    payload (``None`` where absent), emptied as they are used, so each is released early."""
    v, box[0] = box[0], None
    if box[1] is None and box[2] is None:
        return xp.sort(v, stable=True), None, None  # (a merge of sorted runs: stable sorts find them)
    # one take at a time, each input released as its reordered copy replaces it
    if box[1] is not None and not ordered:
        first = xp.argsort(box[1])
        v = xp.take(v, first)
        box[1] = xp.take(box[1], first)
        if box[2] is not None:
            box[2] = xp.take(box[2], first)
        del first
    perm = xp.argsort(v, stable=True)
    v = xp.take(v, perm) if need_values else None
    t, box[1] = (None if box[1] is None else xp.take(box[1], perm)), None
    e, box[2] = (None if box[2] is None else xp.take(box[2], perm)), None
    return v, t, e


def rebalance(what: str, slots: Sequence[Member], data: dict[int, Any], counts: dict[int, int],
              target: Layout, receivers: Sequence[Member], dtype: str, *, reverse: bool = False,
              **fields: Any) -> list[Any]:
    """Step 5: the sorted sequence held as ``data`` (per local slot, ``counts`` its size, in the
    order of ``slots``) laid out by the 1-D layout ``target``, reversed with ``reverse``.

    Returns
    -------
    list
        One array per fragment of ``target`` (``None`` for those of other processes).
    """
    total = sum(counts[m.index] for m in slots)
    offsets, run = {}, 0
    for m in slots:
        offsets[m.index] = run
        run += counts[m.index]
    if reverse:
        offsets = {i: total - o - counts[i] for i, o in offsets.items()}
    b, g = target.block[0], target.grid[0]
    slab = b * g >= total
    coord_of = {r.index: target.fragments[r.index].coords[0] for r in receivers}

    def send(m: Member) -> list[Any]:
        ex = m.executor
        arr = data.pop(m.index)
        if reverse:
            arr = ex.run(lambda xp, a: xp.flip(a), arr)
        start, n = offsets[m.index], int(arr.shape[0])
        pieces: list[Any] = []
        where = None if slab else (np.arange(start, start + n) // b) % g
        for r in receivers:
            c = coord_of[r.index]
            if slab:
                lo, hi = max(c * b - start, 0), min((c + 1) * b - start, n)
                pieces.append(arr[lo:hi] if hi > lo else None)
            else:
                assert where is not None
                sel = np.nonzero(where == c)[0].astype(np.int32 if total < 2**31 else np.int64)
                pieces.append(ex.run(lambda xp, a, i: xp.take(a, i), arr, on(sel, ex)) if sel.size else None)
        return pieces

    by_offset = sorted(slots, key=lambda m: offsets[m.index])
    got = alltoall(what, by_offset, receivers, send, dtype, joined=True, target=target, **fields)
    out: list[Any] = [None] * target.nfragments
    for r in receivers:
        if r.local:
            out[r.index] = got.pop(r.index)
    return out


def _sample_sort_1d(x: "DistributedTensor", descending: bool, name: str, idx: str,
                    stable: bool = True) -> "DistributedTensor":
    layout = x.layout
    n = layout.shape[0]
    slots = members(x, [layout.fragment_index((c,), 0) for c in range(layout.grid[0])])
    dtype = work_dtype(x.dtype, x.frameworks)
    converted = dtype != str(x.dtype)
    values: dict[int, Any] = {}
    ties: dict[int, Any] | None = {} if name == "argsort" else None
    ordered = is_slab_along(layout, 0)
    tie = "int32" if n < 2**31 else idx  # the keys travel in 4 bytes where they fit (half the traffic)
    for m in slots:
        if not m.local:
            continue
        ex = m.executor
        v = x.fragments[m.index].array
        if converted:
            v = ex.run(lambda xp, a: xp.astype(a, ex.dtype(dtype)), v)
        if descending:
            v = ex.run(lambda xp, a: xp.flip(a), v)
        values[m.index] = v
        if ties is not None:
            if ordered:  # one run: the keys are the local positions plus the run's first key
                start = layout.fragments[m.index].coords[0] * layout.block[0]
                ties[m.index] = (n - start - int(v.shape[0])) if descending else start
            else:
                ties[m.index] = on(_global_positions(layout, m.index, descending, tie), ex)
        v = None
    fields = {"layout": layout, "op": name, "descending": descending}
    # descending: the reversed sequence, whose keys increase along the slots reversed
    along = slots[::-1] if descending else slots
    sorted_v, sorted_t, counts = sample_sort(f"dlmg.{name}", along, values, ties,
                                             "index" if ties is not None else "position", dtype,
                                             tie_dtype=tie, ordered=ordered, need_values=name == "sort",
                                             stable=stable, **fields)
    receivers = members(x)
    if name == "argsort":
        sorted_v.clear()
        if descending:
            for i, t in sorted_t.items():
                ex = next(m.executor for m in slots if m.index == i)
                sorted_t[i] = ex.run(lambda xp, a: (n - 1) - a, t)
        out = rebalance("dlmg.argsort (rebalance)", along, sorted_t, counts, layout.dense, receivers, tie,
                        reverse=descending, **fields)
        out = [_cast(a, _member_at(receivers, i), idx) for i, a in enumerate(out)]
        return new_tensor(out, layout.dense, idx)
    out = rebalance("dlmg.sort (rebalance)", along, sorted_v, counts, layout.dense, receivers, dtype,
                    reverse=descending, **fields)
    if converted:
        out = [_cast(a, _member_at(receivers, i), str(x.dtype)) for i, a in enumerate(out)]
    return new_tensor(out, layout.dense, x.dtype)


def _global_positions(layout: Layout, index: int, descending: bool, dtype: str) -> np.ndarray:
    """The global positions of 1-D fragment ``index``'s elements in ``dtype`` (of the reversed
    sequence, reversed, with ``descending``), built in place: one array, no wider temporaries."""
    frag = layout.fragments[index]
    b, g, c, n = layout.block[0], layout.grid[0], frag.coords[0], layout.shape[0]
    out = np.empty(frag.shape[0], dtype=dtype)
    whole = frag.shape[0] // b
    rows = out[:whole * b].reshape(whole, b)
    np.add((np.arange(whole, dtype=dtype) * g + c)[:, None] * b, np.arange(b, dtype=dtype)[None, :], out=rows)
    if frag.shape[0] > whole * b:  # the last, shorter block
        out[whole * b:] = np.arange(frag.shape[0] - whole * b, dtype=dtype) + (whole * g + c) * b
    if descending:
        np.subtract(n - 1, out, out=out)
        out = out[::-1].copy()
    return out


def _member_at(ms: Sequence[Member], index: int) -> Member | None:
    return ms[index] if index < len(ms) and ms[index].index == index else next(
        (m for m in ms if m.index == index), None)


def _cast(a: Any, m: Member | None, dtype: str) -> Any:
    if a is None or m is None or m.executor is None:
        return a
    ex = m.executor
    want = ex.dtype(dtype)
    return a if a.dtype == want else ex.run(lambda xp, v: xp.astype(v, want), a)



