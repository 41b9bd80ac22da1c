"""The timing harness: interleaved repeats, medians, and errors kept as data.

Every figure is the median of ``repeats`` timed repeats after a warm-up, with
the minimum and maximum. The callables of one comparison (dlmg's and the
native one, sometimes a copy baseline too) are timed in turn, repeat by repeat,
so that a noisy machine slows both sides alike and their ratio stays
meaningful. Each call is followed by a ``sync`` inside the timed region, so
device work is timed to completion, never by launch time.

A callable that raises is recorded as ``"error: ..."`` and dropped; the other
callables of the comparison are still timed.
"""

from __future__ import annotations

import gc
import math
import time
import traceback
from dataclasses import asdict, dataclass
from typing import Any, Callable

__all__ = ["Settings", "Timing", "describe_error", "measure", "ratio"]


@dataclass(frozen=True)
class Settings:
    """How hard to time.

    Parameters
    ----------
    repeats : int
        Timed repeats per callable; the median of them is the figure.
    warmup : int
        Untimed calls before the first repeat (the first call also calibrates).
    min_repeat_s : float
        A repeat of a fast callable runs it ``inner`` times in a row so that
        one repeat lasts about this long; its time is divided by ``inner``.
    max_call_s : float
        A callable whose warm-up call takes longer than this is not repeated:
        its figure is that one call, flagged in :attr:`Timing.note`.
    back_to_back : bool
        Run the ``inner`` calls of a repeat back to back and wait for the
        device once, after the last (as ``torch.utils.benchmark`` and
        ``triton.testing.do_bench`` time GPU work): host work that overlaps
        queued device work is then hidden, as in a program that does not
        synchronise after every call. Off: every call is waited for (its
        latency).
    """

    repeats: int = 5
    warmup: int = 1
    min_repeat_s: float = 0.005
    max_call_s: float = 30.0
    back_to_back: bool = False


@dataclass(frozen=True)
class Timing:
    """Seconds per call of one callable.

    Attributes
    ----------
    median_s, min_s, max_s : float
        Median, minimum and maximum over the timed repeats.
    repeats : int
        How many repeats were timed.
    inner : int
        Calls per repeat (each repeat's time is divided by it).
    note : str
        Empty, or why the rules were bent (a single slow call).
    """

    median_s: float
    min_s: float
    max_s: float
    repeats: int
    inner: int
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The timing as a JSON-ready dict."""
        return asdict(self)


def describe_error(exc: BaseException) -> str:
    """A one-line ``"error: Type: message (at file:line)"`` for the report."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = ""
    if frames:
        last = frames[-1]
        where = f" (at {last.filename.rsplit('/', 1)[-1]}:{last.lineno})"
    message = " ".join(str(exc).split())
    if len(message) > 300:
        message = message[:297] + "..."
    return f"error: {type(exc).__name__}: {message}{where}"


def _call(fn: Callable[[], Any], sync: Callable[[Any], None]) -> float:
    start = time.perf_counter()
    result = fn()
    sync(result)
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def _repeat(fn: Callable[[], Any], sync: Callable[[Any], None], inner: int, back_to_back: bool) -> float:
    if back_to_back:
        start = time.perf_counter()
        result = None
        for _ in range(inner):
            result = fn()  # the previous result is released here, as in a loop of calls
        sync(result)  # waits for the whole device, so for every call of the repeat
        elapsed = time.perf_counter() - start
        del result
        return elapsed / inner
    total = 0.0
    for _ in range(inner):
        total += _call(fn, sync)
    return total / inner


def measure(
    callables: dict[str, Callable[[], Any]],
    settings: Settings,
    sync: Callable[[Any], None] = lambda result: None,
) -> dict[str, Timing | str]:
    """Time several callables, interleaved repeat by repeat.

    Parameters
    ----------
    callables : dict of str to callable
        The contenders, by name (``"dlmg"``, ``"native"``, ...). Each is called
        with no arguments; its result is passed to ``sync``.
    settings : Settings
        Repeats, warm-up and calibration.
    sync : callable, optional
        Waits until the result's device work is complete (block_until_ready,
        a CUDA synchronize); called inside the timed region.

    Returns
    -------
    dict of str to Timing or str
        A :class:`Timing` per callable, or an ``"error: ..."`` string for one
        that raised.
    """
    results: dict[str, Timing | str] = {}
    inner: dict[str, int] = {}
    slow: dict[str, float] = {}
    gc.collect(0)  # young objects only: a full collection costs ~0.1 s with JAX and torch loaded
    for name, fn in callables.items():
        try:
            first = _call(fn, sync)
            for _ in range(max(settings.warmup - 1, 0)):
                if first > settings.max_call_s:
                    break
                first = min(first, _call(fn, sync))
        except Exception as exc:  # noqa: BLE001 - a failing contender is data
            results[name] = describe_error(exc)
            continue
        if first > settings.max_call_s:
            slow[name] = first
            continue
        inner[name] = max(1, min(10_000, math.ceil(settings.min_repeat_s / max(first, 1e-9))))
    samples: dict[str, list[float]] = {name: [] for name in inner}
    enabled = gc.isenabled()
    gc.disable()
    try:
        for rep in range(settings.repeats):
            names = list(samples)
            if rep % 2:
                names.reverse()
            for name in names:
                if name in results:
                    continue
                try:
                    samples[name].append(_repeat(callables[name], sync, inner[name], settings.back_to_back))
                except Exception as exc:  # noqa: BLE001
                    results[name] = describe_error(exc)
    finally:
        if enabled:
            gc.enable()
    for name, times in samples.items():
        if name in results:
            continue
        times.sort()
        n = len(times)
        median = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
        results[name] = Timing(median, times[0], times[-1], n, inner[name])
    for name, first in slow.items():
        note = f"one call took {first:.1f} s (> {settings.max_call_s:g} s): a single run, not repeated"
        results[name] = Timing(first, first, first, 1, 1, note)
    return {name: results[name] for name in callables}


def ratio(num: Timing | str | None, den: Timing | str | None) -> float | None:
    """``num.median / den.median``, or None when either side is missing."""
    if not isinstance(num, Timing) or not isinstance(den, Timing) or den.median_s <= 0:
        return None
    return num.median_s / den.median_s
