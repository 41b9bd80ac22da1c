"""Mode maps as runs: a fragment's held indices along a mode are described block by
block, so planning costs memory and time in the number of blocks, not of elements.
Every run operation is compared with the same operation on explicit index arrays."""

from __future__ import annotations


import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg.plans.routes import layout_places, plan_routes
from dlmg.plans.segments import blocked_mode, cyclic_mode, decompose, dense_mode, intersection

from _memory import peak_of


def _owned(block: int, grid: int, coord: int, local: int) -> np.ndarray:
    k = np.arange(local, dtype=np.int64)
    return (coord + (k // block) * grid) * block + k % block


@st.composite
def cyclic_maps(draw):
    block = draw(st.integers(1, 6))
    grid = draw(st.integers(1, 4))
    coord = draw(st.integers(0, grid - 1))
    local = draw(st.integers(0, 30))
    if draw(st.booleans()):
        return cyclic_mode(block, grid, coord, local), _owned(block, grid, coord, local), None, block
    es = draw(st.integers(1, 3))
    bs = draw(st.integers(block * es, block * es + 3))
    return cyclic_mode(block, grid, coord, local, es, bs), _owned(block, grid, coord, local), (block, es, bs), block


@settings(max_examples=150)
@given(cyclic_maps())
def test_cyclic_mode_is_the_element_map(case):
    m, owned, strides, block = case
    want = dense_mode(owned) if strides is None else blocked_mode(owned, *strides)
    assert len(m) == owned.size
    np.testing.assert_array_equal(m.indices, owned)
    np.testing.assert_array_equal(np.asarray(m), owned)
    np.testing.assert_array_equal(m.offsets, want.offsets)
    assert m.unit == want.unit
    assert m.same_indices(want) and want.same_indices(m)
    assert m.same_offsets(want) and want.same_offsets(m)
    assert m.starts.size <= -(-owned.size // block)  # at most one run per local block
    if owned.size:
        assert (m.first, m.last) == (owned[0], owned[-1])
        pick = owned[:: max(owned.size // 5, 1)]
        np.testing.assert_array_equal(m.local_positions(pick), np.searchsorted(owned, pick))


@settings(max_examples=150)
@given(cyclic_maps(), cyclic_maps(), st.integers(1, 3), st.integers(1, 3))
def test_run_comparisons_agree_with_elements(a, b, sa, sb):
    (ma, ia, _, _), (mb, ib, _, _) = a, b
    assert ma.same_indices(mb) == (ia.size == ib.size and np.array_equal(ia, ib))
    same = ma.offsets.size == mb.offsets.size and np.array_equal(ma.offsets * sa, mb.offsets * sb)
    assert ma.same_offsets(mb, sa, sb) == same
    common = intersection(ma, mb)
    np.testing.assert_array_equal(common.indices, np.intersect1d(ia, ib))
    np.testing.assert_array_equal(common.offsets, np.arange(len(common)))


@settings(max_examples=100)
@given(cyclic_maps(), cyclic_maps())
def test_decompose_of_runs_covers_the_intersection(a, b):
    (ma, ia, _, _), (mb, ib, _, _) = a, b
    segs = decompose(ma, mb)
    _, pa, pb = np.intersect1d(ia, ib, return_indices=True)
    want = sorted(zip(ma.offsets[pa].tolist(), mb.offsets[pb].tolist()))
    got = sorted(
        (s.src_start + c * s.src_step + r * ma.unit, s.dst_start + c * s.dst_step + r * mb.unit)
        for s in segs for c in range(s.count) for r in range(s.run)
    )
    assert got == want


def test_a_mode_map_holds_one_run_per_block():
    m = cyclic_mode(256, 16, 3, 2**16)
    assert m.starts.size == 2**16 // 256
    assert len(m) == 2**16
    whole = cyclic_mode(2**20, 1, 0, 2**20)
    assert whole.starts.size == 1


def _layouts(n: int, block: int, devices: int, per: int):
    names = [f"cpu:{i % devices}" for i in range(devices * per)]
    src = dlmg.Layout.block_cyclic((n,), (block,), (devices * per,), names)
    return src, dlmg.Layout.slab((n,), 0, [f"cpu:{i}" for i in range(devices)])


def test_planning_memory_follows_the_blocks_not_the_elements():
    # 2^20 float64 in blocks of 256 over 8 devices, two fragments each: a share is 1 MiB,
    # the mode maps of one int64 per element would be as large (per fragment, several times over)
    n, block = 2**20, 256
    src, slab = _layouts(n, block, 8, 2)
    share = n * 8 // 8
    peak = peak_of(lambda: dlmg.plan_redistribution(src, slab, "float64"))
    assert peak < share // 2, peak
    plan = dlmg.plan_redistribution(src, slab, "float64")
    assert plan.total_bytes == n * 8
    assert sum(c.size for c in plan.copies) == n
    ranks = [i % 2 for i in range(16)]
    src_r = src.replace(ranks=ranks)
    slab_r = slab.replace(ranks=[i % 2 for i in range(8)])
    peak = peak_of(lambda: plan_routes(layout_places(src_r), layout_places(slab_r), 2, 8))
    assert peak < share // 2, peak


def test_many_blocks_redistribute_exactly():
    n, block = 2**14, 16
    src, slab = _layouts(n, block, 4, 2)
    x = np.arange(n, dtype=np.float64)
    y = dlmg.scatter(x, src).redistribute(slab)
    for frag in y.fragments:
        lo = frag.index * (n // 4)
        np.testing.assert_array_equal(np.asarray(frag.array), x[lo:lo + n // 4])
    np.testing.assert_array_equal(np.asarray(y.redistribute(src).gather()), x)
