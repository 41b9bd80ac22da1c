"""dlmg quickstart: one distributed tensor, fragments from three frameworks.

Runs on the CPU in a few seconds with NumPy, PyTorch and JAX installed::

    python examples/quickstart.py
"""

from __future__ import annotations

import os

# JAX shows 8 CPU devices only when this is set before it starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax
import jax.numpy as jnp
import numpy as np
import torch

import dlmg


def main() -> None:
    # 1. A layout: a 6 x 4 matrix cut into slabs of two rows over three host slots.
    layout = dlmg.Layout.slab((6, 4), axis=0, devices=["cpu"] * 3)
    print(layout)

    # 2. Wrap existing arrays of different frameworks as one tensor, without a copy.
    full = np.arange(24, dtype=np.float32).reshape(6, 4)
    pieces = [torch.from_numpy(full[0:2].copy()), full[2:4].copy(), jnp.asarray(full[4:6])]
    dt = dlmg.from_fragments(pieces, layout)
    print(dt)
    assert dt.fragments[0].array is pieces[0]

    # 3. Hand one fragment to another framework through DLPack: same memory.
    as_numpy = np.from_dlpack(dt.fragments[0])
    assert as_numpy.ctypes.data == pieces[0].data_ptr()

    # 4. Gather the whole tensor in row-major order, into any framework.
    assert np.array_equal(dt.gather(framework="numpy"), full)
    assert torch.equal(dt.gather(framework="torch"), torch.from_numpy(full))

    # 5. Scatter a regular array into a block-cyclic layout over JAX's CPU devices,
    #    compute fragment by fragment, and reduce.
    devices = [f"cpu:{d.id}" for d in jax.devices("cpu")[:4]]
    cyclic = dlmg.Layout.block_cyclic((8, 8), block=(2, 2), grid=(2, 2), devices=devices)
    x = dlmg.scatter(np.arange(64, dtype=np.float32).reshape(8, 8), cyclic, framework="jax")
    y = x * 2.0 + 1.0
    expected = np.arange(64, dtype=np.float32).reshape(8, 8) * 2.0 + 1.0
    assert np.array_equal(y.gather(framework="numpy"), expected)
    print("sum over the block-cyclic tensor:", float(dlmg.sum(y)), "expected", float(expected.sum()))

    # 6. Change the distribution explicitly: block-cyclic -> slab over the same devices.
    slab = dlmg.Layout.slab((8, 8), axis=1, devices=devices)
    print(dlmg.plan_redistribution(cyclic, slab, dtype="float32"))
    z = y.redistribute(slab, framework="torch")
    assert np.array_equal(z.gather(framework="numpy"), expected)
    print("quickstart: all checks passed")


if __name__ == "__main__":
    main()
