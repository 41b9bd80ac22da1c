"""A global jax.Array over two processes, handed to torch and back without a copy.

Run (CPU only, two processes on this machine, two JAX CPU devices each):

    python -m torch.distributed.run --nproc-per-node 2 --master-addr 127.0.0.1 \
        --master-port 29500 examples/distributed_jax.py

torchrun starts the processes and sets RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT. Each process joins JAX's multi-controller runtime (its coordinator
at JAX_COORDINATOR_ADDRESS, by default MASTER_PORT + 1 on MASTER_ADDR) and
dlmg's torch.distributed engine with the same rank numbering. The global array
spans both processes; each process wraps its own shards as its fragments.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=2")

import jax  # noqa: E402  (after XLA_FLAGS: JAX reads them when it starts)
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

import dlmg  # noqa: E402
import dlmg.distributed as dd  # noqa: E402

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
next_to_torchrun = f"{os.environ['MASTER_ADDR']}:{int(os.environ['MASTER_PORT']) + 1}"
coordinator = os.environ.get("JAX_COORDINATOR_ADDRESS", next_to_torchrun)

# JAX's own collectives on the CPU, then dlmg's (torch.distributed, the same ranks)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(coordinator, num_processes=world, process_id=rank)
dd.init("torch")

# One block of two rows per JAX device, over every device of every process.
rows = 2 * jax.device_count()
full = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
mesh = Mesh(np.array(jax.devices()), ("rows",))
sharding = NamedSharding(mesh, PartitionSpec("rows"))
x = jax.make_array_from_callback(full.shape, sharding, lambda index: full[index])

dt = dlmg.from_jax(x)    # this process's shards are its fragments: the same buffers
t = dt.to("torch")       # per-process torch tensors, no copy
y = dlmg.to_jax(t)       # the global jax.Array again, over the same buffers

buffers = sorted(s.data.unsafe_buffer_pointer() for s in x.addressable_shards)
assert sorted(f.array.data_ptr() for f in t.local_fragments) == buffers
assert sorted(s.data.unsafe_buffer_pointer() for s in y.addressable_shards) == buffers
assert dt.layout.ranks == tuple(d.process_index for d in mesh.devices.flat)

# Communication goes through dlmg's engine: an all-gather and a reduction.
assert np.array_equal(dt.gather(framework="numpy"), full)
assert float(dlmg.sum(t)) == full.sum()

if rank == 0:
    print(dt.layout)
print(f"rank {rank}: {len(dt.local_fragments)} shards to torch and back, no copy")

dd.finalize()
jax.distributed.shutdown()
