"""Case 13: sorting, scanning and rearranging a distributed array without collecting it.

One process, ``2^24`` float64 in the full mode (``2^22`` quick, ``2^14``
smoke) in slabs over 8 host fragments (NumPy), each row against NumPy's
function on one array of all the elements:

* ``xp.sort(x, stable=False)`` (parallel sample sort; unstable as
  ``numpy.sort``'s default introsort) against ``numpy.sort`` (target <= 1.5x)
  and ``jax.jit(jnp.sort)`` of the same data on a ``NamedSharding`` over JAX's
  8 CPU devices (64-bit types on for the call; target <= 1.0x); the array
  API's default ``xp.sort(x)`` (stable) is timed beside it;
* ``xp.cumulative_sum`` (local scans, an exclusive scan of the fragments'
  totals, a local add) against ``numpy.cumsum`` (target <= 1.2x);
* ``xp.concat`` of two such tensors along the split mode against
  ``numpy.concatenate`` of the two arrays (target <= 1.2x);
* ``xp.flip`` (block renumbering, each fragment flipped locally) against
  ``numpy.flip`` copied into a new array, as dlmg's result is (target <=
  1.2x); ``numpy.flip`` itself, a view, is timed beside it;
* ``xp.take`` of as many random indices as elements (owner-routed reads),
  the indices a host NumPy array and, in a second row, a tensor in 8 host
  slabs, against ``numpy.take`` (target <= 1.2x).

Across processes: ``xp.sort(x, stable=False)`` (the stable one timed beside it) of the same number of float64 in one NumPy slab
per process, 4 processes (2 in the smoke run), torch.distributed on gloo and
MPI, against the floor of any exchange sort: ``numpy.sort`` of one share plus
one all-to-all of the same bytes with the engine's own collective
(``dist.all_to_all_single``; MPI ``Alltoall``; target <= 1.5x). The work runs
in :mod:`benchmarks.cases._mp_sorting`, launched by case 8's launcher; each
figure is the median over repeats of the slowest process's time.

Every dlmg result is compared once with NumPy's before the timing.

On a GPU (a part of case 6, :func:`run_sorting_gpu`): the same two functions
on ``2^25`` float64 (quick run) in 8 slabs of torch fragments on the one GPU,
against ``torch.sort`` and ``torch.cumsum`` of the whole vector on the same GPU
(the same targets), each result compared once with torch's before the timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import Context
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_checked, run_row, torch_slabs
from .multiprocess import launch_for, timing

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

    def build(stable: bool) -> Callable[[], Any]:
        x = _tensor(values)
        return lambda: xp.sort(x, stable=stable)

    fn, fn_stable = prepared(lambda: build(False)), prepared(lambda: build(True))
    row = Row(13, "sort, 8 host fragments (sample sort, stable=False as numpy.sort's default)",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n} float64", "device": "cpu"},
              "numpy.sort of one array", targets=[Target("ratio", "<=", 1.5)])
    callables: dict[str, Callable[[], Any]] = {"dlmg": fn, "native": lambda: np.sort(values),
                                               "dlmg stable=True": fn_stable}
    try:
        callables["jax"] = _jax_sort(values)
    except Exception as exc:  # noqa: BLE001 - JAX missing or without 8 CPU devices: the row keeps its others
        ctx.notes.append(f"case 13: jax.jit(jnp.sort) not run ({type(exc).__name__}: {exc})")
    run_row(row, ctx, callables)
    t, t_jax = row.time("dlmg"), row.time("jax") if "jax" in callables else None
    row.metrics["ratio to jax.jit(jnp.sort)"] = t / t_jax if t and t_jax else None
    row.targets.append(Target("ratio to jax.jit(jnp.sort)", "<=", 1.0))
    t_stable = row.time("dlmg stable=True")
    row.metrics["ratio stable=True"] = t_stable / row.time("native") if t_stable and row.time("native") else None
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


def _params(n: int, what: str = "float64") -> dict[str, Any]:
    return {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n} {what}", "device": "cpu"}


def _same(got: Any, want: np.ndarray, what: str) -> str:
    return "ok" if np.array_equal(got.gather(), want) else f"mismatch: {what} differs"


def _concat(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp

    n = _n(ctx)
    rng = np.random.default_rng(13)
    v, w = rng.standard_normal(n), rng.standard_normal(n)
    a, b = _tensor(v), _tensor(w)
    row = Row(13, "concat of two tensors along the split mode, 8 host fragments each", _params(n, "float64 each"),
              "numpy.concatenate of the two arrays", targets=[Target("ratio", "<=", 1.2)])
    run_checked(row, ctx, {"dlmg": lambda: xp.concat([a, b]), "native": lambda: np.concatenate([v, w])},
                lambda: _same(xp.concat([a, b]), np.concatenate([v, w]), "concat"))
    return [row]


def _flip(ctx: Context) -> list[Row]:
    import dlmg.array_api as xp

    n = _n(ctx)
    v = np.random.default_rng(14).standard_normal(n)
    a = _tensor(v)
    row = Row(13, "flip, 8 host fragments (block renumbering)", _params(n),
              "numpy.flip of one array, copied (a new array, as dlmg's result is)",
              targets=[Target("ratio", "<=", 1.2)])
    run_checked(row, ctx, {"dlmg": lambda: xp.flip(a), "native": lambda: np.flip(v).copy(),
                           "numpy.flip (a view)": lambda: np.flip(v)},
                lambda: _same(xp.flip(a), np.flip(v), "flip"))
    return [row]


def _take(ctx: Context, distributed: bool) -> list[Row]:
    import dlmg.array_api as xp

    n = _n(ctx)
    v = np.random.default_rng(15).standard_normal(n)
    idx = np.random.default_rng(16).integers(0, n, n)
    a = _tensor(v)
    indices = _tensor(idx) if distributed else idx
    what = "indices in 8 host fragments" if distributed else "random host indices"
    row = Row(13, f"take, {n} {what}, 8 host fragments (owner-routed reads)", _params(n),
              "numpy.take of one array", targets=[Target("ratio", "<=", 1.2)])
    run_checked(row, ctx, {"dlmg": lambda: xp.take(a, indices), "native": lambda: np.take(v, idx)},
                lambda: _same(xp.take(a, indices), np.take(v, idx), "take"))
    return [row]


def run_sorting(ctx: Context) -> list[Row]:
    """Case 13: distributed sort, cumulative sum, concat, flip and take against NumPy (and JAX
    for the sort), and the sort across 4 processes against a local sort and one all-to-all."""
    rows: list[Row] = []
    rows.extend(guarded(13, "sort, 8 host fragments (sample sort, stable=False as numpy.sort's default)", "numpy",
                        lambda: _sort(ctx)))
    rows.extend(guarded(13, "cumulative_sum, 8 host fragments (blocked scan)", "numpy", lambda: _cumsum(ctx)))
    rows.extend(guarded(13, "concat, 8 host fragments", "numpy.concatenate", lambda: _concat(ctx)))
    rows.extend(guarded(13, "flip, 8 host fragments", "numpy.flip", lambda: _flip(ctx)))
    rows.extend(guarded(13, "take, random host indices", "numpy.take", lambda: _take(ctx, False)))
    rows.extend(guarded(13, "take, distributed indices", "numpy.take", lambda: _take(ctx, True)))
    rows.extend(_processes(ctx))
    return rows


WORKER = Path(__file__).resolve().parent / "_mp_sorting.py"


def _processes(ctx: Context) -> list[Row]:
    """``sort`` over 4 processes (2 in the smoke run) on both engines against the local sort of
    one share and one all-to-all of the same bytes with the engine's own collective."""
    n = _n(ctx)
    nprocs = 2 if ctx.mode.name == "smoke" else 4
    rows: list[Row] = []
    for engine in ("torch", "mpi"):
        params = {"engine": engine, "processes": nprocs, "size": f"{n} float64", "framework": "numpy"}
        row = Row(13, f"sort, {nprocs} processes ({engine}), one slab each (sample sort, stable=False)", params,
                  "numpy.sort of one share + one all-to-all of the same bytes", targets=[Target("ratio", "<=", 1.5)])
        rows.append(row)
        result = launch_for([row], engine, nprocs, n, ctx.settings.repeats, ctx.settings.warmup, worker=WORKER)
        if result is None:
            continue
        times = result["times"]["sort"]
        row.native = f"numpy.sort of one share + one {result['native']} of the same bytes"
        row.timings = {who: timing(seconds) for who, seconds in times.items()}
        row.check = "ok (checked against numpy.sort in every process)"
        t_stable, t_native = row.time("dlmg stable=True"), row.time("native")
        row.metrics["ratio stable=True"] = t_stable / t_native if t_stable and t_native else None
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
