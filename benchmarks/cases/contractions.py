"""Case 10: contractions, ``A @ B`` of n x n float32 matrices, against one native product.

* the *local* strategy: ``A`` in 8 row slabs (NumPy fragments in host memory)
  times a replicated ``B``, against one ``numpy.matmul`` of the whole arrays:
  each fragment multiplies its rows, and dlmg's planning and dispatch should
  vanish next to the GEMM (target: ratio <= 1.1);
* the *pending-sum* strategy: ``A`` split along k in 8 column slabs, ``B``
  along k in 8 row slabs: 8 panel products give 8 addends, resolved into row
  slabs (a reduce-scatter in one process: copies and adds); against one
  ``numpy.matmul`` (no target: it does the extra additions);
* 8 JAX CPU devices: ``dlmg.einsum("ik,kj->ij")`` on row slabs @ replicated
  ``B`` held as ``jax.Array`` shards, against ``jax.jit(jnp.einsum)`` on
  the same data with the equivalent ``NamedSharding`` s (target: ratio <= 1.0).

* 2 and 4 processes (torch.distributed on gloo, one CPU mesh of every
  process): ``A @ B`` on DTensor-expressible placements (``Shard(0) @
  Replicate``: local; ``Shard(1) @ Shard(0)``: a pending sum, ``Partial`` for
  DTensor, left unreduced by both; ``Shard(0) @ Shard(1)``: one operand
  moves), dlmg on :func:`dlmg.from_dtensor` of the very DTensors against
  DTensor's ``torch.matmul`` (target: ratio <= 1.0). The work runs in
  :mod:`benchmarks.cases._mp_contractions`, launched by case 8's launcher;
  each figure is the median over repeats of the slowest process's time.

The sizes: n = 256 (smoke), 1024 (quick), 4096 (full) in one process;
across processes 256 (smoke, 2 processes only), 2048 (quick: 4096 takes
minutes per row on a 2-core machine) and 4096 (full). Results are compared
with NumPy's product (across processes, in every process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import Context
from ..frameworks import block
from ..harness import describe_error
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, guarded, ok, run_row
from .multiprocess import launch, timing

WORKER = Path(__file__).resolve().parent / "_mp_contractions.py"

__all__ = ["run_contractions"]

_SIZES = {"smoke": 256, "quick": 1024, "full": 4096}
_MP_SIZES = {"smoke": 256, "quick": 2048, "full": 4096}


def _n(ctx: Context) -> int:
    return _SIZES.get(ctx.mode.name, 1024)


def _matrices(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(9)
    return rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)


def _close(got: Any, want: np.ndarray) -> str:
    got = np.asarray(got, dtype=np.float64)
    return "ok" if np.allclose(got, want, rtol=1e-3, atol=1e-2 * np.sqrt(want.shape[0])) else "mismatch: A @ B differs"


def _local(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    n = _n(ctx)
    A, B = _matrices(n)
    devices = ["cpu"] * FRAGMENTS

    def build() -> Callable[[], Any]:
        a = dlmg.scatter(A, Layout.slab((n, n), 0, devices), framework="numpy")
        b = dlmg.scatter(B, Layout.replicated((n, n), devices), framework="numpy")
        assert dlmg.einsum_plan("ik,kj->ij", a, b).strategy == "local"
        return lambda: a @ b

    fn = prepared(build)
    row = Row(10, "A @ B, row slabs @ replicated (local), numpy",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n}x{n} float32", "device": "cpu"},
              "numpy.matmul of the whole arrays", targets=[Target("ratio", "<=", 1.1)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: A @ B})
    if ok(row, "dlmg"):
        want = A.astype(np.float64) @ B.astype(np.float64)
        row.check = check_result(lambda: _close(fn().gather(framework="numpy"), want))
    return [row]


def _pending(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    n = _n(ctx)
    A, B = _matrices(n)
    devices = ["cpu"] * FRAGMENTS
    rows = Layout.slab((n, n), 0, devices)

    def build() -> Callable[[], Any]:
        a = dlmg.scatter(A, Layout.slab((n, n), 1, devices), framework="numpy")
        b = dlmg.scatter(B, Layout.slab((n, n), 0, devices), framework="numpy")
        assert dlmg.einsum_plan("ik,kj->ij", a, b, pending=True).strategy == "pending sum"
        return lambda: dlmg.einsum("ik,kj->ij", a, b, layout=rows)

    fn = prepared(build)
    row = Row(10, "A @ B, k split in both (pending sum, resolved to row slabs), numpy",
              {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{n}x{n} float32", "device": "cpu"},
              "numpy.matmul of the whole arrays")
    run_row(row, ctx, {"dlmg": fn, "native": lambda: A @ B})
    if ok(row, "dlmg"):
        want = A.astype(np.float64) @ B.astype(np.float64)
        row.check = check_result(lambda: _close(fn().gather(framework="numpy"), want))
    return [row]


def _jax(ctx: Context) -> list[Row]:
    import dlmg
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n = _n(ctx)
    A, B = _matrices(n)
    cpus = jax.devices("cpu")[:FRAGMENTS]
    mesh = Mesh(np.array(cpus), ("x",))
    rows_s, repl_s = NamedSharding(mesh, PartitionSpec("x", None)), NamedSharding(mesh, PartitionSpec())
    a_j, b_j = jax.device_put(A, rows_s), jax.device_put(B, repl_s)
    product = jax.jit(lambda x, y: jnp.einsum("ik,kj->ij", x, y), out_shardings=rows_s)
    block(product(a_j, b_j))

    def build() -> Callable[[], Any]:
        a, b = dlmg.from_jax(a_j), dlmg.from_jax(b_j)
        dlmg.einsum("ik,kj->ij", a, b).synchronize()
        return lambda: dlmg.einsum("ik,kj->ij", a, b)

    fn = prepared(build)
    row = Row(10, "einsum ik,kj->ij, row slabs @ replicated, 8 JAX CPU devices",
              {"framework": "jax", "fragments": FRAGMENTS, "size": f"{n}x{n} float32", "device": "cpu:0-7"},
              "jax.jit(jnp.einsum) with the same NamedShardings", targets=[Target("ratio", "<=", 1.0)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: product(a_j, b_j)})
    if ok(row, "dlmg"):
        want = A.astype(np.float64) @ B.astype(np.float64)
        row.check = check_result(lambda: _close(fn().gather(framework="numpy"), want))
    return [row]


_PAIRS = {"local": "A Shard(0) @ B Replicate (local)",
          "pending": "A Shard(1) @ B Shard(0) (pending sum, left unreduced)",
          "move": "A Shard(0) @ B Shard(1) (one operand moves)"}


def _processes(ctx: Context) -> list[Row]:
    name = ctx.mode.name
    n = _MP_SIZES.get(name, 2048)
    settings = ctx.settings
    repeats = 1 if name == "smoke" else min(settings.repeats, 5)
    rows: list[Row] = []
    for nprocs in (2,) if name == "smoke" else (2, 4):
        params = {"engine": "torch", "processes": nprocs, "size": f"{n}x{n} float32", "device": "cpu"}
        try:
            result = launch("torch", nprocs, n, repeats, settings.warmup, worker=WORKER)
        except Exception as exc:  # noqa: BLE001 - recorded in the rows
            error = describe_error(exc)
            rows += [Row(10, f"{title}, {nprocs} processes", params, "DTensor torch.matmul",
                         timings={"dlmg": error, "native": error}) for title in _PAIRS.values()]
            continue
        for key, title in _PAIRS.items():
            times = result["times"][key]
            rows.append(Row(
                10, f"{title}, torch ({result['transport']}), {nprocs} processes",
                {**params, "strategy": result["strategies"][key]},
                "DTensor torch.matmul on the same placements",
                timings={"dlmg": timing(times["dlmg"]), "native": timing(times["native"])},
                targets=[Target("ratio", "<=", 1.0)], check="ok (checked in every process)",
            ))
    return rows


def run_contractions(ctx: Context) -> list[Row]:
    """Case 10: contractions against one native product."""
    out: list[Row] = []
    out += guarded(10, "A @ B, row slabs @ replicated (local), numpy", "numpy", lambda: _local(ctx))
    out += guarded(10, "A @ B, k split in both (pending sum), numpy", "numpy", lambda: _pending(ctx))
    out += guarded(10, "einsum, 8 JAX CPU devices", "jax", lambda: _jax(ctx))
    out += _processes(ctx)
    return out
