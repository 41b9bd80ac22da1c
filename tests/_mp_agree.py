"""Multi-process scenarios of the agreement's rounds (run by :mod:`tests._mp_worker`).

An agreement where every process describes the same call, nobody failed and
the votes are small is one fixed-size all-gather on the engine's channel for
agreements; a long vote, a failure or differing descriptions take more, on
every process alike, and leave the group usable. The scenarios count the
all-gathers on that channel by wrapping it (torch: the engine's all-gather
function, called with the side group; MPI: the agreements' communicator).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg.distributed.agree import agree, conclude, describe, prepare
from dlmg.errors import CollectiveError, CollectiveMismatchError

from tests._mp_scenarios import _global, _np, wrap


class _CountingComm:
    """An MPI communicator that counts its all-gathers and passes everything on."""

    def __init__(self, comm: Any, counts: list[str]) -> None:
        self._comm = comm
        self._counts = counts

    def Iallgather(self, *args: Any) -> Any:
        self._counts.append("allgather")
        return self._comm.Iallgather(*args)

    def Iallgatherv(self, *args: Any) -> Any:
        self._counts.append("allgatherv")
        return self._comm.Iallgatherv(*args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._comm, name)


@contextmanager
def _counted() -> Iterator[list[str]]:
    """The all-gathers on the current engine's channel for agreements, while in the block."""
    eng = dd.current_engine()
    counts: list[str] = []
    if eng.name == "torch":
        inner = eng._all_gather

        def counting(*args: Any, group: Any = None, **kwargs: Any) -> Any:
            if group is eng._objects:
                counts.append("allgather")
            return inner(*args, group=group, **kwargs)

        eng._all_gather = counting
        try:
            yield counts
        finally:
            eng._all_gather = inner
    else:
        comm = eng._objects
        eng._objects = _CountingComm(comm, counts)
        try:
            yield counts
        finally:
            eng._objects = comm


def _raises(exc_type: type, fn: Any) -> str:
    try:
        got = fn()
    except exc_type as exc:
        return f"{type(exc).__name__}: {exc}"
    raise AssertionError(f"returned {got!r} instead of raising {exc_type.__name__}")


def agreement_rounds() -> dict[str, Any]:
    """Rounds on the agreements' channel per outcome, and the outcomes themselves."""
    eng = dd.current_engine()
    me, world = eng.rank, eng.world_size
    rounds: dict[str, int] = {}
    with _counted() as counts:
        votes = agree(eng, describe("test", n=1), vote=("float32", me))
    assert votes == [("float32", r) for r in range(world)], votes
    rounds["agreed"] = len(counts)

    long_vote = "x" * 500 if me == 1 else me  # one process's vote does not fit the record
    with _counted() as counts:
        votes = agree(eng, describe("test", n=2), vote=long_vote)
    assert votes == [("x" * 500 if r == 1 else r) for r in range(world)], votes
    rounds["long vote"] = len(counts)

    def fails() -> None:
        if me == 1:
            raise MemoryError("no room on rank 1 for the test")

    with _counted() as counts:
        seen = _raises(MemoryError if me == 1 else CollectiveError, lambda: prepare(eng, describe("test", n=3), fails))
    rounds["failed"] = len(counts)
    assert me == 1 or ("rank(s) 1 failed" in seen and "no room on rank 1 for the test" in seen), seen

    with _counted() as counts:
        differs = _raises(CollectiveMismatchError, lambda: agree(eng, describe("test", n=4, side=min(me, 1))))
    rounds["differ"] = len(counts)
    assert "side=0" in differs and "side=1" in differs, differs

    def after() -> None:
        if me == 1:
            raise ValueError("rank 1 fails after the exchange")

    with _counted() as counts:
        late = _raises(ValueError if me == 1 else CollectiveError, lambda: conclude(eng, describe("test", n=5), after))
    rounds["failed after"] = len(counts)
    assert me == 1 or "after the agreement" in late, late

    full = _global((4 * world, 6), seed=21)
    t = wrap(full, dd.slab(full.shape, 0))
    with _counted() as counts:
        moved = t.redistribute(dd.slab(full.shape, 1))
    rounds["redistribute"] = len(counts)
    np.testing.assert_array_equal(_np(moved.gather(framework="numpy")), full)  # the group stays usable

    # products that need no exchange: the plan's agreement is the only one
    k = _global((6, 6), seed=22)
    whole = wrap(k, dlmg.Layout.replicated(k.shape, ["cpu"] * world, ranks=list(range(world))))
    rows, cols = wrap(full, dd.slab(full.shape, 0)), wrap(full.T.copy(), dd.slab(full.T.shape, 1))
    with _counted() as counts:
        local = rows @ whole
    rounds["rows @ replicated"] = len(counts)
    with _counted() as counts:
        pending = dlmg.matmul(cols, rows, pending=True)  # left pending: no exchange
    rounds["columns @ rows"] = len(counts)
    np.testing.assert_allclose(_np(local.gather(framework="numpy")), full @ k, rtol=1e-5)
    np.testing.assert_allclose(_np(pending.gather(framework="numpy")), full.T @ full, rtol=1e-5)
    assert eng.broken is None
    return rounds


def mixed_object_sizes() -> list[Any]:
    """``allgather_object`` with pickles on both sides of the record's inline room, in every
    mix across ranks, and empty or ``None`` objects, gives every process's object."""
    eng = dd.current_engine()
    me, world = eng.rank, eng.world_size
    for lengths in ((0, 0), (119, 1), (1, 5000), (5000, 120), (90000, 90000)):
        objects = [b"r%d" % r + b"y" * lengths[r % 2] for r in range(world)]
        assert eng.allgather_object(objects[me]) == objects
    assert eng.allgather_object(None) == [None] * world
    eng.barrier()
    return eng.allgather_object(me)


SCENARIOS = {f.__name__: f for f in (agreement_rounds, mixed_object_sizes)}
