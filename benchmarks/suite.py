"""The benchmark suite: command line, case selection, running and reporting.

Usage::

    python benchmarks/run.py [--full | --smoke] [--gpu [--profile]] [--cases 1,3] [--out DIR]
                             [--update-docs | --docs PATH]
    python benchmarks/run.py --from-record benchmarks/recorded/cpu-quick.json [...] [--docs PATH]

The CPU run (the default) runs cases 1-5, 7 (scaling), 8 (across processes), 9 (save / load), 10 (contractions), 11 (linear algebra), 12 (FFTs) and 13 (sorting and scans); ``--gpu`` runs only case 6 (its
parts selected with ``--cases`` by the number of the CPU case they mirror:
1 interchange, 2 ``to()``, 3 pointwise, 4 gather / scatter, 5 redistribution,
9 save / load, 10 contractions, 11 TSQR, 12 FFTs, 13 sort and cumulative sum)
and exits with status 2 when there is no CUDA GPU. With ``--profile`` every
GPU row also profiles one dlmg call, and the tables of the rows that miss a
target go to ``gpu-<mode>-profiles.md`` in the output folder
(:mod:`benchmarks.profiling`). A case whose dlmg side
fails records the error in its rows; a case that fails as a whole records it as
the case's status; the run goes on either way.

Results go to ``benchmarks/results/`` (ignored by git) unless ``--out`` says
otherwise; the checkout stays clean. ``--update-docs`` rewrites
``docs/performance.md``'s section of the run's kind (CPU or GPU) and keeps the
run's JSON and Markdown in ``benchmarks/recorded/`` (with ``--cases``, the
run's cases replace theirs in the record already there, the others stay, and
with ``--gpu`` the run's parts of case 6 replace theirs:
:func:`benchmarks.page.merge_runs`); ``--docs PATH`` rewrites
another page. ``--from-record`` runs nothing: it rewrites the page's sections
from recorded runs (after a change to how the page shows them).
"""

from __future__ import annotations

import argparse
import datetime as _dt
from math import isqrt
import os
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Sequence

from .config import MODES, Context, GiB, KiB, MiB
from .harness import describe_error
from .page import load_record, merge_runs, update_docs
from .profiling import write_profiles
from .record import Row

__all__ = ["CPU_CASES", "main", "parse_args", "run_suite"]

ROOT = Path(__file__).resolve().parent.parent
#: The page ``--update-docs`` rewrites, and where it keeps that run's files.
DOCS_PAGE = ROOT / "docs" / "performance.md"
RECORDED = ROOT / "benchmarks" / "recorded"


def _case(name: str, **kwargs: Any) -> Callable[[Context], list[Row]]:
    """A case function, imported when the case runs (so a broken module is one case's error)."""

    def run(ctx: Context) -> list[Row]:
        module_name, func = name.rsplit(".", 1)
        module = __import__(f"benchmarks.cases.{module_name}", fromlist=[func])
        return getattr(module, func)(ctx, **kwargs)

    return run


#: The CPU cases by number.
CPU_CASES: dict[int, Callable[[Context], list[Row]]] = {
    1: _case("interchange.run_interchange"),
    2: _case("interchange.run_to"),
    3: _case("pointwise.run_pointwise"),
    4: _case("gather_scatter.run_gather_scatter"),
    5: _case("redistribute.run_redistribute"),
    7: _case("scaling.run_scaling", case=7),
    8: _case("multiprocess.run_multiprocess"),
    9: _case("checkpoint.run_checkpoint"),
    10: _case("contractions.run_contractions"),
    11: _case("linalg.run_linalg"),
    12: _case("fft.run_fft"),
    13: _case("sorting.run_sorting"),
}


def _gpu_parts() -> set[int]:
    """The numbers ``--gpu --cases`` selects case 6's parts by (the CPU cases they mirror)."""
    from .cases.gpu import PARTS

    return {number for number, _, _ in PARTS}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(prog="python benchmarks/run.py", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--full", action="store_true", help="large sizes, more repeats")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes and 1 repeat: checks that the suite runs (no meaningful figures)")
    p.add_argument("--gpu", action="store_true", help="run only the GPU cases (case 6); fails without a CUDA GPU")
    p.add_argument("--profile", action="store_true",
                   help="with --gpu: profile one dlmg call of each row (torch.profiler) and write the top "
                        "15 operations by CUDA time of every row that misses a target to "
                        "<out>/gpu-<mode>-profiles.md")
    p.add_argument("--cases", default=None,
                   help="comma-separated case numbers, e.g. 1,3 (with --gpu: the parts of case 6 by the CPU case "
                        "they mirror, 1-5 and 9-13, e.g. --gpu --cases 9,10,11,12,13)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results",
                   help="folder for <kind>-<mode>.json and .md (default: benchmarks/results, ignored by git)")
    docs = p.add_mutually_exclusive_group()
    docs.add_argument("--update-docs", action="store_true",
                      help="rewrite docs/performance.md and keep the results in benchmarks/recorded/")
    docs.add_argument("--docs", type=Path, default=None, help="a performance page to rewrite (default: none)")
    docs.add_argument("--no-docs", action="store_true", help="do not touch any page (the default)")
    p.add_argument("--from-record", type=Path, nargs="+", default=None, metavar="JSON",
                   help="run nothing: rewrite the page (docs/performance.md, or --docs) from recorded runs, "
                        "e.g. benchmarks/recorded/cpu-quick.json benchmarks/recorded/gpu-quick.json")
    args = p.parse_args(argv)
    if args.from_record is not None:
        clashing = [flag for flag, on in (("--full", args.full), ("--smoke", args.smoke), ("--gpu", args.gpu),
                                          ("--profile", args.profile), ("--cases", args.cases),
                                          ("--no-docs", args.no_docs)) if on]
        if clashing:
            p.error(f"--from-record runs nothing; it cannot be combined with {', '.join(clashing)}")
    if args.profile and not args.gpu:
        p.error("--profile profiles the GPU rows: use it with --gpu")
    args.mode = "full" if args.full else "smoke" if args.smoke else "quick"
    try:
        args.selected = sorted({int(c) for c in args.cases.split(",") if c.strip()}) if args.cases else None
    except ValueError:
        p.error(f"--cases must be comma-separated case numbers, got {args.cases!r}")
    allowed = _gpu_parts() | {6} if args.gpu else set(CPU_CASES)
    if args.selected is not None and not set(args.selected) <= allowed:
        p.error(f"--cases {args.cases!r}: choose among {sorted(allowed)}")
    args.recorded = None
    if args.update_docs or (args.from_record is not None and args.docs is None):
        args.docs = DOCS_PAGE
    if args.update_docs and args.from_record is None:
        args.recorded = RECORDED
    return args


def _sizes(ctx: Context) -> dict[str, str]:
    m = ctx.mode

    def b(n: int) -> str:
        return f"{n / GiB:g} GiB" if n >= GiB else f"{n / MiB:g} MiB" if n >= MiB else f"{n / KiB:g} KiB"

    if ctx.gpu:
        return {
            "interchange": f"8 fragments x {b(m.gpu_interchange_bytes[0])} and x {b(m.gpu_interchange_bytes[1])}",
            "pointwise": f"3 operands x {b(m.gpu_pointwise_bytes)} (8 fragments)",
            "gather/scatter": f"{m.gpu_gather_shape[0]}x{m.gpu_gather_shape[1]} float32",
            "redistribution": f"{m.gpu_redistribute_n}x{m.gpu_redistribute_n} float32 (4 fragments)",
            "save/load": f"{b(m.gpu_checkpoint_bytes)} float32 (8 torch fragments)",
            "contractions": " and ".join(f"{n}x{n}" for n in m.gpu_matmul_n) + " float32 and bfloat16 A @ B",
            "TSQR": f"{m.gpu_qr_shape[0]}x{m.gpu_qr_shape[1]} float64",
            "FFTs": f"{m.gpu_fft_n} complex128 (1-D), {isqrt(m.gpu_fft_n)}x{isqrt(m.gpu_fft_n)} complex128 (2-D)",
            "sort/scan": f"{m.gpu_sort_n} float64",
        }
    return {
        "interchange": f"8 fragments x {b(m.interchange_bytes[0])} and x {b(m.interchange_bytes[1])}",
        "pointwise": f"3 operands x {b(m.pointwise_bytes)} (8 fragments); dispatch 8 x {m.dispatch_elements}",
        "gather/scatter": f"{m.gather_shape[0]}x{m.gather_shape[1]} float32 (8 fragments)",
        "redistribution": f"{m.redistribute_n}x{m.redistribute_n} float32 (8 JAX CPU devices)",
        "scaling": f"{m.scaling_n}x{m.scaling_n} float32 (1-512 NumPy fragments)",
        "across processes": "256x256 float32, 2 processes" if m.name == "smoke"
        else "4096x4096 float32 (64 MiB), 2 and 4 processes",
        "contractions": {"smoke": "256x256 float32 A @ B (2 processes: 256x256)",
                         "full": "4096x4096 float32 A @ B (2 and 4 processes: 4096x4096)"}.get(
            m.name, "1024x1024 float32 A @ B (2 and 4 processes: 2048x2048)"),
    }


def _load() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, where the system has them."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _run_case(number: int, fn: Callable[[Context], list[Row]], ctx: Context) -> dict[str, Any]:
    from .report import case_title

    start = time.perf_counter()
    try:
        rows = fn(ctx)
        status = "ok"
    except Exception as exc:  # noqa: BLE001 - one broken case must not end the run
        rows, status = [], describe_error(exc)
    elapsed = time.perf_counter() - start
    errors = sum(1 for r in rows if r.status != "ok")
    print(f"case {number}: {len(rows)} rows, {errors} with errors, {elapsed:.1f} s"
          + ("" if status == "ok" else f" -- {status}"), file=sys.stderr, flush=True)
    return {"case": number, "title": case_title(number), "status": status, "runtime_s": elapsed,
            "rows": [r.as_dict() for r in rows]}


def run_suite(args: argparse.Namespace) -> dict[str, Any]:
    """Run the selected cases and return the run's JSON document."""
    from .machine import machine_info

    started = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    load_start = _load()
    t0 = time.perf_counter()
    ctx = Context(MODES[args.mode], device="cuda:0" if args.gpu else "cpu", profile=args.profile)
    cases: list[dict[str, Any]] = []
    if args.gpu:
        from .cases.gpu import run_gpu

        ctx.notes.append(f"{ctx.mode.name} sizes; 8 fragments on cuda:0 (redistribution: 4)")
        parts = None if args.selected is None or 6 in args.selected else args.selected

        def gpu(c: Context) -> list[Row]:
            return run_gpu(c, parts)

        cases.append(_run_case(6, gpu, ctx))
    else:
        for number, fn in CPU_CASES.items():
            if args.selected is None or number in args.selected:
                cases.append(_run_case(number, fn, ctx))
    machine = machine_info(ROOT, gpu=args.gpu)
    machine["load_average"], machine["load_average_end"] = load_start, _load()
    busy = load_start[0] if load_start else 0.0
    if busy > 0.5 * (machine.get("usable_cores") or 1):
        ctx.notes.append(
            f"the machine was busy when the run started (1-minute load average {busy} on "
            f"{machine.get('usable_cores')} cores): figures are noisy; ratios less so, since "
            "the contenders of each comparison are timed in turn. PyTorch CPU ops split work "
            "over intra-op threads and stall when one is descheduled, so torch CPU times "
            "jump (4 ms vs 60 ms for the same copy) for dlmg and native alike"
        )
    run = {
        "schema": 1,
        "kind": "gpu" if args.gpu else "cpu",
        "mode": args.mode,
        "command": "python " + shlex.join(["benchmarks/run.py", *args.argv]),
        "started": started,
        "runtime_s": time.perf_counter() - t0,
        "machine": machine,
        "settings": asdict(ctx.settings),
        "sizes": _sizes(ctx),
        "notes": ctx.notes,
        "cases": cases,
    }
    if args.profile:
        stem = f"{run['kind']}-{args.mode}-profiles.md"
        ctx.notes.append(f"--profile: the profiler tables of the {len(ctx.profiles)} rows that miss a target "
                         f"are in {stem} beside this record")
        write_profiles(ctx.profiles, args.out / stem, f"Where the time of the missed rows goes ({args.mode} run)")
    return run


def _from_records(records: Sequence[Path], page: Path) -> int:
    """Rewrite ``page``'s sections from recorded runs; 2 when a record cannot be read."""
    try:
        runs = [(load_record(path), path) for path in records]
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for run, path in runs:
        update_docs(run, page, plots_from=Path(path).parent)
        print(f"updated the {run['kind'].upper()} section of {page} from {path}", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    args.argv = argv
    if args.from_record is not None:
        return _from_records(args.from_record, args.docs)
    if args.gpu:
        from .cases.gpu import require_gpu

        try:
            name = require_gpu()
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"GPU: {name}", file=sys.stderr)
    run = run_suite(args)
    from .plots import write_plots
    from .report import render_markdown, write_results

    write_plots(run, args.out)
    json_path, md_path = write_results(run, args.out)
    print(render_markdown(run))
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)
    if args.recorded is not None and args.selected is not None:
        # some cases only: they take their place in the suite's record, the others stay
        kept_path = args.recorded / f"{run['kind']}-{run['mode']}.json"
        if kept_path.exists():
            run = merge_runs(load_record(kept_path), run)
    if args.recorded is not None:
        write_plots(run, args.recorded)
        kept = write_results(run, args.recorded)
        print(f"kept {kept[0]} and {kept[1]}", file=sys.stderr)
    if args.docs is not None and not args.no_docs:
        plots = args.recorded if args.recorded is not None else args.out
        print(f"updated {update_docs(run, args.docs, plots_from=plots)}", file=sys.stderr)
    print(f"suite runtime {run['runtime_s']:.0f} s", file=sys.stderr)
    return 0
