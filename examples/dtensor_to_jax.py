"""A PyTorch DTensor handed to JAX and back, in two processes, without a copy.

The script starts two processes on ``127.0.0.1`` (torch.distributed on gloo).
Each holds one shard of a DTensor; dlmg wraps the shard as that process's
fragment, JAX reads the fragment through DLPack, and the way back ends in a
DTensor whose local shard is still the same memory. Runs on the CPU in a few
seconds::

    python examples/dtensor_to_jax.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

WORLD = 2


def worker() -> None:
    import jax
    import numpy as np
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    import dlmg
    import dlmg.distributed as dd

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR/PORT from the launcher
    dd.init("torch", timeout=60)  # dlmg's processes are torch.distributed's
    me = dist.get_rank()

    # 1. A 6 x 4 DTensor, rows sharded over the two processes.
    mesh = init_device_mesh("cpu", (WORLD,))
    full = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    x = distribute_tensor(full, mesh, [Shard(0)])
    ptr = x.to_local().data_ptr()

    # 2. Into dlmg: this process's fragment is the very local shard.
    t = dlmg.from_dtensor(x)
    (mine,) = t.local_fragments
    assert mine.array.data_ptr() == ptr, "the shard was copied"
    print(f"rank {me}: fragment {mine.index} of {t.layout.nfragments}, rows {mine.layout.ranges[0]}")

    # 3. To JAX: the fragment becomes a jax.Array on the same buffer.
    j = t.to("jax")
    (jfrag,) = j.local_fragments
    assert jfrag.array.unsafe_buffer_pointer() == ptr, "JAX copied the shard"
    total = float(jax.numpy.sum(jfrag.array))
    print(f"rank {me}: JAX sums its shard to {total}")

    # 4. Back to a DTensor: its local shard is still the same memory.
    y = j.to_dtensor()
    assert y.to_local().data_ptr() == ptr, "the way back copied"
    assert torch.equal(y.full_tensor(), full)
    np.testing.assert_array_equal(np.asarray(jfrag.array), full.numpy()[3 * me:3 * me + 3])
    print(f"rank {me}: DTensor -> dlmg -> JAX -> dlmg -> DTensor kept one buffer")

    dd.finalize()
    dist.destroy_process_group()


def main() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), JAX_PLATFORMS="cpu",
                   DLMG_EXAMPLE_WORKER="1")
        procs.append(subprocess.Popen([sys.executable, __file__], env=env))
    try:
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    if any(codes):
        raise SystemExit(f"a process failed: exit codes {codes}")
    print("both processes done")


if __name__ == "__main__":
    if os.environ.get("DLMG_EXAMPLE_WORKER"):
        worker()
    else:
        main()
