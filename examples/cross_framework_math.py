"""Math over one tensor whose fragments belong to torch, NumPy and JAX.

A 12 x 6 matrix is cut into row slabs over three host devices (JAX's CPU
devices 0, 1 and 2); slab 0 is a torch tensor, slab 1 a NumPy array, slab 2 a
JAX array. Every operation below runs fragment by fragment, each in the
framework owning the fragment; results are checked against NumPy on the
gathered data. Runs on a CPU in a few seconds:

    python examples/cross_framework_math.py
"""

from __future__ import annotations

import os

# JAX shows 8 CPU devices only when this is set before it starts.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

import dlmg  # noqa: E402


def main() -> None:
    layout = dlmg.Layout.slab((12, 6), axis=0, devices=["cpu:0", "cpu:1", "cpu:2"])
    x = np.linspace(-1.0, 1.0, 72, dtype=np.float32).reshape(12, 6)
    y = np.cos(x) + 0.5

    # x: fragment 0 torch, fragment 1 NumPy, fragment 2 JAX (on JAX's cpu:2)
    pieces = [x[0:4], x[4:8], x[8:12]]
    xs = dlmg.from_fragments(
        [torch.from_numpy(pieces[0].copy()), pieces[1].copy(), jax.device_put(pieces[2], jax.devices("cpu")[2])],
        layout,
    )
    # y: all NumPy, scattered into the same layout
    ys = dlmg.scatter(y, layout)
    print("x:", xs)
    print("y:", ys)

    # Elementwise: x's fragments lead, so y's NumPy slabs are handed to torch
    # (fragment 0) and JAX (fragment 2) through DLPack before the work.
    z = dlmg.tanh(xs * ys) + 2 * dlmg.abs(xs) - xs**2
    print("z fragments run in:", [f.framework for f in z.fragments])
    want = np.tanh(x * y) + 2 * np.abs(x) - x**2
    np.testing.assert_allclose(z.gather(framework="numpy"), want, rtol=1e-5, atol=1e-6)

    # Reductions: per-fragment partials in each framework, combined where they lie;
    # over every mode the result is a 0-d distributed tensor (the Array API's result).
    total = dlmg.sum(z)
    print("sum(z) =", float(total), "as a 0-d tensor in", total.frameworks)
    np.testing.assert_allclose(float(total), want.sum(), rtol=1e-5)
    col_max = z.max(axis=0)  # a distributed mode removed: lands on fragment 0's device
    print("max over rows:", np.asarray(col_max.gather(framework="numpy")))
    np.testing.assert_array_equal(col_max.gather(framework="numpy"), want.max(axis=0))
    row_mean = z.mean(axis=1)  # a local mode: each fragment reduces its own rows
    np.testing.assert_allclose(row_mean.gather(framework="numpy"), want.mean(axis=1), rtol=1e-5)
    print("argmax (flat, global):", int(dlmg.argmax(z)), "numpy:", int(np.argmax(want)))
    assert int(dlmg.argmax(z)) == int(np.argmax(want))

    # In place: torch and NumPy fragments keep their memory; the JAX one is replaced.
    before = xs.fragments[0].array.data_ptr()
    xs += 1
    assert xs.fragments[0].array.data_ptr() == before
    np.testing.assert_allclose(xs.gather(framework="numpy"), x + 1, rtol=1e-6)

    # Batch-local transforms: rows stay distributed, the transformed mode is whole.
    spectrum = dlmg.fft.rfft(z, axis=1)
    print("rfft:", spectrum.shape, spectrum.dtype, [f.framework for f in spectrum.fragments])
    np.testing.assert_allclose(spectrum.gather(framework="numpy"), np.fft.rfft(want, axis=1), rtol=1e-4, atol=1e-5)

    batch = dlmg.Layout.slab((6, 3, 3), axis=0, devices=["cpu:0", "cpu:1", "cpu:2"])
    m = np.random.default_rng(0).standard_normal((6, 3, 3)).astype(np.float32)
    spd = m @ m.transpose(0, 2, 1) + 3 * np.eye(3, dtype=np.float32)
    a = dlmg.from_fragments(
        [torch.from_numpy(spd[0:2].copy()), spd[2:4].copy(), jax.device_put(spd[4:6], jax.devices("cpu")[2])], batch
    )
    chol = dlmg.linalg.cholesky(a)
    np.testing.assert_allclose((chol @ a).gather(framework="numpy"), np.linalg.cholesky(spd) @ spd, rtol=1e-4, atol=1e-4)
    print("cholesky and matmul over a batch of 6 matrices: ok")

    dlmg.synchronize()  # the completion boundary (a no-op wait on the CPU)
    print("all results match NumPy")


if __name__ == "__main__":
    main()
