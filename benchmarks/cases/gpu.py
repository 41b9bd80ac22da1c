"""Case 6: the GPU cases, on one CUDA device with 8 fragments on it.

Runs the CPU cases' code on ``cuda:0`` with torch, CuPy and JAX fragments:
interchange and ``to()`` (cases 1 and 2, torch -> CuPy, CuPy -> JAX, JAX ->
torch), pointwise and dispatch (case 3), gather and scatter (case 4), each
against the native framework and the device's copy bandwidth (torch
``dst.copy_(src)`` of the same bytes), and redistribution with 4 torch
fragments against the same moves written in torch. Then, with 8 torch
fragments against one torch call on the whole array on the same GPU:
``dlmg.save`` / ``dlmg.load`` against ``torch.save`` / ``torch.load``, with the
steps dlmg's time goes to (case 9); ``A @ B`` in float32 (TF32 off) and
bfloat16 for three layout pairs, in TFLOP/s (case 10); TSQR ``linalg.qr``
(case 11); ``fft`` along the split axis (case 12); sort and cumulative sum
(case 13).

Every part is written for any device: on the CPU (``Context.device ==
"cpu"``) the same code runs with torch CPU fragments, which is how the tests
run it without a GPU.
"""

from __future__ import annotations

from typing import Callable, Iterable

from ..config import Context
from ..record import Row
from .checkpoint import run_checkpoint_gpu
from .contractions import run_contractions_gpu
from .fft import run_fft_gpu
from .gather_scatter import run_gather_scatter
from .interchange import run_interchange, run_to
from .linalg import run_linalg_gpu
from .pointwise import run_pointwise
from .redistribute import run_redistribute_gpu
from .sorting import run_sorting_gpu

__all__ = ["PARTS", "require_gpu", "run_gpu"]

#: The parts of case 6: the CPU case each mirrors, its label, the case function.
PARTS: tuple[tuple[int, str, Callable[[Context], list[Row]]], ...] = (
    (1, "interchange", run_interchange),
    (2, "to()", run_to),
    (3, "pointwise", run_pointwise),
    (4, "gather / scatter", run_gather_scatter),
    (5, "redistribution", run_redistribute_gpu),
    (9, "checkpoints", run_checkpoint_gpu),
    (10, "contractions", run_contractions_gpu),
    (11, "linear algebra", run_linalg_gpu),
    (12, "FFTs", run_fft_gpu),
    (13, "sorting and scans", run_sorting_gpu),
)


def require_gpu() -> str:
    """The name of CUDA device 0, or a RuntimeError saying why there is none."""
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError("--gpu needs PyTorch with CUDA to find the GPU; torch is not installed") from exc
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise RuntimeError(
            f"--gpu needs a CUDA GPU, but torch {torch.__version__} sees none "
            f"(torch.version.cuda = {torch.version.cuda}); run the GPU cases on a machine with a CUDA GPU"
        )
    return torch.cuda.get_device_name(0)


def run_gpu(ctx: Context, parts: Iterable[int] | None = None) -> list[Row]:
    """Case 6: the GPU parts; a failing part becomes an error row, not a crash.

    Parameters
    ----------
    ctx : Context
        Mode and notes (the device is set to ``cuda:0`` here).
    parts : iterable of int, optional
        The parts to run, by the number of the CPU case they mirror; all by default.
    """
    from ..harness import describe_error

    from ..profiling import missed_profiles

    gpu_ctx = Context(ctx.mode, device="cuda:0", notes=ctx.notes, profile=ctx.profile, profiles=ctx.profiles)
    rows: list[Row] = []
    chosen = None if parts is None else set(parts)
    for number, label, part in PARTS:
        if chosen is not None and number not in chosen:
            continue
        try:
            part_rows = part(gpu_ctx)
        except Exception as exc:  # noqa: BLE001 - reported in the row
            part_rows = [Row(6, label, {}, label, timings={"native": describe_error(exc)})]
        for row in part_rows:
            row.name = f"{label}: {row.name}"
            row.case = 6
        ctx.profiles.extend(missed_profiles(part_rows))
        rows.extend(part_rows)
    return rows
