"""Every example runs to its end on the CPU (each asserts its own results)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs Python subprocesses

# the distributed examples start several processes; tests/test_distributed_examples.py runs them
MULTIPROCESS = ("checkpoint_reshard",)
EXAMPLES = sorted(p for p in (Path(__file__).resolve().parent.parent / "examples").glob("*.py")
                  if not p.stem.startswith("distributed_") and p.stem not in MULTIPROCESS)


@pytest.mark.parametrize("example", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs(example):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    env = dict(os.environ)
    env.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=300, env=env,
        cwd=example.parent.parent,
    )
    assert done.returncode == 0, f"{example.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
