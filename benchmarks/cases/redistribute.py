"""Case 5 (and the GPU part of case 6): redistribution.

On the CPU an ``n x n`` float32 matrix sharded in row slabs over JAX's 8 CPU
devices is moved to column slabs:

* dlmg with JAX fragments: ``dlmg.from_jax(x).redistribute(column slabs)``,
  blocked until ready, against ``jax.device_put`` of ``x`` to the column
  sharding; both layouts are shardings, so dlmg hands the whole move to
  ``jax.device_put`` (the row's ``path`` says what ran, from the plan), and
  dlmg's own copy plan (``dlmg.delegation(False)``) is timed beside it;
* dlmg with NumPy fragments: ``dt.redistribute(column slabs)`` against the same
  ``device_put`` and against the NumPy loop that builds each column slab
  (``np.concatenate`` of the row slabs' column ranges);

  the ``device_put`` contender gets a new ``jax.Array`` over the same shard
  buffers each call (``jax.make_array_from_single_device_arrays``), as a
  program's fresh result would be: on the CPU, JAX moves an array between
  shardings through a host copy of it, which it keeps on the array, so that
  ``device_put`` of the same ``x`` again skips the gather (timed as well, as a
  metric);
* block-cyclic to row slabs with NumPy and with JAX fragments, against
  gathering the tensor and scattering it again.

On a GPU 4 torch fragments, then 4 JAX fragments, on the one GPU move from row
to column slabs, against the same in that framework: index copies (a
concatenation of each row slab's column range) and one concatenation followed
by column slices; then the same for torch and CuPy fragments that
``dlmg.scatter`` carved out of one allocation (one copy for the whole move).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context, MiB
from ..frameworks import concatenate, copy_of, jax_device, put, to_numpy
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_row
from .gather_scatter import layout_spec, native_scatter
from .pointwise import copy_contender

__all__ = ["GPU_FRAGMENTS", "run_redistribute", "run_redistribute_gpu"]

#: Fragments of the GPU redistribution (all on the one GPU).
GPU_FRAGMENTS = 4


def _matches(result: Callable[[], Any], base: np.ndarray) -> Callable[[], str]:
    def compare() -> str:
        got = result()
        gathered = to_numpy(got.gather())
        return "ok" if np.array_equal(gathered, base) else "mismatch: redistributed tensor differs"

    return compare


def _params(n: int, framework: str, source: str, target: str, fragments: int, device: str) -> dict[str, Any]:
    return {"framework": framework, "shape": [n, n], "bytes": n * n * 4, "size": f"{n * n * 4 / MiB:g} MiB",
            "source_layout": source, "target_layout": target, "fragments": fragments, "device": device}


_DEVICE_PUT = "jax.device_put(x, column sharding), x a new array over the same shards"


def _device_puts(x: Any, rows_sharding: Any, cols_sharding: Any) -> dict[str, Callable[[], Any]]:
    """The ``device_put`` contenders: ``native`` moves a new ``jax.Array`` over
    ``x``'s shard buffers (no host copy of it kept by JAX yet, as for a
    program's fresh result); ``cached`` moves ``x`` itself, whose host copy JAX
    keeps after the first call."""
    import jax

    shards = [s.data for s in x.addressable_shards]

    def fresh() -> Any:
        whole = jax.make_array_from_single_device_arrays(x.shape, rows_sharding, shards)
        return jax.device_put(whole, cols_sharding)

    return {"native": fresh, "cached": lambda: jax.device_put(x, cols_sharding)}


def _cached_ratio(row: Row) -> None:
    t, t_cached = row.time("dlmg"), row.time("cached")
    row.metrics["ratio vs device_put of x with JAX's host copy kept"] = t / t_cached if t and t_cached else None


def _slabs_jax(ctx: Context, base: np.ndarray) -> list[Row]:
    import dlmg
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n = base.shape[0]
    mesh = Mesh(np.array([jax_device(f"cpu:{i}") for i in range(FRAGMENTS)]), ("d",))
    rows_sharding = NamedSharding(mesh, PartitionSpec("d", None))
    cols_sharding = NamedSharding(mesh, PartitionSpec(None, "d"))
    x = jax.device_put(base, rows_sharding)
    x.block_until_ready()
    target = dlmg.Layout.slab((n, n), axis=1, devices=[f"cpu:{i}" for i in range(FRAGMENTS)])

    def dlmg_fn() -> Any:
        return dlmg.from_jax(x).redistribute(target)

    def own_plan() -> Any:
        with dlmg.delegation(False):
            return dlmg.from_jax(x).redistribute(target)

    params = _params(n, "jax", "slab axis 0", "slab axis 1", FRAGMENTS, "cpu:0-7")
    params["path"] = _path(dlmg.from_jax(x).plan_redistribution(target))
    row = Row(5, "row slabs -> column slabs, JAX fragments (from_jax + redistribute)", params,
              _DEVICE_PUT, targets=[Target("ratio", "<=", 1.0)])
    run_row(row, ctx, {"dlmg": dlmg_fn, **_device_puts(x, rows_sharding, cols_sharding), "dlmg own plan": own_plan})
    _cached_ratio(row)
    t_own, t_native = row.time("dlmg own plan"), row.time("native")
    row.metrics["ratio of dlmg's own plan (delegation off)"] = t_own / t_native if t_own and t_native else None
    if ok(row, "dlmg"):
        row.check = check_result(_matches(dlmg_fn, base))
    return [row]


def _path(plan: Any) -> str:
    """What a redistribution runs, from its plan: the framework call it is handed to, or dlmg's copies."""
    call = getattr(plan, "delegated_to", None)
    return f"delegated to {call}" if call else f"dlmg plan: {plan.ncopies} strided copies"


def _slabs_numpy(ctx: Context, base: np.ndarray) -> list[Row]:
    import dlmg
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    n = base.shape[0]
    m = n // FRAGMENTS
    mesh = Mesh(np.array([jax_device(f"cpu:{i}") for i in range(FRAGMENTS)]), ("d",))
    rows_sharding = NamedSharding(mesh, PartitionSpec("d", None))
    x = jax.device_put(base, rows_sharding)
    cols_sharding = NamedSharding(mesh, PartitionSpec(None, "d"))
    frags = [base[i * m:(i + 1) * m].copy() for i in range(FRAGMENTS)]
    devices = ["cpu"] * FRAGMENTS

    def numpy_loop() -> list[np.ndarray]:
        return [np.concatenate([f[:, j * m:(j + 1) * m] for f in frags], axis=0) for j in range(FRAGMENTS)]

    def build() -> Callable[[], Any]:
        dt = dlmg.from_fragments(frags, dlmg.Layout.slab((n, n), axis=0, devices=devices))
        target = dlmg.Layout.slab((n, n), axis=1, devices=devices)
        return lambda: dt.redistribute(target)

    dlmg_fn = prepared(build)
    row = Row(5, "row slabs -> column slabs, NumPy fragments",
              _params(n, "numpy", "slab axis 0", "slab axis 1", FRAGMENTS, "cpu"),
              f"{_DEVICE_PUT} (JAX fragments)", targets=[Target("ratio", "<=", 1.0)])
    run_row(row, ctx, {"dlmg": dlmg_fn, **_device_puts(x, rows_sharding, cols_sharding), "numpy": numpy_loop})
    _cached_ratio(row)
    t, t_np = row.time("dlmg"), row.time("numpy")
    row.metrics["ratio vs NumPy loop"] = t / t_np if t and t_np else None
    if ok(row, "dlmg"):
        row.check = check_result(_matches(dlmg_fn, base))
    return [row]


def _block_cyclic(ctx: Context, base: np.ndarray, framework: str) -> list[Row]:
    import dlmg

    n = base.shape[0]
    block, grid = layout_spec("block-cyclic", (n, n))
    devices = fragment_devices(framework, ctx.device)
    x = put(base, framework, devices[0])
    frags = [put(to_numpy(f), framework, d) for f, d in zip(native_scatter(framework, x, block, grid), devices)]

    def make() -> tuple[Any, Any]:
        source = dlmg.Layout.block_cyclic((n, n), block=block, grid=grid, devices=devices)
        target = dlmg.Layout.slab((n, n), axis=0, devices=devices)
        return dlmg.from_fragments(frags, source), target

    def build_redistribute() -> Callable[[], Any]:
        dt, target = make()
        return lambda: dt.redistribute(target)

    def build_gather_scatter() -> Callable[[], Any]:
        dt, target = make()
        return lambda: dlmg.scatter(dt.gather(framework=framework), target, framework=framework)

    dlmg_fn = prepared(build_redistribute)
    row = Row(5, f"block-cyclic -> row slabs, {framework} fragments",
              _params(n, framework, f"block-cyclic {block} over {grid}", "slab axis 0", FRAGMENTS, ctx.device),
              "dlmg gather, then dlmg.scatter")
    run_row(row, ctx, {"dlmg": dlmg_fn, "native": prepared(build_gather_scatter)})
    if ok(row, "dlmg"):
        row.check = check_result(_matches(dlmg_fn, base))
    return [row]


def run_redistribute(ctx: Context) -> list[Row]:
    """Case 5: redistribution over JAX's 8 CPU devices."""
    n = ctx.mode.redistribute_n
    base = np.arange(n * n, dtype=np.float32).reshape(n, n)
    rows: list[Row] = []
    rows.extend(guarded(5, "row slabs -> column slabs, JAX fragments", "jax.device_put",
                        lambda: _slabs_jax(ctx, base)))
    rows.extend(guarded(5, "row slabs -> column slabs, NumPy fragments", "jax.device_put",
                        lambda: _slabs_numpy(ctx, base)))
    for fw in ("numpy", "jax"):
        rows.extend(guarded(5, f"block-cyclic -> row slabs, {fw} fragments", "gather, then scatter",
                            lambda: _block_cyclic(ctx, base, fw)))
    return rows


def _gpu_slabs(ctx: Context, framework: str, carved: bool = False) -> list[Row]:
    """Row slabs to column slabs of ``framework`` fragments on one GPU, against that
    framework's own index copies (a concatenation of each row slab's column range).

    The fragments are separate arrays wrapped by ``from_fragments``, or with
    ``carved`` those ``dlmg.scatter`` made: views of one allocation, which a
    redistribution reads as one array (one copy for the whole move)."""
    import dlmg

    n = ctx.mode.gpu_redistribute_n
    k = GPU_FRAGMENTS
    m = n // k
    base = np.arange(n * n, dtype=np.float32).reshape(n, n) % 65536
    frags = [put(base[i * m:(i + 1) * m], framework, ctx.device) for i in range(k)]
    devices = [ctx.device] * k

    def index_copies() -> list[Any]:
        return [concatenate(framework, [f[:, j * m:(j + 1) * m] for f in frags]) for j in range(k)]

    def cat_chunk() -> list[Any]:  # (a JAX slice is a copy already; a torch one is made contiguous)
        whole = concatenate(framework, frags)
        columns = [whole[:, j * m:(j + 1) * m] for j in range(k)]
        return columns if framework == "jax" else [copy_of(framework, c) for c in columns]

    def build() -> Callable[[], Any]:
        rows = dlmg.Layout.slab((n, n), axis=0, devices=devices)
        dt = dlmg.scatter(put(base, framework, ctx.device), rows) if carved else dlmg.from_fragments(frags, rows)
        target = dlmg.Layout.slab((n, n), axis=1, devices=devices)
        return lambda: dt.redistribute(target)

    dlmg_fn = prepared(build)
    concat = "torch.cat" if framework == "torch" else f"{framework}.concatenate"
    what = ", fragments of one allocation (dlmg.scatter's)" if carved else ""
    row = Row(6, f"redistribute row slabs -> column slabs, {framework}{what}",
              _params(n, framework, "slab axis 0", "slab axis 1", k, ctx.device),
              f"{framework} index copies: {concat} of each row slab's column range")
    run_row(row, ctx, {"dlmg": dlmg_fn, "native": index_copies, "cat+chunk": cat_chunk,
                       "copy": copy_contender(ctx.device, n * n * 4)})
    t, t_cc, t_copy = row.time("dlmg"), row.time("cat+chunk"), row.time("copy")
    row.metrics["ratio vs cat+chunk"] = t / t_cc if t and t_cc else None
    row.metrics["dlmg copy fraction"] = t_copy / t if t and t_copy else None
    row.metrics["dlmg GB/s"] = n * n * 4 / t / 1e9 if t else None
    # as fast as the framework's own index copies, and (one pass over the bytes) at the device's copy rate
    row.targets += [Target("ratio", "<=", 1.1), Target("dlmg copy fraction", ">=", 0.9)]
    if ok(row, "dlmg"):
        row.check = check_result(_matches(dlmg_fn, base))
    return [row]


def run_redistribute_gpu(ctx: Context) -> list[Row]:
    """Case 6's redistribution: 4 torch fragments on the GPU, then 4 JAX fragments, then torch and CuPy
    fragments carved by a scatter."""
    return [row for framework, carved in (("torch", False), ("jax", False), ("torch", True), ("cupy", True))
            for row in guarded(6, f"redistribute row slabs -> column slabs, {framework}", f"{framework} index copies",
                               lambda framework=framework, carved=carved: _gpu_slabs(ctx, framework, carved))]
