"""One process of case 8: times dlmg's collectives against the engine's raw ones.

Run by :mod:`benchmarks.cases.multiprocess` in 2 or 4 processes (torchrun's
environment, or ``mpiexec``). Every repeat of every contender starts after a
barrier and ends when the slowest process is done (the maximum over processes
of each one's time); contenders take turns repeat by repeat. Rank 0 writes the
per-repeat seconds as JSON.

Contenders, on an ``n x n`` float32 matrix in row slabs (one per process):

* all-gather: ``dt.gather()`` against a fresh output plus the engine's
  all-gather (``all_gather_into_tensor`` / ``Allgather``);
* rows -> columns: ``dt.redistribute(column slabs)`` against a fresh output
  plus the engine's all-to-all on the same bytes (``all_to_all_single`` /
  ``Alltoallv`` of each process's whole slab in equal parts), and against what
  a user of the engine writes for the same result: each peer's columns packed
  into a send buffer, then that all-to-all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any


def time_contenders(engine: Any, contenders: dict[str, dict[str, Any]], warmup: int,
                    repeats: int) -> dict[str, dict[str, list[float]]]:
    """Each contender's times after ``warmup`` calls: every call starts after a
    barrier and counts as long as the slowest process took."""
    import numpy as np

    slowest = np.zeros(1)
    times: dict[str, dict[str, list[float]]] = {k: {who: [] for who in pair} for k, pair in contenders.items()}
    for key, pair in contenders.items():
        for i in range(warmup + repeats):
            for who, fn in pair.items():
                engine.barrier()
                t0 = time.perf_counter()
                fn()
                slowest[0] = time.perf_counter() - t0
                engine.allreduce(slowest, "max")
                if i >= warmup:
                    times[key][who].append(float(slowest[0]))
    return times


def worker_arguments() -> argparse.Namespace:
    """The command line every multi-process worker takes: ``--engine``, ``--n``, ``--repeats``,
    ``--warmup`` and ``--out`` (the JSON rank 0 writes)."""
    p = argparse.ArgumentParser()
    p.add_argument("--engine", choices=["torch", "mpi"], required=True)
    p.add_argument("--n", type=int, required=True)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--out", required=True)
    return p.parse_args()


def engine_alltoall(engine: str) -> tuple[Any, str]:
    """The engine's own all-to-all of a contiguous NumPy array in equal parts, into a fresh
    buffer (``dist.all_to_all_single``, MPI ``Alltoall``), and its name for the report."""
    import numpy as np

    if engine == "torch":
        import torch
        import torch.distributed as dist

        def exchange(send: Any) -> Any:
            recv = np.empty_like(send)
            dist.all_to_all_single(torch.from_numpy(recv.reshape(-1).view(np.uint8)),
                                   torch.from_numpy(send.reshape(-1).view(np.uint8)))
            return recv

        return exchange, "dist.all_to_all_single"
    from mpi4py import MPI

    def exchange(send: Any) -> Any:
        recv = np.empty_like(send)
        MPI.COMM_WORLD.Alltoall([send.reshape(-1).view(np.uint8), MPI.BYTE], [recv.reshape(-1).view(np.uint8), MPI.BYTE])
        return recv

    return exchange, "MPI Alltoall"


def main() -> int:
    args = worker_arguments()
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

    import numpy as np

    import dlmg
    import dlmg.distributed as dd

    engine = dd.init(args.engine, timeout=300)
    rank, world = dd.rank(), dd.world_size()
    n = args.n
    rows, cols = dd.slab((n, n), 0), dd.slab((n, n), 1)
    block = n // world
    base = np.arange(block * n, dtype=np.float32).reshape(block, n) + rank * block * n
    if args.engine == "torch":
        import torch
        import torch.distributed as dist

        mine = torch.from_numpy(base)
        x = dlmg.from_fragments({rank: mine}, rows)

        def raw_allgather():
            out = torch.empty((n, n), dtype=torch.float32)
            dist.all_gather_into_tensor(out, mine)
            return out

        def raw_alltoall():
            out = torch.empty(block * n, dtype=torch.float32)
            dist.all_to_all_single(out, mine.reshape(-1))
            return out

        def packed_alltoall():  # what a torch user writes: each peer's columns packed, then sent
            send = mine.reshape(block, world, block).transpose(0, 1).contiguous()
            out = torch.empty((n, block), dtype=torch.float32)
            dist.all_to_all_single(out.view(-1), send.view(-1))
            return out

        names = ("dist.all_gather_into_tensor", "dist.all_to_all_single")
    else:
        from mpi4py import MPI

        comm = MPI.COMM_WORLD
        x = dlmg.from_fragments({rank: base}, rows)

        def raw_allgather():
            out = np.empty((n, n), dtype=np.float32)
            comm.Allgather([base, MPI.FLOAT], [out, MPI.FLOAT])
            return out

        counts = np.full(world, block * block, dtype=np.int64)
        displs = np.arange(world, dtype=np.int64) * block * block

        def raw_alltoall():
            out = np.empty(block * n, dtype=np.float32)
            comm.Alltoallv([base, (counts, displs), MPI.FLOAT], [out, (counts, displs), MPI.FLOAT])
            return out

        def packed_alltoall():  # what an mpi4py user writes: each peer's columns packed, then sent
            send = np.ascontiguousarray(base.reshape(block, world, block).transpose(1, 0, 2))
            out = np.empty((n, block), dtype=np.float32)
            comm.Alltoallv([send, (counts, displs), MPI.FLOAT], [out, (counts, displs), MPI.FLOAT])
            return out

        names = ("MPI Allgather", "MPI Alltoallv")

    # results first: dlmg must be right before it is timed
    full = np.arange(n * n, dtype=np.float32).reshape(n, n)
    got = x.gather()
    assert np.array_equal(np.asarray(got), full)
    y = x.redistribute(cols)
    mine_cols = full[:, rank * block:(rank + 1) * block]
    assert np.array_equal(np.asarray(y.fragments[rank].array), mine_cols)
    assert np.array_equal(np.asarray(packed_alltoall()), mine_cols)

    contenders = {
        "allgather": {"dlmg": lambda: x.gather(), "native": raw_allgather},
        "redistribute": {"dlmg": lambda: x.redistribute(cols), "native": raw_alltoall, "packed": packed_alltoall},
    }
    times = time_contenders(engine, contenders, args.warmup, args.repeats)
    routes = dlmg.movement.redistribution_routes(rows, cols, 4, engine)
    if rank == 0:
        Path(args.out).write_text(json.dumps({
            "times": times, "native": {"allgather": names[0], "redistribute": names[1]},
            "transport": engine.transport(dd.local_device()), "messages": routes.nmessages,
            "bytes_by_ranks": {f"{a}->{b}": v for (a, b), v in routes.bytes_by_ranks.items()},
        }))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
