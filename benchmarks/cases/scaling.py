"""Scaling: cost versus fragment count and versus layout complexity.

An ``n x n`` float32 matrix (4096 x 4096 in the quick run) of NumPy fragments
in host memory:

* **fragment count** -- 1, 8, 64 and 512 fragments in 2-D block grids
  (1x1, 4x2, 8x8, 32x16). Each is gathered into a preallocated array
  (``gather(out=)``) and, from 8 fragments on, redistributed to another grid
  of as many fragments (4x2 -> 2x4, 8x8 -> 16x4, 32x16 -> 16x32);
* **layout complexity** -- 8 fragments (grid 4x2) with square blocks from
  slab-sized down to 1 (cyclic), gathered and redistributed to row slabs.

Each row times dlmg's call against a plain copy of the same bytes
(``np.copyto`` into a preallocated array, the host's copy bandwidth), and
alongside it the **planning** (building the copy plan from scratch, cache
bypassed) and the **plan cache hit** (``dt.plan_redistribution(target)`` or
``dlmg.plan_redistribution`` on a warm cache: what each later call pays to
find its plan). ``us per fragment`` is the time of the same call on a
64 x 64 tensor of the same grid (copies negligible) divided by the fragment
count: what dlmg costs per fragment, which should stay flat as the fragment
count grows. The complexity rows hold dlmg's time against the plain copy of
the same bytes (``ratio``).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context, MiB
from ..record import Row, Target, check_result, prepared
from .common import guarded, ok, run_row
from .pointwise import copy_contender

__all__ = ["COMPLEXITY_BLOCKS", "FRAGMENT_GRIDS", "run_scaling"]

#: Grids of the fragment-count rows: 1, 8, 64 and 512 fragments.
FRAGMENT_GRIDS = ((1, 1), (4, 2), (8, 8), (32, 16))
#: Block sizes of the complexity rows (None: slab-sized blocks), on a 4x2 grid.
COMPLEXITY_BLOCKS = (None, 256, 16, 1)
COMPLEXITY_GRID = (4, 2)

#: Targets: a plan cache hit costs microseconds; dlmg adds at most this per fragment.
PLAN_HIT_US = 10.0
US_PER_FRAGMENT = 20.0
COPY_RATIO = 3.0
#: The per-fragment cost is timed on a TINY_N x TINY_N tensor of the same grid (copies negligible).
TINY_N = 64
TINY = f"same on {TINY_N}x{TINY_N}"


def _layout(n: int, grid: tuple[int, int], block: tuple[int, int] | None = None) -> Any:
    import dlmg

    if block is None:
        block = (-(-n // grid[0]), -(-n // grid[1]))
    return dlmg.Layout((n, n), block=block, grid=grid, devices=["cpu"] * (grid[0] * grid[1]))


def _planner(src: Any, dst: Any) -> Callable[[], Any]:
    """Build the copy plan from ``src`` to ``dst`` from scratch (the plan cache bypassed)."""
    from dlmg.plans.endpoints import layout_endpoints
    from dlmg.plans.build import build_plan

    return lambda: build_plan(layout_endpoints(src), layout_endpoints(dst), 4, src_layout=src, dst_layout=dst,
                              dtype="float32")


def _metrics(row: Row, fragments: int, per_fragment: bool) -> None:
    t, t_copy = row.time("dlmg"), row.time("native")
    row.metrics["fragments"] = float(fragments)
    plan, hit = row.time("planning"), row.time("plan cache hit")
    row.metrics["planning ms"] = plan * 1e3 if plan is not None else None
    row.metrics["plan hit us"] = hit * 1e6 if hit is not None else None
    row.metrics["copy fraction"] = t_copy / t if t and t_copy else None
    row.targets.append(Target("plan hit us", "<=", PLAN_HIT_US))
    if per_fragment:
        tiny = row.time(TINY)
        row.metrics["us per fragment"] = tiny / fragments * 1e6 if tiny is not None else None
        row.targets.append(Target("us per fragment", "<=", US_PER_FRAGMENT))
    else:
        row.targets.append(Target("ratio", "<=", COPY_RATIO))


def _tiny(layout: Any, op: Callable[[Any], Any]) -> Callable[[], Any]:
    """``op`` on a tiny tensor of ``layout``'s grid: what dlmg itself costs, copies aside."""
    import dlmg

    small = dlmg.Layout((TINY_N, TINY_N), block=(-(-TINY_N // layout.grid[0]), -(-TINY_N // layout.grid[1])),
                        grid=layout.grid, devices=layout.devices)
    dt = dlmg.scatter(np.ones((TINY_N, TINY_N), np.float32), small)
    return lambda: op(dt)


def _gather_row(ctx: Context, base: np.ndarray, layout: Any, what: str, params: dict[str, Any]) -> Row:
    import dlmg

    n = base.shape[0]
    one = _layout(n, (1, 1))
    out = np.empty_like(base)

    def build() -> Callable[[], Any]:
        dt = dlmg.scatter(base, layout)
        return lambda: dt.gather(out=out)

    dlmg_fn = prepared(build)
    frags = layout.nfragments
    row = Row(0, f"gather(out=), {what}", {**params, "operation": "gather(out=)"},
              "np.copyto of the same bytes (plain copy)")
    callables = {
        "dlmg": dlmg_fn,
        "native": copy_contender("cpu", base.nbytes),
        "planning": _planner(layout, one),
        "plan cache hit": lambda: dlmg.plan_redistribution(layout, one),
    }
    per_fragment = params["series"] == "fragments"
    if per_fragment:
        tiny_out = np.empty((TINY_N, TINY_N), np.float32)
        callables[TINY] = prepared(lambda: _tiny(layout, lambda dt: dt.gather(out=tiny_out)))
    run_row(row, ctx, callables)
    _metrics(row, frags, per_fragment)
    if ok(row, "dlmg"):
        row.check = check_result(lambda: "ok" if np.array_equal(dlmg_fn(), base) else "mismatch: gather differs")
    return row


def _redistribute_row(ctx: Context, base: np.ndarray, src: Any, dst: Any, what: str,
                      params: dict[str, Any]) -> Row:
    import dlmg

    holder: dict[str, Any] = {}

    def build() -> Callable[[], Any]:
        dt = holder["dt"] = dlmg.scatter(base, src)
        return lambda: dt.redistribute(dst)

    dlmg_fn = prepared(build)

    def hit() -> Any:
        return holder["dt"].plan_redistribution(dst)

    row = Row(0, f"redistribute, {what}", {**params, "operation": "redistribute"},
              "np.copyto of the same bytes (plain copy)")
    callables = {
        "dlmg": dlmg_fn,
        "native": copy_contender("cpu", base.nbytes),
        "planning": _planner(src, dst),
        "plan cache hit": hit,
    }
    per_fragment = params["series"] == "fragments"
    if per_fragment:
        tiny_dst = dlmg.Layout((TINY_N, TINY_N), block=(-(-TINY_N // dst.grid[0]), -(-TINY_N // dst.grid[1])),
                               grid=dst.grid, devices=dst.devices)
        callables[TINY] = prepared(lambda: _tiny(src, lambda dt: dt.redistribute(tiny_dst)))
    run_row(row, ctx, callables)
    _metrics(row, src.nfragments, per_fragment)
    if ok(row, "dlmg"):
        def compare() -> str:
            got = dlmg_fn()
            return "ok" if np.array_equal(np.asarray(got.gather()), base) else "mismatch: redistribution differs"

        row.check = check_result(compare)
    return row


def run_scaling(ctx: Context, case: int = 0) -> list[Row]:
    """The scaling case (CPU): rows by fragment count, then by block size."""
    n = ctx.mode.scaling_n
    base = np.random.default_rng(7).random((n, n), dtype=np.float32)
    size = f"{n}x{n} float32 ({base.nbytes / MiB:g} MiB)"
    rows: list[Row] = []
    for grid in FRAGMENT_GRIDS:
        k = grid[0] * grid[1]
        params = {"size": size, "fragments": k, "grid": list(grid), "block": "slab", "series": "fragments"}
        src = _layout(n, grid)
        what = f"{k} fragments (grid {grid[0]}x{grid[1]})"
        rows += guarded(case, f"gather(out=), {what}", "numpy",
                        lambda: [_gather_row(ctx, base, src, what, params)])
        if k > 1:
            # the transposed grid; a square grid is stretched instead (8x8 -> 16x4)
            target = (grid[1], grid[0]) if grid[0] != grid[1] else (2 * grid[0], grid[1] // 2)
            dst = _layout(n, target)
            rows += guarded(case, f"redistribute, {what}", "numpy", lambda: [_redistribute_row(
                ctx, base, src, dst, f"{what} -> grid {target[0]}x{target[1]}", params)])
    rows_layout = _layout(n, (COMPLEXITY_GRID[0] * COMPLEXITY_GRID[1], 1))
    for b in COMPLEXITY_BLOCKS:
        src = _layout(n, COMPLEXITY_GRID, None if b is None else (b, b))
        block = "slab" if b is None else f"{b}x{b}"
        params = {"size": size, "fragments": src.nfragments, "grid": list(COMPLEXITY_GRID), "block": block,
                  "series": "complexity"}
        what = f"block {block}{' (cyclic)' if b == 1 else ''}, grid 4x2"
        rows += guarded(case, f"gather(out=), {what}", "numpy",
                        lambda: [_gather_row(ctx, base, src, what, params)])
        rows += guarded(case, f"redistribute, {what}", "numpy", lambda: [_redistribute_row(
            ctx, base, src, rows_layout, f"{what} -> row slabs", params)])
    for row in rows:
        row.case = case
    return rows
