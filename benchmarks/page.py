"""The performance page's results: one generated section per kind of run.

``docs/performance.md`` is written by hand (method, machines, why targets are
missed) except between ``<!-- BEGIN CPU -->`` / ``<!-- END CPU -->`` and the
GPU pair of markers. A run rewrites its own kind's section from its record --
the JSON document :func:`benchmarks.suite.run_suite` returns, or one kept in
``benchmarks/recorded/`` -- and leaves every other line of the page as it was.
The section is the reader's view of the run: what was run where, a count of
targets met per case, and one table per case (one per part for the GPU case)
with each figure's target and pass / miss. Every metric of every row stays in
the record's own Markdown (:func:`benchmarks.report.render_markdown`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from .report import case_title, machine_lines

__all__ = ["KINDS", "load_record", "merge_runs", "render_section", "update_docs"]

#: The kinds of run, in the order of their sections on the page.
KINDS = ("cpu", "gpu")

#: Cases whose rows are named ``"part: row"`` (the GPU case runs the CPU cases' parts), one table per part.
PARTED_CASES = frozenset({6})

_RECORD_KEYS = frozenset({"kind", "mode", "command", "started", "machine", "settings", "cases"})

_SKELETON = """\
# Performance

<!-- BEGIN CPU -->
## CPU results

Not run yet: `python benchmarks/run.py --update-docs`.
<!-- END CPU -->

<!-- BEGIN GPU -->
## GPU results

Not run yet: `python benchmarks/run.py --gpu --update-docs`.
<!-- END GPU -->
"""

_HEADER = "| benchmark | size | dlmg | native | ratio | target | result |\n| --- | --- | --- | --- | --- | --- | --- |"
_OPS = {"<=": "≤", ">=": "≥"}


def load_record(path: Path) -> dict[str, Any]:
    """A recorded run (``<kind>-<mode>.json``), checked to be one.

    Raises
    ------
    ValueError
        When the file is not a run's JSON document; the message names the
        file and what is missing.
    """
    try:
        run = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"record {path}: cannot be read as JSON ({exc})") from exc
    if not isinstance(run, dict):
        raise ValueError(f"record {path}: expected a JSON object, got {type(run).__name__}")
    missing = sorted(_RECORD_KEYS - set(run))
    if missing:
        raise ValueError(f"record {path}: not a benchmark run, missing {', '.join(missing)}")
    if run["kind"] not in KINDS:
        raise ValueError(f"record {path}: kind must be one of {KINDS}, got {run['kind']!r}")
    return run


def _unit(seconds: float) -> tuple[float, str]:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return scale, unit
    return 1e-9, "ns"


def _short(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _timing(t: dict[str, Any] | None) -> str:
    """``median unit [min - max]``, all in the median's unit."""
    if not t:
        return "-"
    if "error" in t:
        return "error"
    scale, unit = _unit(t["median_s"])
    text = f"{_short(t['median_s'] / scale)} {unit} [{_short(t['min_s'] / scale)} - {_short(t['max_s'] / scale)}]"
    return text + " (1 call)" if t.get("note") else text


def _targets(row: dict[str, Any]) -> str:
    parts = []
    for t in row["targets"]:
        limit = f"{_OPS.get(t['op'], t['op'])} {t['limit']:g}"
        if t["metric"] == "ratio":  # its value is the row's ratio column
            text = f"ratio {limit}"
        else:
            value = "-" if t["value"] is None else f"{t['value']:.3g}"
            text = f"{t['metric']} {value} ({limit})"
        parts.append(f"**{text}**" if t["pass"] is False else text)
    return "; ".join(parts) or "-"


def _result(row: dict[str, Any]) -> str:
    if row["status"] != "ok":
        return row["status"]
    return {True: "pass", False: "**miss**", None: "-"}[row["pass"]]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _row(row: dict[str, Any], name: str) -> str:
    cells = [
        f"{name}<br>vs {row['native_name']}",
        str(row["params"].get("size", "-")),
        _timing(row["dlmg"]),
        _timing(row["native"]),
        "-" if row["ratio"] is None else f"**{row['ratio']:.3g}**",
        _targets(row),
        _result(row),
    ]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def _provenance(run: dict[str, Any]) -> dict[str, Any]:
    """Where a run's cases come from: its command, start, commit, GPU (if any) and load."""
    m = run.get("machine", {})
    gpu = (m.get("gpu") or {}).get("name")
    return {"command": run["command"], "started": run["started"], "git_commit": m.get("git_commit"), "gpu": gpu,
            "load_average": m.get("load_average"), "load_average_end": m.get("load_average_end")}


def merge_runs(base: dict[str, Any], run: dict[str, Any]) -> dict[str, Any]:
    """``base`` (a recorded run of the same kind and mode) with ``run``'s cases in place of its own.

    A run of some cases (``--cases 10 --update-docs``) updates the record of
    the whole suite this way instead of replacing it: every other case keeps
    its figures, and each case records where it comes from (``"run"``: the
    command, start, commit and load of its run), which the page shows where
    it differs from the record's own. A case of parts (the GPU case: rows
    named ``"part: row"``) merges part by part: ``run``'s parts replace
    ``base``'s (a new part comes after the others), the other parts stay, and
    ``"parts_run"`` says where each part comes from. The sizes and notes of
    both are kept, ``run``'s winning; the machine and settings stay ``base``'s.

    Raises
    ------
    ValueError
        When the two differ in kind or mode.
    """
    for key in ("kind", "mode"):
        if base[key] != run[key]:
            raise ValueError(f"cannot merge a {run[key]!r} run into a {base[key]!r} record ({key} differs)")
    merged = json.loads(json.dumps(base))
    own = _provenance(base)
    cases = {c["case"]: {**c, "run": c.get("run", own)} for c in merged["cases"]}
    fresh = _provenance(run)
    for case in run["cases"]:
        new = {**json.loads(json.dumps(case)), "run": fresh}
        if case["case"] in PARTED_CASES and case["case"] in cases:
            new = _merge_parts(cases[case["case"]], new)
        cases[case["case"]] = new
    merged["cases"] = [cases[k] for k in sorted(cases)]
    merged["sizes"] = {**base.get("sizes", {}), **run.get("sizes", {})}
    numbers = ", ".join(str(c["case"]) for c in run["cases"])
    merged["notes"] = [n for n in base.get("notes", []) if not n.startswith(f"case(s) {numbers}: ")]
    merged["notes"] += [f"case(s) {numbers}: {note}" for note in run.get("notes", [])]
    return merged


def _part_of(row: dict[str, Any]) -> str:
    part, _, name = row["name"].partition(": ")
    return part if name else "other"


def _merge_parts(base: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A parted case of ``base`` with the parts ``new`` ran in place of its own (in their place,
    new parts after), the others kept; ``parts_run`` says where each part comes from."""
    groups: dict[str, list[dict[str, Any]]] = {}
    origins = dict(base.get("parts_run") or {})
    for row in base["rows"]:
        groups.setdefault(_part_of(row), []).append(row)
        origins.setdefault(_part_of(row), base["run"])
    fresh: dict[str, list[dict[str, Any]]] = {}
    for row in new["rows"]:
        fresh.setdefault(_part_of(row), []).append(row)
    for part, rows in fresh.items():
        groups[part] = rows
        origins[part] = new["run"]
    return {**new, "rows": [row for rows in groups.values() for row in rows], "parts_run": origins}


def _parts(case: dict[str, Any]) -> list[tuple[str | None, list[tuple[str, dict[str, Any]]]]]:
    """The case's rows as ``(part, [(name, row)])``, one part (None) unless the case is parted."""
    if case["case"] not in PARTED_CASES:
        return [(None, [(r["name"], r) for r in case["rows"]])]
    parts: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for row in case["rows"]:
        part, _, name = row["name"].partition(": ")
        parts.setdefault(part if name else "other", []).append((name or part, row))
    return list(parts.items())


def _separately(origin: dict[str, Any], reference: dict[str, Any]) -> list[str]:
    """The line that says where a case or part was recorded, where that is not ``reference``'s run."""
    if (origin["command"], origin["started"]) == (reference["command"], reference["started"]):
        return []
    where = f" on an {origin['gpu']}" if origin.get("gpu") else ""
    return ["", f"Recorded separately at commit `{origin.get('git_commit')}` on {str(origin['started'])[:10]}{where}"
                f" with `{origin['command']}`; load average {origin.get('load_average')} at the start,"
                f" {origin.get('load_average_end')} at the end."]


def _count(rows: list[dict[str, Any]]) -> tuple[int, int, int]:
    passed = sum(1 for r in rows if r["status"] == "ok" and r["pass"] is True)
    missed = sum(1 for r in rows if r["status"] == "ok" and r["pass"] is False)
    return passed, missed, len(rows) - passed - missed


def render_section(run: dict[str, Any]) -> str:
    """One run as the page shows it: where and how it ran, a summary, and one table per case."""
    m = run["machine"]
    kind = run["kind"]
    stem = f"{kind}-{run['mode']}"
    lines = [
        f"## {kind.upper()} results",
        "",
        f"Recorded at commit `{m.get('git_commit')}` on {str(run['started'])[:10]}, {run['mode']} sizes,"
        f" with `{run['command']}`"
        f" ({run.get('runtime_s', 0):.0f} s). The full record, with every metric of every row, is"
        f" `benchmarks/recorded/{stem}.md` (and `.json`).",
        "",
        *machine_lines(m),
    ]
    if run.get("sizes"):
        lines.append("- Sizes: " + "; ".join(f"{k} {v}" for k, v in run["sizes"].items()))
    s = run["settings"]
    waiting = ("calls back to back, the device waited for once per repeat" if s.get("back_to_back")
               else "every call waited for")
    lines.append(f"- Timing: median [min - max] of {s['repeats']} repeats after {s['warmup']} warm-up call(s); {waiting}")
    lines += [f"- Note: {note}" for note in run.get("notes", [])]
    every = [r for case in run["cases"] for r in case["rows"]]
    passed, missed, other = _count(every)
    lines += ["", f"{len(every)} rows: {passed} meet their targets, {missed} miss one, {other} have no target"
                  " or an error.", "",
              "| case | rows | pass | miss | no target or error |", "| --- | --- | --- | --- | --- |"]
    for case in run["cases"]:
        passed, missed, other = _count(case["rows"])
        lines.append(f"| {case['case']}. {case['title']} | {len(case['rows'])} | {passed} | {missed} | {other} |")
    for case in run["cases"]:
        lines += ["", f"### {case['case']}. {case.get('title') or case_title(case['case'])}"]
        origin = case.get("run") or _provenance(run)
        lines += _separately(origin, _provenance(run))
        if case["status"] != "ok":
            lines += ["", f"Case status: {_cell(case['status'])}"]
        for part, rows in _parts(case):
            if not rows:
                continue
            if part is not None:
                lines += ["", f"#### {part if '(' in part else part[:1].upper() + part[1:]}"]
                lines += _separately((case.get("parts_run") or {}).get(part) or origin, origin)
            lines += ["", _HEADER] + [_row(row, name) for name, row in rows]
        plot = run.get("plots", {}).get(str(case["case"]))
        if plot:
            lines += ["", f"![{case['title']}]({plot})"]
    return "\n".join(lines) + "\n"


def _markers(kind: str) -> tuple[str, str]:
    return f"<!-- BEGIN {kind.upper()} -->", f"<!-- END {kind.upper()} -->"


def update_docs(run: dict[str, Any], path: Path, plots_from: Path | None = None) -> Path:
    """Rewrite the run's section of the page at ``path``; return ``path``.

    Only the text between the run's kind's markers changes. A page without
    them gets the section after the other kind's (CPU before GPU), or at its
    end; a missing page is made with a placeholder for the other kind. The
    run's plots are copied from ``plots_from`` (the folder of its record)
    beside the page, which links them by file name.
    """
    path = Path(path)
    if plots_from is not None:
        for name in run.get("plots", {}).values():
            source, target = Path(plots_from) / name, path.parent / name
            if source.exists() and source.resolve() != target.resolve():
                path.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
    text = path.read_text() if path.exists() else _SKELETON
    begin, end = _markers(run["kind"])
    section = f"{begin}\n{render_section(run)}{end}"
    pattern = re.compile(re.escape(begin) + r"\n.*?" + re.escape(end), flags=re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text, count=1)
    else:
        other = [k for k in KINDS if k != run["kind"]][0]
        other_begin, other_end = _markers(other)
        if run["kind"] == KINDS[0] and other_begin in text:
            at = text.index(other_begin)
            text = text[:at] + section + "\n\n" + text[at:]
        elif other_end in text:
            at = text.index(other_end) + len(other_end)
            text = text[:at] + "\n\n" + section + text[at:]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
