"""dlmg's redistribution against ``DTensor.redistribute`` across processes, transition by transition.

Whether dlmg hands a torch redistribution across processes to DTensor rests on
these figures: a float32 ``n x n`` tensor, one shard per process on gloo, moved
between the placements below, by ``dt.redistribute(layout)`` (dlmg's all-to-all)
and by ``x.redistribute(mesh, placements)`` on the same memory (``x`` the
DTensor of the same shards). Each figure is the median over repeats of the
slowest process's time (wall time between barriers).

    python benchmarks/dtensor_transitions.py --processes 2 --n 4096

runs the processes itself (plain processes with torchrun's environment) and
prints one line per transition with both times and their ratio (dlmg / DTensor).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: (name, source placement, target placement); "S0" is Shard(0), "S1" Shard(1), "R" Replicate().
TRANSITIONS = (
    ("rows -> columns", "S0", "S1"),
    ("columns -> rows", "S1", "S0"),
    ("rows -> replicated", "S0", "R"),
    ("replicated -> columns", "R", "S1"),
)


def _worker(n: int, repeats: int, out: str) -> None:
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    import dlmg
    import dlmg.distributed as dd

    dd.init("torch", timeout=300)
    rank, world = dd.rank(), dd.world_size()
    mesh = init_device_mesh("cpu", (world,))
    placements = {"S0": Shard(0), "S1": Shard(1), "R": Replicate()}
    full = torch.arange(n * n, dtype=torch.float32).reshape(n, n)
    results = {}
    for name, src, dst in TRANSITIONS:
        local = full.clone() if src == "R" else full.chunk(world, dim=int(src[1]))[rank].contiguous()
        x = DTensor.from_local(local, mesh, [placements[src]], run_check=False)
        t = dlmg.from_dtensor(x)
        target = dlmg.from_dtensor(x.redistribute(mesh, [placements[dst]])).layout

        def dlmg_move(t=t, target=target) -> object:
            return t.redistribute(target)

        def dtensor_move(x=x, dst=dst) -> object:
            return x.redistribute(mesh, [placements[dst]]).to_local()

        got = dlmg_move().gather(framework="numpy")
        assert np.array_equal(got, full.numpy()), f"{name}: dlmg gave other values"
        times: dict[str, list[float]] = {"dlmg": [], "DTensor": []}
        for _ in range(repeats + 1):  # the first of each is a warm-up
            for who, fn in (("dlmg", dlmg_move), ("DTensor", dtensor_move)):
                dist.barrier()
                start = time.perf_counter()
                fn()
                dist.barrier()
                times[who].append(time.perf_counter() - start)
        results[name] = {who: sorted(v[1:])[len(v[1:]) // 2] for who, v in times.items()}
    if rank == 0:
        Path(out).write_text(json.dumps({"n": n, "processes": world, "results": results}))
    dd.finalize() if hasattr(dd, "finalize") else dist.destroy_process_group()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--worker-out", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker_out:
        _worker(args.n, args.repeats, args.worker_out)
        return 0
    out = Path(f"/tmp/dlmg-dtensor-transitions-{os.getpid()}.json")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = dict(os.environ, OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port,
               WORLD_SIZE=str(args.processes), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, __file__, "--n", str(args.n), "--repeats", str(args.repeats), "--worker-out", str(out)]
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r))) for r in range(args.processes)]
    codes = [proc.wait(timeout=1200) for proc in procs]
    if any(codes) or not out.exists():
        print(f"the processes failed: exit codes {codes}", file=sys.stderr)
        return 1
    run = json.loads(out.read_text())
    out.unlink()
    mib = args.n * args.n * 4 / 2**20
    print(f"{args.processes} processes, gloo, {args.n} x {args.n} float32 ({mib:g} MiB)")
    for name, t in run["results"].items():
        print(f"  {name:24s} dlmg {t['dlmg'] * 1e3:8.2f} ms   DTensor {t['DTensor'] * 1e3:8.2f} ms"
              f"   dlmg / DTensor {t['dlmg'] / t['DTensor']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
