"""Wrap torch tensors as one distributed tensor, hand its fragments to JAX
(and CuPy on a GPU) without copies, redistribute and gather.

Runs on the CPU in a few seconds with NumPy, PyTorch and JAX installed::

    python examples/wrap_torch_export_jax.py

Every hand-over is checked to be zero-copy by comparing data pointers.
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


def host_part() -> None:
    # An 8 x 6 matrix as four slabs of two rows on JAX's CPU devices 0..3. torch
    # CPU tensors live in the one host memory, so they fit any cpu slot.
    layout = dlmg.Layout.slab((8, 6), axis=0, devices=[f"cpu:{i}" for i in range(4)])
    whole = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    pieces = [whole[2 * i: 2 * i + 2].clone() for i in range(4)]
    dt = dlmg.from_fragments(pieces, layout)  # zero-copy wrap
    assert all(f.array is p for f, p in zip(dt.fragments, pieces))
    print(dt)

    # Each fragment to JAX through DLPack: same buffer. Host memory is DLPack's CPU device 0,
    # so JAX's from_dlpack puts every fragment on its CPU device 0.
    for frag in dt.fragments:
        j = jnp.from_dlpack(frag)
        assert j.unsafe_buffer_pointer() == frag.array.data_ptr(), "JAX copied the fragment"
        assert j.devices() == {jax.devices("cpu")[0]}
        print(f"fragment {frag.index}: torch {tuple(frag.shape)} -> JAX on {next(iter(j.devices()))}, zero-copy")

    # The whole tensor to JAX fragments at once, refusing any copy: each on its slot's JAX device.
    as_jax = dt.to("jax", copy=False)
    assert all(
        a.array.unsafe_buffer_pointer() == b.array.data_ptr() for a, b in zip(as_jax.fragments, dt.fragments)
    )
    assert [next(iter(f.array.devices())) for f in as_jax.fragments] == jax.devices("cpu")[:4]

    # Explicit redistribution (a plan first), then gather into a transposed torch view.
    cyclic = dlmg.Layout((8, 6), block=(1, 3), grid=(4, 2), devices=[f"cpu:{i}" for i in range(8)])
    print(dlmg.plan_redistribution(layout, cyclic, "float32"))
    moved = as_jax.redistribute(cyclic)
    out = torch.empty(6, 8).T
    moved.gather(out=out)
    assert torch.equal(out, whole)
    assert np.array_equal(np.asarray(dt.gather(framework="jax")), whole.numpy())
    print("gathered:", out.shape, "equal to the original")


def gpu_part() -> None:
    try:
        import cupy
    except ImportError:
        print("CuPy is not installed: skipping the GPU part")
        return
    if not torch.cuda.is_available():
        print("no CUDA GPU: skipping the GPU part")
        return
    layout = dlmg.Layout.slab((8, 6), axis=0, devices=["cuda:0"] * 2)
    pieces = [torch.full((4, 6), float(i), device="cuda:0") for i in range(2)]
    dt = dlmg.from_fragments(pieces, layout)
    for frag in dt.fragments:
        c = cupy.from_dlpack(frag)
        j = jnp.from_dlpack(frag)
        assert c.data.ptr == frag.array.data_ptr() == j.unsafe_buffer_pointer()
    print("GPU fragments handed to CuPy and JAX zero-copy; gathered:", dt.gather(framework="cupy").shape)


if __name__ == "__main__":
    host_part()
    gpu_part()
