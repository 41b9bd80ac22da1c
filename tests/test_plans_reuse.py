"""What redistribution and gather remember between calls: plans per tensor and
target layout, source views per copy, and planning that stays near-linear in
the fragment count. Results are checked against NumPy; nothing is timed."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg.plans.endpoints import layout_endpoints
from dlmg.plans.build import build_plan


def grid_layout(n: int, grid: tuple[int, int]) -> dlmg.Layout:
    return dlmg.Layout((n, n), block=(-(-n // grid[0]), -(-n // grid[1])), grid=grid,
                       devices=["cpu"] * (grid[0] * grid[1]))


def test_repeated_redistribution_reuses_its_plan_and_views():
    x = np.arange(24 * 24, dtype=np.float32).reshape(24, 24)
    src, dst = grid_layout(24, (4, 2)), grid_layout(24, (2, 4))
    dt = dlmg.scatter(x, src)
    first = dt.redistribute(dst)
    plan = dt.plan_redistribution(dst)
    second = dt.redistribute(dst)
    assert dt.plan_redistribution(dst) is plan
    np.testing.assert_array_equal(np.asarray(first.gather()), x)
    np.testing.assert_array_equal(np.asarray(second.gather()), x)
    # the fragments' memory is read again, not a copy taken the first time
    dt.fragments[0].array[...] = -1
    third = np.asarray(dt.redistribute(dst).gather())
    assert (third[:6, :12] == -1).all() and (third[6:] == x[6:]).all()


def test_gather_out_twice_sees_fragment_updates():
    x = np.random.default_rng(0).random((12, 10)).astype(np.float32)
    dt = dlmg.scatter(x, dlmg.Layout.block_cyclic((12, 10), block=(2, 3), grid=(3, 2), devices=["cpu"] * 6))
    out = np.empty_like(x)
    dt.gather(out=out)
    np.testing.assert_array_equal(out, x)
    dt.fragments[2].array[...] = 7
    dt.gather(out=out)
    assert (out == 7).sum() == dt.fragments[2].array.size


def test_jax_fragment_replacement_starts_afresh():
    pytest.importorskip("jax")
    from _ops_support import jax_cpus

    if jax_cpus() < 2:
        pytest.skip("needs 2 JAX CPU devices")
    import jax

    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    lay = dlmg.Layout.slab((4, 4), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.from_fragments([jax.device_put(x[:2], jax.devices("cpu")[0]),
                              jax.device_put(x[2:], jax.devices("cpu")[1])], lay)
    cols = dlmg.Layout.slab((4, 4), 1, ["cpu:0", "cpu:1"])
    np.testing.assert_array_equal(np.asarray(dt.redistribute(cols).gather()), x)
    dt += 1  # JAX fragments are replaced by new arrays
    np.testing.assert_array_equal(np.asarray(dt.redistribute(cols).gather()), x + 1)


@pytest.mark.parametrize("grid,target", [((8, 4), (4, 8)), ((4, 4), (8, 2)), ((16, 1), (1, 16))])
def test_planning_finds_exactly_the_overlapping_pairs(grid, target):
    n = 32
    src, dst = grid_layout(n, grid), grid_layout(n, target)
    plan = build_plan(layout_endpoints(src), layout_endpoints(dst), 4)
    pairs = {(c.src, c.dst) for c in plan.copies}
    expected = set()
    for s in src.fragments:
        s_rows, s_cols = set(src.owned_indices(s.index, 0)), set(src.owned_indices(s.index, 1))
        for d in dst.fragments:
            if s_rows & set(dst.owned_indices(d.index, 0)) and s_cols & set(dst.owned_indices(d.index, 1)):
                expected.add((s.index, d.index))
    assert pairs == expected
    assert sum(c.size for c in plan.copies) == n * n


def test_layout_hash_is_stable_and_equal_layouts_share_plans():
    a, b = grid_layout(16, (4, 2)), grid_layout(16, (4, 2))
    assert a is not b and a == b and hash(a) == hash(b)
    assert dlmg.plan_redistribution(a, grid_layout(16, (2, 4))) is dlmg.plan_redistribution(b, grid_layout(16, (2, 4)))


def test_copy_pairs_without_bulk_copies_writes_every_pair():
    from dlmg.adapters.capabilities import BulkCopies, copy_pairs
    from dlmg.registry import get_adapter

    numpy_adapter = get_adapter("numpy")
    dst = np.zeros((4, 6), np.float32)
    srcs = [np.full((2, 3), v, np.float32) for v in (1, 2, 3, 4)]
    dsts = [dst[:2, :3], dst[:2, 3:], dst[2:, :3], dst[2:, 3:]]
    assert not isinstance(numpy_adapter, BulkCopies)  # the general way: copy_into pair by pair
    copy_pairs(numpy_adapter, dsts, srcs)
    np.testing.assert_array_equal(dst, [[1, 1, 1, 2, 2, 2]] * 2 + [[3, 3, 3, 4, 4, 4]] * 2)


def test_numpy_staging_memory_is_aligned_for_any_importer():
    from dlmg.registry import get_adapter

    numpy_adapter = get_adapter("numpy")
    for shape in [(3,), (257, 129), (0, 5), (1024, 1024), (4099, 17)]:
        a = numpy_adapter.empty(shape, "float32", dlmg.Device("cpu", 0))
        assert a.shape == shape and a.dtype == np.float32
        assert a.nbytes < 1 << 16 or a.ctypes.data % 64 == 0


def test_host_fragments_of_a_scatter_are_separate_allocations():
    # host fragments are not carved from one buffer (their pages would all fault
    # in one fresh mapping); each is its own array
    x = np.arange(64.0).reshape(16, 4)
    dt = dlmg.scatter(x, dlmg.Layout.slab(x.shape, 0, ["cpu"] * 4))
    assert all(f.array.base is None and f.array.flags.owndata for f in dt.fragments)
    np.testing.assert_array_equal(dt.gather(), x)
