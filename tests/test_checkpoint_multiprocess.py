"""dlmg.save / dlmg.load across processes, on torch.distributed (gloo) and MPI.

Per engine, one shared directory and a sequence of launches: 2 processes save and
load, 4 processes load what 2 saved and save themselves, then 2 and 1 processes
load both (so 2 -> 1, 2, 4 and 4 -> 2, 1). On gloo also the bytes each process reads,
a save that loses a process part way, and the bridge to PyTorch's DCP; on both, loads
by every process while an independent process saves the same path.
"""

from __future__ import annotations

import pytest

from _multiproc import check, have_mpi, launch

pytestmark = pytest.mark.slow

ENGINES = ["torch", "mpi"]


@pytest.fixture(scope="module", params=ENGINES)
def runs(request, tmp_path_factory):
    pytest.importorskip("torch")
    pytest.importorskip("tensorstore")
    engine = request.param
    if engine == "mpi" and not have_mpi():
        pytest.skip("needs mpi4py and an mpiexec")
    env = {"DLMG_TEST_CKPT_DIR": str(tmp_path_factory.mktemp(f"ckpt-{engine}"))}
    crash = engine == "torch"  # under mpiexec a process that exits takes the whole job down
    steps = [
        (2, ["ckpt_save", "ckpt_load", "ckpt_load_during_saves", "ckpt_load_pins_differ"]
         + (["ckpt_bytes_read", "dcp_roundtrip"] if engine == "torch" else [])),
        (4, ["ckpt_load", "ckpt_save"]),
        (2, ["ckpt_load"] + (["ckpt_crash_save"] if crash else [])),
        (1, ["ckpt_load"] + (["ckpt_crash_check"] if crash else [])),
    ]
    results = []
    for nprocs, scenarios in steps:
        results.append((nprocs, scenarios, launch(engine, nprocs, scenarios, timeout=300, collective_timeout=40,
                                                  extra_env=env)))
    return engine, results


def _loaded(runs, nprocs_wanted, index):
    _, results = runs
    nprocs, scenarios, result = results[index]
    assert nprocs == nprocs_wanted
    return check(result, "ckpt_load")


def test_two_processes_save_and_load(runs):
    values = _loaded(runs, 2, 0)
    assert all(v == values[0] for v in values)
    assert [2, "saved layout"] in values[0] and [2, "block-cyclic"] in values[0]


def test_four_processes_load_what_two_saved_then_save(runs):
    values = _loaded(runs, 4, 1)
    assert {tuple(e) for e in values[0]} == {(2, "column slabs"), (2, "block-cyclic"), (2, "replicated"),
                                             (2, "saved layout")}
    _, results = runs
    assert check(results[1][2], "ckpt_save") == [4] * 4


def test_two_processes_load_what_four_saved(runs):
    values = _loaded(runs, 2, 2)
    assert [4, "refused saved layout"] in values[0] and [4, "column slabs"] in values[0]


def test_one_process_loads_both(runs):
    (value,) = _loaded(runs, 1, 3)
    assert {e[0] for e in value} == {2, 4} and [2, "refused saved layout"] in value


def test_each_process_reads_at_most_a_tenth_more_than_it_needs(runs):
    engine, results = runs
    if engine != "torch":
        pytest.skip("counted once, on the gloo launch")
    for read, need in check(results[0][2], "ckpt_bytes_read"):
        assert need <= read <= 1.1 * need, (read, need)


def test_a_save_that_loses_a_process_publishes_nothing(runs):
    engine, results = runs
    if engine != "torch":
        pytest.skip("under mpiexec a process that exits ends the whole job; tested on gloo")
    assert check(results[2][2], "ckpt_crash_save", ranks=[0])[0].startswith("refused")
    assert "incomplete save" in check(results[3][2], "ckpt_crash_check")[0]


def test_loads_of_every_process_read_one_save_while_another_process_saves(runs):
    _, results = runs
    assert check(results[0][2], "ckpt_load_during_saves") == [30, 30]


def test_processes_that_pinned_different_saves_load_again_and_agree(runs):
    _, results = runs
    assert check(results[0][2], "ckpt_load_pins_differ") == [[False, True]] * 2


def test_dcp_bridge_both_ways(runs):
    engine, results = runs
    if engine != "torch":
        pytest.skip("DCP runs on torch.distributed; tested on gloo")
    assert check(results[0][2], "dcp_roundtrip") == [2, 2]
