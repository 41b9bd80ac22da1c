"""Case 8: collectives across processes against the engine's raw collectives.

An ``n x n`` float32 matrix (64 MiB in the quick and full modes) in row slabs,
one per process, 2 and 4 processes on this machine, with each engine:
torch.distributed on gloo (plain processes with torchrun's environment) and
MPI through mpi4py (``mpiexec``). Rows:

* all-gather: ``dt.gather()`` against ``all_gather_into_tensor`` / ``Allgather``
  into a fresh output;
* row slabs -> column slabs: ``dt.redistribute(columns)`` against
  ``all_to_all_single`` / ``Alltoallv`` of each process's slab in equal parts
  (the same bytes between every pair of processes) into a fresh output, which
  moves the bytes but does not rearrange them; and against the same result
  written with the engine (``pack + all-to-all``: each peer's columns packed
  into a send buffer, then that all-to-all).

Each figure is the median over repeats of the slowest process's time; the
work runs in :mod:`benchmarks.cases._mp_collectives`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dlmg.testing import start_local_processes

from ..config import Context, MiB
from ..harness import Timing, describe_error
from ..record import Row, Target

__all__ = ["launch", "launch_for", "run_multiprocess", "run_workers", "timing"]

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().parent / "_mp_collectives.py"
CASE = 8


def run_workers(worker: Path, args: list[str], nprocs: int, out: Path, engine: str = "torch",
                timeout: float = 900) -> dict[str, Any]:
    """Run ``worker`` with ``args`` in ``nprocs`` processes on this machine (one
    torch.distributed group on gloo, or ``mpiexec`` for ``engine="mpi"``) and read
    the results it wrote to ``out``; raises with the processes' output when one fails
    or one outlives ``timeout`` seconds."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    procs = start_local_processes([str(worker), *args], nprocs, engine, env=env, cwd=ROOT)
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0])
    if any(p.returncode for p in procs) or not out.exists():
        raise RuntimeError(f"the {nprocs} {engine} processes failed: {''.join(logs)[-1500:]}")
    return json.loads(out.read_text())  # type: ignore[no-any-return]


def launch(engine: str, nprocs: int, n: int, repeats: int, warmup: int, worker: Path = WORKER) -> dict[str, Any]:
    """Run ``worker`` in ``nprocs`` processes of ``engine`` and return what rank 0 wrote.

    The worker takes ``--engine --n --repeats --warmup --out`` (case 10's
    multi-process rows use this launcher too)."""
    out = Path(tempfile.mkdtemp(prefix="dlmg-bench-")) / "result.json"
    try:
        return run_workers(worker, ["--engine", engine, "--n", str(n), "--repeats", str(repeats),
                                    "--warmup", str(warmup), "--out", str(out)], nprocs, out, engine)
    finally:
        shutil.rmtree(out.parent, ignore_errors=True)


def launch_for(rows: list[Row], engine: str, nprocs: int, n: int, repeats: int, warmup: int,
               worker: Path = WORKER) -> dict[str, Any] | None:
    """:func:`launch`'s result for ``rows``; ``None`` where the launch failed, its error then
    recorded as every row's ``dlmg`` and ``native`` timings."""
    try:
        return launch(engine, nprocs, n, repeats, warmup, worker)
    except Exception as exc:  # noqa: BLE001 - recorded in the rows
        error = describe_error(exc)
        for row in rows:
            row.timings = {"dlmg": error, "native": error}
        return None


def timing(seconds: list[float]) -> Timing:
    """The median, minimum and maximum of per-repeat ``seconds`` (each the slowest process's)."""
    s = sorted(seconds)
    return Timing(s[len(s) // 2], s[0], s[-1], len(s), 1)


def run_multiprocess(ctx: Context) -> list[Row]:
    """The rows of case 8 (see the module docstring)."""
    smoke = ctx.mode.name == "smoke"
    n = 256 if smoke else 4096
    counts = (2,) if smoke else (2, 4)
    settings = ctx.settings
    rows: list[Row] = []
    for engine in ("torch", "mpi"):
        for nprocs in counts:
            params = {"engine": engine, "processes": nprocs, "shape": [n, n], "bytes": n * n * 4,
                      "size": f"{n * n * 4 / MiB:g} MiB", "dtype": "float32"}
            try:
                result = launch(engine, nprocs, n, settings.repeats, settings.warmup)
            except Exception as exc:  # noqa: BLE001 - recorded in the rows
                error = describe_error(exc)
                for op in ("all-gather", "row slabs -> column slabs"):
                    rows.append(Row(CASE, f"{op}, {engine}, {nprocs} processes", params, "-",
                                    timings={"dlmg": error, "native": error}))
                continue
            for op, title in (("allgather", "all-gather"), ("redistribute", "row slabs -> column slabs")):
                times = result["times"][op]
                extra = {"transport": result["transport"]}
                if op == "redistribute":
                    extra["messages"] = result["messages"]
                row = Row(
                    CASE, f"{title}, {engine} ({result['transport']}), {nprocs} processes", {**params, **extra},
                    result["native"][op] + " into a fresh output",
                    timings={"dlmg": timing(times["dlmg"]), "native": timing(times["native"])},
                    targets=[Target("ratio", "<=", 1.1)], check="ok (checked in every process)",
                )
                if "packed" in times:  # the same result written with the engine: pack, then all-to-all
                    row.timings["pack + all-to-all"] = timing(times["packed"])
                    t, t_packed = row.time("dlmg"), row.time("pack + all-to-all")
                    row.metrics["ratio vs pack + all-to-all"] = t / t_packed if t and t_packed else None
                    row.targets.append(Target("ratio vs pack + all-to-all", "<=", 1.1))
                rows.append(row)
    return rows
