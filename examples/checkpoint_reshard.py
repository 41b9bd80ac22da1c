"""Save a distributed tensor from 2 processes, load it in 1 and in 4 processes, in other layouts.

Run, on this machine (CPU, gloo; any free port instead of 29500):

    # 2 processes save one slab of rows each
    python -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
        --master-port 29500 examples/checkpoint_reshard.py save /tmp/dlmg-ckpt
    # 1 process loads it as a block-cyclic layout of 4 host fragments
    python examples/checkpoint_reshard.py load /tmp/dlmg-ckpt
    # 4 processes load it as one slab of columns each
    python -m torch.distributed.run --nproc-per-node 4 --master-addr 127.0.0.1 \
        --master-port 29500 examples/checkpoint_reshard.py load /tmp/dlmg-ckpt

The checkpoint is plain Zarr v3 (docs/saving.md): ``zarr.open_array(path)[...]``
reads it without dlmg. Every process reads only the chunks its own fragments
need.
"""

import os
import sys

import numpy as np

import dlmg
import dlmg.distributed as dd

step, path = sys.argv[1], sys.argv[2]
if "RANK" in os.environ:  # started by torch.distributed.run: one process of several
    dd.init("torch")
rank, world = dd.rank(), dd.world_size()
shape = (12, 10)
expected = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

if step == "save":
    rows = dd.slab(shape, axis=0)  # fragment r, rows of process r
    x = dlmg.scatter(expected if rank == 0 else None, rows, root=0)
    dlmg.save(path, x, overwrite=True)
    if rank == 0:
        print(f"saved {shape} from {world} processes as {rows!r}")
elif step == "load":
    if world == 1:
        target = dlmg.Layout(shape, block=(2, 3), grid=(2, 2), devices=["cpu"] * 4)  # block-cyclic
    else:
        target = dd.slab(shape, axis=1)  # one slab of columns per process
    print(f"rank {rank}: saved from {dlmg.saved_layout(path)!r}")
    y = dlmg.load(path, target, framework="torch")
    for frag in y.local_fragments:
        want = expected[np.ix_(*(target.owned_indices(frag.index, m) for m in range(2)))]
        assert np.array_equal(frag.array.numpy(), want), frag
    assert np.array_equal(y.gather(framework="numpy"), expected)
    print(f"rank {rank}: loaded into {target!r} on {world} process(es): {len(y.local_fragments)} fragment(s) checked")
else:
    raise SystemExit(f"unknown step {step!r}: use save or load")

if dd.is_initialized():
    dd.finalize()
