"""Safe writes: a save goes to a staging directory and is published whole.

A save writes everything into ``.<name>.dlmg-partial-<token>`` beside the
target path. Once every process has written its chunks (the callers agree on
that across processes), one process writes the commit marker
(:data:`~dlmg.io.format.COMMIT_MARKER`) into the staging directory and
renames it onto the target path: with ``renameat2(RENAME_EXCHANGE)`` where
Linux offers it, the old and new checkpoints swap in one step; elsewhere the
old one is first renamed aside. A save that dies part way leaves the earlier
checkpoint at the path untouched and its own staging directory without a
marker, which :func:`check_complete` refuses; the next save to that path
removes it (:func:`remove_stale`), and a save that fails on a process while
the others live removes its own at once.

A replaced checkpoint is removed only where no load reads it
(:func:`~dlmg.io.locks.remove_generation`); one still read stays beside the
path until a later save removes it. Saves of one path run one at a time
(:func:`~dlmg.io.locks.exclusive`), so no save removes another one's staging
directory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
from functools import lru_cache
from typing import Any

from ..errors import CheckpointError, CheckpointExistsError, IncompleteCheckpointError
from .format import COMMIT_MARKER, FORMAT
from .locks import remove_generation

__all__ = ["staging_path", "check_target", "is_checkpoint", "write_marker", "check_complete", "publish",
           "stale_staging", "remove_stale", "discard"]

_PARTIAL = ".dlmg-partial-"


def staging_path(path: str, token: str) -> str:
    """The staging directory of a save to ``path`` (beside it, so a rename publishes it)."""
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{name}{_PARTIAL}{token}")


def stale_staging(path: str) -> list[str]:
    """The staging directories of earlier saves to ``path`` still beside it (sorted)."""
    parent, name = os.path.split(os.path.abspath(path))
    prefix = f".{name}{_PARTIAL}"
    try:
        entries = os.listdir(parent)
    except OSError:
        return []
    return sorted(os.path.join(parent, e) for e in entries if e.startswith(prefix))


def _has_marker(path: str) -> bool:
    try:
        check_complete(path)
    except IncompleteCheckpointError:
        return False
    return True


def remove_stale(path: str) -> list[str]:
    """Remove what earlier saves to ``path`` left beside it; returns what was removed.

    A staging directory without a commit marker is a save that never
    finished: removed. One with a marker (a save that died while publishing,
    or a replaced checkpoint set aside) is removed only when ``path`` itself
    holds a finished checkpoint, so the one whole copy is never lost. A
    directory a load reads now stays (:func:`~dlmg.io.locks.remove_generation`).
    The caller holds the lock of saves to ``path``, so no other save's staging
    directory is among them.
    """
    settled = is_checkpoint(path) and _has_marker(path)
    removed = []
    for stale in stale_staging(path):
        ours = os.path.islink(stale) or (os.path.isdir(stale) and (settled or not _has_marker(stale)))
        if ours and remove_generation(stale):
            removed.append(stale)
    return removed


def discard(staging: str) -> None:
    """Remove the staging directory of a save that failed (nothing else writes to it any more;
    after a replacement it holds the replaced checkpoint, kept while a load reads it)."""
    remove_generation(staging)


def _json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def is_checkpoint(path: str) -> bool:
    """Whether ``path`` is a directory holding a dlmg checkpoint, finished or not: its
    ``zarr.json`` carries dlmg's record, or its commit marker is dlmg's (a checkpoint
    whose metadata was lost is still dlmg's to replace)."""
    meta = _json(os.path.join(path, "zarr.json"))
    attributes = meta.get("attributes") if isinstance(meta, dict) else None
    record = attributes.get("dlmg") if isinstance(attributes, dict) else None
    if isinstance(record, dict) and record.get("format") == FORMAT:
        return True
    marker = _json(os.path.join(path, COMMIT_MARKER))
    return isinstance(marker, dict) and marker.get("format") == FORMAT and os.path.isdir(path)


def check_target(path: str, overwrite: bool) -> None:
    """Refuse a save onto ``path`` that would replace something it must not.

    Raises
    ------
    CheckpointExistsError
        When ``path`` exists and ``overwrite`` is false, or ``path`` exists and
        is no dlmg checkpoint (never replaced).
    """
    if not os.path.lexists(path):
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise CheckpointError(f"save: the directory {parent} of path {path!r} does not exist")
        return
    if not is_checkpoint(path):
        raise CheckpointExistsError(
            f"save: path {path!r} exists and is no dlmg checkpoint; dlmg replaces only its own "
            f"checkpoints (overwrite={overwrite})"
        )
    if not overwrite:
        raise CheckpointExistsError(f"save: path {path!r} already holds a checkpoint; pass overwrite=True to replace it")


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory handles
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def write_marker(staging: str, summary: dict[str, Any]) -> None:
    """Write the commit marker into ``staging`` (whole or not at all: a rename)."""
    target = os.path.join(staging, COMMIT_MARKER)
    tmp = target + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"format": FORMAT, "complete": True, **summary}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)
    _fsync_dir(staging)


def check_complete(path: str, where: str | None = None) -> dict[str, Any]:
    """The commit marker of ``path`` (read at ``path``, named ``where`` in errors).

    Raises
    ------
    IncompleteCheckpointError
        Unless ``path`` holds a commit marker saying complete.
    """
    shown = path if where is None else where
    marker = os.path.join(path, COMMIT_MARKER)
    try:
        with open(marker, encoding="utf-8") as f:
            content = json.load(f)
    except FileNotFoundError:
        raise IncompleteCheckpointError(
            f"{shown} is an incomplete save (no commit marker {COMMIT_MARKER}): a save that did "
            f"not finish; load the checkpoint it was meant to replace, or save again"
        ) from None
    except (OSError, ValueError) as exc:
        raise IncompleteCheckpointError(f"{shown}: the commit marker {COMMIT_MARKER} is unreadable ({exc})") from None
    if not isinstance(content, dict) or content.get("complete") is not True:
        raise IncompleteCheckpointError(f"{shown}: the commit marker {COMMIT_MARKER} does not say complete: {content!r}")
    return content


@lru_cache(maxsize=1)
def _renameat2() -> Any:
    name = ctypes.util.find_library("c")
    if name is None:  # pragma: no cover
        return None
    fn = getattr(ctypes.CDLL(name, use_errno=True), "renameat2", None)
    if fn is not None:
        fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
        fn.restype = ctypes.c_int
    return fn


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Swap two paths in one step where the system can (Linux ``renameat2``)."""
    fn = _renameat2()
    if fn is None:  # pragma: no cover - not Linux, or an old C library
        return False
    return fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def publish(staging: str, path: str) -> None:
    """Move the finished ``staging`` directory onto ``path``, replacing what is there.

    The replaced checkpoint is removed unless a load reads it now; then it
    stays beside ``path`` (under the staging name) for the next save to remove.
    """
    path = os.path.abspath(path)
    if not os.path.lexists(path):
        os.rename(staging, path)
    elif _exchange(staging, path):
        remove_generation(staging)  # now the old checkpoint
    else:  # pragma: no cover - without an atomic exchange: the old one aside, the new one in
        aside = staging + ".old"
        os.rename(path, aside)
        os.rename(staging, path)
        remove_generation(aside)
    _fsync_dir(os.path.dirname(path))
