"""The peak of new memory during one call, as the memory tests across processes measure it
(``tracemalloc`` sees NumPy's buffers, so those tests use NumPy fragments)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any


def measured(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the peak of the memory it allocated beyond what was held before, in bytes."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return result, peak


def peak_of(fn: Callable[[], Any]) -> int:
    """The peak of :func:`measured`, the result freed."""
    return measured(fn)[1]
