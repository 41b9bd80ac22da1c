"""Agreement before every collective: same operation, same layouts, nobody failed.

SPMD code calls the same collectives in the same order on every process. Before
data moves, every process contributes a digest of what it is about to do (a
description: operation, layouts, dtype, arguments), whether it met an error
while preparing, and a small vote, in one fixed-size all-gather bounded by the
engine's timeout. When every digest matches and nobody failed, that is all.
Otherwise every process sees it in the same bytes and all of them run a second
all-gather of the descriptions and the errors' texts, for the messages. Then,
on every process alike:

* a process that failed makes every other one raise
  :class:`~dlmg.errors.CollectiveError` naming its rank and its error (the
  failing process raises its own error);
* descriptions that differ raise :class:`~dlmg.errors.CollectiveMismatchError`
  showing this process's side and the first differing one.

So one failing process ends the collective everywhere instead of leaving the
others waiting, and the group stays usable afterwards.

After the agreement comes the exchange and the local work around it (copies
into the destinations, conversions of the result). :func:`conclude` runs that
part and then a second agreement (again one all-gather when all went well):
a process whose local work failed after the data moved reports it there, so
every process raises and none returns a value. A failure of the engine itself (a timeout, a peer that died)
is not followed by a second round: the communicator is then in an unknown
state and every process gets its own :class:`~dlmg.errors.CollectiveError`
from its own bounded wait.

:func:`exclusive` keeps one collective at a time per engine and process: a
second thread waits for the first one's collective, at most the engine's
timeout, then raises.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, TypeVar

from ..errors import CollectiveError, CollectiveMismatchError

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

__all__ = ["agree", "prepare", "prepare_vote", "describe", "conclude", "exclusive"]

T = TypeVar("T")

#: Descriptions longer than this are shown cut in messages (the digest compares all of it).
_SHOWN = 600


def describe(what: str, **fields: Any) -> str:
    """``what(field=value, ...)``, the text every process compares."""
    inner = ", ".join(f"{k}={v!r}" for k, v in fields.items())
    return f"{what}({inner})"


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def _cut(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + " ..."


def agree(engine: "Engine", description: str, error: BaseException | None = None, vote: Any = None,
          when: str = "while preparing it") -> list[Any]:
    """Compare ``description`` and failures across every process (see the module docstring).

    Every process sends the digest of ``description``, whether it failed and its
    ``vote`` in one :meth:`~dlmg.distributed.engine.Engine.allgather_object`
    (one fixed-size all-gather while the vote is small). Only when some process
    failed or the digests differ does a second one carry the texts for the
    message; every process reads the same first round, so all of them take the
    second or none does.

    Returns
    -------
    list
        Every process's ``vote`` (a small picklable value), in rank order.

    Raises
    ------
    CollectiveError
        When some process reports an error (the failing process re-raises its own).
    CollectiveMismatchError
        When descriptions differ.
    """
    mine = _digest(description)
    entries = engine.allgather_object((mine, error is not None, None if error is not None else vote))
    if all(e[0] == mine and not e[1] for e in entries):
        return [e[2] for e in entries]
    report = None if error is None else f"{type(error).__name__}: {error}"
    texts = engine.allgather_object((_cut(description), report))
    failed = [(r, texts[r][1]) for r, e in enumerate(entries) if e[1]]
    if failed:
        if error is not None:
            raise error
        ranks = ", ".join(str(r) for r, _ in failed)
        first_rank, first_report = failed[0]
        raise CollectiveError(
            f"{_cut(description)} did not complete: rank(s) {ranks} failed {when}; "
            f"rank {first_rank}: {first_report}"
        )
    other = next(r for r, e in enumerate(entries) if e[0] != mine)  # the first round found one
    raise CollectiveMismatchError(
        f"processes disagree on the collective (every process must call the same dlmg "
        f"functions on the same layouts in the same order): rank {engine.rank} runs "
        f"{_cut(description)}, rank {other} runs {texts[other][0]}"
    )


def prepare(engine: "Engine", description: str, work: Callable[[], T]) -> T:
    """Run the local ``work`` of a collective, then :func:`agree` on it; returns its result."""
    try:
        result = work()
    except Exception as exc:
        agree(engine, description, exc)
        raise  # pragma: no cover - agree re-raises exc
    agree(engine, description)
    return result


def prepare_vote(engine: "Engine", description: str, work: Callable[[], tuple[T, Any]]) -> tuple[T, list[Any]]:
    """As :func:`prepare`, for ``work`` returning ``(result, vote)``; returns ``(result, votes)``."""
    try:
        result, vote = work()
    except Exception as exc:
        agree(engine, description, exc)
        raise  # pragma: no cover - agree re-raises exc
    return result, agree(engine, description, vote=vote)


def conclude(engine: "Engine", description: str, run: Callable[[], T]) -> T:
    """Run the part of a collective after its agreement (``run``: the exchange and the
    local work around it), then agree that it succeeded everywhere.

    Raises
    ------
    CollectiveError
        On every process when any process's ``run`` failed (the failing process
        re-raises its own error), or when the engine itself failed.
    """
    try:
        result = run()
    except CollectiveError:
        raise  # the engine failed: every process meets its own bounded wait
    except Exception as exc:
        agree(engine, f"{description} (completion)", exc, when="after the agreement")
        raise  # pragma: no cover - agree re-raises exc
    agree(engine, f"{description} (completion)", when="after the agreement")
    return result


@contextmanager
def exclusive(engine: "Engine", what: str) -> Iterator[None]:
    """Hold ``engine``'s lock for one whole collective (see the module docstring).

    Raises
    ------
    CollectiveError
        When another thread of this process holds it longer than the engine's timeout.
    """
    engine.check_usable(what)
    lock = engine.lock
    if not lock.acquire(timeout=engine.timeout):
        raise CollectiveError(
            f"{what}: rank {engine.rank} waited {engine.timeout:g} s for another thread's collective; "
            "dlmg runs one collective at a time per process, and every process must call them in "
            "the same order"
        )
    try:
        yield
    finally:
        lock.release()
