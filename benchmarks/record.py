"""What a benchmark records: rows of comparisons, their metrics and targets.

A :class:`Row` is one comparison: dlmg's timing, the native timing (and any
extra contenders such as a plain copy), the ratio ``dlmg / native``, derived
metrics (GB/s, fraction of copy bandwidth, microseconds of dispatch) and the
targets they are held against. Targets are reported (pass / miss), never
asserted.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, Callable

from .harness import Timing, describe_error, ratio

__all__ = ["Row", "Target", "check_result", "prepared"]

_OPS: dict[str, Callable[[float, float], bool]] = {"<=": operator.le, ">=": operator.ge}


@dataclass(frozen=True)
class Target:
    """A goal for one metric, such as ``ratio <= 1.5``.

    Parameters
    ----------
    metric : str
        ``"ratio"`` or the name of an entry of :attr:`Row.metrics`.
    op : {"<=", ">="}
    limit : float
    """

    metric: str
    op: str
    limit: float

    def __str__(self) -> str:
        return f"{self.metric} {self.op} {self.limit:g}"

    def check(self, value: float | None) -> bool | None:
        """Whether ``value`` meets the target; None when there is no value."""
        if value is None:
            return None
        return _OPS[self.op](value, self.limit)


@dataclass
class Row:
    """One comparison between dlmg and its native counterpart.

    Attributes
    ----------
    case : int
        The case number (1-6).
    name : str
        What is measured, e.g. ``"pointwise a*b+c, torch"``.
    params : dict
        Sizes and settings (bytes, shape, layout, frameworks, device).
    native : str
        What the native side runs, in words.
    timings : dict of str to Timing or str
        ``"dlmg"``, ``"native"`` and any other contender, or an error string.
    metrics : dict of str to float or None
        Derived figures; filled by the case.
    targets : list of Target
    check : str
        Result check: ``""`` (none), ``"ok ..."`` or ``"mismatch ..."``.
    profile : str
        With ``--profile``, the profiler's table of one dlmg call
        (:mod:`benchmarks.profiling`); not part of :meth:`as_dict`.
    """

    case: int
    name: str
    params: dict[str, Any]
    native: str
    timings: dict[str, Timing | str] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    check: str = ""
    profile: str = field(default="", repr=False)

    def time(self, who: str) -> float | None:
        """The median seconds of contender ``who``, or None."""
        timing = self.timings.get(who)
        return timing.median_s if isinstance(timing, Timing) else None

    @property
    def ratio(self) -> float | None:
        """dlmg's median time over the native median time."""
        return ratio(self.timings.get("dlmg"), self.timings.get("native"))

    def value(self, metric: str) -> float | None:
        """The value of ``metric`` (``"ratio"`` or an entry of :attr:`metrics`)."""
        return self.ratio if metric == "ratio" else self.metrics.get(metric)

    @property
    def status(self) -> str:
        """``"ok"``, or the first error among the contenders and the check."""
        for who, timing in self.timings.items():
            if isinstance(timing, str):
                return f"{timing} [{who}]" if who != "dlmg" else timing
        if self.check.startswith(("mismatch", "error")):
            return "error: wrong result: " + self.check
        return "ok"

    def passed(self) -> bool | None:
        """True when every target is met, False when one is missed, None when unknown."""
        results = [t.check(self.value(t.metric)) for t in self.targets]
        if not results:
            return None
        if any(r is False for r in results):
            return False
        if any(r is None for r in results):
            return None
        return True

    def as_dict(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (every key present, values may be null)."""
        timings = {
            who: (t.as_dict() if isinstance(t, Timing) else {"error": t}) for who, t in self.timings.items()
        }
        return {
            "case": self.case,
            "name": self.name,
            "params": self.params,
            "native_name": self.native,
            "dlmg": timings.get("dlmg"),
            "native": timings.get("native"),
            "others": {k: v for k, v in timings.items() if k not in ("dlmg", "native")},
            "ratio": self.ratio,
            "metrics": self.metrics,
            "targets": [
                {
                    "metric": t.metric,
                    "op": t.op,
                    "limit": t.limit,
                    "value": self.value(t.metric),
                    "pass": t.check(self.value(t.metric)),
                }
                for t in self.targets
            ],
            "pass": self.passed(),
            "check": self.check,
            "status": self.status,
        }


def prepared(build: Callable[[], Callable[[], Any]]) -> Callable[[], Any]:
    """The callable ``build()`` returns, or one that re-raises its error.

    dlmg set-up (wrapping fragments, building a layout) happens outside the
    timed call; when it fails, the failure must land in the report as the dlmg
    contender's error, not end the case.
    """
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - reported as the contender's error
        error = exc

        def fail() -> Any:
            raise error

        return fail


def check_result(compare: Callable[[], str]) -> str:
    """Run a result check; its exceptions become ``"error: ..."`` strings."""
    try:
        return compare()
    except Exception as exc:  # noqa: BLE001
        return describe_error(exc)
