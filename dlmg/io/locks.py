"""Who touches a checkpoint path at once: one save at a time, and loads that read one generation.

Each save publishes a new directory (a *generation*) at the path; readers and
writers coordinate through advisory ``flock`` locks, which every process of a
machine honours (and, where the kernel forwards them to the server, processes
of other machines on a network file system):

* **Saves are serialized** by an exclusive lock on the lock file
  ``.<name>.dlmg-lock`` beside the path (:func:`exclusive`), held from a save's
  first check to its last removal; a save that cannot take it within
  :data:`LOCK_TIMEOUT` seconds raises :class:`~dlmg.errors.CheckpointError`
  naming the path. The lock file stays (removing it would let two savers lock
  two different files).
* **A load pins one generation** (:func:`pinned`): it opens the directory at
  the path, takes a shared lock on that directory and checks that the path
  still names it. From then on it reads through the open handle
  (``/proc/self/fd/<n>``), so a save that publishes meanwhile changes nothing
  it reads; and a save removes a replaced generation only when it can lock it
  exclusively (:func:`remove_generation`), so no reader is inside it. A
  generation still read is left for the next save to remove. Where the path
  changes between the open and the check again and again, the load takes the
  lock file shared, which keeps every save from publishing until the pin is
  taken, so a pin never fails for timing.
* Without ``/proc/self/fd`` (not Linux) a load holds the lock file shared
  while it reads: no save publishes during a read, and a save waits for the
  reads under way.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from ..errors import CheckpointError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no advisory locks
    fcntl = None  # type: ignore[assignment]

__all__ = ["LOCK_TIMEOUT", "lock_path", "exclusive", "shared", "pinned", "Pin", "remove_generation"]

#: Seconds a save waits for another save of the same path before it raises.
LOCK_TIMEOUT = 60.0

_PROC_FD = "/proc/self/fd"
#: Errors of ``flock`` on file systems that offer no locks: there, nothing is locked.
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL, errno.EBADF})
#: Tries to pin the path's directory without the lock file before taking it shared.
_PIN_TRIES = 3


def lock_path(path: str) -> str:
    """The lock file of saves to ``path`` (beside it)."""
    parent, name = os.path.split(os.path.abspath(path))
    return os.path.join(parent, f".{name}.dlmg-lock")


def _flock(fd: int, mode: int, deadline: float | None) -> bool:
    """Take ``mode`` on ``fd``, waiting until ``deadline`` (``None``: not at all).

    Returns whether it was taken; ``True`` also where the file system has no locks.
    """
    delay = 0.001
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                return True
            raise
        if deadline is None or time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(2 * delay, 0.01)


@contextmanager
def exclusive(path: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the lock of saves to ``path`` (one save at a time).

    Raises
    ------
    CheckpointError
        When another save holds it for more than ``timeout`` seconds
        (:data:`LOCK_TIMEOUT` by default), or the lock file cannot be made.
    """
    if fcntl is None:  # pragma: no cover
        yield
        return
    where = lock_path(path)
    wait = LOCK_TIMEOUT if timeout is None else timeout
    try:
        fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as exc:
        raise CheckpointError(f"save {path}: cannot open the lock file {where} ({exc})") from exc
    try:
        if not _flock(fd, fcntl.LOCK_EX, time.monotonic() + wait):
            raise CheckpointError(
                f"save {path}: another save of this path held the lock {where} for more than {wait:g} s; "
                f"saves of one path run one at a time"
            )
        yield
    finally:
        os.close(fd)


@contextmanager
def shared(path: str, timeout: float | None = None) -> Iterator[None]:
    """Hold the lock of saves to ``path`` shared: no save publishes meanwhile.

    Where the lock file cannot be opened or made (a read-only directory, where
    no save runs either) nothing is held.
    """
    if fcntl is None:  # pragma: no cover
        yield
        return
    where = lock_path(path)
    wait = LOCK_TIMEOUT if timeout is None else timeout
    try:
        fd = os.open(where, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        try:
            fd = os.open(where, os.O_RDONLY)
        except OSError:
            yield
            return
    try:
        if not _flock(fd, fcntl.LOCK_SH, time.monotonic() + wait):
            raise CheckpointError(
                f"load {path}: a save of this path held the lock {where} for more than {wait:g} s"
            )
        yield
    finally:
        os.close(fd)


class Pin:
    """One generation of a checkpoint, held for reading.

    Attributes
    ----------
    directory : str
        Where to read it: ``/proc/self/fd/<n>`` of the pinned directory, or the
        path itself while the lock file is held shared (or where it is no
        directory at all: the readers then say what is wrong).
    """

    __slots__ = ("directory",)

    def __init__(self, directory: str) -> None:
        self.directory = directory


def _same(fd: int, path: str) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _try_pin(path: str) -> tuple[int | None, bool]:
    """``(fd, done)``: a locked handle of the directory at ``path`` that the path still names;
    ``(None, True)`` where ``path`` is no directory; ``(None, False)`` where it changed meanwhile."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:  # gone for now, between the two renames of a replacement, if ever saved
        return None, not os.path.exists(lock_path(path))
    except OSError:  # no directory: the readers say what is there
        return None, True
    try:
        # Waits only while a save removes this very generation (it then no longer is at the path).
        if _flock(fd, fcntl.LOCK_SH, time.monotonic() + LOCK_TIMEOUT) and _same(fd, path):
            return fd, True
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    return None, False


@contextmanager
def pinned(path: str, hold: bool = False) -> Iterator[Pin]:
    """The generation at ``path``, kept whole (not removed, not replaced under the reader) until exit.

    Parameters
    ----------
    path : str
        A checkpoint path (absolute, symbolic links resolved).
    hold : bool
        Also hold the lock file shared until exit, so that no save publishes
        meanwhile (processes that must all pin the same generation).
    """
    with ExitStack() as stack:
        if fcntl is None or not os.path.isdir(_PROC_FD):  # pragma: no cover - not Linux
            stack.enter_context(shared(path))
            yield Pin(path)
            return
        if hold:
            stack.enter_context(shared(path))
        fd, done = None, False
        for _ in range(_PIN_TRIES):
            fd, done = _try_pin(path)
            if done:
                break
        if not done:  # saves published between the open and the check every time
            stack.enter_context(shared(path))
            fd, _ = _try_pin(path)
        if fd is None:
            yield Pin(path)
            return
        stack.callback(os.close, fd)
        yield Pin(f"{_PROC_FD}/{fd}")


def remove_generation(directory: str) -> bool:
    """Remove a replaced or abandoned generation unless a load reads it now.

    Returns whether it is gone; one still read stays, for the next save of
    its path to remove.
    """
    if os.path.islink(directory):
        os.unlink(directory)
        return True
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if fcntl is not None and not _flock(fd, fcntl.LOCK_EX, None):
            return False
        shutil.rmtree(directory, ignore_errors=True)
        return not os.path.lexists(directory)
    finally:
        os.close(fd)
