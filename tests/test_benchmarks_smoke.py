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


# --- case 6's parts on the CPU: the GPU code, run with torch CPU fragments ---------------------

#: The parts of case 6 that mirror CPU cases 9-13, by that number, and the rows each gives in the smoke run.
GPU_PARTS = {9: 2, 10: 6, 11: 2, 12: 3, 13: 2}


def _gpu_part_rows(number):
    from benchmarks.cases.gpu import PARTS
    from benchmarks.config import MODES, Context

    part = next(fn for n, _, fn in PARTS if n == number)
    ctx = Context(MODES["smoke"], device="cpu")
    return part(ctx), ctx


@pytest.mark.parametrize("number", sorted(GPU_PARTS))
def test_gpu_part_runs_on_the_cpu_with_checked_rows(number):
    from benchmarks.harness import Timing

    rows, _ = _gpu_part_rows(number)
    assert len(rows) == GPU_PARTS[number], [r.name for r in rows]
    for row in rows:
        assert row.status == "ok", (row.name, row.status)
        assert row.check.startswith("ok"), (row.name, row.check)
        assert isinstance(row.timings["native"], Timing) and isinstance(row.timings["dlmg"], Timing)
        assert row.ratio is not None and row.ratio > 0
        assert row.targets and row.passed() is not None, row.name
        assert row.params["framework"] == "torch" and row.params["device"] == "cpu"
        assert row.params["fragments"] == 8


def test_gpu_contractions_report_tflops_per_layout_and_restore_tf32():
    import torch

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    rows, ctx = _gpu_part_rows(10)
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    assert any("TF32 off" in note for note in ctx.notes)
    assert {r.params["size"] for r in rows} == {"256x256 float32", "256x256 bfloat16"}
    assert {r.params["strategy"] for r in rows} == {"local", "pending sum", "move x1"}
    for row in rows:
        assert row.metrics["dlmg TFLOP/s"] > 0 and row.metrics["native TFLOP/s"] > 0
        assert [str(t) for t in row.targets] == ["ratio <= 1.1"]
        assert ("TF32" in row.params) == row.params["size"].endswith("float32")


def test_gpu_checkpoint_rows_say_where_the_time_goes_and_leave_no_files():
    rows, _ = _gpu_part_rows(9)
    save, load = rows
    assert save.name.startswith("save") and load.name.startswith("load")
    assert {"device-to-host copy", "encode", "encode without checksums", "file write+fsync",
            "torch.save+fsync"} <= set(save.timings)
    assert {"file read", "decode", "decode without checksums", "host-to-device copy"} <= set(load.timings)
    for row in rows:
        assert row.metrics["GB/s"] > 0 and row.metrics["torch GB/s"] > 0
        assert "checksums share" in row.metrics
        assert row.params["compression"] == "none" and "crc32c" in row.params["codecs"]
        assert row.params["folder"].startswith("/tmp/")
        assert not Path(row.params["folder"]).exists()


def test_a_wrong_result_fails_the_row_and_is_not_timed():
    from benchmarks.cases.common import run_checked
    from benchmarks.config import MODES, Context
    from benchmarks.record import Row, Target

    calls = []

    def dlmg_side():
        calls.append(1)

    ctx = Context(MODES["smoke"], device="cpu")
    for check, status in ((lambda: "mismatch: differs", "error: wrong result: mismatch: differs"),
                          (lambda: 1 / 0, "error: ZeroDivisionError")):
        calls.clear()
        row = Row(6, "x", {}, "y", targets=[Target("ratio", "<=", 1.1)])
        run_checked(row, ctx, {"dlmg": dlmg_side, "native": lambda: None}, check)
        assert not calls and row.time("dlmg") is None and row.time("native") is not None
        assert row.ratio is None and row.passed() is None
        assert row.status.startswith(status), row.status
    row = Row(6, "x", {}, "y")
    run_checked(row, ctx, {"dlmg": dlmg_side, "native": lambda: None}, lambda: "ok")
    assert row.status == "ok" and row.ratio is not None and calls


def test_gpu_cases_select_the_parts_by_the_cpu_case_they_mirror():
    from benchmarks.suite import parse_args

    assert parse_args(["--gpu", "--cases", "9,10,11,12,13"]).selected == [9, 10, 11, 12, 13]
    with pytest.raises(SystemExit):
        parse_args(["--gpu", "--cases", "7"])


@pytest.mark.gpu
def test_gpu_parts_run_on_the_gpu(tmp_path):
    done = subprocess.run(
        [sys.executable, str(RUN), "--gpu", "--smoke", "--cases", ",".join(map(str, GPU_PARTS)),
         "--out", str(tmp_path), "--no-docs"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    run = json.loads((tmp_path / "gpu-smoke.json").read_text())
    rows = run["cases"][0]["rows"]
    assert len(rows) == sum(GPU_PARTS.values())
    for row in rows:
        assert row["status"] == "ok" and row["check"].startswith("ok"), (row["name"], row["status"], row["check"])
        assert row["params"]["device"] == "cuda:0"


def test_profile_keeps_a_table_of_the_dlmg_call_for_the_rows_that_miss(tmp_path):
    from benchmarks.cases.gpu import PARTS
    from benchmarks.config import MODES, Context
    from benchmarks.profiling import missed_profiles, write_profiles
    from benchmarks.record import Target
    from benchmarks.suite import parse_args

    part = next(fn for n, _, fn in PARTS if n == 11)
    rows = part(Context(MODES["smoke"], device="cpu", profile=True))
    assert rows and all("aten::" in r.profile and "Name" in r.profile for r in rows), rows[0].profile
    assert "profile" not in rows[0].as_dict()
    rows[0].targets = [Target("ratio", "<=", 0.0)]  # a target no row meets; the others none
    for row in rows[1:]:
        row.targets = []
    missed = missed_profiles(rows)
    assert [name for name, _ in missed] == [rows[0].name]
    page = write_profiles(missed, tmp_path / "gpu-smoke-profiles.md", "profiles").read_text()
    assert f"## {rows[0].name}" in page and "aten::" in page
    assert "No row missed" in write_profiles([], tmp_path / "none.md", "profiles").read_text()
    assert not part(Context(MODES["smoke"], device="cpu"))[0].profile
    assert parse_args(["--gpu", "--profile"]).profile
    with pytest.raises(SystemExit):
        parse_args(["--profile"])
