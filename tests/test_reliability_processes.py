"""Reliability across 2 and 3 processes on each engine (torch.distributed on gloo, MPI):
a collective gives the one-process answer or raises on every rank.

Each (engine, process count) pair launches its processes once for the module
and runs the scenarios of :mod:`tests._mp_faults` in them; the tests below
read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, launched_per_setup

SCENARIOS = ["missing_rank", "small_int_reductions", "var_std", "different_arguments", "allocation_fails",
             "two_threads", "unpickled_elsewhere", "changed_fragment", "agreement_rounds", "mixed_object_sizes",
             "after_finalize"]
SETUPS = [("torch", 2), ("torch", 3), ("mpi", 2), ("mpi", 3)]

pytestmark = pytest.mark.slow


def scenarios_for(engine: str) -> list[str]:
    """A torch.distributed group of the user's exists only under the torch engine."""
    return [*SCENARIOS[:-1], "user_group", SCENARIOS[-1]] if engine == "torch" else SCENARIOS


run = launched_per_setup(SETUPS, scenarios_for, timeout=240.0, collective_timeout=30.0)


def test_a_layout_naming_a_missing_process_is_refused_on_every_rank(run):
    for value in check(run, "missing_rank"):
        assert value.startswith("LayoutError") and "engine has" in value


def test_unsigned_small_and_complex_reductions_across_processes(run):
    values = check(run, "small_int_reductions")
    assert values[0] == values[-1]
    done = {(d, op) for d, op, _, how in values[0] if how == "equal"}
    for dtype in ("uint8", "uint16", "uint32", "uint64", "int8", "int16"):
        assert {(dtype, "sum"), (dtype, "prod")} <= done
    assert {("int16", "max"), ("int16", "min"), ("int16", "argmax"), ("complex64", "prod")} <= done


def test_var_and_std_across_processes(run):
    assert all(v == 32 for v in check(run, "var_std"))


def test_after_finalize_every_rank_raises_the_same_error(run):
    for value in check(run, "after_finalize"):
        assert value.startswith("FragmentError") and "init" in value


def test_ranks_asking_for_different_results_are_stopped(run):
    for value in check(run, "different_arguments"):
        assert value.startswith("CollectiveMismatchError") and "result_dtype" in value


def test_an_allocation_failure_after_planning_raises_on_every_rank(run):
    values = check(run, "allocation_fails")
    assert values[1].startswith("MemoryError")
    assert all(v.startswith("CollectiveError") for i, v in enumerate(values) if i != 1)


def test_two_threads_running_collectives_never_crash_or_give_wrong_values(run):
    for value in check(run, "two_threads"):
        assert value["right"] + value["refused"] == 20
    assert run["returncodes"] == [0] * len(run["returncodes"]) or run["returncodes"] == [0]


def test_a_tensor_unpickled_in_another_process_is_refused_on_every_rank(run):
    values = check(run, "unpickled_elsewhere")
    assert set(values[0]) == {"gather", "sum", "sum_axis", "redistribute"}
    for outcome in values[0].values():  # where it was pickled: the others' refusal, naming them
        assert outcome.startswith("CollectiveError") and "pickled, in process 0" in outcome
    for rank, seen in enumerate(values[1:], start=1):
        assert set(seen) == {"gather", "sum", "sum_axis", "redistribute", "add"}
        for outcome in seen.values():
            assert outcome.startswith("FragmentError") and f"this is process {rank}" in outcome


def test_a_fragment_changed_on_one_rank_is_refused_on_every_rank(run):
    for rank, seen in enumerate(check(run, "changed_fragment")):
        for outcome in seen.values():
            assert outcome.startswith("FragmentError" if rank == 1 else "CollectiveError"), (rank, outcome)
            assert "must keep its shape" in outcome


def test_a_user_group_gets_agreements_of_its_own(run):
    if "user_group" not in run["ranks"][0]:
        pytest.skip("a torch.distributed group: the torch engine only")
    values = check(run, "user_group")
    assert values[1].startswith("Injected")
    assert values[0].startswith("CollectiveError") and "rank(s) 1" in values[0]
    assert all(v == "outside" for v in values[2:])


def test_an_agreement_is_one_all_gather_unless_something_needs_the_texts(run):
    """One fixed-size all-gather when every process agrees (a product that needs no exchange
    runs one agreement in all); a second one for a vote too long for the record, for a
    failure and for differing descriptions, on every rank alike."""
    for rounds in check(run, "agreement_rounds"):
        assert rounds == {"agreed": 1, "long vote": 2, "failed": 2, "differ": 2, "failed after": 2,
                          "redistribute": 2, "rows @ replicated": 1, "columns @ rows": 1}, rounds


def test_objects_of_any_size_are_gathered_whole(run):
    assert check(run, "mixed_object_sizes") == [list(range(len(run["ranks"])))] * len(run["ranks"])


def test_the_run_ends_cleanly(run):
    """Every process exits 0, and MPI finalizes with no pending request on a communicator."""
    assert all(code == 0 for code in run["returncodes"])
    assert "pending" not in run["output"]
