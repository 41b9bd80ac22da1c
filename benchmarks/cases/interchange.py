"""Cases 1 and 2: handing fragments to another framework through DLPack.

Case 1 wraps 8 fragments (``dlmg.from_fragments``) and exports each to another
framework with that framework's ``from_dlpack(dt.fragments[i])``; the native
counterpart is the bare ``from_dlpack`` on the same arrays. Case 2 converts the
whole tensor with ``dt.to(framework)`` against the same loop of bare calls.

Both run at a small and a large fragment size: a zero-copy hand-over costs the
same at both, so the large / small time ratio is reported next to the ratio.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..config import Context, KiB, MiB
from ..frameworks import from_dlpack_fn, put
from ..record import Row, Target, check_result, prepared
from .common import FRAGMENTS, fragment_devices, guarded, ok, run_row, same_pointers

__all__ = ["CPU_PAIRS", "GPU_PAIRS", "run_interchange", "run_to"]

#: (source framework, consumer framework) pairs on the CPU and on a GPU.
CPU_PAIRS = (("torch", "jax"), ("numpy", "torch"), ("jax", "torch"))
GPU_PAIRS = (("torch", "cupy"), ("cupy", "jax"), ("jax", "torch"))

RATIO_TARGET = Target("ratio", "<=", 1.2)
GROWTH_TARGET = Target("large/small", "<=", 1.2)
# Wrapping builds one tensor and one fragment record per array: a fixed few
# microseconds that the other pairs' bare loops absorb, while NumPy -> torch's bare
# loop is about 2 us per array, so its wrap + export row has a wider target.
WRAP_NUMPY_TARGET = Target("ratio", "<=", 1.5)


def _size(nbytes: int) -> str:
    if nbytes >= MiB:
        return f"{nbytes / MiB:g} MiB"
    return f"{nbytes / KiB:g} KiB"


def _fragments(src: str, device: str, nbytes: int) -> tuple[list[Any], list[str]]:
    n = nbytes // 4
    devices = fragment_devices(src, device)
    arrays = [put(np.full(n, i, dtype=np.float32), src, d) for i, d in enumerate(devices)]
    return arrays, devices


def _zero_copy_check(
    outputs: Callable[[], list[Any]], native: Callable[[], list[Any]], inputs: list[Any]
) -> Callable[[], str]:
    def compare() -> str:
        dlmg_side = "zero-copy" if same_pointers(outputs(), inputs) else "copy (data pointers differ)"
        native_side = "zero-copy" if same_pointers(native(), inputs) else "copy"
        return f"ok: dlmg {dlmg_side}, native {native_side}"

    return compare


def _bare_loop(consume: Callable[[Any], Any], arrays: list[Any]) -> Callable[[], list[Any]]:
    """The native counterpart: the consumer's ``from_dlpack`` on each array."""
    return lambda: [consume(a) for a in arrays]


def _rows_for(ctx: Context, case: int, src: str, dst: str) -> list[Row]:
    import dlmg

    consume = from_dlpack_fn(dst)
    rows: list[Row] = []
    small: dict[str, Callable[[], Any]] = {}  # the small size's main contenders, timed again beside the large
    for nbytes in ctx.mode.gpu_interchange_bytes if ctx.gpu else ctx.mode.interchange_bytes:
        arrays, devices = _fragments(src, ctx.device, nbytes)
        params = {
            "source": src,
            "consumer": dst,
            "fragments": FRAGMENTS,
            "bytes_per_fragment": nbytes,
            "size": f"{FRAGMENTS} x {_size(nbytes)}",
            "device": ctx.device,
        }

        native = _bare_loop(consume, arrays)  # bound now: the small size's calls are timed again later

        def layout() -> Any:
            return dlmg.Layout.slab((FRAGMENTS * (nbytes // 4),), axis=0, devices=devices)

        if case == 1:
            def build_wrap() -> Callable[[], list[Any]]:
                lay, frags = layout(), arrays

                def wrap_export() -> list[Any]:
                    dt = dlmg.from_fragments(frags, lay)
                    return [consume(f) for f in dt.fragments]

                return wrap_export

            wrap_target = WRAP_NUMPY_TARGET if src == "numpy" else RATIO_TARGET
            row = Row(1, f"{src} -> {dst}: from_fragments + from_dlpack(dt.fragments[i])", dict(params),
                      f"{dst} from_dlpack on each {src} array", targets=[wrap_target])
            _run_sized(row, ctx, {"dlmg": prepared(build_wrap), "native": native}, small)
            if ok(row, "dlmg"):
                row.check = check_result(_zero_copy_check(build_wrap(), native, arrays))
            rows.append(row)

            def build_export() -> Callable[[], list[Any]]:
                dt = dlmg.from_fragments(arrays, layout())
                return lambda: [consume(f) for f in dt.fragments]

            row = Row(1, f"{src} -> {dst}: from_dlpack(dt.fragments[i]) only", dict(params),
                      f"{dst} from_dlpack on each {src} array", targets=[RATIO_TARGET])
            run_row(row, ctx, {"dlmg": prepared(build_export), "native": native})
            rows.append(row)
        else:
            def build_to() -> Callable[[], Any]:
                dt = dlmg.from_fragments(arrays, layout())
                return lambda: dt.to(dst)

            row = Row(2, f"{src} -> {dst}: dt.to({dst!r})", dict(params),
                      f"loop of {dst} from_dlpack on each {src} array", targets=[RATIO_TARGET])
            to = prepared(build_to)
            _run_sized(row, ctx, {"dlmg": to, "native": native}, small)
            if ok(row, "dlmg"):
                from ..frameworks import fragment_arrays

                row.check = check_result(_zero_copy_check(lambda: fragment_arrays(to()), native, arrays))
            rows.append(row)
    return rows


def _run_sized(row: Row, ctx: Context, contenders: dict[str, Callable[[], Any]],
               small: dict[str, Callable[[], Any]]) -> None:
    """Time a main row; the large one also times the small size's calls in turn.

    The first call (small size) stores its contenders in ``small``; the second
    (large size) times them again beside its own, so that large / small is a
    ratio measured in the same conditions.
    """
    if not small:
        small.update(contenders)
        run_row(row, ctx, contenders)
        return
    run_row(row, ctx, {**contenders, "dlmg small": small["dlmg"], "native small": small["native"]})
    for who, key in (("dlmg", "large/small"), ("native", "native large/small")):
        t_large, t_small = row.time(who), row.time(f"{who} small")
        row.metrics[key] = t_large / t_small if t_small and t_large else None
    row.targets.append(GROWTH_TARGET)


def _run(ctx: Context, case: int) -> list[Row]:
    rows: list[Row] = []
    for src, dst in GPU_PAIRS if ctx.gpu else CPU_PAIRS:
        rows.extend(guarded(case, f"{src} -> {dst}", f"{dst} from_dlpack", lambda: _rows_for(ctx, case, src, dst)))
    return rows


def run_interchange(ctx: Context) -> list[Row]:
    """Case 1: wrap 8 fragments and export each to another framework."""
    return _run(ctx, 1)


def run_to(ctx: Context) -> list[Row]:
    """Case 2: ``dt.to(framework)`` against a loop of bare ``from_dlpack``."""
    return _run(ctx, 2)
