"""Case 9: dlmg.save / dlmg.load against numpy.save / numpy.load, zarr-python and PyTorch DCP.

An ``n x n`` float32 matrix (64 MiB in the quick mode; 64 MiB and 1 GiB in the full mode)
in row slabs, one per process, 1 and 2 processes on this machine
(torch.distributed on gloo). Rows, each the slowest process's time, median over
the repeats (the work runs in :mod:`benchmarks.cases._mp_checkpoint`):

* save: ``dlmg.save`` (TensorStore) against ``numpy.save`` of each process's own
  slab (the same bytes, one ``.npy`` per process), with zarr-python writing the
  same chunks and codecs and DCP saving the same tensor as a DTensor beside it;
* load into the saved layout: ``dlmg.load`` against ``numpy.load``, zarr-python and
  DCP;
* load into column slabs: against dlmg's own load into the saved layout.

Files go to a temporary folder on the local disk; the page cache is not
dropped, so loads read from memory. Both TensorStore and DCP fsync what they
write; ``numpy.save`` does not. So the save rows also give ``numpy.save``
followed by an fsync (metric "throughput vs numpy+fsync") and TensorStore
writing the same chunks without fsync (the flush's share); the load rows give
TensorStore reading the same slab on its own ("ratio vs TensorStore read": what
dlmg adds to the library it reads with).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..config import Context, GiB, MiB
from ..harness import describe_error
from ..record import Row, Target
from .multiprocess import run_workers, timing

__all__ = ["run_checkpoint"]

WORKER = Path(__file__).resolve().parent / "_mp_checkpoint.py"
CASE = 9


def _launch(nprocs: int, n: int, repeats: int, warmup: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="dlmg-bench-ckpt-"))
    out = work / "result.json"
    try:
        return run_workers(WORKER, ["--n", str(n), "--repeats", str(repeats), "--warmup", str(warmup),
                                    "--dir", str(work), "--out", str(out)], nprocs, out,
                           timeout=900 if n <= 4096 else 2400)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run_checkpoint(ctx: Context) -> list[Row]:
    """The rows of case 9 (see the module docstring)."""
    name = ctx.mode.name
    sizes = {"smoke": [256], "full": [4096, 16384]}.get(name, [4096])
    settings = ctx.settings
    rows: list[Row] = []
    for n in sizes:
        # 1 GiB: one warm-up and three repeats keep each launch within minutes (on the 2-core
        # machine one round of the twelve timed operations took about 110 s)
        big = n > 4096
        repeats = 1 if name == "smoke" else min(settings.repeats, 3 if big else 5)
        rows += _rows(n, repeats, min(settings.warmup, 1) if big else settings.warmup)
    return rows


def _rows(n: int, repeats: int, warmup: int) -> list[Row]:
    rows: list[Row] = []
    for nprocs in (1, 2):
        nbytes = n * n * 4
        size = f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes / MiB:g} MiB"
        params = {"processes": nprocs, "shape": [n, n], "bytes": nbytes, "size": size, "dtype": "float32",
                  "page cache": "not dropped"}
        try:
            result = _launch(nprocs, n, repeats, warmup)
        except Exception as exc:  # noqa: BLE001 - recorded in the rows
            error = describe_error(exc)
            for op in ("save", "load", "load into column slabs"):
                rows.append(Row(CASE, f"{op}, {nprocs} process(es)", params, "-",
                                timings={"dlmg": error, "native": error}))
            continue
        t = {k: timing(v) for k, v in result["times"].items()}
        check = "ok (values equal after the load into column slabs)" if result["check"] else "mismatch"
        for op, native in (("save", "numpy save"), ("load", "numpy load")):
            row = Row(CASE, f"{op}, row slabs, {nprocs} process(es)", params, f"{native} of each process's slab",
                      timings={"dlmg": t[f"dlmg {op}"], "native": t[native],
                               "zarr-python": t[f"zarr {op}"], "DCP": t[f"dcp {op}"]},
                      check=check)
            mine = row.time("dlmg")
            row.metrics["GB/s"] = nbytes / mine / 1e9 if mine else None
            row.metrics["throughput vs numpy"] = row.time("native") / mine if mine else None
            row.metrics["ratio vs zarr-python"] = mine / row.time("zarr-python") if mine else None
            row.metrics["ratio vs DCP"] = mine / row.time("DCP") if mine else None
            if op == "save":
                row.timings["numpy save+fsync"] = t["numpy save fsync"]
                row.timings["TensorStore without fsync"] = t["tensorstore save nosync"]
                row.metrics["throughput vs numpy+fsync"] = row.time("numpy save+fsync") / mine if mine else None
            else:
                row.timings["TensorStore read"] = t["tensorstore load"]
                row.metrics["ratio vs TensorStore read"] = mine / row.time("TensorStore read") if mine else None
            row.targets = [Target("throughput vs numpy", ">=", 0.8), Target("ratio vs DCP", "<=", 1.0)]
            rows.append(row)
        rows.append(Row(CASE, f"load into column slabs, {nprocs} process(es)", params,
                        "dlmg.load into the saved row slabs",
                        timings={"dlmg": t["dlmg load other layout"], "native": t["dlmg load"]},
                        targets=[Target("ratio", "<=", 1.2)], check=check))
    return rows
