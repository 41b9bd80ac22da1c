"""The engines' own collectives in 2 and 4 processes (torch.distributed on gloo, MPI),
the engine registry, set-up errors and the routing math (one process)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from dlmg.plans.routes import layout_places, plan_routes

from _multiproc import check, have_mpi, launch

ENGINES = [
    pytest.param("torch", marks=pytest.mark.skipif(pytest.importorskip("torch") is None, reason="needs torch")),
    pytest.param("mpi", marks=pytest.mark.skipif(not have_mpi(), reason="needs mpi4py and an MPI (pip install mpi4py mpich)")),
]


@pytest.mark.slow
@pytest.mark.parametrize("nprocs", [2, 4])
@pytest.mark.parametrize("engine", ENGINES)
def test_engine_collectives(engine, nprocs):
    result = launch(engine, nprocs, ["engine"])
    values = check(result, "engine")
    assert all(v["name"] == engine and v["backend"] == engine for v in values)
    assert values[0]["devices"] == ["cpu:0"] * nprocs


def test_registry_and_single_process_defaults():
    assert {"torch", "mpi"} <= set(dd.engine_names())
    assert not dd.is_initialized() and dd.backend() is None
    assert dd.rank() == 0 and dd.world_size() == 1 and str(dd.local_device()) == "cpu:0"
    assert dd.slab((4, 2)) == Layout.slab((4, 2), 0, ["cpu"])
    with pytest.raises(dlmg.FrameworkError, match="backend 'nccl2' is unknown"):
        dd.init("nccl2")
    with pytest.raises(ValueError, match="timeout"):
        dd.init("torch", timeout=0)


def test_torch_init_outside_torchrun(monkeypatch):
    pytest.importorskip("torch")
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(dlmg.CollectiveError, match="torchrun"):
        dd.init("torch")
    with pytest.raises(TypeError, match="group="):
        dd.init("torch", comm=object())
    assert not dd.is_initialized()


def _layouts(draw, shape, world):
    block = [draw(st.integers(1, max(n, 1))) for n in shape]
    grid = [draw(st.integers(1, 3)) for _ in shape]
    reps = draw(st.integers(1, 2))
    n = int(np.prod(grid)) * reps
    ranks = [draw(st.integers(0, world - 1)) for _ in range(n)]
    return Layout(shape, block=block, grid=grid, devices=["cpu"] * n, ranks=ranks)


@st.composite
def _pairs(draw):
    world = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=3)))
    return world, _layouts(draw, shape, world), _layouts(draw, shape, world)


@given(_pairs())
def test_routes_cover_every_destination_element_once(pair):
    world, src, dst = pair
    routes = plan_routes(layout_places(src), layout_places(dst), world, 4)
    filled = {f.index: np.zeros(f.shape, dtype=np.int64) for f in dst.fragments}
    pieces = [(p.src, p.dst, p.indices) for ps in routes.messages.values() for p in ps]
    for (a, b), ps in routes.messages.items():
        assert a != b and ps  # one message per pair of different processes
        offset = 0
        for p in ps:  # packed back to back
            assert p.offset == offset
            offset += p.size
            assert src.ranks[p.src] == a and dst.ranks[p.dst] == b
    for rank, pairs in routes.local.items():
        for s, d, box in pairs:
            assert src.ranks[s] == rank == dst.ranks[d]
            want = tuple(np.intersect1d(src.owned_indices(s, m), dst.owned_indices(d, m)) for m in range(src.ndim))
            assert all(np.array_equal(a, b) for a, b in zip(box, want))
            pieces.append((s, d, box))
    for s, d, box in pieces:
        local = [np.searchsorted(dst.owned_indices(d, m), box[m]) for m in range(dst.ndim)]
        filled[d][np.ix_(*local)] += 1
    for d, counts in filled.items():
        assert (counts == 1).all(), (d, counts)
