"""Test configuration shared by every test module.

JAX shows 8 CPU devices only when ``XLA_FLAGS`` is set before its first
operation, so it is set here, before any test imports JAX. ``JAX_PLATFORMS`` is
deliberately left alone: with a GPU present JAX must keep it.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

_FLAG = "--xla_force_host_platform_device_count=8"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + _FLAG).strip()

_GPU_REASON = "needs a CUDA GPU with CuPy, PyTorch and JAX"


def _cuda_present() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


HAS_CUDA = _cuda_present()


def pytest_collection_modifyitems(config, items):
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason=_GPU_REASON)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)

try:  # one hypothesis profile for the whole suite: no deadlines (2-core CI), bounded examples
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "dlmg",
        deadline=None,
        max_examples=int(os.environ.get("DLMG_HYPOTHESIS_EXAMPLES", "60")),
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.load_profile("dlmg")
except ImportError:  # pragma: no cover - hypothesis is in the test extra
    pass
