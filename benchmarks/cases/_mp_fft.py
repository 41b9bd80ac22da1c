"""One process of case 12's multi-process rows: ``fftn`` of an n^3 float64 slab.

Run by :mod:`benchmarks.cases.fft` through case 8's launcher
(:func:`benchmarks.cases.multiprocess.launch`), on gloo (torch.distributed) or
MPI. Each process holds ``n / P`` planes of mode 0 (NumPy). dlmg runs
``dlmg.fft.fftn`` (modes 1 and 2 where they lie, a transpose making mode 0
whole, its transforms, a transpose back). The native contender is what a user
writes by hand with the engine's own collective: ``numpy.fft.fftn`` over modes
1 and 2, the planes packed per peer, one ``all_to_all_single`` (MPI
``Alltoall``), ``numpy.fft.fft`` along mode 0, and the same all-to-all back:
the same local FFTs and the same bytes per transpose. Values are checked
first, in every process. Rank 0 writes the per-repeat seconds as JSON.
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
    import dlmg.distributed as dd

    engine = dd.init(args.engine, timeout=600)
    rank, world = dd.rank(), dd.world_size()
    n = args.n
    planes = n // world
    full = np.random.default_rng(12).standard_normal((n, n, n))
    mine = np.ascontiguousarray(full[rank * planes:(rank + 1) * planes])
    x = dlmg.from_fragments({rank: mine}, dd.slab((n, n, n), 0))

    exchange, name = engine_alltoall(args.engine)

    def by_hand() -> np.ndarray:
        a = np.fft.fftn(mine, axes=(1, 2))
        send = np.ascontiguousarray(a.reshape(planes, world, n // world, n).transpose(1, 0, 2, 3))
        b = np.fft.fft(exchange(send).reshape(n, n // world, n), axis=0)
        back = exchange(np.ascontiguousarray(b.reshape(world, planes, n // world, n)))
        return np.ascontiguousarray(back.transpose(1, 0, 2, 3)).reshape(planes, n, n)

    # results first: dlmg must be right before it is timed
    want = np.fft.fftn(full)[rank * planes:(rank + 1) * planes]
    got = dlmg.fft.fftn(x)
    assert got.layout == x.layout
    np.testing.assert_allclose(np.asarray(got.fragments[rank].array), want, atol=1e-8)
    np.testing.assert_allclose(by_hand(), want, atol=1e-8)
    del full, want

    contenders = {"fftn": {"dlmg": lambda: dlmg.fft.fftn(x), "native": by_hand,
                           "dlmg transposed_out": lambda: dlmg.fft.fftn(x, transposed_out=True)}}
    times = time_contenders(engine, contenders, args.warmup, args.repeats)
    if rank == 0:
        Path(args.out).write_text(json.dumps({"times": times, "native": name}))
    dd.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
