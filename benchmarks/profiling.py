"""What a row's time goes to: a ``torch.profiler`` table of one dlmg call.

With ``--profile`` every timed row also runs its dlmg call once more, warm,
under ``torch.profiler`` (CPU activity, and CUDA where the row runs on a GPU:
kernels of every framework on the device, not torch's alone), and keeps the
profiler's table of the 15 operations that took the most GPU time (CPU
time on the CPU). The suite writes the tables of the rows that miss a target
to ``<kind>-<mode>-profiles.md`` in the output folder, so that a miss comes
with a measured account of its time rather than a guess.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .harness import describe_error

__all__ = ["TOP_OPS", "missed_profiles", "profile_table", "render_profiles", "write_profiles"]

#: Operations listed per profiled call.
TOP_OPS = 15


def profile_table(fn: Callable[[], Any], device: str, sync: Callable[[Any], None]) -> str:
    """The profiler's table of one call of ``fn`` (waited for by ``sync``), top :data:`TOP_OPS`
    operations by GPU time on a GPU, by CPU time on the CPU; ``"error: ..."`` when it fails."""
    try:
        from torch.profiler import ProfilerActivity, profile

        on_gpu = device.startswith("cuda")
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        with profile(activities=activities) as prof:
            sync(fn())
        averages = prof.key_averages()
        for key in (("device_time_total", "cuda_time_total") if on_gpu else ("cpu_time_total",)):
            try:
                return str(averages.table(sort_by=key, row_limit=TOP_OPS))
            except (AttributeError, KeyError, ValueError):
                continue  # an older torch names the device column after CUDA
        return str(averages.table(row_limit=TOP_OPS))
    except Exception as exc:  # noqa: BLE001 - a failed profile is reported, the row stands
        return describe_error(exc)


def missed_profiles(rows: list[Any]) -> list[tuple[str, str]]:
    """``(row name, table)`` of every row that misses a target and was profiled."""
    return [(row.name, row.profile) for row in rows if row.profile and row.passed() is False]


def render_profiles(profiles: list[tuple[str, str]], title: str) -> str:
    """The profiles as Markdown: one heading and one fixed-width table per missed row."""
    lines = [f"# {title}", ""]
    if not profiles:
        lines.append("No row missed its target.")
    for name, table in profiles:
        lines += [f"## {name}", "", "```", table.rstrip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def write_profiles(profiles: list[tuple[str, str]], path: Path, title: str) -> Path:
    """Write :func:`render_profiles` to ``path`` (its folder created); return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_profiles(profiles, title))
    return path
