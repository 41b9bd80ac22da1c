"""Starting one SPMD script in several processes on this machine, for tests and benchmarks.

The two engines' launchers differ: torch.distributed reads torchrun's
environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``,
``MASTER_PORT``), MPI starts its processes itself through ``mpiexec -n N``.
:func:`start_local_processes` hides that difference, so that a test of code
written against :mod:`dlmg.distributed` runs the same script under either.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from dlmg.errors import FrameworkNotInstalledError

__all__ = ["find_mpiexec", "free_port", "start_local_processes"]

#: The engines :func:`start_local_processes` knows how to start.
ENGINES = ("torch", "mpi")


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_mpiexec() -> str | None:
    """The ``mpiexec`` beside the interpreter (the ``mpich`` wheel installs one there),
    else the one on the ``PATH``, else ``None``."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def start_local_processes(
    argv: Sequence[str],
    nprocs: int,
    engine: str = "torch",
    *,
    env: Mapping[str, str],
    cwd: str | Path | None = None,
    output: Sequence[IO[Any]] | None = None,
    new_session: bool = False,
) -> list[subprocess.Popen[Any]]:
    """Start ``python argv...`` in ``nprocs`` processes on 127.0.0.1, without waiting.

    Parameters
    ----------
    argv : sequence of str
        The script and its arguments (the interpreter is this one, ``sys.executable``).
    nprocs : int
        How many processes.
    engine : {"torch", "mpi"}
        ``"torch"``: ``nprocs`` plain processes with torchrun's environment on a
        free port; ``"mpi"``: one ``mpiexec -n nprocs`` process.
    env : dict
        The environment every process starts from.
    cwd : str, optional
        The processes' working directory.
    output : sequence, optional
        Open files: where process ``r`` writes its stdout and stderr (under ``"mpi"`` all
        processes write to the first); ``None``: a text pipe per started process.
    new_session : bool
        Start each process in a session of its own, so that the caller can end it
        with its children (``os.killpg``).

    Returns
    -------
    list of subprocess.Popen
        ``nprocs`` processes under ``"torch"``, the one ``mpiexec`` under ``"mpi"``.

    Raises
    ------
    ValueError
        For an ``engine`` other than ``"torch"`` and ``"mpi"``, or ``output`` with
        fewer files than processes.
    FrameworkNotInstalledError
        For ``engine="mpi"`` when no ``mpiexec`` is found.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: expected one of {ENGINES}")
    started = 1 if engine == "mpi" else nprocs
    if output is not None and len(output) < started:
        raise ValueError(f"output: {len(output)} files for {started} processes")

    def start(cmd: list[str], r: int, penv: Mapping[str, str]) -> subprocess.Popen[Any]:
        where: Any = subprocess.PIPE if output is None else output[r]
        return subprocess.Popen(cmd, env=dict(penv), cwd=cwd, stdout=where, stderr=subprocess.STDOUT,
                                text=output is None, start_new_session=new_session)

    if engine == "mpi":
        mpiexec = find_mpiexec()
        if mpiexec is None:
            raise FrameworkNotInstalledError("engine='mpi': no mpiexec found (pip install mpi4py mpich)")
        return [start([mpiexec, "-n", str(nprocs), sys.executable, *argv], 0, env)]
    port = str(free_port())
    return [
        start([sys.executable, *argv], r,
              dict(env, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=port))
        for r in range(nprocs)
    ]
