"""Case 11: distributed linear algebra: TSQR ``linalg.qr`` of a tall-skinny float64 matrix, blocked Cholesky.

``A`` (2^17 x 64 float64 in the quick run; 2^13 x 16 smoke; 2^19 x 64 full)
in 8 row slabs of NumPy fragments in host memory; ``dlmg.linalg.qr`` runs TSQR
(a local QR per fragment, one QR of the 8 stacked 64 x 64 factors, ``Q``
applied back to each fragment) against one ``numpy.linalg.qr`` of the whole
array (target: ratio <= 1.3), and against ``dask.array.linalg.tsqr`` on the
same 8 blocks with dask's threaded scheduler where dask is installed (target:
ratio <= 1.0). The results are checked as ``Q R == A`` and ``Q^T Q == I``.

Blocked right-looking Cholesky of an SPD float64 matrix (2048 x 2048 quick,
256 smoke, 4096 full) on a 2 x 2 grid of 256 x 256 blocks (NumPy fragments),
against one ``numpy.linalg.cholesky`` of the whole matrix (target: ratio <= 2.0,
the issue's figure for 4 processes, here in one).

``eigh`` of a symmetric float64 matrix (1024 x 1024 quick, 128 smoke, 2048
full) split in rows over 4 NumPy fragments (two blocks each), by one-sided
block Jacobi, against one ``numpy.linalg.eigh`` of the whole matrix (LAPACK's
divide and conquer; no target: the row records the price of not gathering).
Checked through the eigenvalues and the residual ``A V - V diag(w)``.

Across 4 processes, on each engine (torch.distributed on gloo, MPI), run in
:mod:`benchmarks.cases._mp_linalg` through case 8's launcher: blocked Cholesky of
an SPD float64 matrix (2048 x 2048 quick, 256 smoke, 4096 full) on a 2 x 2 grid
of processes, against one ``numpy.linalg.cholesky`` of the whole matrix in one
process (the case's own; target: ratio <= 2.0); and a pending sum of ``n x n``
float32 addends, one per process, resolved to a replicated tensor and to row
slabs, against the engine's own ``all_reduce`` / ``reduce_scatter_tensor`` (MPI
``Allreduce`` / ``Reduce_scatter_block``) of the same bytes in place (target:
ratio <= 1.1; the all-reduce or reduce-scatter that TSQR, the blocked
factorizations and the k-split contraction end with). Each dlmg figure is the
median over repeats of the slowest process's time.

On a GPU (a part of case 6, :func:`run_linalg_gpu`): TSQR ``linalg.qr`` of a
tall-skinny float64 matrix (2^20 x 64 in the quick run) in 8 row slabs of
torch fragments on the one GPU, against one ``torch.linalg.qr`` of the whole
matrix on the same GPU (target: ratio <= 1.3). The factors are checked once,
before the timing: ``Q R == A``, ``Q^T Q == I``, and ``|R|`` equal to the
native ``|R|`` (R is unique up to the signs of its rows).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..config import Context
from ..harness import measure
from ..record import Row, Target, check_result, prepared
from ._mp_linalg import spd
from .common import FRAGMENTS, guarded, ok, run_checked, run_row, torch_slabs
from .multiprocess import launch_for, timing

__all__ = ["run_linalg", "run_linalg_gpu"]

_SIZES = {"smoke": (2 ** 13, 16), "quick": (2 ** 17, 64), "full": (2 ** 19, 64)}
_SQUARE = {"smoke": 256, "quick": 2048, "full": 4096}
_EIGH = {"smoke": 128, "quick": 1024, "full": 2048}


def _matrix(ctx: Context) -> np.ndarray:
    m, n = _SIZES.get(ctx.mode.name, _SIZES["quick"])
    return np.random.default_rng(11).standard_normal((m, n))


def _factors_ok(q: np.ndarray, r: np.ndarray, a: np.ndarray) -> str:
    n = a.shape[1]
    if not np.allclose(q @ r, a, atol=1e-9) or not np.allclose(q.T @ q, np.eye(n), atol=1e-9):
        return "mismatch: Q R != A or Q not orthonormal"
    return "ok"


def _tsqr(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    A = _matrix(ctx)
    m, n = A.shape

    def build() -> Callable[[], Any]:
        a = dlmg.scatter(A, Layout.slab((m, n), 0, ["cpu"] * FRAGMENTS), framework="numpy")
        return lambda: dlmg.linalg.qr(a)

    fn = prepared(build)
    params = {"framework": "numpy", "fragments": FRAGMENTS, "size": f"{m}x{n} float64", "device": "cpu"}
    row = Row(11, "linalg.qr (TSQR), row slabs, numpy", params, "numpy.linalg.qr of the whole array",
              targets=[Target("ratio", "<=", 1.3)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: np.linalg.qr(A)})
    rows = [row]
    if ok(row, "dlmg"):
        def check() -> str:
            q, r = fn()
            return _factors_ok(q.gather(framework="numpy"), r.gather(framework="numpy"), A)

        row.check = check_result(check)
    try:
        import dask
        import dask.array as da
    except ImportError:
        return rows
    blocks = da.from_array(A, chunks=(-(-m // FRAGMENTS), n))

    def dask_qr() -> Any:
        q, r = da.linalg.tsqr(blocks)
        with dask.config.set(scheduler="threads"):
            return dask.compute(q, r)

    drow = Row(11, "linalg.qr (TSQR), row slabs, numpy, against dask", params,
               "dask.array.linalg.tsqr on the same blocks (threaded scheduler)", targets=[Target("ratio", "<=", 1.0)])
    run_row(drow, ctx, {"dlmg": fn, "native": dask_qr})
    return rows + [drow]


def _cholesky(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    n = _SQUARE.get(ctx.mode.name, _SQUARE["quick"])
    rng = np.random.default_rng(12)
    m = rng.standard_normal((n, n))
    spd = m @ m.T + n * np.eye(n)
    b = min(256, n // 2)

    def build() -> Callable[[], Any]:
        lay = Layout((n, n), block=(b, b), grid=(2, 2), devices=["cpu"] * 4)
        a = dlmg.scatter(spd, lay, framework="numpy")
        return lambda: dlmg.linalg.cholesky(a)

    fn = prepared(build)
    row = Row(11, "linalg.cholesky (blocked right-looking), 2 x 2 grid, numpy",
              {"framework": "numpy", "fragments": 4, "size": f"{n}x{n} float64, blocks {b}", "device": "cpu"},
              "numpy.linalg.cholesky of the whole matrix", targets=[Target("ratio", "<=", 2.0)])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: np.linalg.cholesky(spd)})
    if ok(row, "dlmg"):
        want = np.linalg.cholesky(spd)
        row.check = check_result(
            lambda: "ok" if np.allclose(fn().gather(framework="numpy"), want, atol=1e-8) else "mismatch: L differs")
    return [row]


def _eigh(ctx: Context) -> list[Row]:
    import dlmg
    from dlmg import Layout

    n = _EIGH.get(ctx.mode.name, _EIGH["quick"])
    rng = np.random.default_rng(13)
    m = rng.standard_normal((n, n))
    sym = (m + m.T) / 2
    p = 4

    def build() -> Callable[[], Any]:
        lay = Layout((n, n), block=(-(-n // (2 * p)), n), grid=(p, 1), devices=["cpu"] * p)
        a = dlmg.scatter(sym, lay, framework="numpy")
        return lambda: dlmg.linalg.eigh(a)

    fn = prepared(build)
    row = Row(11, "linalg.eigh (one-sided block Jacobi), row blocks, numpy",
              {"framework": "numpy", "fragments": p, "size": f"{n}x{n} float64", "device": "cpu"},
              "numpy.linalg.eigh of the whole matrix", targets=[])
    run_row(row, ctx, {"dlmg": fn, "native": lambda: np.linalg.eigh(sym)})
    if ok(row, "dlmg"):
        want = np.linalg.eigvalsh(sym)

        def check() -> str:
            w, v = fn()
            w, v = w.gather(framework="numpy"), v.gather(framework="numpy")
            scale = n * np.abs(sym).max()
            if not np.allclose(w, want, atol=1e-10 * scale) or not np.allclose(sym @ v, v * w, atol=1e-10 * scale):
                return "mismatch: eigenvalues or residual"
            return "ok"

        row.check = check_result(check)
    return [row]


WORKER = Path(__file__).resolve().parent / "_mp_linalg.py"
_MP_PROCESSES = 4


def _processes(ctx: Context) -> list[Row]:
    """Blocked Cholesky on a 2 x 2 grid of processes against one native Cholesky in this process,
    and a pending sum resolved across processes against the engine's own collective, on both
    engines (see the module docstring)."""
    n = _SQUARE.get(ctx.mode.name, _SQUARE["quick"])
    whole = spd(n)
    native = measure({"native": lambda: np.linalg.cholesky(whole)}, ctx.settings)["native"]
    rows: list[Row] = []
    for engine in ("torch", "mpi"):
        base = {"engine": engine, "processes": _MP_PROCESSES, "framework": "numpy"}
        chol = Row(11, f"linalg.cholesky (blocked right-looking), 2 x 2 grid, {_MP_PROCESSES} processes ({engine})",
                   {**base, "size": f"{n}x{n} float64"}, "numpy.linalg.cholesky of the whole matrix in one process",
                   targets=[Target("ratio", "<=", 2.0)])
        resolve = {op: Row(11, f"pending sum resolved ({op}: {into}), {_MP_PROCESSES} processes ({engine})",
                           {**base, "size": f"{n}x{n} float32 per addend"}, "",
                           targets=[Target("ratio", "<=", 1.1)])
                   for op, into in (("all-reduce", "replicated"), ("reduce-scatter", "row slabs"))}
        rows += [chol, *resolve.values()]
        result = launch_for([chol, *resolve.values()], engine, _MP_PROCESSES, n, ctx.settings.repeats,
                            ctx.settings.warmup, worker=WORKER)
        if result is None:
            continue
        times = result["times"]
        chol.params["blocks"] = result["block"]
        chol.timings = {"dlmg": timing(times["cholesky"]["dlmg"]), "native": native}
        chol.check = "ok (checked against numpy.linalg.cholesky in every process)"
        for op, row in resolve.items():
            row.native = f"{result['native'][op]} of the same bytes, in place ({result['transport']})"
            row.timings = {who: timing(seconds) for who, seconds in times[op].items()}
            row.check = "ok (checked against the sum of the addends in every process)"
    return rows


def run_linalg(ctx: Context) -> list[Row]:
    """Case 11: TSQR against one native QR (and dask's TSQR where installed), blocked Cholesky
    against one native Cholesky (in one process and on a grid of 4 processes), Jacobi eigh
    against one native eigh, a pending sum resolved across 4 processes against the engine's
    own collective."""
    out = guarded(11, "linalg.qr (TSQR), row slabs, numpy", "numpy", lambda: _tsqr(ctx))
    out += guarded(11, "linalg.cholesky (blocked), 2 x 2 grid, numpy", "numpy", lambda: _cholesky(ctx))
    out += guarded(11, "linalg.eigh (one-sided block Jacobi), row blocks, numpy", "numpy", lambda: _eigh(ctx))
    out += guarded(11, "linalg.cholesky (blocked), 2 x 2 grid of processes", "numpy.linalg.cholesky",
                   lambda: _processes(ctx))
    return out


# --- on a GPU (a part of case 6) ---------------------------------------------------------


def _gpu_tsqr(ctx: Context, shape: tuple[int, int], dtype: str, target: float) -> list[Row]:
    import dlmg.array_api as xp
    import torch

    m, n = shape
    tdtype = getattr(torch, dtype)
    whole = torch.randn((m, n), generator=torch.Generator(device=ctx.device).manual_seed(11), device=ctx.device,
                        dtype=tdtype)
    a = torch_slabs(whole, 0)
    row = Row(11, f"linalg.qr (TSQR), row slabs, 8 torch fragments, {dtype}",
              {"framework": "torch", "fragments": FRAGMENTS, "size": f"{m}x{n} {dtype}", "device": ctx.device},
              "one torch.linalg.qr of the whole matrix on the same device", targets=[Target("ratio", "<=", target)])
    tol = 1e-9 if dtype == "float64" else 1e-4

    def check() -> str:
        q, r = xp.linalg.qr(a)
        q, r = q.gather(), r.gather()
        r_native = torch.linalg.qr(whole).R
        scale = float(whole.abs().max())
        eye = torch.eye(n, dtype=whole.dtype, device=whole.device)
        if not torch.allclose(q @ r, whole, atol=tol * scale * n) or not torch.allclose(q.T @ q, eye, atol=tol * n):
            return "mismatch: Q R != A or Q not orthonormal"
        if not torch.allclose(r.abs(), r_native.abs(), atol=tol * 10 * float(r_native.abs().max())):
            return "mismatch: |R| differs from torch.linalg.qr's"
        return "ok (Q R == A, Q^T Q == I, |R| as torch's)"

    run_checked(row, ctx, {"dlmg": lambda: xp.linalg.qr(a), "native": lambda: torch.linalg.qr(whole)}, check)
    return [row]


def run_linalg_gpu(ctx: Context) -> list[Row]:
    """Case 6's linear algebra: TSQR of 8 torch fragments against one ``torch.linalg.qr``, in float64
    (target 1.3) and of a larger float32 matrix (target 1.2)."""
    return (guarded(11, "linalg.qr (TSQR), row slabs, torch fragments, float64", "torch.linalg.qr",
                    lambda: _gpu_tsqr(ctx, ctx.mode.gpu_qr_shape, "float64", 1.3))
            + guarded(11, "linalg.qr (TSQR), row slabs, torch fragments, float32", "torch.linalg.qr",
                      lambda: _gpu_tsqr(ctx, ctx.mode.gpu_qr32_shape, "float32", 1.2)))
