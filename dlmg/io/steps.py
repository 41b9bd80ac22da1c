"""The steps of a save or load that every process takes together.

Each step runs some local work on every process, then all processes compare
what they did and whether it failed (:func:`dlmg.distributed.agree.prepare_vote`):
a failure on one process raises on every process, so no process goes on to
publish a save or return a loaded tensor that another could not finish. In
one process a step is just the work.
"""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ..distributed import current_engine, rank, world_size
from ..distributed.agree import prepare_vote

__all__ = ["step", "rank", "world_size", "collective_timeout"]

T = TypeVar("T")


def step(description: str, work: Callable[[], tuple[T, Any]]) -> tuple[T, list[Any]]:
    """Run ``work`` (returning ``(result, vote)``) here, then agree across processes.

    Returns
    -------
    (result, votes)
        This process's result and every process's vote, in rank order.
    """
    engine = current_engine()
    if engine is None:
        result, vote = work()
        return result, [vote]
    return prepare_vote(engine, description, work)


def collective_timeout() -> float | None:
    """How long the engine's collectives wait (``None`` in one process)."""
    engine = current_engine()
    return None if engine is None else float(engine.timeout)
