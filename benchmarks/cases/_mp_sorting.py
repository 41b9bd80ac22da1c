"""One process of case 13's multi-process rows: ``xp.sort`` of a float64 vector in slabs.

Run by :mod:`benchmarks.cases.sorting` through case 8's launcher
(:func:`benchmarks.cases.multiprocess.launch`), on gloo (torch.distributed) or
MPI. Each process holds ``n / P`` elements (one NumPy slab). dlmg runs
``dlmg.array_api.sort(x, stable=False)`` (parallel sample sort: local sorts,
splitters, one exchange, a local merge, a rebalancing exchange; unstable as
``numpy.sort``'s default), and the array API's default (stable) beside it. The native contender is the floor of any exchange
sort: ``numpy.sort`` of this process's share and one all-to-all of the same
bytes in equal parts with the engine's own collective
(``dist.all_to_all_single``; MPI ``Alltoall``) into a fresh buffer. Values are
checked first, in every process. Rank 0 writes the per-repeat seconds as JSON.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.cases._mp_collectives import engine_alltoall, time_contenders, worker_arguments

    args = worker_arguments()

    import numpy as np

    import dlmg
    import dlmg.array_api as xp
    import dlmg.distributed as dd

    engine = dd.init(args.engine, timeout=600)
    rank, world = dd.rank(), dd.world_size()
    n = args.n - args.n % world
    share = n // world
    full = np.random.default_rng(11).standard_normal(n)
    mine = np.ascontiguousarray(full[rank * share:(rank + 1) * share])
    x = dlmg.from_fragments({rank: mine}, dd.slab((n,), 0))

    exchange, name = engine_alltoall(args.engine)

    def floor() -> np.ndarray:
        return exchange(np.sort(mine))

    # results first: dlmg must be right before it is timed
    want = np.sort(full)
    got = xp.sort(x, stable=False)
    for f in got.layout.fragments_of(rank):
        held = np.asarray(got.fragments[f].array)
        np.testing.assert_array_equal(held, want[got.layout.owned_indices(f, 0)])
    assert sum(got.layout.fragment(f).shape[0] for f in range(got.layout.nfragments)) == n
    assert floor().shape == (share,)
    del full, want, got

    contenders = {"sort": {"dlmg": lambda: xp.sort(x, stable=False), "native": floor,
                           "dlmg stable=True": lambda: xp.sort(x)}}
    times = time_contenders(engine, contenders, args.warmup, args.repeats)
    if rank == 0:
        Path(args.out).write_text(json.dumps({"times": times, "native": name}))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
