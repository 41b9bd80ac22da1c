"""Communication engines by name: the entry-point group ``dlmg.engines``, then
the built-in table.

An engine module exposes a factory ``create(*, timeout, **its_options)``
returning an :class:`~dlmg.distributed.engine.Engine`;
:func:`dlmg.distributed.init` passes its keyword options through to it
(``group=`` for torch, ``comm=`` for MPI), so the core knows no engine's
arguments. Adding an engine is one new module and one entry point (or
:func:`register_engine`).
"""

from __future__ import annotations

import importlib
import warnings
from functools import lru_cache
from importlib.metadata import entry_points
from typing import Any, Callable

from ..errors import FrameworkError

__all__ = ["BUILTIN_ENGINES", "engine_names", "engine_factory"]

#: The built-in engines: name -> ``"module:factory"``.
BUILTIN_ENGINES: dict[str, str] = {
    "torch": "dlmg.distributed.c10d:create",
    "mpi": "dlmg.distributed.mpi:create",
}
_ENTRY_POINT_GROUP = "dlmg.engines"


@lru_cache(maxsize=None)
def _table() -> dict[str, str]:
    table = dict(BUILTIN_ENGINES)
    for ep in entry_points(group=_ENTRY_POINT_GROUP):
        table[ep.name] = ep.value
    return table


def engine_names() -> tuple[str, ...]:
    """Names of every registered engine."""
    return tuple(_table())


def engine_factory(name: str) -> Callable[..., Any]:
    """The factory of engine ``name``.

    Raises
    ------
    FrameworkError
        For an unknown name, or an engine module that fails to load.
    """
    if not isinstance(name, str) or name not in _table():
        raise FrameworkError(f"backend {name!r} is unknown; registered engines: {', '.join(engine_names())}")
    target = _table()[name]
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except Exception as exc:
        if name in BUILTIN_ENGINES and target != BUILTIN_ENGINES[name]:
            warnings.warn(
                f"dlmg engine {name!r} from entry point {target!r} failed to load ({exc!r}); "
                "using the built-in one", RuntimeWarning, stacklevel=2,
            )
            module_name, _, attr = BUILTIN_ENGINES[name].partition(":")
            return getattr(importlib.import_module(module_name), attr)
        raise FrameworkError(f"engine {name!r} ({target}) failed to load: {exc!r}") from exc
