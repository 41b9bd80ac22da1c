"""Sizes and timing settings of the three modes: smoke, quick and full."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .harness import Settings

__all__ = ["Context", "MODES", "Mode", "KiB", "MiB", "GiB"]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB


@dataclass(frozen=True)
class Mode:
    """Sizes of every case in one mode.

    Attributes
    ----------
    name : str
        ``"smoke"``, ``"quick"`` or ``"full"``.
    settings : Settings
        Repeats and warm-up.
    interchange_bytes : tuple of int
        Bytes per fragment of the small and the large interchange runs.
    pointwise_bytes : int
        Total bytes of each pointwise operand (8 fragments).
    dispatch_elements : int
        Elements per fragment of the dispatch-overhead run.
    gather_shape : tuple of int
        Global float32 shape of the gather / scatter runs.
    redistribute_n : int
        The redistributed matrix is ``n x n`` float32.
    scaling_n : int
        The scaling case's matrix is ``n x n`` float32.
    gpu_* :
        The same on the GPU.
    gpu_matmul_n : tuple of int
        The GPU contractions multiply ``n x n`` matrices, for each ``n``.
    gpu_checkpoint_bytes : int
        Bytes of the float32 matrix the GPU checkpoint saves and loads.
    gpu_fft_n : int
        Elements of the GPU FFTs' complex128 signal (1-D; the 2-D one is
        ``sqrt(n) x sqrt(n)``).
    gpu_qr_shape : tuple of int
        The tall-skinny float64 matrix of the GPU TSQR.
    gpu_qr32_shape : tuple of int
        The tall-skinny float32 matrix of the second GPU TSQR row.
    gpu_fftn_side : int
        The GPU ``fftn`` transforms a ``side^3`` complex64 array.
    gpu_sort_n : int
        Elements of the float64 vector the GPU sort sorts.
    """

    name: str
    settings: Settings
    interchange_bytes: tuple[int, int]
    pointwise_bytes: int
    dispatch_elements: int
    gather_shape: tuple[int, int]
    redistribute_n: int
    scaling_n: int
    gpu_interchange_bytes: tuple[int, int]
    gpu_pointwise_bytes: int
    gpu_gather_shape: tuple[int, int]
    gpu_redistribute_n: int
    gpu_matmul_n: tuple[int, ...]
    gpu_checkpoint_bytes: int
    gpu_fft_n: int
    gpu_qr_shape: tuple[int, int]
    gpu_qr32_shape: tuple[int, int]
    gpu_fftn_side: int
    gpu_sort_n: int


MODES: dict[str, Mode] = {
    "smoke": Mode(
        name="smoke",
        settings=Settings(repeats=1, warmup=1, min_repeat_s=0.0, max_call_s=5.0),
        interchange_bytes=(4 * KiB, 64 * KiB),
        pointwise_bytes=256 * KiB,
        dispatch_elements=16,
        gather_shape=(256, 256),
        redistribute_n=256,
        scaling_n=256,
        gpu_interchange_bytes=(4 * KiB, 64 * KiB),
        gpu_pointwise_bytes=1 * MiB,
        gpu_gather_shape=(512, 512),
        gpu_redistribute_n=512,
        gpu_matmul_n=(256,),
        gpu_checkpoint_bytes=256 * KiB,
        gpu_fft_n=1 << 14,
        gpu_qr_shape=(1 << 13, 16),
        gpu_qr32_shape=(1 << 13, 16),
        gpu_fftn_side=32,
        gpu_sort_n=1 << 14,
    ),
    "quick": Mode(
        name="quick",
        settings=Settings(repeats=7, warmup=2, min_repeat_s=0.02, max_call_s=20.0),
        interchange_bytes=(4 * KiB, 4 * MiB),
        pointwise_bytes=64 * MiB,
        dispatch_elements=16,
        gather_shape=(4096, 4096),
        redistribute_n=2048,
        scaling_n=4096,
        gpu_interchange_bytes=(4 * KiB, 256 * MiB),
        gpu_pointwise_bytes=256 * MiB,
        gpu_gather_shape=(8192, 8192),
        gpu_redistribute_n=8192,
        gpu_matmul_n=(8192, 16384),
        gpu_checkpoint_bytes=1 * GiB,
        gpu_fft_n=1 << 26,
        gpu_qr_shape=(1 << 20, 64),
        gpu_qr32_shape=(1 << 22, 128),
        gpu_fftn_side=512,
        gpu_sort_n=1 << 25,
    ),
    "full": Mode(
        name="full",
        settings=Settings(repeats=11, warmup=2, min_repeat_s=0.05, max_call_s=60.0),
        interchange_bytes=(4 * KiB, 256 * MiB),
        pointwise_bytes=256 * MiB,
        dispatch_elements=16,
        gather_shape=(8192, 8192),
        redistribute_n=4096,
        scaling_n=8192,
        gpu_interchange_bytes=(4 * KiB, 1 * GiB),
        gpu_pointwise_bytes=1 * GiB,
        gpu_gather_shape=(16384, 16384),
        gpu_redistribute_n=16384,
        gpu_matmul_n=(8192, 16384),
        gpu_checkpoint_bytes=1 * GiB,
        gpu_fft_n=1 << 28,
        gpu_qr_shape=(1 << 22, 64),
        gpu_qr32_shape=(1 << 22, 128),
        gpu_fftn_side=512,
        gpu_sort_n=1 << 27,
    ),
}


@dataclass
class Context:
    """What a case runs with.

    Attributes
    ----------
    mode : Mode
    device : str
        ``"cpu"`` or ``"cuda:0"``.
    notes : list of str
        Free-form remarks a case adds for the report.
    profile : bool
        Profile one dlmg call of every timed row (``--profile``; see
        :mod:`benchmarks.profiling`).
    profiles : list of (str, str)
        ``(row name, profiler table)`` of the rows that missed a target.
    """

    mode: Mode
    device: str = "cpu"
    notes: list[str] = field(default_factory=list)
    profile: bool = False
    profiles: list[tuple[str, str]] = field(default_factory=list)

    @property
    def settings(self) -> Settings:
        """The mode's timing settings; on a GPU, calls run back to back (see
        :class:`~benchmarks.harness.Settings`)."""
        if self.gpu:
            return replace(self.mode.settings, back_to_back=True)
        return self.mode.settings

    @property
    def gpu(self) -> bool:
        """Whether the cases run on a GPU."""
        return self.device.startswith("cuda")
