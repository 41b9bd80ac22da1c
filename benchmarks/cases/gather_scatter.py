"""Case 4: gather and scatter under slab, cyclic and block-cyclic layouts.

The tensor is a 2-D float32 matrix over 8 fragments:

* slab: 8 slabs of rows (``Layout.slab(shape, axis=0, ...)``);
* cyclic: rows dealt one by one to the 8 fragments (block ``(1, C)``, grid ``(8, 1)``);
* block-cyclic: ``(R/16, C/16)`` blocks dealt over a ``4 x 2`` grid.

Each dlmg call is timed against its native counterpart and a plain copy of the
same bytes (the memory-bandwidth limit):

* ``dt.gather(framework=fw)`` against the framework's concatenation of the
  same fragments (``np.concatenate``, ``torch.cat``, ...);
* ``dt.gather(out=buffer)`` against the concatenation into the same buffer;
* ``dlmg.scatter(x, layout, framework=fw)`` against the framework cutting the
  same fragments out of ``x`` itself (one strided view and copy per fragment).

Bandwidth is reported as tensor bytes per second, and as the fraction of the
plain copy's (``t_copy / t_dlmg``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context, MiB
from ..frameworks import concatenate, copy_of, put, to_numpy
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_row
from .pointwise import copy_contender

__all__ = ["LAYOUTS", "layout_spec", "native_scatter", "run_gather_scatter"]

LAYOUTS = ("slab", "cyclic", "block-cyclic")


def layout_spec(kind: str, shape: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """``(block, grid)`` of a layout kind for an ``R x C`` matrix over 8 fragments."""
    rows, cols = shape
    if kind == "slab":
        return (rows // FRAGMENTS, cols), (FRAGMENTS, 1)
    if kind == "cyclic":
        return (1, cols), (FRAGMENTS, 1)
    if kind == "block-cyclic":
        return (rows // 16, cols // 16), (4, 2)
    raise ValueError(f"layout kind {kind!r} is not one of {LAYOUTS}")


def native_scatter(framework: str, x: Any, block: tuple[int, int], grid: tuple[int, int]) -> list[Any]:
    """Cut the block-cyclic fragments out of ``x`` with the framework alone.

    Needs every mode's extent to be a multiple of ``block * grid``; fragment
    ``f`` has grid coordinates ``(f % grid[0], f // grid[0])`` (column-major).
    One strided view and one copy per fragment (for JAX, whose indexing
    already returns a new array, just the indexing).
    """
    rows, cols = x.shape
    (b0, b1), (g0, g1) = block, grid
    six = x.reshape(rows // (b0 * g0), g0, b0, cols // (b1 * g1), g1, b1)
    out = []
    for f in range(g0 * g1):
        p, q = f % g0, f // g0
        piece = six[:, p, :, :, q, :]
        if framework != "jax":
            piece = copy_of(framework, piece)
        out.append(piece.reshape(rows // g0, cols // g1))
    return out


def _gbps(row: Row, nbytes: int) -> None:
    t_copy = row.time("copy")
    for who in ("dlmg", "native", "copy"):
        t = row.time(who)
        row.metrics[f"{who} GB/s"] = nbytes / t / 1e9 if t else None
    for who in ("dlmg", "native"):
        t = row.time(who)
        row.metrics[f"{who} copy fraction"] = t_copy / t if t and t_copy else None


def _rows_for(ctx: Context, framework: str) -> list[Row]:
    import dlmg

    shape = ctx.mode.gpu_gather_shape if ctx.gpu else ctx.mode.gather_shape
    nbytes = shape[0] * shape[1] * 4
    base = np.arange(shape[0] * shape[1], dtype=np.float32).reshape(shape)
    devices = fragment_devices(framework, ctx.device)
    x = put(base, framework, devices[0])
    copy = copy_contender(ctx.device, nbytes)
    concat = "torch.cat" if framework == "torch" else framework + ".concatenate"
    rows: list[Row] = []
    slab_dlmg: dict[str, Callable[[], Any]] = {}
    for kind in LAYOUTS:
        block, grid = layout_spec(kind, shape)
        frags = native_scatter(framework, x, block, grid)
        params = {"framework": framework, "layout": kind, "shape": list(shape), "block": list(block),
                  "grid": list(grid), "fragments": FRAGMENTS, "bytes": nbytes,
                  "size": f"{nbytes / MiB:g} MiB", "device": ctx.device}

        def layout() -> Any:
            return dlmg.Layout.block_cyclic(shape, block=block, grid=grid, devices=devices)

        def build_gather() -> Callable[[], Any]:
            dt = dlmg.from_fragments(frags, layout())
            return lambda: dt.gather(framework=framework)

        out = None if framework == "jax" else put(np.zeros(shape, dtype=np.float32), framework, devices[0])

        def build_gather_out() -> Callable[[], Any]:
            dt, buffer = dlmg.from_fragments(frags, layout()), out  # bound now: the slab call is reused later
            return lambda: dt.gather(out=buffer)

        def build_scatter() -> Callable[[], Any]:
            lay = layout()
            return lambda: dlmg.scatter(x, lay, framework=framework)

        gather, scatter = prepared(build_gather), prepared(build_scatter)

        def gathered_ok() -> str:
            return "ok" if np.array_equal(to_numpy(gather()), base) else "mismatch: gathered array differs"

        def scattered_ok() -> str:
            from ..frameworks import fragment_arrays

            got = [to_numpy(a) for a in fragment_arrays(scatter())]
            want = [to_numpy(a) for a in frags]
            same = len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want))
            return "ok" if same else "mismatch: scattered fragments differ"

        native_out = _concat_into(framework, frags, out)
        ops: list[tuple[str, Callable[[], Any], Callable[[], Any] | None, str, Callable[[], str] | None]] = [
            ("gather", gather, lambda: concatenate(framework, frags), f"{concat} of the fragments", gathered_ok),
            ("gather(out=)", prepared(build_gather_out), native_out,
             f"{concat} of the fragments into the same buffer", None),
            ("scatter", scatter, lambda: native_scatter(framework, x, block, grid),
             f"{framework} strided view + copy per fragment", scattered_ok),
        ]
        for op, dlmg_fn, native_fn, native_name, check in ops:
            if native_fn is None:  # JAX arrays are immutable: no buffer to fill
                continue
            row = Row(4, f"{op}, {kind}, {framework}", dict(params), native_name)
            contenders = {"dlmg": dlmg_fn, "native": native_fn, "copy": copy}
            if kind == "slab":
                slab_dlmg[op] = dlmg_fn
                # a gather or scatter on one GPU is one pass over the bytes: at copy bandwidth
                row.targets.append(Target("dlmg copy fraction", ">=", 0.9 if ctx.gpu else 0.8))
            elif op in slab_dlmg:
                contenders["dlmg slab"] = slab_dlmg[op]  # timed in turn with this layout's call
            run_row(row, ctx, contenders)
            _gbps(row, nbytes)
            if "dlmg slab" in contenders:
                t, t_slab = row.time("dlmg"), row.time("dlmg slab")
                row.metrics["time / slab time"] = t / t_slab if t and t_slab else None
                row.targets.append(Target("time / slab time", "<=", 3.0))
            if check is not None and ok(row, "dlmg"):
                row.check = check_result(check)
            rows.append(row)
    return rows


def _concat_into(framework: str, frags: list[Any], out: Any | None) -> Callable[[], Any] | None:
    """The framework's concatenation into a preallocated buffer, where it has one."""
    if framework == "jax" or out is None:
        return None
    # the fragments stacked along mode 0 have the buffer's bytes, not always its shape
    flat = out.reshape(sum(f.shape[0] for f in frags), frags[0].shape[1])
    if framework == "numpy":
        return lambda: np.concatenate(frags, axis=0, out=flat)
    if framework == "torch":
        import torch

        return lambda: torch.cat(frags, dim=0, out=flat)
    if framework == "cupy":
        import cupy

        return lambda: cupy.concatenate(frags, axis=0, out=flat)
    return None


def run_gather_scatter(ctx: Context) -> list[Row]:
    """Case 4 (and its GPU form in case 6): gather and scatter bandwidth."""
    frameworks = ("torch", "cupy", "jax") if ctx.gpu else ("numpy", "torch")
    rows: list[Row] = []
    for fw in frameworks:
        rows.extend(guarded(4, f"gather / scatter, {fw}", fw, lambda: _rows_for(ctx, fw)))
    return rows
