"""The distributed examples run to their end from their documented commands
(two processes on 127.0.0.1; a free port instead of the documented 29500)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from _multiproc import free_port, have_mpi, mpiexec

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(cmd: list[str], **extra_env: str) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1", JAX_PLATFORMS="cpu", **extra_env)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return done.stdout


def test_torchrun_example():
    pytest.importorskip("torch")
    out = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                "127.0.0.1", "--master-port", str(free_port()), "examples/distributed_torchrun.py"])
    assert "rank 0 -> rank 1" in out and "Routes:" in out  # the plan printed by plan_redistribution()


def test_jax_multicontroller_example():
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    out = _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr",
                "127.0.0.1", "--master-port", str(free_port()), "examples/distributed_jax.py"],
               JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}",
               XLA_FLAGS="--xla_force_host_platform_device_count=2")
    assert "rank 0: 2 shards to torch and back, no copy" in out
    assert "rank 1: 2 shards to torch and back, no copy" in out
    assert "1:cpu:2048" in out  # the first JAX CPU device of process 1, in the printed layout


def test_mpi_example():
    if not have_mpi():
        pytest.skip("needs mpi4py and an MPI (pip install mpi4py mpich)")
    out = _run([mpiexec(), "-n", "2", sys.executable, "examples/distributed_mpi.py"])
    assert "all checks passed on 2 processes" in out


def test_checkpoint_reshard_example(tmp_path):
    """Saved by 2 processes as row slabs, loaded by 1 (block-cyclic) and by 4 (column slabs)."""
    pytest.importorskip("torch")
    pytest.importorskip("tensorstore")
    path = str(tmp_path / "ckpt")

    def torchrun(n, *args):
        return _run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), "--master-addr",
                     "127.0.0.1", "--master-port", str(free_port()), "examples/checkpoint_reshard.py", *args])

    assert "from 2 processes" in torchrun(2, "save", path)
    assert "on 1 process(es): 4 fragment(s) checked" in _run([sys.executable, "examples/checkpoint_reshard.py", "load", path])
    out = torchrun(4, "load", path)
    assert out.count("on 4 process(es): 1 fragment(s) checked") == 4
