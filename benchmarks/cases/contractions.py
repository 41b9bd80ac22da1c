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

* on a GPU (a part of case 6, :func:`run_contractions_gpu`): ``A @ B`` of
  8192 x 8192 and 16384 x 16384 in float32 with TF32 off and in bfloat16,
  both operands 8 torch fragments on the one GPU, for row slabs @ replicated,
  k split in both resolved to row slabs, and row slabs @ column slabs, against
  one ``torch.matmul`` of the whole operands on the same GPU, with TFLOP/s
  (``2 n^3`` over the time) for both (target: ratio <= 1.1).

The sizes: n = 256 (smoke), 1024 (quick), 4096 (full) in one process;
across processes 256 (smoke, 2 processes only), 2048 (quick: 4096 takes
minutes per row on a 2-core machine) and 4096 (full). Results are compared
with NumPy's product (across processes, in every process).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from ..config import Context
from ..frameworks import block
from ..harness import describe_error
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, guarded, ok, run_checked, run_row, torch_slabs
from .multiprocess import launch, timing

WORKER = Path(__file__).resolve().parent / "_mp_contractions.py"

__all__ = ["run_contractions", "run_contractions_gpu", "tf32_off"]

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


# --- on a GPU (a part of case 6) ---------------------------------------------------------

#: Largest difference from the native product, relative to its largest element, by data type:
#: the same products summed in another order, and in bfloat16 each of the 8 k-split addends and
#: each sum of them rounded to 8 bits (a lost addend would be off by an eighth).
_GPU_TOLERANCE = {"float32": 1e-4, "bfloat16": 5e-2}
_TF32_NOTE = ("TF32 off: torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32 "
              "set to False for the part, restored after")


@contextmanager
def tf32_off() -> Iterator[None]:
    """float32 products in full float32 (no TF32 tensor cores) within the block, for dlmg's
    fragments and the native call alike; torch's two switches are restored after."""
    import torch

    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _gpu_operands(n: int, dtype: str, device: str) -> tuple[Any, Any]:
    import torch

    gen = torch.Generator(device=device).manual_seed(9)
    a = torch.rand((n, n), generator=gen, device=device, dtype=torch.float32)
    b = torch.rand((n, n), generator=gen, device=device, dtype=torch.float32)
    return a.to(getattr(torch, dtype)), b.to(getattr(torch, dtype))


_Operands = Callable[[Any, Any], tuple[Any, Any, Callable[[], Any]]]


def _gpu_operand_builders(n: int, device: str) -> dict[str, tuple[str, _Operands]]:
    """Each layout pair: its title, and a builder of the two distributed operands and dlmg's
    call from the whole operands."""
    import dlmg

    devices = [device] * FRAGMENTS
    rows = dlmg.Layout.slab((n, n), 0, devices)

    def local(a_whole: Any, b_whole: Any) -> tuple[Any, Any, Callable[[], Any]]:
        a = torch_slabs(a_whole, 0)
        b = dlmg.from_fragments([b_whole.clone() for _ in devices], dlmg.Layout.replicated((n, n), devices))
        return a, b, lambda: a @ b

    def pending(a_whole: Any, b_whole: Any) -> tuple[Any, Any, Callable[[], Any]]:
        a, b = torch_slabs(a_whole, 1), torch_slabs(b_whole, 0)
        return a, b, lambda: dlmg.einsum("ik,kj->ij", a, b, layout=rows)

    def columns(a_whole: Any, b_whole: Any) -> tuple[Any, Any, Callable[[], Any]]:
        a, b = torch_slabs(a_whole, 0), torch_slabs(b_whole, 1)
        return a, b, lambda: a @ b

    return {"local": ("row slabs @ replicated", local),
            "pending": ("k split in both, resolved to row slabs", pending),
            "columns": ("row slabs @ column slabs", columns)}


def _gpu_row(ctx: Context, n: int, dtype: str, key: str, a_whole: Any, b_whole: Any, want: Any) -> Row:
    import dlmg
    import torch

    title, operands = _gpu_operand_builders(n, ctx.device)[key]
    strategy = ["-"]

    def build() -> Callable[[], Any]:
        a, b, call = operands(a_whole, b_whole)
        strategy[0] = dlmg.einsum_plan("ik,kj->ij", a, b, pending=True).strategy
        return call

    fn = prepared(build)
    params = {"framework": "torch", "fragments": FRAGMENTS, "size": f"{n}x{n} {dtype}", "device": ctx.device,
              "layouts": title, "strategy": strategy[0]}
    if dtype == "float32":
        params["TF32"] = "off (allow_tf32 = False for matmul and cuDNN, restored after)"
    row = Row(10, f"A @ B, {title}, torch {dtype}", params,
              "one torch.matmul of the whole operands on the same device", targets=[Target("ratio", "<=", 1.1)])

    def check() -> str:
        got = fn().gather()
        err = float((got.float() - want.float()).abs().max() / want.float().abs().max())
        tol = _GPU_TOLERANCE[dtype]
        return f"ok (max relative difference {err:.1e})" if err <= tol else \
            f"mismatch: max relative difference from torch.matmul {err:.1e} > {tol:g}"

    run_checked(row, ctx, {"dlmg": fn, "native": lambda: torch.matmul(a_whole, b_whole)}, check)
    flops = 2.0 * n ** 3
    for who, metric in (("dlmg", "dlmg TFLOP/s"), ("native", "native TFLOP/s")):
        t = row.time(who)
        row.metrics[metric] = flops / t / 1e12 if t else None
    return row


def _gpu_size(ctx: Context, n: int, dtype: str) -> list[Row]:
    import torch

    a_whole, b_whole = _gpu_operands(n, dtype, ctx.device)
    want = torch.matmul(a_whole, b_whole)
    rows = []
    for key in ("local", "pending", "columns"):
        rows += guarded(10, f"A @ B, {key}, torch {dtype}", "torch.matmul",
                        lambda key=key: [_gpu_row(ctx, n, dtype, key, a_whole, b_whole, want)])
    return rows


def run_contractions_gpu(ctx: Context) -> list[Row]:
    """Case 6's contractions: ``A @ B`` in 8 torch fragments on ``ctx.device`` against one
    ``torch.matmul`` (float32 with TF32 off, and bfloat16), for three layout pairs."""
    import torch

    rows: list[Row] = []
    with tf32_off():
        for n in ctx.mode.gpu_matmul_n:
            for dtype in ("float32", "bfloat16"):
                rows += _gpu_size(ctx, n, dtype)  # its operands are freed on return
                if ctx.gpu:
                    torch.cuda.empty_cache()  # the next size starts from free memory
    if rows:
        ctx.notes.append("contractions: " + _TF32_NOTE)
    return rows
