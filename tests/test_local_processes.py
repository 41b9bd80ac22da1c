"""``dlmg.testing.start_local_processes``: one script in several processes of this machine."""

from __future__ import annotations

import os

import pytest

from dlmg.testing import find_mpiexec, free_port, start_local_processes

SCRIPT = "import os; print(os.environ['RANK'], os.environ['WORLD_SIZE'], os.environ['MASTER_PORT'])"


def test_torch_engine_gives_each_process_torchruns_environment():
    procs = start_local_processes(["-c", SCRIPT], 3, "torch", env=dict(os.environ))
    lines = [p.communicate(timeout=60)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    assert [line[:2] for line in lines] == [["0", "3"], ["1", "3"], ["2", "3"]]
    assert len({line[2] for line in lines}) == 1  # one rendezvous port for all


def test_mpi_engine_is_one_mpiexec(tmp_path):
    """One mpiexec starts both ranks: each writes its own file (their shared output could
    interleave mid-line), named by its rank in one MPI world of size 2."""
    if find_mpiexec() is None:
        pytest.skip("needs an MPI (pip install mpich)")
    script = (
        "import pathlib, sys\n"
        "from mpi4py import MPI\n"
        "world = MPI.COMM_WORLD\n"
        "pathlib.Path(sys.argv[1], f'rank-{world.Get_rank()}').write_text(f'hello {world.Get_size()}')\n"
    )
    procs = start_local_processes(["-c", script, str(tmp_path)], 2, "mpi", env=dict(os.environ))
    assert len(procs) == 1
    procs[0].communicate(timeout=120)
    assert procs[0].returncode == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank-0", "rank-1"]
    assert {p.read_text() for p in tmp_path.iterdir()} == {"hello 2"}


def test_bad_arguments_are_refused_before_anything_starts(tmp_path):
    with pytest.raises(ValueError, match="engine='gloo'"):
        start_local_processes(["-c", "pass"], 2, "gloo", env={})
    with open(tmp_path / "log", "w") as log, pytest.raises(ValueError, match="output: 1 files for 2"):
        start_local_processes(["-c", "pass"], 2, "torch", env={}, output=[log])
    assert 0 < free_port() < 65536
