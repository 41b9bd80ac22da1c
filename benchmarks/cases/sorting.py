"""Case 13: sorting and scanning a distributed array without collecting it.

``xp.sort`` (parallel sample sort) and ``xp.cumulative_sum`` (local scans, an
exclusive scan of the fragments' totals, a local add) of ``2^24`` float64 in
slabs over 8 host fragments (NumPy), against NumPy's function on one array of
all the elements and, for the sort, ``jax.jit(jnp.sort)`` of the same data on
a ``NamedSharding`` over JAX's 8 CPU devices (64-bit types on for the call).
Targets: sort <= 1.5x ``numpy.sort`` and <= 1.0x JAX's; cumulative sum <= 1.2x
``numpy.cumsum``.

On a GPU (a part of case 6, :func:`run_sorting_gpu`): the same two functions
on ``2^25`` float64 (quick run) in 8 slabs of torch fragments on the one GPU,
against ``torch.sort`` and ``torch.cumsum`` of the whole vector on the same GPU
(the same targets), each result compared once with torch's before the timing.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_checked, run_row, torch_slabs

__all__ = ["run_sorting", "run_sorting_gpu"]


def _n(ctx: Context) -> int:
    """``2^24`` elements in the full mode, fewer in the smaller ones (a sixteenth of the pointwise bytes)."""
    return min(1 << 24, ctx.mode.pointwise_bytes // 16)


def _tensor(values: np.ndarray) -> Any:
    import dlmg

    layout = dlmg.Layout.slab((values.shape[0],), 0, fragment_devices("numpy", "cpu"))
    return dlmg.scatter(values, layout)


def _jax_sort(values: np.ndarray) -> Callable[[], Any]:
    """``jax.jit(jnp.sort)`` on the values sharded over JAX's CPU devices, in float64."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    with jax.enable_x64(True):
        mesh = Mesh(np.array(jax.devices("cpu")[:FRAGMENTS]), ("x",))
        sharding = NamedSharding(mesh, PartitionSpec("x"))
        x = jax.device_put(values, sharding)
        fn = jax.jit(jnp.sort, out_shardings=sharding)
        fn(x).block_until_ready()

    def call() -> Any:
        with jax.enable_x64(True):
            return fn(x).block_until_ready()

    return call


def _sort(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp

    n = _n(ctx)
    values = np.random.default_rng(11).standard_normal(n)

    def build() -> Callable[[], Any]:
        x = _tensor(values)
        return lambda: xp.sort(x)

    fn = prepared(build)
    row = Row(13, "sort, 8 host fragments (sample sort)",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n} float64", "device": "cpu"},
              "numpy.sort of one array", targets=[Target("ratio", "<=", 1.5)])
    callables: dict[str, Callable[[], Any]] = {"dlmg": fn, "native": lambda: np.sort(values)}
    try:
        callables["jax"] = _jax_sort(values)
    except Exception as exc:  # noqa: BLE001 - JAX missing or without 8 CPU devices: the row keeps its others
        ctx.notes.append(f"case 13: jax.jit(jnp.sort) not run ({type(exc).__name__}: {exc})")
    run_row(row, ctx, callables)
    t, t_jax = row.time("dlmg"), row.time("jax") if "jax" in callables else None
    row.metrics["ratio to jax.jit(jnp.sort)"] = t / t_jax if t and t_jax else None
    row.targets.append(Target("ratio to jax.jit(jnp.sort)", "<=", 1.0))
    if ok(row, "dlmg"):
        row.check = check_result(
            lambda: "ok" if np.array_equal(fn().gather(), np.sort(values)) else "mismatch: sort differs")
    return [row]


def _cumsum(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp

    n = _n(ctx)
    values = np.random.default_rng(12).standard_normal(n)

    def build() -> Callable[[], Any]:
        x = _tensor(values)
        return lambda: xp.cumulative_sum(x)

    fn = prepared(build)
    row = Row(13, "cumulative_sum, 8 host fragments (blocked scan)",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n} float64", "device": "cpu"},
              "numpy.cumsum of one array", targets=[Target("ratio", "<=", 1.2)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: np.cumsum(values)})
    if ok(row, "dlmg"):
        row.check = check_result(
            lambda: "ok" if np.allclose(fn().gather(), np.cumsum(values), rtol=1e-9, atol=1e-6)
            else "mismatch: cumulative sum differs")
    return [row]


def run_sorting(ctx: Context) -> list[Row]:
    """Case 13: distributed sort and cumulative sum against NumPy (and JAX for the sort)."""
    rows: list[Row] = []
    rows.extend(guarded(13, "sort, 8 host fragments (sample sort)", "numpy", lambda: _sort(ctx)))
    rows.extend(guarded(13, "cumulative_sum, 8 host fragments (blocked scan)", "numpy", lambda: _cumsum(ctx)))
    return rows


# --- on a GPU (a part of case 6) ---------------------------------------------------------


def _gpu_vector(ctx: Context, seed: int) -> Any:
    import torch

    gen = torch.Generator(device=ctx.device).manual_seed(seed)
    return torch.randn(ctx.mode.gpu_sort_n, generator=gen, device=ctx.device, dtype=torch.float64)


def _gpu_params(ctx: Context) -> dict[str, Any]:
    return {"framework": "torch", "fragments": FRAGMENTS, "size": f"{ctx.mode.gpu_sort_n} float64",
            "device": ctx.device}


def _gpu_sort(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp
    import torch

    whole = _gpu_vector(ctx, 11)
    x = torch_slabs(whole, 0)
    row = Row(13, "sort, 8 torch fragments (sample sort)", _gpu_params(ctx),
              "one torch.sort of the whole vector on the same device", targets=[Target("ratio", "<=", 1.5)])

    def check() -> str:
        return "ok" if torch.equal(xp.sort(x).gather(), torch.sort(whole).values) else "mismatch: sort differs"

    run_checked(row, ctx, {"dlmg": lambda: xp.sort(x), "native": lambda: torch.sort(whole)}, check)
    return [row]


def _gpu_cumsum(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp
    import torch

    whole = _gpu_vector(ctx, 12)
    x = torch_slabs(whole, 0)
    row = Row(13, "cumulative_sum, 8 torch fragments (blocked scan)", _gpu_params(ctx),
              "one torch.cumsum of the whole vector on the same device", targets=[Target("ratio", "<=", 1.2)])

    def check() -> str:
        same = torch.allclose(xp.cumulative_sum(x).gather(), torch.cumsum(whole, 0), rtol=1e-9, atol=1e-6)
        return "ok" if same else "mismatch: cumulative sum differs"

    run_checked(row, ctx, {"dlmg": lambda: xp.cumulative_sum(x), "native": lambda: torch.cumsum(whole, 0)}, check)
    return [row]


def run_sorting_gpu(ctx: Context) -> list[Row]:
    """Case 6's sorting and scans: sample sort and blocked cumulative sum of 8 torch fragments
    against ``torch.sort`` and ``torch.cumsum`` of the whole vector."""
    return (guarded(13, "sort, 8 torch fragments (sample sort)", "torch.sort", lambda: _gpu_sort(ctx))
            + guarded(13, "cumulative_sum, 8 torch fragments (blocked scan)", "torch.cumsum",
                      lambda: _gpu_cumsum(ctx)))
