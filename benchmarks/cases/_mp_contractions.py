"""One process of case 10's multi-process rows: ``A @ B`` against DTensor's ``torch.matmul``.

Run by :mod:`benchmarks.cases.contractions` through case 8's launcher
(:func:`benchmarks.cases.multiprocess.launch`), 2 or 4 processes on gloo
(torch.distributed, plain processes with torchrun's environment). ``A`` and
``B`` are ``n x n`` float32, built as DTensors on a one-dimensional CPU mesh
of every process, in three pairs of placements:

* ``Shard(0) @ Replicate``: dlmg's *local* strategy (no communication);
* ``Shard(1) @ Shard(0)``: a *pending sum* on both sides (DTensor's
  ``Partial``), left unreduced by both;
* ``Shard(0) @ Shard(1)``: one operand moves (dlmg gathers the smaller, or the
  cheaper one by its cost model; DTensor by its sharding strategies).

dlmg's operands are :func:`dlmg.from_dtensor` of the very DTensors (the same
local tensors, no copy). Every repeat of every contender starts after a
barrier and ends when the slowest process is done; contenders take turns
repeat by repeat. Values are checked first, in every process: both results
resolved and compared with each other and with the product of the whole
matrices. Rank 0 writes the per-repeat seconds as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PAIRS = {
    "local": ("Shard(0)", "Replicate"),
    "pending": ("Shard(1)", "Shard(0)"),
    "move": ("Shard(0)", "Shard(1)"),
}


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=["torch"], required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

    import numpy as np
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor

    import dlmg
    import dlmg.distributed as dd
    from benchmarks.cases._mp_collectives import time_contenders

    engine = dd.init("torch", timeout=600)
    rank, world = dd.rank(), dd.world_size()
    n = args.n
    mesh = init_device_mesh("cpu", (world,))
    rng = np.random.default_rng(9)
    A = torch.from_numpy(rng.random((n, n), dtype=np.float32))
    B = torch.from_numpy(rng.random((n, n), dtype=np.float32))
    placement = {"Shard(0)": Shard(0), "Shard(1)": Shard(1), "Replicate": Replicate()}
    want = None
    contenders = {}
    strategies = {}
    for key, (pa, pb) in PAIRS.items():
        a_dt = distribute_tensor(A, mesh, [placement[pa]])
        b_dt = distribute_tensor(B, mesh, [placement[pb]])
        a, b = dlmg.from_dtensor(a_dt), dlmg.from_dtensor(b_dt)
        assert a.fragments[a.layout.ranks.index(rank)].array.data_ptr() == a_dt.to_local().data_ptr()
        strategies[key] = dlmg.einsum_plan("ik,kj->ij", a, b, pending=True).strategy

        # results first: dlmg must be right before it is timed
        mine, theirs = dlmg.matmul(a, b, pending=True), torch.matmul(a_dt, b_dt)  # both left unreduced
        if want is None:
            want = (A.double() @ B.double()).numpy()
        got = np.asarray(mine.redistribute(dlmg.Layout.replicated(
            (n, n), ["cpu"] * world, ranks=list(range(world)))).fragments[rank].array)
        ref = theirs.full_tensor().numpy()
        tol = dict(rtol=1e-3, atol=1e-2 * np.sqrt(n))
        assert np.allclose(got, want, **tol), f"{key}: dlmg differs from the product"
        assert np.allclose(ref, want, **tol), f"{key}: DTensor differs from the product"

        def run_dlmg(a=a, b=b):
            return dlmg.matmul(a, b, pending=True)

        def run_dtensor(a_dt=a_dt, b_dt=b_dt):
            return torch.matmul(a_dt, b_dt)  # the local product waits for any collective it needs

        contenders[key] = {"dlmg": run_dlmg, "native": run_dtensor}

    times = time_contenders(engine, contenders, args.warmup, args.repeats)
    if rank == 0:
        Path(args.out).write_text(json.dumps({
            "times": times, "strategies": strategies,
            "transport": engine.transport(dd.local_device()),
        }))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
