"""What the benchmarks ran on: CPU, memory, GPU, software versions, git commit."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["machine_info"]

_PACKAGES = ("dlmg", "numpy", "torch", "jax", "jaxlib", "cupy", "cupy-cuda12x", "cupy-cuda13x", "array-api-compat")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except OSError:
        pass
    return None


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def _git_commit(root: Path) -> str | None:
    if os.environ.get("DLMG_BENCH_COMMIT"):  # a copy of the tree without .git (a copy made for another machine)
        return os.environ["DLMG_BENCH_COMMIT"]
    try:
        done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        # tracked files that differ from that commit (edits, or a tree copied onto another
        # machine over an older .git): the figures are not that commit's alone
        changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    if not commit:
        return None
    return f"{commit} with changes" if changed.returncode == 0 and changed.stdout.strip() else commit


def _gpu(gpu: bool) -> dict[str, Any] | None:
    if not gpu:
        return None
    import torch

    props = torch.cuda.get_device_properties(0)
    return {
        "name": torch.cuda.get_device_name(0),
        "count": torch.cuda.device_count(),
        "memory_gib": round(props.total_memory / 1024**3, 1),
        "torch_cuda": torch.version.cuda,
    }


def machine_info(root: Path, gpu: bool) -> dict[str, Any]:
    """A JSON-ready description of the machine and the software.

    Parameters
    ----------
    root : Path
        The repository root (for the git commit).
    gpu : bool
        Whether to describe CUDA device 0 (through torch).
    """
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": usable,
        "memory_gib": _memory_gib(),
        "load_average": load,
        "os": f"{platform.system()} {platform.release()}",
        "gpu": _gpu(gpu),
        "versions": _versions(),
        "git_commit": _git_commit(root),
        "executable": sys.executable,
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }
