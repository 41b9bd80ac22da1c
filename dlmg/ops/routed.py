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
from ..distributed._state import current
from ..distributed.agree import conclude, describe, exclusive, prepare_vote
from ..errors import ReadOnlyError
from ..layout import Layout
from ._executor import executor, move_array
from .dispatch import new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["owners", "result_layout", "result_frameworks", "box", "read", "write", "unravel", "narrow"]

_HOST = Device("cpu", 0)


def owners(layout: Layout, coords: Sequence[np.ndarray], rank: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The owning fragment and the local row-major offset there of each element.

    ``coords`` holds one int64 array per mode (equal lengths, in bounds). Of the
    replicas, one held by process ``rank`` is chosen where there is one, else
    replica 0.
    """
    n = len(coords[0]) if coords else 1
    cell = np.zeros(n, dtype=np.int64)
    offset = np.zeros(n, dtype=np.int64)
    scale = 1
    for m in range(layout.ndim):
        c, b, g = coords[m], layout.block[m], layout.grid[m]
        blk = c // b
        cell += (blk % g) * scale
        scale *= g
    # local offsets need each fragment's local shape: row-major over local indices
    shapes = np.array(layout.local_shapes, dtype=np.int64).reshape(layout.nfragments, layout.ndim)
    stride = np.ones(n, dtype=np.int64)
    for m in reversed(range(layout.ndim)):
        c, b, g = coords[m], layout.block[m], layout.grid[m]
        local = (c // b) // g * b + c % b
        offset += local * stride
        stride *= shapes[cell, m]
    if layout.nreplicas > 1:
        # replicas of one grid cell may sit in different processes: choose per cell
        by_cell = np.zeros(layout.ngrid, dtype=np.int64)
        for k in range(layout.ngrid):
            here = [r for r in range(layout.nreplicas) if layout.ranks[k + layout.ngrid * r] == rank]
            by_cell[k] = here[0] if here else 0
        cell = cell + layout.ngrid * by_cell[cell]
    return cell, offset


def narrow(index: np.ndarray) -> np.ndarray:
    """Indices as int32 where they fit, which every framework takes as indices (JAX
    without 64-bit types refuses int64 ones)."""
    if index.size and int(index.max()) >= 2**31:
        return index
    return index.astype(np.int32)


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
        by_place.setdefault((frag.device, rank), frag.framework)
    first = lead.fragments[0].framework
    return [by_place.get((d, r), first) for d, r in zip(layout.devices, layout.ranks)]


def box(coords: Sequence[np.ndarray], layout: Layout, fragment: int) -> list[np.ndarray]:
    """The global indices read by ``fragment`` of ``layout`` (the result), flattened in
    its row-major order, one array per source mode, from ``coords`` broadcastable to
    the result shape."""
    picks = [layout.owned_indices(fragment, j) for j in range(layout.ndim)]
    shape = tuple(len(p) for p in picks)
    out = []
    for c in coords:
        for j, p in enumerate(picks):
            if c.shape[j] != 1:
                c = np.take(c, p, axis=j)
        out.append(np.broadcast_to(c, shape).reshape(-1))
    return out


def _read_local(frag: Any, local: tuple[np.ndarray, ...]) -> Any:
    """``frag``'s elements at ``local`` (one index array per mode), in its framework."""
    ex = executor(frag.framework, frag.device)
    idx = tuple(move_array(narrow(i), ex) for i in local)

    def run(xp: Any) -> Any:
        a = frag.array
        if not idx:
            return xp.reshape(a, (1,))
        return a[idx]

    return ex.run(run)


def read(x: "DistributedTensor", requests: dict[int, list[np.ndarray]], layout: Layout,
         frameworks: Sequence[str], name: str) -> "DistributedTensor":
    """A tensor of ``layout`` whose fragment ``o`` (held here) holds ``x``'s elements at the
    global indices ``requests[o]`` (one flat array per mode of ``x``), in fragment
    ``o``'s row-major order and in framework ``frameworks[o]``."""
    engine = current()
    if engine is not None and engine.world_size > 1 and x.layout.nprocesses > 1 or (
            engine is not None and engine.world_size > 1 and layout.nprocesses > 1):
        return _read_across(x, requests, layout, frameworks, name, engine)
    arrays: list[Any] = [None] * layout.nfragments
    for o, coords in requests.items():
        cell, offset = owners(x.layout, coords)
        arrays[o] = _assemble(x, cell, offset, layout.fragment(o).shape,
                              executor(frameworks[o], layout.devices[o]), x.dtype)
    return new_tensor(arrays, layout, x.dtype)


def _assemble(x: "DistributedTensor", cell: np.ndarray, offset: np.ndarray, shape: tuple[int, ...],
              out: Any, dtype: str) -> Any:
    order = np.argsort(cell, kind="stable")
    counts = np.bincount(cell, minlength=x.layout.nfragments)
    pieces = []
    start = 0
    for f in np.flatnonzero(counts):
        stop = start + int(counts[f])
        frag = x.fragments[int(f)]
        local = unravel(offset[order[start:stop]], frag.shape)
        pieces.append(move_array(_read_local(frag, local), out))
        start = stop
    return out.run(lambda xp: _place(xp, pieces, order, shape, out, dtype))


def _place(xp: Any, pieces: list[Any], order: np.ndarray, shape: tuple[int, ...], out: Any, dtype: str) -> Any:
    if not pieces:
        return xp.zeros(shape, dtype=out.dtype(dtype), device=out.adapter.native_device(out.device))
    got = pieces[0] if len(pieces) == 1 else xp.concat(pieces)
    if len(pieces) > 1 or not _sorted(order):
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order), dtype=np.int64)
        got = xp.take(got, move_array(narrow(inverse), out), axis=0)
    return xp.reshape(got, shape)


def _sorted(order: np.ndarray) -> bool:
    return bool(len(order) < 2 or np.all(order[1:] > order[:-1]))


def write(x: "DistributedTensor", requests: list[tuple[list[np.ndarray], Callable[[Any], Any]]],
          name: str) -> None:
    """Write into ``x`` in place: each request is ``(coords, values)`` with the global
    indices (one flat array per mode) and ``values(executor)`` giving the values to
    store there as a flat array of that executor's framework. Every replica of an
    element is written; of repeated indices one value is stored (NumPy's rule)."""
    engine = current()
    if engine is not None and engine.world_size > 1 and x.layout.nprocesses > 1:
        raise NotImplementedError(f"{name}: assignment across processes by index arrays")
    replaced: dict[int, Any] = {}
    for coords, values in requests:
        cells: list[np.ndarray] = []
        base, offset = owners(x.layout, coords)
        base = base % x.layout.ngrid
        for r in range(x.layout.nreplicas):
            cells.append(base + r * x.layout.ngrid)
        for cell in cells:
            order = np.argsort(cell, kind="stable")
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
                local = tuple(move_array(narrow(i), ex) for i in unravel(offset[pick], frag.shape))
                vals = values(ex)
                vals = ex.run(lambda xp: xp.take(vals, move_array(narrow(pick), ex), axis=0))
                current_array = replaced.get(int(f), frag.array)
                new = ex.run(lambda xp: _store(frag, current_array, local, vals))
                if new is not None:
                    replaced[int(f)] = new
                start = stop
    if replaced:
        x._replace_arrays(replaced)


def _store(frag: Any, a: Any, local: tuple[Any, ...], vals: Any) -> Any:
    if not frag.adapter.mutable:
        return a.at[local].set(vals) if local else vals.reshape(())
    if frag.readonly:
        raise ReadOnlyError(f"fragment {frag.index} is read-only")
    if local:
        a[local] = vals
    else:
        a[...] = vals[0]
    return None


def _read_across(x: "DistributedTensor", requests: dict[int, list[np.ndarray]], layout: Layout,
                 frameworks: Sequence[str], name: str, engine: Any) -> "DistributedTensor":
    """:func:`read` across processes: one all-to-all of requests, one of values.

    Each process sends, to every process owning some of its requested elements, one
    int64 per element (the owning fragment and the local offset there); the owners
    read them in their fragments' frameworks and send the values back in the same
    order. Messages are staged in host memory.
    """
    me, world = engine.rank, engine.world_size
    nfrag = x.layout.nfragments
    wire = "uint8" if x.dtype == "bool" else x.dtype
    description = describe(name, source=x.layout, result=layout, dtype=x.dtype)

    def work() -> tuple[Any, list[int]]:
        outs = sorted(requests)
        found = [owners(x.layout, requests[o], rank=me) for o in outs]
        sizes = [len(c) for c, _ in found]
        cell = np.concatenate([c for c, _ in found]) if found else np.zeros(0, np.int64)
        offset = np.concatenate([f for _, f in found]) if found else np.zeros(0, np.int64)
        del found
        ranks = np.asarray(x.layout.ranks, dtype=np.int64)[cell]
        order = np.argsort(ranks * nfrag + cell, kind="stable")
        codes = offset[order] * nfrag + cell[order]
        counts = np.bincount(ranks, minlength=world)
        return (outs, sizes, order, codes, counts), [int(c) for c in counts]

    with exclusive(engine, name):
        (outs, sizes, order, codes, counts), votes = prepare_vote(engine, description, work)
        receive = [int(v[me]) for v in votes]

        def run() -> list[Any]:
            send_buf, send = _host_buffer(engine, len(codes), "int64")
            send[...] = codes
            recv_buf, asked = _host_buffer(engine, sum(receive), "int64")
            engine.alltoallv(send_buf, [int(c) for c in counts], recv_buf, receive)
            del send_buf, send
            frag_of = asked % nfrag
            local_offset = asked // nfrag
            out_buf, answer = _host_buffer(engine, len(asked), wire)
            for f in np.unique(frag_of):
                pick = np.flatnonzero(frag_of == f)
                frag = x.fragments[int(f)]
                got = _read_local(frag, unravel(local_offset[pick], frag.shape))
                answer[pick] = np.asarray(move_array(got, executor("numpy", _HOST))).astype(answer.dtype, copy=False)
            del recv_buf, asked, frag_of, local_offset
            back_buf, back = _host_buffer(engine, len(codes), wire)
            engine.alltoallv(out_buf, receive, back_buf, [int(c) for c in counts])
            del out_buf, answer
            values = np.empty_like(back)
            values[order] = back
            del back_buf, back
            arrays: list[Any] = [None] * layout.nfragments
            start = 0
            for o, n in zip(outs, sizes):
                part = values[start:start + n].reshape(layout.fragment(o).shape)
                if x.dtype == "bool":
                    part = part.astype(bool)
                arrays[o] = move_array(np.ascontiguousarray(part), executor(frameworks[o], layout.devices[o]))
                start += n
            return arrays

        arrays = conclude(engine, description, run)
    return new_tensor(arrays, layout, x.dtype)


def _host_buffer(engine: Any, n: int, dtype: str) -> tuple[Any, np.ndarray]:
    """An engine buffer of ``n`` elements in host memory and a NumPy view of it."""
    buf, _ = engine.empty(n, dtype, _HOST)
    return buf, np.asarray(move_array(buf, executor("numpy", _HOST)))
