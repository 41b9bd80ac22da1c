"""dlmg across processes with torch.distributed: one process per device, as under torchrun.

Run (CPU only, two processes on this machine):

    python -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
        --master-port 29500 examples/distributed_torchrun.py

Every process runs this same program (SPMD). Each wraps its own torch tensor as
its fragment of one distributed tensor, then gathers, redistributes and
reduces it; only those calls communicate (gloo on the host, NCCL on GPUs).
"""

import numpy as np
import torch

import dlmg
import dlmg.distributed as dd

dd.init("torch")  # the default process group, set up from torchrun's environment
rank, world = dd.rank(), dd.world_size()
shape = (4 * world, 6)
expected = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)

# one slab of rows per process, on each process's own device
rows = dd.slab(shape, axis=0)
mine = torch.from_numpy(expected[4 * rank: 4 * (rank + 1)].copy()).to(dd.local_device().kind)
x = dlmg.from_fragments({rank: mine}, rows)
print(f"rank {rank}: {x}\n{rows}" if rank == 0 else f"rank {rank}: holds fragment {rank}")

# all-gather: every process receives the whole array
full = x.gather(framework="numpy")
assert np.array_equal(full, expected)

# root gather: only rank 0 receives it
at_root = x.gather(root=0)
assert (at_root is not None) == (rank == 0)

# rows -> columns: one message per pair of processes, planned from the layouts alone
cols = dd.slab(shape, axis=1)
plan = x.plan_redistribution(cols)  # the same on every process: bytes per (sender, receiver)
if rank == 0:
    print(plan)
y = x.redistribute(cols)
for frag in y.local_fragments:
    assert np.array_equal(frag.array.cpu().numpy(), expected[:, frag.layout.global_slices()[1]])

# reductions combine local partials with one all-reduce; pointwise work stays local
total = dlmg.sum(x * 2)
assert float(total) == 2 * expected.sum()
print(f"rank {rank}: sum(2x) = {float(total)}")

dd.finalize()
