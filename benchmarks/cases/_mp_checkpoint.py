"""One process of the save / load benchmark (case 9), started by :mod:`benchmarks.cases.checkpoint`.

An ``n x n`` float32 matrix in row slabs, one per process (torch.distributed on
gloo; one process runs a group of one). Timed, each as the slowest process's
time between two barriers, median over the repeats:

* dlmg.save (TensorStore), dlmg.load into the saved layout, dlmg.load into
  column slabs;
* numpy.save / numpy.load of each process's own slab (the same bytes, one file
  per process), and numpy.save followed by an fsync of the file (what a save
  that survives a power cut costs);
* TensorStore alone on dlmg's files: writing the slab without fsync (the
  flush's share of a save) and reading it into a NumPy array (the library's
  share of a load; the rest is dlmg's own);
* zarr-python writing and reading the same chunks with the same codecs;
* torch.distributed.checkpoint saving and loading the same tensor as a DTensor.

The page cache is not dropped: every read is served from memory after the
first, as the writes are.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--dir", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    import zarr
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    import dlmg
    import dlmg.distributed as dd

    dd.init("torch")
    rank, world = dd.rank(), dd.world_size()
    n = args.n
    shape = (n, n)
    full = np.random.default_rng(9).random(shape, dtype=np.float32) if rank == 0 else None
    rows, cols = dd.slab(shape, 0), dd.slab(shape, 1)
    x = dlmg.scatter(full, rows, root=0)
    mine = x.fragments[rank].array
    base = Path(args.dir)
    ckpt, npy, zpath, dpath = base / "dlmg", base / f"slab{rank}.npy", base / "zarr", base / "dcp"

    def timed(fn) -> list[float]:
        out = []
        for i in range(args.warmup + args.repeats):
            dist.barrier()
            t0 = time.perf_counter()
            fn()
            dist.barrier()
            if i >= args.warmup:
                out.append(time.perf_counter() - t0)
        return out

    times: dict[str, list[float]] = {}
    times["dlmg save"] = timed(lambda: dlmg.save(ckpt, x, overwrite=True))
    times["dlmg load"] = timed(lambda: dlmg.load(ckpt))
    times["dlmg load other layout"] = timed(lambda: dlmg.load(ckpt, cols))
    times["numpy save"] = timed(lambda: np.save(npy, mine))

    def numpy_save_fsync() -> None:
        with open(npy, "wb") as f:
            np.save(f, mine)
            f.flush()
            os.fsync(f.fileno())

    times["numpy save fsync"] = timed(numpy_save_fsync)
    times["numpy load"] = timed(lambda: np.load(npy))

    meta = json.loads((ckpt / "zarr.json").read_text())
    meta.pop("attributes", None)  # the same chunks and codecs as dlmg's files
    block = meta["chunk_grid"]["configuration"]["chunk_shape"]
    codecs = meta["codecs"]
    start, stop = rank * block[0], min((rank + 1) * block[0], n)

    def zarr_save() -> None:
        if rank == 0:
            shutil.rmtree(zpath, ignore_errors=True)
            zpath.mkdir()
            (zpath / "zarr.json").write_text(json.dumps(meta))
        dist.barrier()
        zarr.open_array(str(zpath), mode="r+")[start:stop] = mine

    def zarr_load() -> None:
        zarr.open_array(str(zpath), mode="r")[start:stop]

    times["zarr save"] = timed(zarr_save)
    times["zarr load"] = timed(zarr_load)

    import tensorstore as ts

    tpath = base / "ts"
    unsynced = ts.Context({"cache_pool": {"total_bytes_limit": 0}, "file_io_sync": False})
    spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tpath)}}

    def ts_save_nosync() -> None:
        if rank == 0:
            shutil.rmtree(tpath, ignore_errors=True)
            ts.open(dict(spec, metadata=meta, create=True), context=unsynced).result()
        dist.barrier()
        ts.open(dict(spec, open=True), context=unsynced).result()[start:stop].write(mine).result()

    reader = ts.open({"driver": "zarr3", "kvstore": {"driver": "file", "path": str(ckpt)}, "open": True},
                     context=ts.Context({"cache_pool": {"total_bytes_limit": 0}})).result()

    def ts_load() -> None:
        out = np.empty((stop - start, n), np.float32)
        ts.array(out, copy=False, write=True).write(reader[start:stop]).result()

    times["tensorstore save nosync"] = timed(ts_save_nosync)
    times["tensorstore load"] = timed(ts_load)

    mesh = init_device_mesh("cpu", (world,))
    dt = distribute_tensor(torch.from_numpy(full) if rank == 0 else torch.empty(shape), mesh, [Shard(0)], src_data_rank=0)

    def dcp_save() -> None:
        if rank == 0:
            shutil.rmtree(dpath, ignore_errors=True)
        dist.barrier()
        dcp.save({"x": dt}, checkpoint_id=str(dpath))

    def dcp_load() -> None:
        dcp.load({"x": dt}, checkpoint_id=str(dpath))

    times["dcp save"] = timed(dcp_save)
    times["dcp load"] = timed(dcp_load)

    check = np.array_equal(dlmg.load(ckpt, cols).gather(framework="numpy"), x.gather(framework="numpy"))
    if rank == 0:
        Path(args.out).write_text(json.dumps({"times": times, "check": bool(check), "codecs": codecs}))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
