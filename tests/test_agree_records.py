"""The agreement's fixed-size records and its rounds, in one process.

The engines carry a pickle of up to ``INLINE`` bytes inside one fixed-size
record and gather longer ones in a second all-gather; ``agree`` reads its first
round and gathers the texts only when some process failed or the digests
differ. A stand-in engine plays the other processes here (what each of them
sends is given), so every outcome is checked without launching processes; the
multi-process runs are in ``tests/test_reliability_processes.py``.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from dlmg.distributed.agree import agree, describe
from dlmg.distributed.engine import INLINE, RECORD, Engine, record, unpickle
from dlmg.errors import CollectiveError, CollectiveMismatchError


class Peers(Engine):
    """Rank 0 of a group whose other processes send ``others(round, obj)`` in each round."""

    name = "peers"

    def __init__(self, world: int, others: Any) -> None:
        super().__init__(0, world, 5.0)
        self.others = others
        self.rounds: list[Any] = []

    def allgather_object(self, obj: Any) -> list[Any]:
        k = len(self.rounds)
        self.rounds.append(obj)
        return [obj, *(self.others(k, r) for r in range(1, self.world_size))]

    def local_device(self) -> Any:
        raise NotImplementedError

    def transport(self, device: Any) -> str:
        return "none"

    def empty(self, n: int, dtype: str, device: Any) -> Any:
        raise NotImplementedError

    def all_gather(self, send: Any, recv: Any) -> None:
        raise NotImplementedError

    def alltoallv(self, send: Any, send_counts: Any, recv: Any, recv_counts: Any) -> None:
        raise NotImplementedError

    def broadcast(self, buf: Any, root: int) -> None:
        raise NotImplementedError

    def allreduce(self, buf: Any, op: str) -> None:
        raise NotImplementedError


def _first_round_of(description: str, failed: bool = False, vote: Any = None) -> tuple:
    """What a process doing ``description`` sends first (its digest as agree computes it)."""
    probe = Peers(1, None)
    try:
        agree(probe, description, RuntimeError("x") if failed else None, vote)
    except RuntimeError:
        pass
    digest = probe.rounds[0][0]
    return (digest, failed, None if failed else vote)


def test_agreeing_processes_take_one_round_and_return_the_votes():
    text = describe("redistribute", source="rows", target="columns")
    mine = _first_round_of(text, vote="a")
    engine = Peers(3, lambda k, r: (mine[0], False, f"vote {r}"))
    assert agree(engine, text, vote="a") == ["a", "vote 1", "vote 2"]
    assert len(engine.rounds) == 1


def test_a_failed_process_makes_the_others_raise_with_its_error_in_a_second_round():
    text = describe("gather", root=0)
    digest = _first_round_of(text)[0]

    def others(k: int, r: int) -> Any:
        if k == 0:
            return (digest, r == 2, None)
        return (text, "MemoryError: no room" if r == 2 else None)

    engine = Peers(3, others)
    with pytest.raises(CollectiveError, match=r"rank\(s\) 2 failed while preparing it; rank 2: MemoryError: no room"):
        agree(engine, text)
    assert engine.rounds[1] == (text, None)  # this process's text, no error of its own
    assert len(engine.rounds) == 2


def test_the_failing_process_raises_its_own_error_after_taking_part_in_both_rounds():
    text = describe("gather", root=0)
    digest = _first_round_of(text)[0]
    engine = Peers(2, lambda k, r: (digest, False, None) if k == 0 else (text, None))
    with pytest.raises(KeyError, match="mine"):
        agree(engine, text, KeyError("mine"))
    assert engine.rounds[0][1] is True and engine.rounds[1] == (text, "KeyError: 'mine'")


def test_differing_descriptions_show_both_sides():
    mine, theirs = describe("sum", axis=0), describe("sum", axis=1)
    other = _first_round_of(theirs)
    engine = Peers(2, lambda k, r: other if k == 0 else (theirs, None))
    with pytest.raises(CollectiveMismatchError, match=r"rank 0 runs sum\(axis=0\), rank 1 runs sum\(axis=1\)"):
        agree(engine, mine)
    assert len(engine.rounds) == 2


def test_a_record_holds_the_length_and_the_inline_bytes():
    data = pickle.dumps(("a", 1))
    rec = record(data)
    assert len(rec) == RECORD == INLINE + 8
    assert int.from_bytes(rec[:8], "little") == len(data) and rec[8: 8 + len(data)] == data
    assert record(b"x" * 500)[8:] == b"x" * INLINE  # only the head travels in the record


def _pickling_to(length: int) -> bytes:
    """Bytes whose pickle is ``length`` bytes long."""
    obj = next(b"p" * n for n in range(length) if len(pickle.dumps(b"p" * n)) == length)
    return obj


@pytest.mark.parametrize("lengths", [(INLINE, 20), (INLINE + 1, 20), (20, INLINE + 200), (20, 20)])
def test_pickles_longer_than_the_record_come_from_a_second_round(lengths):
    objects = [_pickling_to(n) for n in lengths]
    pickles = [pickle.dumps(o) for o in objects]
    assert [len(p) for p in pickles] == list(lengths)
    records = b"".join(record(p) for p in pickles)
    asked: list[list[int]] = []

    def rest(ls: list[int]) -> list[bytes]:
        asked.append(ls)
        return pickles

    assert unpickle(Peers(2, None), "test", records, rest) == objects
    assert asked == ([list(lengths)] if max(lengths) > INLINE else [])


@pytest.mark.parametrize("records", [
    b"\x05" + bytes(RECORD - 1) + record(pickle.dumps(1)),  # 5 bytes that are no pickle
    (1 << 50).to_bytes(8, "little") + bytes(INLINE) + record(pickle.dumps(1)),  # an impossible length
])
def test_bytes_that_are_no_records_break_the_engine(records):
    engine = Peers(2, None)
    with pytest.raises(CollectiveError, match="different sequences of collectives"):
        unpickle(engine, "test", records, lambda ls: [b""] * 2)
    assert engine.broken is not None
