"""Case 12: distributed FFTs, ``fftn`` of an n x n x n float64 array in 8 slabs.

* 8 NumPy fragments (row slabs in host memory): ``dlmg.fft.fftn``, which
  transforms modes 1 and 2 where they lie, transposes once (mode 0 whole,
  mode 1 split: one all-to-all of the complex array), transforms mode 0 and
  transposes back, against one ``numpy.fft.fftn`` of the whole array (target:
  ratio <= 1.5); ``transposed_out=True`` (no transpose back) is timed beside it;
* 8 JAX CPU devices: ``dlmg.fft.fftn`` of :func:`dlmg.from_jax` of the sharded
  array (each fragment's transforms by ``jnp.fft``), against
  ``jax.jit(jnp.fft.fftn)`` on the same ``NamedSharding`` (target: ratio <=
  1.0), with one ``numpy.fft.fftn`` beside it. 64-bit types are switched on in
  JAX for this row and switched back after it.

* 2 and 4 processes (2 only in the smoke run), torch.distributed on gloo and
  MPI, one slab of NumPy planes each: ``dlmg.fft.fftn`` against the same slab
  transform written by hand with the engine's own all-to-all (the same local
  FFTs and the same bytes per transpose; target: ratio <= 1.5). The work runs
  in :mod:`benchmarks.cases._mp_fft`, launched by case 8's launcher; each
  figure is the median over repeats of the slowest process's time.

The sizes: n = 32 (smoke), 128 (quick and full). Results are compared with
``numpy.fft.fftn``.

On a GPU (a part of case 6, :func:`run_fft_gpu`): ``dlmg.fft.fft`` along the
split axis of 8 torch fragments on the one GPU, of a 1-D complex128 signal
(``2^26`` elements in the quick run: the four-step decomposition) and of a
square complex128 matrix of as many elements in row slabs, transformed along
the rows' axis (a slab transpose there and back), against one
``torch.fft.fft`` of the whole array on the same GPU (target: ratio <= 1.5),
``transposed_out=True`` timed beside it. Each result is compared once with
torch's before anything is timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import math

import numpy as np

from ..config import Context
from ..frameworks import block
from ..harness import describe_error
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, guarded, ok, run_checked, run_row, torch_slabs
from .multiprocess import launch_for, timing

__all__ = ["run_fft", "run_fft_gpu"]

_SIZES = {"smoke": 32, "quick": 128, "full": 128}


def _n(ctx: Context) -> int:
    return _SIZES.get(ctx.mode.name, 128)


def _signal(n: int) -> np.ndarray:
    return np.random.default_rng(12).standard_normal((n, n, n))


def _close(got: Any, want: np.ndarray) -> str:
    got = np.asarray(got)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    return f"ok (max relative error {err:.1e})" if err < 1e-10 else f"mismatch: max relative error {err:.1e}"


def _numpy(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    n = _n(ctx)
    x = _signal(n)
    slabs = Layout.slab(x.shape, 0, ["cpu"] * FRAGMENTS)
    a = dlmg.scatter(x, slabs, framework="numpy")

    def build() -> Callable[[], Any]:
        dlmg.fft.fftn(a)
        return lambda: dlmg.fft.fftn(a)

    fn = prepared(build)
    row = Row(12, "fftn, 8 row slabs (numpy fragments)",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n}^3 float64", "device": "cpu"},
              "numpy.fft.fftn of the whole array", targets=[Target("ratio", "<=", 1.5)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: np.fft.fftn(x),
                       "dlmg transposed_out": lambda: dlmg.fft.fftn(a, transposed_out=True)})
    if ok(row, "dlmg"):
        want = np.fft.fftn(x)
        row.check = check_result(lambda: _close(fn().gather(framework="numpy"), want))
        kept = row.time("dlmg transposed_out")
        row.metrics["ratio transposed_out"] = kept / row.time("native") if kept else None
    return [row]


def _jax(ctx: Context) -> list[Row]:
    import jax

    before = bool(jax.config.read("jax_enable_x64"))
    jax.config.update("jax_enable_x64", True)
    try:
        return _jax_rows(ctx)
    finally:
        jax.config.update("jax_enable_x64", before)


def _jax_rows(ctx: Context) -> list[Row]:
    import dlmg
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n = _n(ctx)
    x = _signal(n)
    mesh = Mesh(np.array(jax.devices("cpu")[:FRAGMENTS]), ("x",))
    sharding = NamedSharding(mesh, PartitionSpec("x", None, None))
    xj = jax.device_put(x, sharding)
    native = jax.jit(jnp.fft.fftn, out_shardings=sharding)

    def run_native() -> Any:
        return native(xj)

    def build() -> Callable[[], Any]:
        a = dlmg.from_jax(xj)
        dlmg.fft.fftn(a).synchronize()
        return lambda: dlmg.fft.fftn(a)

    fn = prepared(build)
    row = Row(12, "fftn, 8 row slabs on 8 JAX CPU devices",
              {"framework": "jax", "fragments": FRAGMENTS, "size": f"{n}^3 float64", "device": "cpu:0-7"},
              "jax.jit(jnp.fft.fftn) on the same NamedSharding", targets=[Target("ratio", "<=", 1.0)])
    try:
        block(run_native())
    except Exception as exc:  # noqa: BLE001 - JAX's own failure is the native contender's result
        error = describe_error(exc)
        run_row(row, ctx, {"dlmg": fn, "numpy.fft.fftn": lambda: np.fft.fftn(x)})
        row.timings["native"] = error
    else:
        run_row(row, ctx, {"dlmg": fn, "native": run_native, "numpy.fft.fftn": lambda: np.fft.fftn(x)})
    if ok(row, "dlmg"):
        want = np.fft.fftn(x)
        row.check = check_result(lambda: _close(fn().gather(framework="numpy"), want))
        numpy_time = row.time("numpy.fft.fftn")
        row.metrics["ratio vs numpy.fft.fftn"] = row.time("dlmg") / numpy_time if numpy_time else None
    return [row]


def run_fft(ctx: Context) -> list[Row]:
    """The rows of case 12."""
    return (guarded(12, "fftn, numpy fragments", "numpy.fft.fftn", lambda: _numpy(ctx))
            + guarded(12, "fftn, 8 JAX CPU devices", "jax.jit(jnp.fft.fftn)", lambda: _jax(ctx))
            + _processes(ctx))


WORKER = Path(__file__).resolve().parent / "_mp_fft.py"
_MP_SIZES = {"smoke": 32, "quick": 128, "full": 128}


def _processes(ctx: Context) -> list[Row]:
    """``fftn`` over 2 (and 4) processes on both engines against the same transform by hand."""
    smoke = ctx.mode.name == "smoke"
    n = _MP_SIZES.get(ctx.mode.name, 128)
    rows: list[Row] = []
    for engine in ("torch", "mpi"):
        for nprocs in (2,) if smoke else (2, 4):
            params = {"engine": engine, "processes": nprocs, "size": f"{n}^3 float64", "framework": "numpy"}
            row = Row(12, f"fftn, {nprocs} processes ({engine}), one slab each", params,
                      "numpy.fft.fftn of modes 1, 2 + all-to-all + numpy.fft.fft of mode 0 + all-to-all back",
                      targets=[Target("ratio", "<=", 1.5)])
            rows.append(row)
            result = launch_for([row], engine, nprocs, n, ctx.settings.repeats, ctx.settings.warmup, worker=WORKER)
            if result is None:
                continue
            times = result["times"]["fftn"]
            row.native = f"by hand with {result['native']}: " + row.native
            row.timings = {who: timing(seconds) for who, seconds in times.items()}
            row.check = "ok (checked against numpy.fft.fftn in every process)"
            kept = row.time("dlmg transposed_out")
            row.metrics["ratio transposed_out"] = kept / row.time("native") if kept and row.time("native") else None
    return rows


# --- on a GPU (a part of case 6) ---------------------------------------------------------


def _gpu_fft(ctx: Context, shape: tuple[int, ...]) -> list[Row]:
    import dlmg.array_api as xp
    import torch

    gen = torch.Generator(device=ctx.device).manual_seed(12)
    whole = torch.randn(shape, generator=gen, device=ctx.device, dtype=torch.complex128)
    x = torch_slabs(whole, 0)
    size = "x".join(str(e) for e in shape)
    what = "1-D signal (four-step)" if len(shape) == 1 else "matrix in row slabs, along the rows' axis"
    row = Row(12, f"fft along the split axis, {what}, 8 torch fragments",
              {"framework": "torch", "fragments": FRAGMENTS, "size": f"{size} complex128", "device": ctx.device},
              "one torch.fft.fft of the whole array along the same axis", targets=[Target("ratio", "<=", 1.5)])

    def check() -> str:
        want = torch.fft.fft(whole, dim=0)
        err = float((xp.fft.fft(x, axis=0).gather() - want).abs().max() / want.abs().max())
        return f"ok (max relative error {err:.1e})" if err < 1e-10 else f"mismatch: max relative error {err:.1e}"

    run_checked(row, ctx, {"dlmg": lambda: xp.fft.fft(x, axis=0), "native": lambda: torch.fft.fft(whole, dim=0),
                           "dlmg transposed_out": lambda: xp.fft.fft(x, axis=0, transposed_out=True)}, check)
    kept, native = row.time("dlmg transposed_out"), row.time("native")
    row.metrics["ratio transposed_out"] = kept / native if kept and native and row.time("dlmg") else None
    return [row]


def _gpu_fftn(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp
    import torch

    side = ctx.mode.gpu_fftn_side
    gen = torch.Generator(device=ctx.device).manual_seed(13)
    whole = torch.randn((side,) * 3, generator=gen, device=ctx.device, dtype=torch.complex64)
    x = torch_slabs(whole, 0)
    row = Row(12, "fftn, 8 row slabs of torch fragments (slab decomposition)",
              {"framework": "torch", "fragments": FRAGMENTS, "size": f"{side}^3 complex64", "device": ctx.device},
              "one torch.fft.fftn of the whole array", targets=[Target("ratio", "<=", 1.3)])

    def check() -> str:
        want = torch.fft.fftn(whole)
        err = float((xp.fft.fftn(x).gather() - want).abs().max() / want.abs().max())
        return f"ok (max relative error {err:.1e})" if err < 1e-4 else f"mismatch: max relative error {err:.1e}"

    run_checked(row, ctx, {"dlmg": lambda: xp.fft.fftn(x), "native": lambda: torch.fft.fftn(whole),
                           "dlmg transposed_out": lambda: xp.fft.fftn(x, transposed_out=True)}, check)
    kept, native = row.time("dlmg transposed_out"), row.time("native")
    row.metrics["ratio transposed_out"] = kept / native if kept and native and row.time("dlmg") else None
    return [row]


def run_fft_gpu(ctx: Context) -> list[Row]:
    """Case 6's FFTs: ``fft`` along the split axis of 8 torch fragments against one ``torch.fft.fft``,
    and ``fftn`` of a cube in 8 slabs against one ``torch.fft.fftn`` (target 1.3)."""
    n = ctx.mode.gpu_fft_n
    side = math.isqrt(n)
    return (guarded(12, "fft, 1-D signal, torch fragments", "torch.fft.fft", lambda: _gpu_fft(ctx, (n,)))
            + guarded(12, "fft, matrix in row slabs, torch fragments", "torch.fft.fft",
                      lambda: _gpu_fft(ctx, (side, side)))
            + guarded(12, "fftn, row slabs, torch fragments", "torch.fft.fftn", lambda: _gpu_fftn(ctx)))
