"""The engine of this process, if :func:`dlmg.distributed.init` set one.

Kept apart from the engines so the core can ask for this process's rank
without importing any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

_current: "list[Engine]" = []


def current() -> "Engine | None":
    """The active engine, ``None`` when dlmg runs in one process."""
    return _current[0] if _current else None


def set_current(engine: "Engine | None") -> None:
    _current.clear()
    if engine is not None:
        _current.append(engine)


def rank() -> int:
    """This process's rank (0 without an engine)."""
    return _current[0].rank if _current else 0


def world_size() -> int:
    """The number of processes (1 without an engine)."""
    return _current[0].world_size if _current else 1
