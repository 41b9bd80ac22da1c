"""Variable-length pieces between fragments: the one all-to-all and the one small share
that the scans, the sample sort and the unique values run on.

A *member* is a fragment taking part in such an algorithm: its index, the
process holding it and, where this process holds it, the executor (framework
and device) its local work runs on. Two operations move data between members:

* :func:`share` gives every process a small host value of every member (scan
  totals, sort samples, bucket counts): in one process it is the values
  themselves; across processes it is one agreement round
  (:func:`~dlmg.distributed.agree.prepare_vote`), so a failure in one process's
  local work raises on every process.
* :func:`alltoall` sends, from every member, one 1-D array (in the member's own
  framework) to every member of a second list, as MPI's ``MPI_Alltoallv``: in one
  process each array is handed to the receiver's framework and device
  (:func:`~dlmg.ops.dispatch.move_array`, zero-copy where DLPack allows); across
  processes the counts are agreed first (:func:`share`), then the bytes of all
  pieces between each pair of processes travel in one
  :meth:`~dlmg.distributed.engine.Engine.alltoallv`, staged through host memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..device import Device
from ..distributed.state import current
from ..distributed.agree import describe, exclusive, prepare_vote
from ..dtypes import canonical
from ._executor import Executor, executor, fail, move_array

__all__ = ["Member", "members", "host", "share", "alltoall", "on"]

_HOST = Device("cpu", 0)


@dataclass(frozen=True)
class Member:
    """One fragment taking part: its index, process, device and, where held here, executor."""

    index: int
    rank: int
    device: Device
    executor: Executor | None  # None: another process holds it

    @property
    def local(self) -> bool:
        """Whether this process holds the member."""
        return self.executor is not None


def members(tensor: Any, indices: Sequence[int] | None = None) -> list[Member]:
    """The fragments ``indices`` of ``tensor`` (every fragment by default) as members."""
    frags = tensor.fragments
    chosen = range(len(frags)) if indices is None else indices
    out = []
    for i in chosen:
        f = frags[i]
        ex = executor(f.framework, f.device) if f.is_local else None
        out.append(Member(i, f.rank, f.device, ex))
    return out


def host(array: Any, ex: Executor) -> np.ndarray:
    """``array`` (of ``ex``'s framework) as a NumPy array on the host (zero-copy where it can)."""
    return np.asarray(move_array(array, executor("numpy", _HOST), ex.adapter))


def on(array: Any, ex: Executor) -> Any:
    """A NumPy array as an array of ``ex``'s framework on its device."""
    return move_array(np.ascontiguousarray(array), ex)


def across_processes() -> Any:
    """The current engine when it spans more than one process, else ``None``."""
    engine = current()
    return engine if engine is not None and engine.world_size > 1 else None


def share(what: str, local: Callable[[], dict[int, Any]], **fields: Any) -> dict[int, Any]:
    """Every member's small host value: ``local()`` gives this process's ``{index: value}``;
    the result merges every process's (``fields`` describe the call for the agreement)."""
    engine = across_processes()
    if engine is None:
        return local()
    with exclusive(engine, what):
        _, votes = prepare_vote(engine, describe(what, **fields), lambda: (None, local()))
    merged: dict[int, Any] = {}
    for vote in votes:
        merged.update(vote)
    return merged


def alltoall(what: str, sources: Sequence[Member], targets: Sequence[Member],
             send: Callable[[Member], list[Any]], dtype: str, *, joined: bool = False,
             **fields: Any) -> dict[int, Any]:
    """One all-to-all of 1-D pieces (see the module).

    Parameters
    ----------
    what : str
        The operation, for messages and the agreement.
    sources, targets : sequence of Member
        Who sends and who receives.
    send : callable
        ``send(member)`` for each local source: one 1-D array (of the member's
        framework, ``dtype``) or ``None`` (nothing) per target, in the order of
        ``targets``.
    dtype : str
        The pieces' element type (a dlmg dtype name).
    joined : bool
        Give each target one array, its pieces joined in the order of ``sources`` (across
        processes a view of the receive buffer where they lie in that order in it: one
        target per process, sources in rank order).

    Returns
    -------
    dict
        For each local target's index: the pieces it received, one per source in the
        order of ``sources`` (1-D arrays of its framework; ``None`` where nothing came),
        or with ``joined`` one array.

    Notes
    -----
    ``send`` should hand over its arrays (pop them from where the caller keeps them):
    each is released once its bytes are packed, before the receive buffer fills.
    """
    engine = across_processes()
    outgoing: dict[int, list[Any]] = {}

    def prepare() -> dict[int, list[int]]:
        counts = {}
        for m in sources:
            if not m.local:
                continue
            assert m.executor is not None
            try:
                pieces = send(m)
            except Exception as exc:
                raise fail(what, m.index, m.executor, exc) from exc
            ex = m.executor
            want = ex.dtype(dtype)
            pieces = [p if p is None or p.dtype == want else ex.run(lambda xp, a: xp.astype(a, want), p)
                      for p in pieces]
            outgoing[m.index] = pieces
            counts[m.index] = [0 if p is None else int(p.shape[0]) for p in pieces]
        return counts

    if engine is None:
        prepare()
        received: dict[int, list[Any]] = {t.index: [None] * len(sources) for t in targets if t.local}
        for s_pos, m in enumerate(sources):
            pieces = outgoing.pop(m.index)
            for t_pos, t in enumerate(targets):
                p = pieces[t_pos]
                if p is None or t.executor is None:
                    continue
                received[t.index][s_pos] = p if t.executor is m.executor else move_array(p, t.executor,
                                                                                        m.executor.adapter)  # type: ignore[union-attr]
        return _joined(received, targets, dtype) if joined else received
    with exclusive(engine, what):
        _, votes = prepare_vote(engine, describe(what, **fields, dtype=dtype, sources=[m.index for m in sources],
                                                 targets=[t.index for t in targets]), lambda: (None, prepare()))
        counts: dict[int, list[int]] = {}
        for vote in votes:
            counts.update(vote)
        return _exchange(engine, sources, targets, outgoing, counts, np.dtype(canonical(dtype)), joined, dtype)


def _joined(received: dict[int, list[Any]], targets: Sequence[Member], dtype: str) -> dict[int, Any]:
    out = {}
    for t in targets:
        if t.index not in received:
            continue
        parts = [p for p in received.pop(t.index) if p is not None]
        ex = t.executor
        assert ex is not None
        if not parts:
            out[t.index] = ex.adapter.empty((0,), dtype, ex.device)
        else:
            out[t.index] = parts[0] if len(parts) == 1 else ex.run(lambda xp, ps: xp.concat(ps), parts)
            del parts
    return out


def _exchange(engine: Any, sources: Sequence[Member], targets: Sequence[Member], outgoing: dict[int, list[Any]],
              counts: dict[int, list[int]], dt: np.dtype, joined: bool, dtype: str) -> dict[int, Any]:
    """The pieces' bytes in one ``alltoallv`` (order per pair of processes: source, then target)."""
    me, world = engine.rank, engine.world_size
    item = dt.itemsize
    send_counts = [0] * world
    recv_counts = [0] * world
    for s_pos, m in enumerate(sources):
        for t_pos, t in enumerate(targets):
            n = counts[m.index][t_pos] * item
            if m.rank == me:
                send_counts[t.rank] += n
            if t.rank == me:
                recv_counts[m.rank] += n
    buf = np.empty(sum(send_counts), dtype=np.uint8)
    starts = np.concatenate([[0], np.cumsum(send_counts)[:-1]]).astype(np.int64)
    cursor = list(starts)
    for s_pos, m in enumerate(sources):
        if m.rank != me:
            continue
        pieces = outgoing.pop(m.index)
        for t_pos, t in enumerate(targets):
            p = pieces[t_pos]
            if p is None or p.shape[0] == 0:
                continue
            raw = np.ascontiguousarray(host(p, m.executor)).reshape(-1)  # type: ignore[arg-type]
            raw = raw.astype(dt, copy=False).view(np.uint8)
            buf[cursor[t.rank]:cursor[t.rank] + raw.size] = raw
            cursor[t.rank] += raw.size
            pieces[t_pos] = raw = p = None
        del pieces  # (the source's arrays are released once packed)
    recv = np.empty(sum(recv_counts), dtype=np.uint8)
    engine.alltoallv(buf, send_counts, recv, recv_counts)
    del buf
    mine = [t for t in targets if t.rank == me]
    ranks = [m.rank for m in sources]
    if joined and len(mine) == 1 and ranks == sorted(ranks):  # one target: its pieces lie in source order
        ex = mine[0].executor
        return {mine[0].index: on(recv.view(dt), ex) if recv.size else
                ex.adapter.empty((0,), dtype, ex.device)}
    received: dict[int, list[Any]] = {t.index: [None] * len(sources) for t in targets if t.rank == me}
    rstarts = np.concatenate([[0], np.cumsum(recv_counts)[:-1]]).astype(np.int64)
    rcursor = list(rstarts)
    for s_pos, m in enumerate(sources):
        for t_pos, t in enumerate(targets):
            if t.rank != me:
                continue
            n = counts[m.index][t_pos] * item
            if n == 0:
                continue
            raw = recv[rcursor[m.rank]:rcursor[m.rank] + n]
            rcursor[m.rank] += n
            received[t.index][s_pos] = on(raw.view(dt), t.executor)  # type: ignore[arg-type]
    return _joined(received, targets, dtype) if joined else received
