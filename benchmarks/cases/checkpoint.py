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

On a GPU (a part of case 6, :func:`run_checkpoint_gpu`): ``dlmg.save`` and
``dlmg.load`` of a float32 matrix (1 GiB in the quick and full runs) in 8 torch
fragments on the one GPU, against ``torch.save`` / ``torch.load`` (back to the
same GPU) of the whole tensor, in GB/s. Beside them, each timed on its own,
the steps dlmg's time goes to: the device-to-host copy of the fragments (torch's
``.to("cpu")``, and dlmg's own host copy that ``save`` makes; back to the device
for the load), TensorStore encoding (decoding) the same host bytes with
the checkpoint's own codecs into an in-memory store, with and without the
CRC-32C checksums (their difference is the checksums' share; dlmg's format
compresses nothing), and a plain write + fsync (read) of the same bytes, one
file per fragment. Files go to a temporary folder under ``/tmp``, removed
after; the page cache is not dropped, so loads read from memory.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..config import Context, GiB, KiB, MiB
from ..harness import describe_error
from ..record import Row, Target, check_result
from .common import FRAGMENTS, guarded, run_checked, torch_slabs
from .multiprocess import run_workers, timing

__all__ = ["run_checkpoint", "run_checkpoint_gpu"]

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


# --- on a GPU (a part of case 6) ---------------------------------------------------------

#: Codecs that only lay bytes out or check them; any other codec in a checkpoint compresses.
_LAYOUT_CODECS = frozenset({"bytes", "crc32c", "sharding_indexed", "transpose"})


def _size(nbytes: int) -> str:
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes / MiB:g} MiB" if nbytes >= MiB \
        else f"{nbytes / KiB:g} KiB"


def _codec_names(codecs: Any) -> list[str]:
    """Every codec named in a Zarr v3 codec list, those inside a shard's too."""
    names: list[str] = []
    for codec in codecs if isinstance(codecs, list) else []:
        names.append(codec.get("name", "?"))
        config = codec.get("configuration") or {}
        for key in ("codecs", "index_codecs"):
            names += _codec_names(config.get(key))
    return names


def _without_checksums(codecs: Any) -> Any:
    """The codec list with every ``crc32c`` left out (a shard's inner and index codecs too)."""
    if not isinstance(codecs, list):
        return codecs
    out = []
    for codec in codecs:
        if codec.get("name") == "crc32c":
            continue
        config = codec.get("configuration")
        if isinstance(config, dict):
            codec = dict(codec, configuration={k: _without_checksums(v) if k in ("codecs", "index_codecs") else v
                                               for k, v in config.items()})
        out.append(codec)
    return out


def _memory_store(metadata: dict[str, Any]) -> Any:
    """A Zarr v3 array of ``metadata`` in TensorStore's in-memory key-value store (no file system)."""
    import tensorstore as ts

    meta = {k: v for k, v in metadata.items() if k not in ("zarr_format", "node_type")}
    spec = {"driver": "zarr3", "kvstore": {"driver": "memory"}, "metadata": meta, "create": True,
            "store_data_equal_to_fill_value": True}
    return ts.open(spec, context=ts.Context({"cache_pool": {"total_bytes_limit": 0}})).result()


class _Steps:
    """The steps of a save and a load, each on its own, on the bytes of ``tensor``'s fragments."""

    def __init__(self, tensor: Any, work: Path) -> None:
        from dlmg.io.format import array_metadata
        from dlmg.io.geometry import fragment_index

        self.device = tensor.fragments[0].array.device
        self.fragments = [f.array for f in tensor.fragments]
        self.indices = [fragment_index(f.layout) for f in tensor.fragments]
        self.tensor = tensor
        self.host = [f.detach().to("cpu", copy=True) for f in self.fragments]
        self.host_np = [h.numpy() for h in self.host]
        self.out_np = [h.numpy().copy() for h in self.host]
        # the metadata dlmg.save writes: the same chunks, shards and codecs
        self.metadata = array_metadata(tensor.layout, tensor.dtype, [f.framework for f in tensor.fragments])
        self.codecs = _codec_names(self.metadata.get("codecs"))
        self.stores = {"with": _memory_store(self.metadata),
                       "without": _memory_store(dict(self.metadata,
                                                     codecs=_without_checksums(self.metadata["codecs"])))}
        self.files = [work / f"raw-{i}.bin" for i in range(len(self.fragments))]
        self.write_files()

    def to_host(self) -> list[Any]:
        return [f.to("cpu") for f in self.fragments]

    def dlmg_to_host(self) -> Any:
        from dlmg.io.host import on_host

        return on_host(self.tensor)

    def to_device(self) -> list[Any]:
        return [h.to(self.device) for h in self.host]

    def encode(self, which: str) -> None:
        store = self.stores[which]
        for future in [store[index].write(h) for index, h in zip(self.indices, self.host_np)]:
            future.result()

    def decode(self, which: str) -> None:
        import tensorstore as ts

        store = self.stores[which]
        futures = [ts.array(out, copy=False, write=True).write(store[index])
                   for index, out in zip(self.indices, self.out_np)]
        for future in futures:
            future.result()

    def write_files(self) -> None:
        for path, h in zip(self.files, self.host_np):
            with open(path, "wb") as f:
                f.write(memoryview(h).cast("B"))
                f.flush()
                os.fsync(f.fileno())

    def read_files(self) -> None:
        for path, out in zip(self.files, self.out_np):
            with open(path, "rb", buffering=0) as f:
                f.readinto(memoryview(out).cast("B"))


def _torch_save_fsync(tensor: Any, path: Path) -> None:
    import torch

    with open(path, "wb") as f:
        torch.save(tensor, f)
        f.flush()
        os.fsync(f.fileno())


def _gpu_rows(ctx: Context, work: Path) -> list[Row]:
    import dlmg
    import torch

    nbytes = ctx.mode.gpu_checkpoint_bytes
    n = math.isqrt(nbytes // 4)
    nbytes = n * n * 4
    whole = torch.rand((n, n), generator=torch.Generator(device=ctx.device).manual_seed(9), device=ctx.device)
    tensor = torch_slabs(whole, 0)
    checkpoint, pt = str(work / "dlmg-checkpoint"), work / "whole.pt"
    torch.save(whole, pt)

    def check() -> str:
        dlmg.save(checkpoint, tensor)
        back = dlmg.load(checkpoint)
        where = {str(f.array.device) for f in back.fragments}
        if type(back.fragments[0].array) is not torch.Tensor or where != {str(whole.device)}:
            return f"mismatch: loaded as {type(back.fragments[0].array).__name__} on {sorted(where)}"
        return "ok (loaded values equal, torch on the saved device)" if torch.equal(back.gather(), whole) \
            else "mismatch: loaded values differ"

    verdict = check_result(check)
    steps = _Steps(tensor, work)
    compression = [c for c in steps.codecs if c not in _LAYOUT_CODECS]
    params = {"framework": "torch", "fragments": FRAGMENTS, "shape": [n, n], "bytes": nbytes, "size": _size(nbytes),
              "dtype": "float32", "device": ctx.device, "codecs": ", ".join(dict.fromkeys(steps.codecs)),
              "compression": ", ".join(compression) or "none", "page cache": "not dropped", "folder": str(work)}
    # 1 GiB a call: few repeats keep the part within minutes, as in case 9's large rows
    settings = ctx.settings if ctx.mode.name == "smoke" else replace(
        ctx.settings, repeats=min(ctx.settings.repeats, 3), warmup=1)
    save_steps: dict[str, Callable[[], Any]] = {
        "device-to-host copy": steps.to_host,
        "dlmg's host copy (io.host.on_host)": steps.dlmg_to_host,
        "encode": lambda: steps.encode("with"),
        "encode without checksums": lambda: steps.encode("without"),
        "file write+fsync": steps.write_files,
    }
    load_steps: dict[str, Callable[[], Any]] = {
        "file read": steps.read_files,
        "decode": lambda: steps.decode("with"),
        "decode without checksums": lambda: steps.decode("without"),
        "host-to-device copy": steps.to_device,
    }
    rows = []
    for op, dlmg_call, native, native_call, parts in (
        ("save", lambda: dlmg.save(checkpoint, tensor, overwrite=True), "torch.save of the whole tensor",
         lambda: torch.save(whole, pt), save_steps),
        ("load", lambda: dlmg.load(checkpoint), "torch.load of the whole tensor to the same device",
         lambda: torch.load(pt, map_location=ctx.device), load_steps),
    ):
        row = Row(9, f"{op}, 8 torch fragments", dict(params), native,
                  targets=[Target("throughput vs torch", ">=", 0.8)])
        callables = {"dlmg": dlmg_call, "native": native_call, **parts}
        if op == "save":
            callables["torch.save+fsync"] = lambda: _torch_save_fsync(whole, pt)
        run_checked(row, ctx, callables, lambda: verdict, settings)
        _step_metrics(row, nbytes, op)
        rows.append(row)
    return rows


def _step_metrics(row: Row, nbytes: int, op: str) -> None:
    """GB/s of both sides, and each step's time as a share of dlmg's."""
    mine, theirs = row.time("dlmg"), row.time("native")
    row.metrics["GB/s"] = nbytes / mine / 1e9 if mine else None
    row.metrics["torch GB/s"] = nbytes / theirs / 1e9 if theirs else None
    row.metrics["throughput vs torch"] = theirs / mine if mine and theirs else None
    if op == "save":
        synced = row.time("torch.save+fsync")
        row.metrics["throughput vs torch+fsync"] = synced / mine if mine and synced else None
    coded, plain = ("encode", "encode without checksums") if op == "save" else ("decode", "decode without checksums")
    for step in [w for w in row.timings if w not in ("dlmg", "native", "torch.save+fsync", plain)]:
        t = row.time(step)
        row.metrics[f"{step} share"] = t / mine if mine and t else None
    with_sums, without = row.time(coded), row.time(plain)
    row.metrics["checksums share"] = (with_sums - without) / mine if mine and with_sums and without else None


def run_checkpoint_gpu(ctx: Context) -> list[Row]:
    """Case 6's checkpoints: dlmg.save / dlmg.load of 8 torch fragments on ``ctx.device`` against
    torch.save / torch.load of the whole tensor, with the steps dlmg's time goes to."""
    work = Path(tempfile.mkdtemp(prefix="dlmg-bench-gpu-ckpt-", dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        return guarded(9, "save / load, 8 torch fragments", "torch.save / torch.load", lambda: _gpu_rows(ctx, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
