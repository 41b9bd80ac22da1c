"""Writing a run: its JSON document and its full Markdown record.

The record's Markdown shows every metric of every row; the performance page
shows a reader's view of the same run (:mod:`benchmarks.page`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["case_title", "machine_lines", "render_markdown", "write_results"]

_CASE_TITLES = {
    1: "Interchange: wrap 8 fragments and export each through DLPack",
    2: "Framework conversion: dt.to(framework)",
    3: "Pointwise a * b + c over 8 fragments, and dispatch overhead",
    4: "Gather and scatter (slab, cyclic, block-cyclic)",
    5: "Redistribution over JAX's 8 CPU devices",
    6: "GPU: interchange, pointwise, gather / scatter, redistribution, save / load, contractions, TSQR, FFTs, "
       "sorting on cuda:0",
    7: "Scaling: cost versus fragment count and layout complexity",
    8: "Across processes: all-gather and redistribution (torch.distributed, MPI)",
    9: "Saving and loading: dlmg.save / dlmg.load against numpy.save / load, zarr-python and DCP",
    10: "Contractions: A @ B and einsum against one native product",
    11: "Linear algebra: TSQR linalg.qr and blocked Cholesky against one native factorization",
    12: "FFTs: fftn over 8 slabs against numpy.fft.fftn and jax.jit(jnp.fft.fftn)",
    13: "Sorting, scans and rearranging: sample sort, blocked cumulative_sum, concat, flip and take against NumPy; sort across processes",
}


def case_title(case: int) -> str:
    """The heading of a case."""
    return _CASE_TITLES.get(case, f"Case {case}")


def machine_lines(m: dict[str, Any]) -> list[str]:
    """The machine a run was recorded on, as list items: CPU and load, GPU, versions."""
    lines = [
        f"- CPU: {m['cpu']}, {m['cores']} cores ({m.get('usable_cores')} usable), {m['memory_gib']} GiB;"
        f" load average (1, 5, 15 min) {m.get('load_average')} at the start, {m.get('load_average_end')} at the end",
    ]
    if m.get("gpu"):
        g = m["gpu"]
        lines.append(f"- GPU: {g['name']} ({g['memory_gib']} GiB, {g['count']} visible, CUDA {g['torch_cuda']})")
    lines.append("- Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()))
    return lines


def write_results(run: dict[str, Any], out: Path) -> tuple[Path, Path]:
    """Write ``<kind>-<mode>.json`` and ``.md`` under ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{run['kind']}-{run['mode']}"
    json_path = out / f"{stem}.json"
    md_path = out / f"{stem}.md"
    json_path.write_text(json.dumps(run, indent=1, sort_keys=False, default=str) + "\n")
    md_path.write_text(render_markdown(run, level=1) + "\n")
    return json_path, md_path


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if value >= scale or unit == "ns":
            return f"{value / scale:.3g} {unit}"
    return f"{value:.3g} s"


def _timing(t: dict[str, Any] | None) -> str:
    if not t:
        return "-"
    if "error" in t:
        return "error"
    text = f"{_seconds(t['median_s'])} [{_seconds(t['min_s'])} - {_seconds(t['max_s'])}]"
    if t.get("note"):
        text += " (1 run)"
    return text


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _target_cells(row: dict[str, Any]) -> tuple[str, str]:
    if not row["targets"]:
        return "-", "-"
    parts = []
    for t in row["targets"]:
        mark = {True: "pass", False: "miss", None: "n/a"}[t["pass"]]
        parts.append(f"{t['metric']} {t['op']} {t['limit']:g}: {mark}")
    overall = {True: "**pass**", False: "**miss**", None: "n/a"}[row["pass"]]
    return "; ".join(parts), overall


def _row_markdown(row: dict[str, Any]) -> str:
    metrics = "; ".join(f"{k} {_number(v)}" for k, v in row["metrics"].items() if v is not None) or "-"
    others = row.get("others") or {}
    extra = "; ".join(f"{who} {_timing(t)}" for who, t in others.items())
    if extra:
        metrics = f"{metrics}; {extra}" if metrics != "-" else extra
    target, verdict = _target_cells(row)
    status = row["status"] if row["status"] != "ok" else (row["check"] or "ok")
    cells = [
        f"{row['name']}<br>vs {row['native_name']}",
        str(row["params"].get("size", "-")),
        _timing(row["dlmg"]),
        _timing(row["native"]),
        f"**{row['ratio']:.3g}**" if row["ratio"] is not None else "-",
        metrics,
        target,
        verdict,
        status,
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def render_markdown(run: dict[str, Any], level: int = 2) -> str:
    """The run as Markdown: machine, command, and one table per case.

    Parameters
    ----------
    run : dict
        The run's JSON document.
    level : int
        Heading level of the run's title (cases get ``level + 1``).
    """
    h = "#" * level
    m = run["machine"]
    lines = [f"{h} {run['kind'].upper()} results ({run['mode']})", ""]
    lines += [
        f"- Command: `{run['command']}`",
        f"- Date: {run['started']}; suite runtime {run['runtime_s']:.0f} s; dlmg commit {m.get('git_commit')}",
        *machine_lines(m),
    ]
    sizes = run.get("sizes", {})
    if sizes:
        lines.append("- Sizes: " + ", ".join(f"{k} {v}" for k, v in sizes.items()))
    s = run["settings"]
    lines.append(f"- Timing: median of {s['repeats']} repeats after {s['warmup']} warm-up call(s)")
    for note in run.get("notes", []):
        lines.append(f"- Note: {note}")
    header = ("| benchmark | size | dlmg | native | ratio | metrics | target | result | check / status |\n"
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for case in run["cases"]:
        lines += ["", f"{h}# {case['case']}. {case['title']}", ""]
        if case["status"] != "ok":
            lines += [f"Case status: {case['status']}", ""]
        if case["rows"]:
            lines.append(header)
            lines += [_row_markdown(r) for r in case["rows"]]
        plot = run.get("plots", {}).get(str(case["case"]))
        if plot:
            lines += ["", f"![{case['title']}]({plot})"]
        lines.append(f"\n({case['runtime_s']:.1f} s)")
    return "\n".join(lines)
