"""Helpers shared by the case modules."""

from __future__ import annotations

from typing import Any, Callable

from ..config import Context
from ..frameworks import make_sync
from ..harness import Settings, Timing, describe_error, measure
from ..record import Row, check_result

__all__ = ["FRAGMENTS", "fragment_devices", "guarded", "ok", "profile_row", "run_checked", "run_row",
           "same_pointers", "torch_slabs"]

#: Fragments per distributed tensor in every CPU case (and the GPU pointwise
#: and gather / scatter cases).
FRAGMENTS = 8


def fragment_devices(framework: str, device: str, count: int = FRAGMENTS) -> list[str]:
    """Devices of ``count`` fragments of ``framework`` on ``device``'s kind.

    JAX on the CPU spreads its fragments over its CPU devices ``cpu:0`` ...
    ``cpu:7``; NumPy and PyTorch CPU arrays all sit in host memory (``"cpu"``);
    on a GPU every fragment is on that one GPU.
    """
    if device.startswith("cuda"):
        return [device] * count
    if framework == "jax":
        return [f"cpu:{i}" for i in range(count)]
    return ["cpu"] * count


def run_row(row: Row, ctx: Context, callables: dict[str, Callable[[], Any]],
            settings: Settings | None = None) -> Row:
    """Time ``callables`` for ``row`` (device work timed to completion) with ``settings``
    (by default the context's); with ``ctx.profile``, profile one more dlmg call (see
    :func:`profile_row`)."""
    sync = make_sync(ctx.device)
    row.timings = measure(callables, ctx.settings if settings is None else settings, sync)
    profile_row(row, ctx, callables.get("dlmg"))
    return row


def profile_row(row: Row, ctx: Context, fn: Callable[[], Any] | None) -> None:
    """With ``ctx.profile``, keep the profiler's table of one warm call of ``fn`` (dlmg's) on
    ``row``, while its operands are still alive; nothing when dlmg's call was not timed."""
    if ctx.profile and fn is not None and isinstance(row.timings.get("dlmg"), Timing):
        from ..profiling import profile_table

        row.profile = profile_table(fn, ctx.device, make_sync(ctx.device))


def run_checked(row: Row, ctx: Context, callables: dict[str, Callable[[], Any]], check: Callable[[], str],
                settings: Settings | None = None) -> Row:
    """Check dlmg's result once, then time ``callables`` for ``row``; a wrong result is not timed.

    ``check`` runs dlmg's call and compares its result with the native one
    (``"ok ..."`` or ``"mismatch ..."``). Unless it is ``"ok"``, the dlmg
    contender is left out of the timing, so a wrong value fails the row
    instead of being reported as fast: a mismatch stays the row's check (its
    status: ``"error: wrong result: ..."``), and a check that raised (dlmg's
    call failing) becomes dlmg's error.
    """
    verdict = check_result(check)
    if verdict.startswith("ok"):
        row.check = verdict
        return run_row(row, ctx, callables, settings)
    run_row(row, ctx, {who: fn for who, fn in callables.items() if who != "dlmg"}, settings)
    if verdict.startswith("error"):
        row.timings = {"dlmg": verdict, **row.timings}
    else:
        row.check = verdict
    return row


def torch_slabs(whole: Any, axis: int, count: int = FRAGMENTS) -> Any:
    """``whole`` (a torch tensor) as a distributed tensor of ``count`` slabs along ``axis``
    on its device, each fragment a contiguous tensor of its own (not a view of ``whole``)."""
    import dlmg
    import torch

    device = str(whole.device)
    layout = dlmg.Layout.slab(tuple(whole.shape), axis, [device] * count)
    step = -(-whole.shape[axis] // count)
    pieces = [p.clone(memory_format=torch.contiguous_format) for p in torch.split(whole, step, dim=axis)]
    return dlmg.from_fragments(pieces, layout)


def same_pointers(outputs: list[Any], inputs: list[Any]) -> bool:
    """Whether every output shares its input's memory (a zero-copy hand-over)."""
    from ..frameworks import data_ptr

    pairs = [(data_ptr(o), data_ptr(i)) for o, i in zip(outputs, inputs)]
    return len(outputs) == len(inputs) and all(a is not None and a == b for a, b in pairs)


def ok(row: Row, *contenders: str) -> bool:
    """Whether every named contender of ``row`` has a timing (no error)."""
    return all(isinstance(row.timings.get(c), Timing) for c in contenders)


def guarded(case: int, name: str, native: str, build: Callable[[], list[Row]]) -> list[Row]:
    """The rows ``build()`` returns, or one row holding its error.

    Native set-up (a framework missing, a device absent) fails a group of rows,
    not the whole case: the error is recorded as the native contender's.
    """
    try:
        return build()
    except Exception as exc:  # noqa: BLE001 - reported in the row
        error = describe_error(exc)
        return [Row(case, name, {}, native, timings={"native": error, "dlmg": "skipped: native set-up failed"})]
