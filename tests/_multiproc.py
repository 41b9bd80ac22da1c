"""Launching N processes of one scenario list on 127.0.0.1 and collecting their results.

Each launch starts the worker (:mod:`tests._mp_worker`) in N processes once
(test modules call it from a module-scoped fixture) under one of:

* ``torch``: plain subprocesses with torchrun's environment (``RANK``,
  ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``);
* ``mpi``: ``mpiexec -n N`` of the MPI installed beside the interpreter (the
  ``mpich`` wheel) or on the PATH;
* ``jax``: plain subprocesses that also join JAX's multi-controller runtime
  (``jax.distributed.initialize``) on a second port, then dlmg on gloo.

Every process writes ``rank<r>.json``: per scenario, whether it passed, its
error and the values it reports. A hard timeout ends the whole launch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from dlmg.testing import find_mpiexec as mpiexec
from dlmg.testing import free_port, start_local_processes

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "_mp_worker.py"


def have_mpi() -> bool:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return mpiexec() is not None


def skip_without(engine: str, *frameworks: str) -> None:
    """Skip the test unless torch, ``frameworks`` and, for ``engine="mpi"``, an MPI are here."""
    for name in ("torch", *frameworks):
        pytest.importorskip(name)
    if engine == "mpi" and not have_mpi():
        pytest.skip("needs mpi4py and an MPI (pip install mpi4py mpich)")


def launched_per_setup(setups: list[tuple[str, int]], scenarios: list[str] | Callable[[str], list[str]], *,
                       needs: tuple[str, ...] = (), **options: Any) -> Any:
    """A module-scoped fixture that runs ``scenarios`` in one launch per ``(engine,
    process count)`` of ``setups`` (``options`` go to :func:`launch`; ``needs``: the
    frameworks besides torch that the scenarios use). ``scenarios`` may be a function
    of the engine's name, for scenarios only one engine can run."""

    @pytest.fixture(scope="module", params=setups, ids=[f"{e}-{n}" for e, n in setups])
    def run(request: Any) -> dict[str, Any]:
        engine, nprocs = request.param
        skip_without(engine, *needs)
        return launch(engine, nprocs, scenarios(engine) if callable(scenarios) else scenarios, **options)

    return run


def _env(extra: dict[str, str | None] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)  # the worker sets its own device count
    env.update({
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
        "TORCH_CPP_LOG_LEVEL": "ERROR", "PYTHONUNBUFFERED": "1",
        # Open MPI's mpiexec refuses to start as root (containers) without these; MPICH ignores them.
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    })
    for key, value in (extra or {}).items():
        if value is None:
            env.pop(key, None)  # e.g. JAX_PLATFORMS, where JAX must find its GPU
        else:
            env[key] = value
    return env


def launch(engine: str, nprocs: int, scenarios: list[str], *, timeout: float = 240.0,
           collective_timeout: float = 60.0, extra_env: dict[str, str | None] | None = None) -> dict[str, Any]:
    """Run ``scenarios`` in ``nprocs`` processes under ``engine``.

    Returns
    -------
    dict
        ``{"ranks": [per-rank {scenario: {"ok", "error", "value"}} or None],
        "returncodes": [...], "output": str}``.
    """
    out = Path(tempfile.mkdtemp(prefix="dlmg-mp-"))
    args = ["--engine", engine, "--out", str(out), "--timeout", str(collective_timeout),
            "--scenarios", ",".join(scenarios)]
    env = _env(extra_env)
    procs: list[subprocess.Popen] = []
    logs = [open(out / f"log{r}.txt", "w+") for r in range(nprocs)]
    try:
        env["DLMG_TEST_JAX_PORT"] = str(free_port())  # the JAX engine's multi-controller runtime
        # the "jax" engine's processes start as torchrun's do: the worker joins JAX's runtime itself
        starter = "mpi" if engine == "mpi" else "torch"
        procs = start_local_processes([str(WORKER), *args], nprocs, starter, env=env, cwd=ROOT,
                                      output=logs, new_session=True)
        codes = []
        for p in procs:
            try:
                codes.append(p.wait(timeout=timeout))
            except subprocess.TimeoutExpired:
                codes.append(None)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        ranks = []
        for r in range(nprocs):
            path = out / f"rank{r}.json"
            ranks.append(json.loads(path.read_text()) if path.exists() else None)
        output = ""
        for r, log in enumerate(logs):
            log.seek(0)
            output += f"--- process {r} ---\n{log.read()[-6000:]}\n"
        return {"ranks": ranks, "returncodes": codes, "output": output, "engine": engine}
    finally:
        for log in logs:
            log.close()
        shutil.rmtree(out, ignore_errors=True)


#: The engines under which the memory scenarios (tracemalloc) run: under torch.distributed,
#: tracing every allocation while gloo's own threads run crashed the interpreter now and then,
#: so the per-process bound is measured under MPI, whose collectives run on the caller's thread.
MEMORY_ENGINES = ("mpi",)


def with_memory(scenarios: list[str], memory: list[str]) -> Callable[[str], list[str]]:
    """``scenarios`` for every engine, plus the ``memory`` ones under :data:`MEMORY_ENGINES`
    (for :func:`launched_per_setup`)."""
    return lambda engine: scenarios + (memory if engine in MEMORY_ENGINES else [])


def check_memory(result: dict[str, Any], scenario: str) -> list[Any]:
    """:func:`check` of a memory scenario, skipped under engines it does not run on."""
    if result.get("engine") not in MEMORY_ENGINES:
        pytest.skip(f"the memory bound is measured under {', '.join(MEMORY_ENGINES)}: tracemalloc beside "
                    "gloo's threads is not safe")
    return check(result, scenario)


def check(result: dict[str, Any], scenario: str, ranks: list[int] | None = None) -> list[Any]:
    """Assert ``scenario`` passed on every (or the given) rank; returns the per-rank values."""
    values = []
    for r, rank in enumerate(result["ranks"]):
        if ranks is not None and r not in ranks:
            continue
        assert rank is not None, f"process {r} wrote no results:\n{result['output']}"
        entry = rank.get(scenario)
        assert entry is not None, f"process {r} did not run {scenario}:\n{result['output']}"
        assert entry["ok"], f"{scenario} failed on process {r}: {entry['error']}\n{result['output'][-3000:]}"
        values.append(entry.get("value"))
    return values
