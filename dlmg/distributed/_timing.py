"""Bounded waiting shared by the engines."""

from __future__ import annotations

import os
import time
from typing import Callable

from ..errors import CollectiveError

__all__ = ["wait_until"]


def wait_until(done: Callable[[], bool], timeout: float, what: str, rank: int,
               gone: Callable[[], None] | None = None) -> None:
    """Poll ``done()`` until it is true or ``timeout`` seconds pass.

    Polling drives the progress of non-blocking collectives (MPI progresses a
    request while it is tested), so there is no sleep between tests, only a
    yield of the processor; after a second of waiting the pause grows to 1 ms.

    ``gone`` runs when the time runs out, before the error is raised.

    Raises
    ------
    CollectiveError
        When the time runs out (the message names the collective and this rank).
    """
    start = time.monotonic()
    deadline = start + timeout
    while not done():
        now = time.monotonic()
        if now > deadline:
            if gone is not None:
                gone()  # release what the unfinished operation holds
            raise CollectiveError(
                f"{what}: rank {rank} waited {timeout:g} s and not every process took part "
                "(a process failed, left or runs a different sequence of collectives)"
            )
        if now - start < 1.0:
            os.sched_yield()
        else:
            time.sleep(1e-3)
