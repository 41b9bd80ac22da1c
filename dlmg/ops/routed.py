"""Owner-routed requests: reading and writing arbitrary elements of a distributed tensor.

Indexing with index arrays, ``take``, ``take_along_axis`` and slicing along a
split mode ask for elements that may lie in any fragment. Instead of collecting
the tensor, each request is sent to the fragment that owns its element (the
owner computed from the block-cyclic index math, vectorised), the owner reads
(or writes) its elements in its own framework on its own device, and the values
come back to the fragment of the result that asked: the *owner-computes* rule of
distributed arrays (Global Arrays' ``NGA_Gather``/``NGA_Scatter``; Chapel's and
UPC's remote element access; Heat's advanced indexing). In one process a request
is a read of the owning fragment; across processes the requests travel in one
all-to-all of indices and the values in one all-to-all back, through the
engine's collectives (:mod:`dlmg.distributed`).

What a caller gives is, per result fragment held here, the global index of each
of its elements along each mode of the source (``coords``); see
:func:`dlmg.array_api._keys.coordinates` for how a key becomes those.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..distributed.state import current
from ..distributed.agree import conclude, describe, exclusive, prepare_vote
from ..errors import DtypeError, ReadOnlyError
from ..layout import Layout
from ._executor import executor, move_array
from .dispatch import new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["Box", "place_pieces", "grouped", "owners", "result_layout", "result_frameworks", "box", "read", "write", "unravel", "narrow", "as_indices"]

_HOST = Device("cpu", 0)


def owners(layout: Layout, coords: Sequence[np.ndarray], rank: int = 0,
           size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The owning fragment and the local row-major offset there of each element.

    ``coords`` holds one int64 array per mode (equal lengths, in bounds). Of the
    replicas, one held by process ``rank`` is chosen where there is one, else
    replica 0. ``size`` counts the elements where ``coords`` cannot (a 0-d
    ``layout``: no modes, each element its one element; by default one).
    """
    n = len(coords[0]) if coords else (1 if size is None else size)
    cell = np.zeros(n, dtype=np.int64)
    local: list[np.ndarray] = []
    scale = 1
    for m in range(layout.ndim):
        c, b, g = coords[m], layout.block[m], layout.grid[m]
        if g == 1:  # the mode whole in every fragment
            local.append(c)
            continue
        blk = c // b
        if layout.nblocks[m] <= g:  # one block per fragment at most (a slab)
            cell += blk * scale if scale != 1 else blk
            blk *= b
            local.append(np.subtract(c, blk, out=blk))
        else:
            coord = blk % g
            cell += coord * scale
            local.append((blk - coord) // g * b + (c - blk * b))
        scale *= g
    # the local row-major offset: strides from each element's fragment's local shape
    shapes = np.array(layout.local_shapes, dtype=np.int64).reshape(layout.nfragments, layout.ndim)
    if not local:
        offset = np.zeros(n, dtype=np.int64)
    elif layout.ndim == 1 and local[-1] is not coords[-1]:
        offset = local[-1].astype(np.int64, copy=False)  # already a new array
    else:
        offset = np.array(local[-1], dtype=np.int64, copy=True)
    stride: Any = 1
    for m in reversed(range(layout.ndim - 1)):
        column = shapes[:, m + 1]
        stride = stride * (column[0] if np.all(column == column[0]) else column[cell])
        offset += local[m] * stride
    if layout.nreplicas > 1:
        # replicas of one grid cell may sit in different processes: choose per cell
        by_cell = np.zeros(layout.ngrid, dtype=np.int64)
        for k in range(layout.ngrid):
            here = [r for r in range(layout.nreplicas) if layout.ranks[k + layout.ngrid * r] == rank]
            by_cell[k] = here[0] if here else 0
        cell = cell + layout.ngrid * by_cell[cell]
    return cell, offset


def grouped(keys: np.ndarray, n: int) -> np.ndarray:
    """The stable order grouping ``keys`` (integers in ``[0, n)``): a radix sort on 16-bit
    keys where ``n`` allows (NumPy sorts those by counting), a merge sort otherwise."""
    small = keys.astype(np.int16) if n <= 2**15 else keys
    return np.argsort(small, kind="stable")


def narrow(index: np.ndarray) -> np.ndarray:
    """Indices as int32 where they fit, which every framework takes as indices (JAX
    without 64-bit types refuses int64 ones)."""
    if index.size and int(index.max()) >= 2**31:
        return index
    return index.astype(np.int32)


def as_indices(index: np.ndarray, ex: Any) -> Any:
    """Host indices as an index array of ``ex``'s framework on its device: int64 where
    the framework takes them, else int32 (:func:`narrow`)."""
    try:
        return move_array(index, ex)
    except DtypeError:
        return move_array(narrow(index), ex)


def unravel(offset: np.ndarray, shape: tuple[int, ...]) -> tuple[np.ndarray, ...]:
    """Local row-major offsets as one index array per mode."""
    if not shape:
        return ()
    return tuple(np.asarray(i, dtype=np.int64) for i in np.unravel_index(offset, shape))


def result_layout(lead: "DistributedTensor", shape: tuple[int, ...]) -> Layout:
    """A balanced slab of ``shape`` along mode 0 over the devices (and processes) of
    ``lead``'s fragments, each device once, in fragment order."""
    seen: list[tuple[Device, int]] = []
    for frag, rank in zip(lead.layout.devices, lead.layout.ranks):
        if (frag, rank) not in seen:
            seen.append((frag, rank))
    if not shape:
        return Layout.single((), seen[0][0], ranks=seen[0][1])
    return Layout.slab(shape, 0, [d for d, _ in seen], ranks=[r for _, r in seen])


def result_frameworks(lead: "DistributedTensor", layout: Layout) -> list[str]:
    """The framework of each result fragment: that of ``lead``'s first fragment on its device."""
    by_place: dict[tuple[Device, int], str] = {}
    for frag, rank in zip(lead.fragments, lead.layout.ranks):
        if frag.framework is not None:  # (fragments of other processes name none)
            by_place.setdefault((frag.device, rank), frag.framework)
    first = next(iter(by_place.values()), "numpy")
    return [by_place.get((d, r), first) for d, r in zip(layout.devices, layout.ranks)]


class Box:
    """The global indices read (or written) by one fragment of a result, per source mode:
    arrays broadcastable to the fragment's shape (``subs``), so that nothing of the
    fragment's size is made until a round of requests asks for a stretch of them."""

    __slots__ = ("subs", "shape", "size")

    def __init__(self, subs: Sequence[np.ndarray], shape: tuple[int, ...]) -> None:
        self.subs = list(subs)
        self.shape = tuple(shape)
        self.size = math.prod(self.shape)

    def coords(self, start: int = 0, stop: int | None = None) -> list[np.ndarray]:
        """The indices of elements ``start`` to ``stop`` (row-major), one flat array per mode."""
        stop = self.size if stop is None else stop
        if start == 0 and stop == self.size:
            return [np.broadcast_to(c, self.shape).reshape(-1) for c in self.subs]
        where = np.unravel_index(np.arange(start, stop, dtype=np.int64), self.shape)
        return [np.asarray(c[tuple(w if n != 1 else 0 for w, n in zip(where, c.shape))], dtype=np.int64)
                .reshape(-1) for c in self.subs]


def box(coords: Sequence[np.ndarray], layout: Layout, fragment: int) -> Box:
    """The :class:`Box` of ``fragment`` of ``layout`` (the result), from ``coords``
    broadcastable to the result's shape."""
    frag = layout.fragment(fragment)
    shape = tuple(frag.shape)
    runs: list[slice | None] = []
    for j in range(layout.ndim):  # a slab's positions are one run: no index array needed
        b, g, at = layout.block[j], layout.grid[j], frag.coords[j]
        runs.append(slice(at * b, at * b + shape[j]) if layout.nblocks[j] <= g else None)
    picks = [None if runs[j] is not None else layout.owned_indices(fragment, j) for j in range(layout.ndim)]
    for j, p in enumerate(picks):
        if p is not None and len(p) and int(p[-1]) - int(p[0]) + 1 == len(p):
            runs[j] = slice(int(p[0]), int(p[-1]) + 1)
    subs: list[np.ndarray] = []
    for c in coords:
        for j, p in enumerate(picks):
            run = runs[j]
            if c.shape[j] == 1 and layout.shape[j] != 1:  # broadcast along j: the same for every fragment
                continue
            if run is not None:  # a contiguous run of positions (a slab) is a view
                c = c[(slice(None),) * j + (run,)]
            elif p is not None:
                c = np.take(c, p, axis=j)
        subs.append(c)
    return Box(subs, shape)


def _read_local(frag: Any, offsets: np.ndarray) -> Any:
    """``frag``'s elements at the local row-major ``offsets``, in its framework (a 0-d
    fragment's one element as often as asked)."""
    ex = executor(frag.framework, frag.device)
    local = (offsets,) if len(frag.shape) <= 1 else unravel(offsets, frag.shape)
    idx = tuple(as_indices(i, ex) for i in local)

    def run(xp: Any) -> Any:
        a = frag.array
        return xp.reshape(a, (1,))[idx] if a.ndim == 0 else a[idx]

    return ex.run(run)


def read(x: "DistributedTensor", requests: dict[int, Box], layout: Layout,
         frameworks: Sequence[str], name: str) -> "DistributedTensor":
    """A tensor of ``layout`` whose fragment ``o`` (held here) holds ``x``'s elements at the
    global indices of ``requests[o]`` (a :class:`Box`), in fragment
    ``o``'s row-major order and in framework ``frameworks[o]``."""
    engine = current()
    if engine is not None and engine.world_size > 1 and x.layout.nprocesses > 1 or (
            engine is not None and engine.world_size > 1 and layout.nprocesses > 1):
        return _read_across(x, requests, layout, frameworks, name, engine)
    arrays: list[Any] = [None] * layout.nfragments
    for o, request in requests.items():
        cell, offset = owners(x.layout, request.coords(), size=request.size)
        arrays[o] = _assemble(x, cell, offset, layout.fragment(o).shape,
                              executor(frameworks[o], layout.devices[o]), x.dtype)
    return new_tensor(arrays, layout, x.dtype)


def _assemble(x: "DistributedTensor", cell: np.ndarray, offset: np.ndarray, shape: tuple[int, ...],
              out: Any, dtype: str) -> Any:
    order = grouped(cell, x.layout.nfragments)
    counts = np.bincount(cell, minlength=x.layout.nfragments)
    pieces = []
    start = 0
    for f in np.flatnonzero(counts):
        stop = start + int(counts[f])
        frag = x.fragments[int(f)]
        pieces.append(move_array(_read_local(frag, offset[order[start:stop]]), out))
        start = stop
    return out.run(lambda xp: _place(xp, pieces, order, counts, shape, out, dtype))


def _place(xp: Any, pieces: list[Any], order: np.ndarray, counts: np.ndarray, shape: tuple[int, ...], out: Any,
           dtype: str) -> Any:
    if not pieces:
        return xp.zeros(shape, dtype=out.dtype(dtype), device=out.adapter.native_device(out.device))
    if len(pieces) > 1 and out.adapter.traits.mutable:
        # each piece written straight to its positions: no joined copy, no inverse order
        got = xp.empty((len(order),), dtype=pieces[0].dtype, device=out.adapter.native_device(out.device))
        start = 0
        for piece, k in zip(pieces, counts[counts > 0]):
            got[as_indices(order[start:start + int(k)], out)] = piece
            start += int(k)
        return xp.reshape(got, shape)
    got = pieces[0] if len(pieces) == 1 else xp.concat(pieces)
    if len(pieces) > 1 or not _sorted(order):
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order), dtype=np.int64)
        got = xp.take(got, as_indices(inverse, out), axis=0)
    return xp.reshape(got, shape)


def _sorted(order: np.ndarray) -> bool:
    return bool(len(order) < 2 or np.all(order[1:] > order[:-1]))


def write(x: "DistributedTensor", requests: list[tuple[Box, Callable[[Any], Any]]],
          name: str) -> None:
    """Write into ``x`` in place: each request is ``(coords, values)`` with the global
    indices (one flat array per mode) and ``values(executor)`` giving the values to
    store there as a flat array of that executor's framework. Every replica of an
    element is written; of repeated indices one value is stored (NumPy's rule)."""
    engine = current()
    if engine is not None and engine.world_size > 1 and x.layout.nprocesses > 1:
        _write_across(x, requests, name, engine)
        return
    replaced: dict[int, Any] = {}
    for request, values in requests:
        if not request.size:
            continue
        cells: list[np.ndarray] = []
        base, offset = owners(x.layout, request.coords(), size=request.size)
        base = base % x.layout.ngrid
        for r in range(x.layout.nreplicas):
            cells.append(base + r * x.layout.ngrid)
        for cell in cells:
            order = grouped(cell, x.layout.nfragments)
            counts = np.bincount(cell, minlength=x.layout.nfragments)
            start = 0
            for f in np.flatnonzero(counts):
                stop = start + int(counts[f])
                frag = x.fragments[int(f)]
                if not frag.is_local:
                    start = stop
                    continue
                ex = executor(frag.framework, frag.device)
                pick = order[start:stop]
                local = tuple(as_indices(i, ex) for i in unravel(offset[pick], frag.shape))
                vals = values(ex)
                vals = ex.run(lambda xp: xp.take(vals, as_indices(pick, ex), axis=0))
                current_array = replaced.get(int(f), frag.array)
                new = ex.run(lambda xp: _store(frag, current_array, local, vals))
                if new is not None:
                    replaced[int(f)] = new
                start = stop
    if replaced:
        x._replace_arrays(replaced)


def _store(frag: Any, a: Any, local: tuple[Any, ...], vals: Any) -> Any:
    if not frag.adapter.traits.mutable:
        return a.at[local].set(vals) if local else vals.reshape(())
    if frag.readonly:
        raise ReadOnlyError(f"fragment {frag.index} is read-only")
    if local:
        a[local] = vals
    else:
        a[...] = vals[0]
    return None


#: Requests a process sends per round across processes: its requests in at least this many
#: rounds (each round's index and message arrays are then a fraction of its share of the
#: result), but no round smaller than :data:`ROUND_MIN` elements.
ROUNDS = 16
ROUND_MIN = 1 << 12


def _read_across(x: "DistributedTensor", requests: dict[int, Box], layout: Layout,
                 frameworks: Sequence[str], name: str, engine: Any) -> "DistributedTensor":
    """:func:`read` across processes: per round, one all-to-all of request counts, one of
    requests and one of values back.

    Each process sends, to every process owning some of its requested elements, one
    int64 per element (the owning fragment and the local offset there); the owners
    read them in their fragments' frameworks and send the values back in the same
    order, straight into the result fragment's host array. Requests go in rounds of
    at most ``ceil(share / ROUNDS)`` elements, so the index arrays alive at once stay
    a fraction of the result's share; every process runs as many rounds as the one
    with the most. Messages are staged in host memory.
    """
    me, world = engine.rank, engine.world_size
    nfrag = x.layout.nfragments
    wire = "uint8" if x.dtype == "bool" else x.dtype
    rank_of = np.asarray(x.layout.ranks, dtype=np.int64)
    description = describe(name, source=x.layout, result=layout, dtype=x.dtype)
    outs = sorted(requests)
    total = sum(requests[o].size for o in outs)
    step = max(ROUND_MIN, -(-total // ROUNDS))
    segments = [(o, a, min(a + step, requests[o].size)) for o in outs for a in range(0, requests[o].size, step)]

    def work() -> tuple[dict[int, np.ndarray], int]:
        kind = _host_buffer(engine, 0, wire)[1].dtype
        return {o: np.empty(requests[o].shape, dtype=kind) for o in outs}, len(segments)

    with exclusive(engine, name):
        results, votes = prepare_vote(engine, description, work)
        rounds = max(int(v) for v in votes)

        def run() -> list[Any]:
            for r in range(rounds):
                if r < len(segments):
                    o, a, b = segments[r]
                    cell, offset = owners(x.layout, requests[o].coords(a, b), rank=me, size=b - a)
                    ranks = rank_of[cell]
                    order = grouped(ranks, world)
                    codes = offset[order] * nfrag + cell[order]
                    del cell, offset
                    counts = np.bincount(ranks, minlength=world)
                    del ranks
                else:
                    o, a, b = -1, 0, 0
                    order = codes = np.zeros(0, dtype=np.int64)
                    counts = np.zeros(world, dtype=np.int64)
                _exchange_round(engine, x, codes, counts, wire, results.get(o), a, b, order)
            arrays: list[Any] = [None] * layout.nfragments
            for o in outs:
                part = results.pop(o)
                if x.dtype == "bool":
                    part = part.astype(bool)
                arrays[o] = move_array(part, executor(frameworks[o], layout.devices[o]))
            return arrays

        arrays = conclude(engine, description, run)
    return new_tensor(arrays, layout, x.dtype)


def _exchange_round(engine: Any, x: "DistributedTensor", codes: np.ndarray, counts: np.ndarray, wire: str,
                    into: np.ndarray | None, start: int, stop: int, order: np.ndarray) -> None:
    """One round: counts, requests and values exchanged; the values land in
    ``into.reshape(-1)[start:stop]`` in the requests' order (``order``)."""
    world, nfrag = engine.world_size, x.layout.nfragments
    send_buf, send = _host_buffer(engine, world, "int64")
    send[...] = counts
    recv_buf, recv = _host_buffer(engine, world, "int64")
    engine.alltoallv(send_buf, [1] * world, recv_buf, [1] * world)
    receive = [int(c) for c in recv]
    sent = [int(c) for c in counts]
    del send_buf, send, recv_buf, recv
    send_buf, send = _host_buffer(engine, len(codes), "int64")
    send[...] = codes
    recv_buf, asked = _host_buffer(engine, sum(receive), "int64")
    engine.alltoallv(send_buf, sent, recv_buf, receive)
    del send_buf, send
    frag_of = asked % nfrag
    local_offset = asked // nfrag
    del recv_buf, asked
    out_buf, answer = _host_buffer(engine, len(frag_of), wire)
    for f in np.unique(frag_of):
        pick = np.flatnonzero(frag_of == f)
        frag = x.fragments[int(f)]
        got = _read_local(frag, local_offset[pick])
        answer[pick] = np.asarray(move_array(got, executor("numpy", _HOST))).astype(answer.dtype, copy=False)
        del pick, got
    del frag_of, local_offset
    back_buf, back = _host_buffer(engine, len(codes), wire)
    engine.alltoallv(out_buf, receive, back_buf, sent)
    del out_buf, answer
    if into is not None and stop > start:
        into.reshape(-1)[start + order] = back


def _write_across(x: "DistributedTensor", requests: list[tuple[Box, Callable[[Any], Any]]], name: str,
                  engine: Any) -> None:
    """:func:`write` across processes: per round, one all-to-all of counts, one of the
    destinations (fragment and local offset, one per replica of each element) and one of
    the values; each owner writes what it receives into its fragments."""
    world = engine.world_size
    lay = x.layout
    nfrag, ngrid = lay.nfragments, lay.ngrid
    wire = "uint8" if x.dtype == "bool" else x.dtype
    rank_of = np.asarray(lay.ranks, dtype=np.int64)
    description = describe(name, target=lay, dtype=x.dtype)
    total = sum(box_.size for box_, _ in requests)
    step = max(ROUND_MIN, -(-total // ROUNDS))
    segments = [(k, a, min(a + step, box_.size)) for k, (box_, _) in enumerate(requests)
                for a in range(0, box_.size, step)]
    host = executor("numpy", _HOST)

    def work() -> tuple[list[Any], int]:
        return [np.asarray(values(host)).reshape(-1) for _, values in requests], len(segments)

    with exclusive(engine, name):
        flat, votes = prepare_vote(engine, description, work)
        rounds = max(int(v) for v in votes)

        def run() -> None:
            replaced: dict[int, Any] = {}
            for r in range(rounds):
                if r < len(segments):
                    k, a, b = segments[r]
                    base, offset = owners(lay, requests[k][0].coords(a, b), size=b - a)
                    base = base % ngrid
                    cell = np.concatenate([base + ngrid * rep for rep in range(lay.nreplicas)])
                    offset = np.tile(offset, lay.nreplicas)
                    vals = np.tile(flat[k][a:b], lay.nreplicas)
                    ranks = rank_of[cell]
                    order = grouped(ranks, world)
                    codes = offset[order] * nfrag + cell[order]
                    vals = vals[order]
                    counts = np.bincount(ranks, minlength=world)
                    del base, offset, cell, ranks, order
                else:
                    codes = np.zeros(0, dtype=np.int64)
                    vals = np.zeros(0, dtype=_host_buffer(engine, 0, wire)[1].dtype)
                    counts = np.zeros(world, dtype=np.int64)
                _write_round(engine, x, codes, vals, counts, wire, replaced)
            if replaced:
                x._replace_arrays(replaced)

        conclude(engine, description, run)


def _write_round(engine: Any, x: "DistributedTensor", codes: np.ndarray, vals: np.ndarray, counts: np.ndarray,
                 wire: str, replaced: dict[int, Any]) -> None:
    """One round of :func:`_write_across`: destinations and values exchanged and written."""
    world, nfrag = engine.world_size, x.layout.nfragments
    send_buf, send = _host_buffer(engine, world, "int64")
    send[...] = counts
    recv_buf, recv = _host_buffer(engine, world, "int64")
    engine.alltoallv(send_buf, [1] * world, recv_buf, [1] * world)
    receive = [int(c) for c in recv]
    sent = [int(c) for c in counts]
    send_buf, send = _host_buffer(engine, len(codes), "int64")
    send[...] = codes
    recv_buf, where = _host_buffer(engine, sum(receive), "int64")
    engine.alltoallv(send_buf, sent, recv_buf, receive)
    vsend_buf, vsend = _host_buffer(engine, len(vals), wire)
    vsend[...] = vals
    vrecv_buf, got = _host_buffer(engine, sum(receive), wire)
    engine.alltoallv(vsend_buf, sent, vrecv_buf, receive)
    frag_of = where % nfrag
    local_offset = where // nfrag
    for f in np.unique(frag_of):
        pick = np.flatnonzero(frag_of == f)
        frag = x.fragments[int(f)]
        ex = executor(frag.framework, frag.device)
        local = tuple(as_indices(i, ex) for i in unravel(local_offset[pick], frag.shape))
        part = got[pick].astype(bool) if x.dtype == "bool" else got[pick]
        new_values = move_array(np.ascontiguousarray(part), ex)
        current_array = replaced.get(int(f), frag.array)
        new = ex.run(lambda xp: _store(frag, current_array, local, new_values))
        if new is not None:
            replaced[int(f)] = new


def place_pieces(pieces: dict[int, Any], source_ranks: Sequence[int], dtype: str,
                 layout_of: Callable[[int], Layout], frameworks_of: Callable[[Layout], Sequence[str]],
                 name: str) -> "DistributedTensor":
    """The 1-D concatenation, in source order, of pieces held by the processes, laid out by
    ``layout_of(total)`` (a slab along mode 0): a stream compaction's placement step.

    ``pieces`` maps each source index held here to its 1-D array; ``source_ranks`` gives
    every source's process. The processes share their pieces' lengths (one small
    collective), an exclusive scan of them gives each piece's place, and each piece's
    stretches go to the result fragments they fall in: one all-to-all of values.
    """
    engine = current()
    if engine is None or engine.world_size == 1:
        counts = [int(pieces[f].shape[0]) if f in pieces else 0 for f in range(len(source_ranks))]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out = layout_of(int(starts[-1]))
        frameworks = frameworks_of(out)
        arrays: list[Any] = [None] * out.nfragments
        for o in range(out.nfragments):
            lo, hi = _span_of(out, o)
            ex = executor(frameworks[o], out.devices[o])
            parts = [move_array(pieces[f][a - int(starts[f]):b - int(starts[f])], ex)
                     for f, a, b in _overlaps(starts, lo, hi) if f in pieces]
            arrays[o] = ex.run(lambda xp: _joined(xp, parts, hi - lo, ex, dtype))
        return new_tensor(arrays, out, dtype)
    return _place_across(pieces, source_ranks, dtype, layout_of, frameworks_of, name, engine)


def _span_of(layout: Layout, o: int) -> tuple[int, int]:
    lo = o * layout.block[0]
    return min(lo, layout.shape[0]), min(lo + layout.block[0], layout.shape[0])


def _overlaps(starts: np.ndarray, lo: int, hi: int) -> list[tuple[int, int, int]]:
    """``(source, first, stop)`` of every source stretch within ``[lo, hi)``, in order."""
    out = []
    for f in range(len(starts) - 1):
        a, b = max(lo, int(starts[f])), min(hi, int(starts[f + 1]))
        if a < b:
            out.append((f, a, b))
    return out


def _joined(xp: Any, parts: list[Any], n: int, ex: Any, dtype: str) -> Any:
    if not parts:
        return xp.zeros((n,), dtype=ex.dtype(dtype), device=ex.adapter.native_device(ex.device))
    return parts[0] if len(parts) == 1 else xp.concat(parts)


def _place_across(pieces: dict[int, Any], source_ranks: Sequence[int], dtype: str,
                  layout_of: Callable[[int], Layout], frameworks_of: Callable[[Layout], Sequence[str]],
                  name: str, engine: Any) -> "DistributedTensor":
    me, world = engine.rank, engine.world_size
    wire = "uint8" if dtype == "bool" else dtype
    host = executor("numpy", _HOST)
    description = describe(name, sources=tuple(source_ranks), dtype=dtype)

    def work() -> tuple[dict[int, np.ndarray], dict[int, int]]:
        mine = {f: np.asarray(move_array(p, host)).reshape(-1) for f, p in pieces.items()}
        return mine, {f: int(a.shape[0]) for f, a in mine.items()}

    with exclusive(engine, name):
        mine, votes = prepare_vote(engine, description, work)
        counts = [0] * len(source_ranks)
        for vote in votes:
            for f, n in vote.items():
                counts[int(f)] = int(n)
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        out = layout_of(int(starts[-1]))
        frameworks = frameworks_of(out)

        def stretches(rank_from: int, rank_to: int) -> list[tuple[int, int, int, int]]:
            """``(result fragment, source, first, stop)`` sent from one process to another, in order."""
            found: list[tuple[int, int, int, int]] = []
            for o in range(out.nfragments):
                if out.ranks[o] != rank_to:
                    continue
                lo, hi = _span_of(out, o)
                found.extend((o, f, a, b) for f, a, b in _overlaps(starts, lo, hi) if source_ranks[f] == rank_from)
            return found

        def run() -> list[Any]:
            sends = [stretches(me, r) for r in range(world)]
            receives = [stretches(r, me) for r in range(world)]
            sent = [sum(b - a for _, _, a, b in s) for s in sends]
            received = [sum(b - a for _, _, a, b in s) for s in receives]
            send_buf, send = _host_buffer(engine, sum(sent), wire)
            at = 0
            for per_rank in sends:
                for _, f, a, b in per_rank:
                    send[at:at + b - a] = mine[f][a - int(starts[f]):b - int(starts[f])]
                    at += b - a
            mine.clear()
            recv_buf, recv = _host_buffer(engine, sum(received), wire)
            engine.alltoallv(send_buf, sent, recv_buf, received)
            del send_buf, send
            arrays: list[Any] = [None] * out.nfragments
            filled: dict[int, np.ndarray] = {}
            for o in range(out.nfragments):
                if out.ranks[o] == me:
                    lo, hi = _span_of(out, o)
                    filled[o] = np.empty(hi - lo, dtype=recv.dtype)
            at = 0
            for per_rank in receives:
                for o, _, a, b in per_rank:
                    lo = _span_of(out, o)[0]
                    filled[o][a - lo:b - lo] = recv[at:at + b - a]
                    at += b - a
            for o, part in filled.items():
                arrays[o] = move_array(part.astype(bool) if dtype == "bool" else part,
                                       executor(frameworks[o], out.devices[o]))
            return arrays

        arrays = conclude(engine, description, run)
    return new_tensor(arrays, out, dtype)


def _host_buffer(engine: Any, n: int, dtype: str) -> tuple[Any, np.ndarray]:
    """An engine buffer of ``n`` elements in host memory and a NumPy view of it."""
    buf, _ = engine.empty(n, dtype, _HOST)
    return buf, np.asarray(move_array(buf, executor("numpy", _HOST)))
