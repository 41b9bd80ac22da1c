"""Bounded waiting shared by the engines."""

from __future__ import annotations

import time
from typing import Callable

from ..errors import CollectiveError

__all__ = ["wait_until"]


def wait_until(done: Callable[[], bool], timeout: float, what: str, rank: int) -> None:
    """Poll ``done()`` with a growing pause until it is true or ``timeout`` seconds pass.

    Raises
    ------
    CollectiveError
        When the time runs out (the message names the collective and this rank).
    """
    deadline = time.monotonic() + timeout
    pause = 1e-5
    while not done():
        if time.monotonic() > deadline:
            raise CollectiveError(
                f"{what}: rank {rank} waited {timeout:g} s and not every process took part "
                "(a process failed, left or runs a different sequence of collectives)"
            )
        time.sleep(pause)
        pause = min(pause * 2, 1e-3)
