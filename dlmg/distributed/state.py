"""The engine of this process, if :func:`dlmg.distributed.init` set one.

Kept apart from the engines so the core can ask for this process's rank
without importing any of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LayoutError

if TYPE_CHECKING:  # pragma: no cover
    from .engine import Engine

__all__ = ["current", "set_current", "rank", "world_size", "check_ranks"]

#: State (not a cache): the active engine, set by ``init`` and ``finalize``.
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


def check_ranks(layout: Any, what: str) -> None:
    """Refuse a layout naming a process the current engine does not have.

    Without an engine nothing is checked here (single-process code refuses
    fragments of other ranks where it reads them); under
    :func:`dlmg.distributed.init` every rank must be below the world size.

    Raises
    ------
    LayoutError
        Naming the missing ranks, the world size and the layout.
    """
    if not _current:
        return
    world = _current[0].world_size
    ranks = layout.ranks
    if max(ranks, default=0) < world:
        return
    missing = sorted({r for r in ranks if r >= world})
    raise LayoutError(
        f"{what}: the layout's ranks name process(es) {missing}, but the engine has {world} "
        f"process(es) (ranks 0..{world - 1}); ranks={tuple(ranks)}"
    )
