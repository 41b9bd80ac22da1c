"""One process of case 11's multi-process rows: blocked Cholesky on a 2 x 2 grid of processes, and
a pending sum resolved across processes.

Run by :mod:`benchmarks.cases.linalg` through case 8's launcher
(:func:`benchmarks.cases.multiprocess.launch`), 4 processes on gloo (torch.distributed) or MPI.

* Cholesky: an SPD ``n x n`` float64 matrix on a 2 x 2 grid of ``min(256, n / 2)`` blocks, grid
  cell ``i`` on process ``i`` (NumPy fragments); ``dlmg.linalg.cholesky`` (blocked right-looking:
  each panel factorised by its owner, broadcast along grid rows and columns, the trailing update
  where the blocks lie). Its native contender, one ``numpy.linalg.cholesky`` of the whole matrix
  in one process, is timed by the case itself, outside these processes.
* Pending sum: every process holds one ``n x n`` float32 addend of a pending sum (a layout with
  ``partial="sum"``, one replica per process), resolved to a replicated tensor (an all-reduce)
  and to row slabs (a reduce-scatter), against the engine's own collective on the same bytes:
  ``all_reduce`` / ``reduce_scatter_tensor`` (MPI ``Allreduce`` / ``Reduce_scatter_block``),
  in place of a working buffer (no fresh output; dlmg's result is one).

Values are checked first, in every process. Rank 0 writes the per-repeat seconds as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def spd(n: int):  # type: ignore[no-untyped-def]
    """The SPD matrix of the Cholesky rows (the case builds the same one for its native contender):
    a symmetric random matrix shifted by ``n I``, positive definite by Gershgorin's margin."""
    import numpy as np

    a = np.random.default_rng(21).standard_normal((n, n))
    return (a + a.T) / 2 + n * np.eye(n)


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.cases._mp_collectives import time_contenders, worker_arguments

    args = worker_arguments()

    import numpy as np

    import dlmg
    import dlmg.distributed as dd
    from dlmg import Layout

    engine = dd.init(args.engine, timeout=600)
    rank, world = dd.rank(), dd.world_size()
    n = args.n
    everyone = list(range(world))

    # -- Cholesky on a 2 x (world / 2) grid of processes --------------------------------
    b = min(256, n // 2)
    lay = Layout((n, n), block=(b, b), grid=(2, world // 2), devices=["cpu"] * world, ranks=everyone)
    whole = spd(n)
    rows, cols = lay.owned_indices(rank, 0), lay.owned_indices(rank, 1)
    x = dlmg.from_fragments({rank: np.ascontiguousarray(whole[np.ix_(rows, cols)])}, lay)
    want = np.linalg.cholesky(whole)[np.ix_(rows, cols)]
    del whole
    low = dlmg.linalg.cholesky(x)
    np.testing.assert_allclose(np.asarray(low.fragments[rank].array), want, atol=1e-8)
    del low, want

    # -- a pending sum, one addend per process -------------------------------------------
    addend = np.random.default_rng(100 + rank).random((n, n), dtype=np.float32)
    pending = dlmg.from_fragments({rank: addend}, Layout((n, n), devices=["cpu"] * world, ranks=everyone,
                                                        partial="sum"))
    replicated = Layout.replicated((n, n), ["cpu"] * world, ranks=everyone)
    slabs = dd.slab((n, n), 0)
    total = sum(np.random.default_rng(100 + r).random((n, n), dtype=np.float32).astype(np.float64)
                for r in everyone)
    np.testing.assert_allclose(np.asarray(pending.redistribute(replicated).fragments[rank].array), total,
                               rtol=1e-5)
    mine = slabs.owned_indices(rank, 0)
    np.testing.assert_allclose(np.asarray(pending.redistribute(slabs).fragments[rank].array), total[mine],
                               rtol=1e-5)
    del total
    work = addend.copy().reshape(-1)
    part = np.empty(work.size // world, dtype=np.float32)

    if args.engine == "torch":
        import torch
        import torch.distributed as dist

        tw, tp = torch.from_numpy(work), torch.from_numpy(part)

        def all_reduce() -> None:
            dist.all_reduce(tw)

        def reduce_scatter() -> None:
            dist.reduce_scatter_tensor(tp, tw)

        names = {"all-reduce": "dist.all_reduce", "reduce-scatter": "dist.reduce_scatter_tensor"}
    else:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD

        def all_reduce() -> None:
            comm.Allreduce(MPI.IN_PLACE, [work, MPI.FLOAT], op=MPI.SUM)

        def reduce_scatter() -> None:
            comm.Reduce_scatter_block([work, MPI.FLOAT], [part, MPI.FLOAT], op=MPI.SUM)

        names = {"all-reduce": "MPI Allreduce", "reduce-scatter": "MPI Reduce_scatter_block"}

    contenders = {
        "cholesky": {"dlmg": lambda: dlmg.linalg.cholesky(x)},
        "all-reduce": {"dlmg": lambda: pending.redistribute(replicated), "native": all_reduce},
        "reduce-scatter": {"dlmg": lambda: pending.redistribute(slabs), "native": reduce_scatter},
    }
    times = time_contenders(engine, contenders, args.warmup, args.repeats)
    if rank == 0:
        Path(args.out).write_text(json.dumps({"times": times, "native": names, "block": b,
                                              "transport": engine.transport(dd.local_device())}))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
