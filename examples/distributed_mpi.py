"""dlmg across MPI processes (mpi4py): scatter from a root, redistribute, gather.

Run (CPU only, two processes on this machine; ``pip install mpi4py mpich``):

    mpiexec -n 2 python examples/distributed_mpi.py

Rank 0 holds a NumPy array and scatters it block-cyclically over the
processes; every process then works on its own fragments, and the collectives
run as MPI all-to-all(v), all-gather and all-reduce.
"""

import numpy as np

import dlmg
import dlmg.distributed as dd

dd.init("mpi")  # mpi4py's COMM_WORLD
rank, world = dd.rank(), dd.world_size()
shape = (6, 8)
expected = np.arange(48, dtype=np.float64).reshape(shape)

# 2x2 blocks dealt round robin over a 1 x world process grid, fragment f on rank f
layout = dlmg.Layout(shape, block=(2, 2), grid=(1, world), devices=["cpu"] * world, ranks=range(world))
x = dlmg.scatter(expected if rank == 0 else None, layout, root=0)
for frag in x.local_fragments:
    print(f"rank {rank}: fragment {frag.index} holds columns {layout.owned_indices(frag.index, 1).tolist()}")

# every process gets the whole array back
assert np.array_equal(x.gather(), expected)

# to row slabs, then reduce: the maximum and where it is
rows = dd.slab(shape, axis=0)
y = x.redistribute(rows)
assert int(dlmg.argmax(y)) == expected.size - 1
assert float(dlmg.max(y)) == expected.max()
assert np.array_equal(dlmg.mean(y, axis=0).gather(), expected.mean(axis=0))
if rank == 0:
    print("all checks passed on", world, "processes")

dd.finalize()
