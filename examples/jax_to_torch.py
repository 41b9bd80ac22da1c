"""A sharded jax.Array handed to PyTorch and back, without copying a byte.

JAX refuses ``__dlpack__`` for an array on several devices; dlmg wraps its
shards as the fragments of one distributed tensor instead. Runs on the CPU in a
few seconds (JAX shows 8 CPU devices through ``XLA_FLAGS``)::

    python examples/jax_to_torch.py
"""

from __future__ import annotations

import os

# JAX shows 8 CPU devices only when this is set before it starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import dlmg


def shard_pointers(x: jax.Array) -> dict[str, int]:
    """Buffer address of each shard of ``x``, by device."""
    return {f"cpu:{s.device.id}": s.data.unsafe_buffer_pointer() for s in x.addressable_shards}


def main() -> None:
    # 1. A 16 x 8 array on a 2 x 4 mesh: rows over 'x', columns over 'y'.
    mesh = jax.make_mesh((2, 4), ("x", "y"))
    x = jax.device_put(
        np.arange(128, dtype=np.float32).reshape(16, 8), NamedSharding(mesh, P("x", "y"))
    )
    try:
        x.__dlpack__()
    except BufferError as exc:
        print("JAX alone:", exc)

    # 2. Its layout: blocks of 8 x 2, a 2 x 4 grid, devices column-major over the grid.
    dt = dlmg.from_jax(x)
    print(dt.layout)

    # 3. To PyTorch: one tensor per device, each the very buffer of a JAX shard.
    tt = dt.to("torch")
    got = {str(tt.layout.devices[f.index]): f.array.data_ptr() for f in tt.fragments}
    assert got == shard_pointers(x), "a fragment was copied"
    print("torch fragments share the JAX shards' memory:", len(got), "buffers")

    # JAX buffers are immutable by contract: read them in torch, never write them.
    # A torch computation makes new tensors; here, the sum of squares per fragment.
    partial = [float((f.array.double() ** 2).sum()) for f in tt.fragments]
    assert np.isclose(sum(partial), float((np.asarray(x, dtype=np.float64) ** 2).sum()))
    print("sum of squares over the torch fragments:", sum(partial))

    # 4. Back to a sharded jax.Array on the same mesh, again without a copy.
    y = tt.to_jax(mesh=mesh)
    assert shard_pointers(y) == shard_pointers(x), "a shard was copied"
    assert y.sharding.is_equivalent_to(x.sharding, x.ndim)
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))
    print("back in JAX:", y.sharding, "- same buffers")

    # 5. The same conversions for the sharding alone.
    layout = dlmg.layout_from_sharding(x.sharding, x.shape)
    print("sharding on a mesh of its own:", dlmg.sharding_from_layout(layout))


if __name__ == "__main__":
    main()
