"""The performance page's generated sections, made from recorded runs.

``docs/performance.md`` is hand-written except between its ``BEGIN`` / ``END``
markers, which :func:`benchmarks.page.update_docs` fills from a run's record.
Nothing is timed here: the records in ``benchmarks/recorded/`` are rendered
again (``--from-record``) and compared with the page, so a table edited by
hand, or a record kept without its page, fails.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
RECORDED = ROOT / "benchmarks" / "recorded"
PAGE = ROOT / "docs" / "performance.md"
ANALYSIS = ROOT / "docs" / "performance-history.md"
RECORDS = [RECORDED / "cpu-quick.json", RECORDED / "gpu-quick.json"]

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.page import load_record, render_section, update_docs  # noqa: E402


def _row(name, ratio, targets, status="ok"):
    passes = [t["pass"] for t in targets]
    verdict = None if not passes else (False if False in passes else True)
    timing = {"median_s": 2e-5, "min_s": 1.9e-5, "max_s": 2.5e-5, "repeats": 7, "inner": 10, "note": ""}
    return {"case": 6, "name": name, "params": {"size": "8 x 4 KiB"}, "native_name": "the framework's loop",
            "dlmg": timing, "native": timing, "others": {}, "ratio": ratio, "metrics": {}, "targets": targets,
            "pass": verdict, "check": "ok", "status": status}


def _target(metric, op, limit, value, passed):
    return {"metric": metric, "op": op, "limit": limit, "value": value, "pass": passed}


@pytest.fixture()
def gpu_run():
    run = load_record(RECORDED / "gpu-quick.json")
    run = copy.deepcopy(run)
    run["cases"] = [{"case": 6, "title": "GPU parts", "status": "ok", "runtime_s": 1.0, "rows": [
        _row("interchange: torch -> cupy", 0.5, [_target("ratio", "<=", 1.2, 0.5, True)]),
        _row("interchange: cupy -> jax", 1.4, [_target("ratio", "<=", 1.2, 1.4, False),
                                               _target("large/small", "<=", 1.2, 1.03, True)]),
        _row("gather / scatter: gather, slab, jax", 0.69, [_target("dlmg copy fraction", ">=", 0.9, 0.892, False)]),
        _row("redistribution: no target", 0.5, []),
        _row("redistribution: broken", None, [], status="error: ValueError: bad layout"),
    ]}]
    return run


def test_the_page_shows_what_the_records_hold(tmp_path):
    page = tmp_path / "performance.md"
    shutil.copyfile(PAGE, page)
    for record in RECORDS:
        update_docs(load_record(record), page, plots_from=RECORDED)
    assert page.read_text() == PAGE.read_text(), (
        "docs/performance.md's tables differ from benchmarks/recorded/: run "
        "python benchmarks/run.py --from-record benchmarks/recorded/cpu-quick.json benchmarks/recorded/gpu-quick.json"
    )
    assert (tmp_path / "scaling-cpu-quick.png").read_bytes() == (RECORDED / "scaling-cpu-quick.png").read_bytes()


def test_the_page_cites_each_record_and_its_commit():
    text = PAGE.read_text()
    analysis = ANALYSIS.read_text().split("## Where targets are missed, and why", 1)[1]
    for record in RECORDS:
        run = load_record(record)
        commit = run["machine"]["git_commit"]
        assert f"Recorded at commit `{commit}`" in text
        assert f"benchmarks/recorded/{record.stem}.md" in text
        # a new record means the hand-written analysis of its misses is read again
        assert commit in analysis, f"the history page's misses do not discuss the record at {commit}"


def test_a_section_gives_each_target_its_verdict(gpu_run):
    text = render_section(gpu_run)
    assert "5 rows: 1 meet their targets, 2 miss one, 2 have no target or an error." in text
    lines = {line.split("<br>")[0].lstrip("| "): line for line in text.splitlines() if "<br>" in line}
    assert lines["torch -> cupy"].endswith("| ratio ≤ 1.2 | pass |")
    assert lines["cupy -> jax"].endswith("| **ratio ≤ 1.2**; large/small 1.03 (≤ 1.2) | **miss** |")
    assert lines["gather, slab, jax"].endswith("| **dlmg copy fraction 0.892 (≥ 0.9)** | **miss** |")
    assert lines["no target"].endswith("| - | - |")
    assert lines["broken"].endswith("| error: ValueError: bad layout |")
    assert "| 20 us [19 - 25] |" in lines["torch -> cupy"]


def test_a_parted_case_has_one_table_per_part(gpu_run):
    text = render_section(gpu_run)
    assert [line for line in text.splitlines() if line.startswith("####")] == [
        "#### Interchange", "#### Gather / scatter", "#### Redistribution"]
    assert text.count("| benchmark | size |") == 3


def test_updating_rewrites_only_the_section_of_the_run(tmp_path, gpu_run):
    page = tmp_path / "performance.md"
    hand = ["# Title\n\nmethod\n\n", "\n\nbetween\n\n", "\n\n## Where targets are missed, and why\n\nkept\n"]
    page.write_text(hand[0] + "<!-- BEGIN CPU -->\nold CPU\n<!-- END CPU -->" + hand[1]
                    + "<!-- BEGIN GPU -->\nold GPU\n<!-- END GPU -->" + hand[2])
    update_docs(gpu_run, page)
    once = page.read_text()
    update_docs(gpu_run, page)
    assert page.read_text() == once
    head, rest = once.split("<!-- BEGIN CPU -->\nold CPU\n<!-- END CPU -->")
    assert head == hand[0] and rest.startswith(hand[1] + "<!-- BEGIN GPU -->\n## GPU results\n")
    assert rest.endswith("<!-- END GPU -->" + hand[2]) and "old GPU" not in rest


def test_a_missing_section_goes_after_the_other_kind_and_a_new_page_gets_both(tmp_path, gpu_run):
    page = tmp_path / "performance.md"
    page.write_text("# P\n\n<!-- BEGIN CPU -->\ncpu\n<!-- END CPU -->\n\n## After\n")
    update_docs(gpu_run, page)
    text = page.read_text()
    assert text.index("<!-- END CPU -->") < text.index("<!-- BEGIN GPU -->") < text.index("## After")
    fresh = tmp_path / "new" / "performance.md"
    update_docs(gpu_run, fresh)
    assert "Not run yet: `python benchmarks/run.py --update-docs`" in fresh.read_text()


def test_from_record_rewrites_a_page_and_runs_nothing(tmp_path):
    page = tmp_path / "performance.md"
    page.write_text("# P\n\nhand-written\n")
    done = subprocess.run([sys.executable, str(RUN), "--from-record", str(RECORDS[0]), "--docs", str(page)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    commit = load_record(RECORDS[0])["machine"]["git_commit"]
    assert text.startswith("# P\n\nhand-written\n") and f"Recorded at commit `{commit}`" in text
    assert "case 1:" not in done.stderr and "suite runtime" not in done.stderr  # no case ran
    assert (tmp_path / "scaling-cpu-quick.png").exists()


def test_from_record_refuses_what_is_not_a_record(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "cpu"}))
    done = subprocess.run([sys.executable, str(RUN), "--from-record", str(bad), "--docs", str(tmp_path / "p.md")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"record {bad}: not a benchmark run, missing" in done.stderr and "machine" in done.stderr
    assert not (tmp_path / "p.md").exists()
    clash = subprocess.run([sys.executable, str(RUN), "--from-record", str(RECORDS[0]), "--gpu"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert clash.returncode == 2 and "cannot be combined with --gpu" in clash.stderr


def test_a_run_of_some_cases_takes_their_place_in_the_record():
    from benchmarks.page import merge_runs

    base = copy.deepcopy(load_record(RECORDS[0]))
    first = base["cases"][0]
    run = copy.deepcopy(base)
    run["command"], run["started"] = "python benchmarks/run.py --cases 99 --update-docs", "2030-01-02T03:04:05+00:00"
    run["machine"]["git_commit"] = "abc1234"
    run["sizes"] = {"contractions": "a size"}
    run["notes"] = ["busy"]
    run["cases"] = [{**copy.deepcopy(first), "case": 99, "title": "A new case"},
                    {**copy.deepcopy(first), "title": "The first case again", "rows": []}]
    merged = merge_runs(base, run)
    numbers = [c["case"] for c in merged["cases"]]
    assert numbers == sorted(numbers) and numbers[-1] == 99 and len(numbers) == len(base["cases"]) + 1
    assert [c["title"] for c in merged["cases"] if c["case"] == first["case"]] == ["The first case again"]
    assert merged["command"] == base["command"] and merged["sizes"]["contractions"] == "a size"
    assert merged["notes"][-1] == f"case(s) 99, {first['case']}: busy"
    assert base["cases"][0]["title"] == first["title"]  # the base is left as it was
    text = render_section(merged)
    own = text.split("### ")[2]  # the base's second case: no line of provenance of its own
    assert "Recorded separately" not in own
    new = text.split("### 99.")[1]
    assert "Recorded separately at commit `abc1234` on 2030-01-02 with " \
           "`python benchmarks/run.py --cases 99 --update-docs`" in new
    other = copy.deepcopy(run)
    other["mode"] = "full"
    with pytest.raises(ValueError, match="mode differs"):
        merge_runs(base, other)


def test_a_run_of_some_gpu_parts_takes_their_place_and_keeps_the_others():
    from benchmarks.page import merge_runs

    base = copy.deepcopy(load_record(RECORDS[1]))
    rows = base["cases"][0]["rows"]
    parts = list(dict.fromkeys(r["name"].partition(": ")[0] for r in rows))
    assert "pointwise" in parts and len(parts) > 2
    run = copy.deepcopy(base)
    run["command"] = "python benchmarks/run.py --gpu --cases 3,10 --update-docs"
    run["started"] = "2030-01-02T03:04:05+00:00"
    old_pointwise = [r for r in rows if r["name"].startswith("pointwise: ")]
    new_pointwise = {**copy.deepcopy(old_pointwise[0]), "name": "pointwise: again"}
    contraction = {**copy.deepcopy(old_pointwise[0]), "name": "a part not recorded: A @ B"}
    run["cases"][0]["rows"] = [new_pointwise, contraction]
    merged = merge_runs(base, run)
    names = [r["name"] for r in merged["cases"][0]["rows"]]
    assert "pointwise: again" in names and not any(r["name"] in names for r in old_pointwise)
    assert names[-1] == "a part not recorded: A @ B"  # a new part comes after the others
    assert len(names) == len(rows) - len(old_pointwise) + 2
    kept = [n for n in names if n.partition(": ")[0] not in ("pointwise", "a part not recorded")]
    assert kept == [r["name"] for r in rows if not r["name"].startswith("pointwise: ")]
    assert list(dict.fromkeys(n.partition(": ")[0] for n in names)) == parts + ["a part not recorded"]
    origins = merged["cases"][0]["parts_run"]
    assert origins["pointwise"]["started"] == origins["a part not recorded"]["started"] == run["started"]
    assert origins["interchange"]["started"] == base["started"]
    text = render_section(merged)
    interchange = text.split("#### Interchange")[1].split("####")[0]
    assert f"Recorded separately at commit `{base['machine']['git_commit']}`" in interchange
    assert "Recorded separately" not in text.split("#### Pointwise")[1].split("####")[0]
    assert "--gpu --cases 3,10" in text.split("#### Interchange")[0]  # the case's own line: the latest run
