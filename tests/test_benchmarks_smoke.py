"""The benchmark suite runs end to end (tiny sizes), so that it cannot rot.

No timing is asserted here: performance is reported by the suite, never
tested. What is checked is the shape of what it writes -- every case, every
row with its ratio, targets and status, the native side working, the
Markdown and the performance page -- and that a failing dlmg call becomes data
instead of ending the run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs Python subprocesses

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "benchmarks" / "run.py"
CPU_CASES = [1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 13]
ROW_KEYS = {"case", "name", "params", "native_name", "dlmg", "native", "others", "ratio", "metrics",
            "targets", "pass", "check", "status"}

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    docs = out / "performance.md"
    done = subprocess.run(
        [sys.executable, str(RUN), "--smoke", "--out", str(out), "--docs", str(docs)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return out, docs, json.loads((out / "cpu-smoke.json").read_text())


def test_smoke_run_has_every_case_with_rows(smoke_run):
    _, _, run = smoke_run
    assert run["kind"] == "cpu" and run["mode"] == "smoke"
    assert [c["case"] for c in run["cases"]] == CPU_CASES
    for case in run["cases"]:
        assert case["status"] == "ok", (case["case"], case["status"])
        assert case["rows"], case["case"]


def test_every_row_has_ratio_targets_and_a_working_native_side(smoke_run):
    _, _, run = smoke_run
    for case in run["cases"]:
        for row in case["rows"]:
            assert ROW_KEYS <= set(row), (row["name"], ROW_KEYS - set(row))
            assert row["ratio"] is None or row["ratio"] > 0
            assert isinstance(row["status"], str) and row["status"]
            native = row["native"]
            assert native is not None and "error" not in native, (row["name"], native)
            assert native["repeats"] >= 1 and native["min_s"] <= native["median_s"] <= native["max_s"]
            if row["status"] == "ok":
                assert row["ratio"] is not None, row["name"]
            for target in row["targets"]:
                assert {"metric", "op", "limit", "value", "pass"} <= set(target)


def test_interchange_rows_report_growth_from_small_to_large(smoke_run):
    _, _, run = smoke_run
    rows = next(c for c in run["cases"] if c["case"] == 1)["rows"]
    assert any("large/small" in r["metrics"] for r in rows)


def test_fused_rows_name_their_compiler(smoke_run):
    _, _, run = smoke_run
    rows = [r for r in next(c for c in run["cases"] if c["case"] == 3)["rows"] if r["name"].startswith("fused")]
    assert {r["params"]["framework"] for r in rows} == {"numpy", "torch", "jax"}
    for row in rows:
        assert row["targets"] and row["status"] == "ok", (row["name"], row["status"])
        assert row["check"].startswith("ok ("), row["check"]
    jax_row = next(r for r in rows if r["params"]["framework"] == "jax")
    assert jax_row["params"]["compiler"] == "jax.jit"


def test_scaling_rows_cover_fragment_counts_and_block_sizes_with_a_plot(smoke_run):
    out, docs, run = smoke_run
    case = next(c for c in run["cases"] if c["case"] == 7)
    rows = case["rows"]
    by_series = {}
    for row in rows:
        by_series.setdefault(row["params"]["series"], []).append(row)
        assert row["status"] == "ok" and row["check"] == "ok", (row["name"], row["status"], row["check"])
        per_fragment = row["params"]["series"] == "fragments"
        for metric in ("planning ms", "plan hit us") + (("us per fragment",) if per_fragment else ()):
            assert row["metrics"][metric] is not None, (row["name"], metric)
        wanted = {"plan hit us", "us per fragment" if per_fragment else "ratio"}
        assert {t["metric"] for t in row["targets"]} >= wanted, row["name"]
    assert sorted({r["params"]["fragments"] for r in by_series["fragments"]}) == [1, 8, 64, 512]
    assert [r["params"]["block"] for r in by_series["complexity"]][::2] == ["slab", "256x256", "16x16", "1x1"]
    plot = run["plots"]["7"]
    assert (out / plot).stat().st_size > 0 and (docs.parent / plot).exists()
    assert f"]({plot})" in docs.read_text()


def test_machine_info_and_command_are_recorded(smoke_run):
    _, _, run = smoke_run
    machine = run["machine"]
    assert machine["cores"] >= 1 and machine["cpu"]
    assert {"numpy", "python"} <= set(machine["versions"])
    assert run["command"].startswith("python benchmarks/run.py --smoke")


def test_markdown_and_performance_page_are_written(smoke_run):
    out, docs, _ = smoke_run
    table = (out / "cpu-smoke.md").read_text()
    assert "| benchmark |" in table and "ratio" in table
    page = docs.read_text()
    assert "<!-- BEGIN CPU -->" in page and "<!-- END CPU -->" in page
    assert "<!-- BEGIN GPU -->" in page and "Not run yet" in page


def test_performance_page_keeps_the_other_kind(tmp_path):
    from benchmarks.page import update_docs

    page = tmp_path / "performance.md"
    run = {"kind": "gpu", "mode": "smoke", "command": "python benchmarks/run.py --gpu", "started": "now",
           "runtime_s": 1.0, "settings": {"repeats": 1, "warmup": 1}, "cases": [],
           "machine": {"cpu": "x", "cores": 1, "usable_cores": 1, "memory_gib": 1, "gpu": None,
                       "versions": {"python": "3"}}}
    page.write_text(
        "<!-- BEGIN CPU -->\nkept CPU section\n<!-- END CPU -->\n"
        "<!-- BEGIN NOTES -->\nhand-written analysis\n<!-- END NOTES -->\n"
        "\n## A later section\n\nkept too\n"
    )
    update_docs(run, page)
    text = page.read_text()
    assert "kept CPU section" in text and "## GPU results" in text and "smoke sizes" in text
    assert "<!-- BEGIN NOTES -->\nhand-written analysis\n<!-- END NOTES -->" in text
    assert text.endswith("## A later section\n\nkept too\n")


def test_a_failing_contender_is_recorded_not_raised():
    from benchmarks.harness import Settings, Timing, measure

    def broken():
        raise AttributeError("module 'dlmg' has no attribute 'nothing'")

    got = measure({"dlmg": broken, "native": lambda: None}, Settings(repeats=1, warmup=1, min_repeat_s=0))
    assert got["dlmg"].startswith("error: AttributeError")
    assert isinstance(got["native"], Timing)


def _cuda_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_gpu_flag_fails_clearly_without_a_gpu(tmp_path):
    if _cuda_present():
        pytest.skip("a CUDA GPU is present: --gpu runs instead of failing")
    done = subprocess.run(
        [sys.executable, str(RUN), "--gpu", "--smoke", "--out", str(tmp_path), "--no-docs"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 2
    assert "--gpu needs" in done.stderr
    assert not list(tmp_path.iterdir())


def test_results_folder_is_ignored_and_no_page_by_default():
    from benchmarks.suite import DOCS_PAGE, RECORDED, parse_args

    args = parse_args([])
    assert args.out == ROOT / "benchmarks" / "results"
    assert args.docs is None and args.recorded is None
    done = subprocess.run(["git", "check-ignore", "-q", "benchmarks/results/cpu-quick.json"], cwd=ROOT)
    if done.returncode == 128:
        pytest.skip("needs a git checkout")
    assert done.returncode == 0, "benchmarks/results/ must be ignored by git"
    update = parse_args(["--update-docs"])
    assert update.docs == DOCS_PAGE and update.recorded == RECORDED
    assert subprocess.run(["git", "check-ignore", "-q", "benchmarks/recorded/cpu-quick.json"],
                          cwd=ROOT).returncode == 1
