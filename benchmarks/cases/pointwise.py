"""Case 3: pointwise ``a * b + c`` over 8 fragments, and dispatch overhead.

The large run evaluates ``a * b + c`` on three distributed tensors of 8
fragments each, against the same expression on one array of the same
framework holding all the elements. A plain copy of the same bytes is timed
alongside (``np.copyto`` on the CPU, torch ``dst.copy_(src)`` on a GPU) to put
both in terms of memory bandwidth: an eager framework evaluates the expression
as two elementwise kernels that move ``6 N`` bytes (read 2, write 1, twice),
a copy moves ``2 N``.

The fused run evaluates the same expression through :func:`dlmg.fuse`: one
kernel per fragment compiled by the fragment's framework (``jax.jit``,
``torch.compile``, ``cupy.fuse``; NumPy has none and runs eagerly), one pass
over memory (``4 N`` bytes), against the eager expression on one array.

The tiny run (8 fragments of 16 elements) measures what dlmg adds per
fragment per operation: ``(dlmg time - native per-fragment loop time) /
(fragments * 2 ops)``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context, MiB
from ..frameworks import fragment_arrays, put, to_numpy
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_row

__all__ = ["copy_contender", "run_pointwise"]

OPS = 2  # a * b, then + c


def copy_contender(device: str, nbytes: int) -> Callable[[], Any]:
    """A plain copy of ``nbytes`` into a preallocated buffer on ``device``.

    ``np.copyto`` on the CPU (the memory-bandwidth limit of one core), torch
    ``dst.copy_(src)`` on a GPU (the device's copy bandwidth).
    """
    n = nbytes // 4
    if device.startswith("cuda"):
        import torch

        src = torch.ones(n, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    src_np = np.ones(n, dtype=np.float32)
    dst_np = np.zeros_like(src_np)
    return lambda: np.copyto(dst_np, src_np)


def _distribute(x: np.ndarray, framework: str, devices: list[str]) -> list[Any]:
    per = x.shape[0] // len(devices)
    return [put(x[i * per:(i + 1) * per], framework, d) for i, d in enumerate(devices)]


def _large(ctx: Context, framework: str) -> list[Row]:
    import dlmg

    nbytes = ctx.mode.gpu_pointwise_bytes if ctx.gpu else ctx.mode.pointwise_bytes
    n = nbytes // 4
    rng = np.random.default_rng(3)
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    devices = fragment_devices(framework, ctx.device)
    one = devices[0]
    A, B, C = (put(x, framework, one) for x in (a, b, c))
    frags = [_distribute(x, framework, devices) for x in (a, b, c)]
    expected = a * b + c
    del a, b, c

    def build() -> Callable[[], Any]:
        layout = dlmg.Layout.slab((n,), axis=0, devices=devices)
        da, db, dc = (dlmg.from_fragments(f, layout) for f in frags)
        return lambda: da * db + dc

    dlmg_fn = prepared(build)
    row = Row(
        3,
        f"a * b + c, {framework}",
        {"framework": framework, "fragments": FRAGMENTS, "bytes_per_operand": nbytes,
         "size": f"3 x {nbytes / MiB:g} MiB float32", "device": ctx.device},
        f"{framework} a * b + c on one array",
        # on a GPU, where each fragment's kernel is the same work: 1.05 (JAX 1.1, whose
        # immutable fragments allocate every result)
        targets=[Target("ratio", "<=", (1.1 if framework == "jax" else 1.05) if ctx.gpu else 1.1)],
    )
    run_row(row, ctx, {"dlmg": dlmg_fn, "native": lambda: A * B + C, "copy": copy_contender(ctx.device, nbytes)})
    traffic = 6 * nbytes
    t_copy = row.time("copy")
    for who in ("dlmg", "native"):
        t = row.time(who)
        row.metrics[f"{who} GB/s"] = traffic / t / 1e9 if t else None
        row.metrics[f"{who} copy fraction"] = (traffic / t) / (2 * nbytes / t_copy) if t and t_copy else None
    row.metrics["copy GB/s"] = 2 * nbytes / t_copy / 1e9 if t_copy else None
    if ctx.gpu:
        row.targets.append(Target("dlmg copy fraction", ">=", 0.8))
    if ok(row, "dlmg"):
        def compare() -> str:
            got = np.concatenate([to_numpy(x) for x in fragment_arrays(dlmg_fn())])
            return "ok" if np.allclose(got, expected, rtol=1e-6) else "mismatch: a * b + c differs"

        row.check = check_result(compare)
    return [row]


def _fused(ctx: Context, framework: str) -> list[Row]:
    """``dlmg.fuse(a * b + c)``: one compiled kernel per fragment (one pass over memory)."""
    import dlmg

    nbytes = ctx.mode.gpu_pointwise_bytes if ctx.gpu else ctx.mode.pointwise_bytes
    n = nbytes // 4
    rng = np.random.default_rng(5)
    a, b, c = (rng.random(n, dtype=np.float32) for _ in range(3))
    devices = fragment_devices(framework, ctx.device)
    A, B, C = (put(x, framework, devices[0]) for x in (a, b, c))
    frags = [_distribute(x, framework, devices) for x in (a, b, c)]
    expected = a * b + c
    del a, b, c
    fused = dlmg.fuse(lambda x, y, z: x * y + z)

    def build() -> Callable[[], Any]:
        layout = dlmg.Layout.slab((n,), axis=0, devices=devices)
        da, db, dc = (dlmg.from_fragments(f, layout) for f in frags)
        fused(da, db, dc).synchronize()  # compile outside the timed calls
        return lambda: fused(da, db, dc)

    dlmg_fn = prepared(build)
    compilers = sorted(set(fused.compilers.values())) or ["-"]
    row = Row(
        3,
        f"fused a * b + c (dlmg.fuse), {framework}",
        {"framework": framework, "fragments": FRAGMENTS, "bytes_per_operand": nbytes,
         "size": f"3 x {nbytes / MiB:g} MiB float32", "device": ctx.device, "compiler": ", ".join(compilers)},
        f"eager {framework} a * b + c on one array",
        # one pass instead of two: 4 N bytes moved instead of 6 N (the eager kernels');
        # NumPy has no compiler, so its fused form is its eager form
        targets=[Target("ratio", "<=", 1.1 if framework == "numpy" else 0.75)],
    )
    run_row(row, ctx, {"dlmg": dlmg_fn, "native": lambda: A * B + C, "copy": copy_contender(ctx.device, nbytes)})
    t_copy = row.time("copy")
    t = row.time("dlmg")
    row.metrics["dlmg GB/s"] = 4 * nbytes / t / 1e9 if t else None
    row.metrics["dlmg copy fraction"] = (4 * nbytes / t) / (2 * nbytes / t_copy) if t and t_copy else None
    if ok(row, "dlmg"):
        def compare() -> str:
            got = np.concatenate([to_numpy(x) for x in fragment_arrays(dlmg_fn())])
            if not np.allclose(got, expected, rtol=1e-6):
                return "mismatch: fused a * b + c differs"
            return f"ok ({', '.join(compilers)})"

        row.check = check_result(compare)
    return [row]


def _dispatch(ctx: Context, framework: str) -> list[Row]:
    import dlmg

    k = ctx.mode.dispatch_elements
    devices = fragment_devices(framework, ctx.device)
    rng = np.random.default_rng(4)
    frags = [_distribute(rng.random(k * FRAGMENTS, dtype=np.float32), framework, devices) for _ in range(3)]
    fa, fb, fc = frags

    def native() -> list[Any]:
        return [x * y + z for x, y, z in zip(fa, fb, fc)]

    def build() -> Callable[[], Any]:
        layout = dlmg.Layout.slab((k * FRAGMENTS,), axis=0, devices=devices)
        da, db, dc = (dlmg.from_fragments(f, layout) for f in frags)
        return lambda: da * db + dc

    row = Row(
        3,
        f"dispatch overhead, {framework}",
        {"framework": framework, "fragments": FRAGMENTS, "elements_per_fragment": k, "ops": OPS,
         "size": f"{FRAGMENTS} x {k} float32", "device": ctx.device},
        f"loop over the {FRAGMENTS} {framework} fragments: x * y + z",
    )
    run_row(row, ctx, {"dlmg": prepared(build), "native": native})
    t_dlmg, t_native = row.time("dlmg"), row.time("native")
    row.metrics["us per fragment per op"] = (
        (t_dlmg - t_native) / (FRAGMENTS * OPS) * 1e6 if t_dlmg is not None and t_native is not None else None
    )
    row.targets.append(Target("us per fragment per op", "<=", 2.0))
    return [row]


def run_pointwise(ctx: Context) -> list[Row]:
    """Case 3 (and its GPU form in case 6): pointwise work and dispatch."""
    frameworks = ("torch", "cupy", "jax") if ctx.gpu else ("numpy", "torch", "jax")
    rows: list[Row] = []
    for fw in frameworks:
        rows.extend(guarded(3, f"a * b + c, {fw}", fw, lambda: _large(ctx, fw)))
    for fw in frameworks:
        rows.extend(guarded(3, f"fused a * b + c (dlmg.fuse), {fw}", fw, lambda: _fused(ctx, fw)))
    for fw in frameworks:
        rows.extend(guarded(3, f"dispatch overhead, {fw}", fw, lambda: _dispatch(ctx, fw)))
    return rows
