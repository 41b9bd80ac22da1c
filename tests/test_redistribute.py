"""Redistribution and its copy plans: the segment math, byte counts, reused
fragments, and round trips between random layouts and frameworks."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.errors import LayoutMismatchError
from dlmg.plans.segments import blocked_mode, decompose, dense_mode, streaks

from _strategies import (
    FRAMEWORKS,
    check_fragments,
    expected_fragment,
    have,
    jax_cpus,
    layout_pairs,
    layouts,
    make,
    need,
    reference,
    shapes,
    to_numpy,
)

AVAILABLE = tuple(f for f in FRAMEWORKS if have(f))


# -- segments -------------------------------------------------------------------------
def _pairs(segments, src_unit, dst_unit):
    """Every (source offset, destination offset) pair the segments cover."""
    out = []
    for s in segments:
        for c in range(s.count):
            for r in range(s.run):
                out.append((s.src_start + c * s.src_step + r * src_unit,
                            s.dst_start + c * s.dst_step + r * dst_unit))
    return out


@st.composite
def mode_maps(draw, universe):
    chosen = sorted(draw(st.sets(st.sampled_from(universe), max_size=len(universe))))
    idx = np.array(chosen, dtype=np.int64)
    if draw(st.booleans()):
        return dense_mode(idx)
    block = draw(st.integers(1, 4))
    es = draw(st.integers(1, 3))
    bs = draw(st.integers(block * es, block * es + 3))
    return blocked_mode(idx, block, es, bs)


@settings(max_examples=150)
@given(st.data())
def test_decompose_covers_the_intersection_exactly(data):
    universe = list(range(data.draw(st.integers(1, 40))))
    a = data.draw(mode_maps(universe))
    b = data.draw(mode_maps(universe))
    segs = decompose(a, b)
    common, ia, ib = np.intersect1d(a.indices, b.indices, return_indices=True)
    want = list(zip(a.offsets[ia].tolist(), b.offsets[ib].tolist()))
    assert sorted(_pairs(segs, a.unit, b.unit)) == sorted(want)  # each pair once, any order
    assert all(s.count >= 1 and s.run >= 1 for s in segs)


def test_decompose_block_cyclic_is_a_few_segments():
    n, block, grid = 10_000, 7, 3
    k = np.arange(n)
    owned = k[(k // block) % grid == 1]
    segs = decompose(dense_mode(owned), dense_mode(np.arange(n)))
    assert len(segs) <= 2  # the full blocks as one progression, plus a partial last block
    assert sum(s.size for s in segs) == owned.size
    cyc = decompose(dense_mode(np.arange(2, n, 5)), dense_mode(np.arange(1000, 4000)))
    assert len(cyc) == 1 and cyc[0].run == 1


def test_streaks():
    flags = np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], bool)
    assert streaks(flags).tolist() == [2, 1, 0, 1, 0, 0, 3, 2, 1]
    assert streaks(np.zeros(0, bool)).tolist() == []


# -- plans ---------------------------------------------------------------------------------
def _expected_plan_bytes(src: Layout, dst: Layout, itemsize: int):
    """Bytes each destination fragment needs: 0 when a source fragment on its device holds
    exactly its elements, else all of them."""
    total = 0
    reused = set()
    for d in dst.fragments:
        if d.size == 0:
            continue
        same = [
            s for s in src.fragments
            if s.device == d.device and s.shape == d.shape
            and all(np.array_equal(src.owned_indices(s.index, m), dst.owned_indices(d.index, m))
                    for m in range(dst.ndim))
        ]
        if same:
            reused.add(d.index)
        else:
            total += d.size * itemsize
    return total, reused


@settings(max_examples=60)
@given(layout_pairs(), st.sampled_from(["float32", "complex128", "bool"]))
def test_plan_bytes_equal_what_differs(pair, dtype):
    src, dst = pair
    plan = dlmg.plan_redistribution(src, dst, dtype)
    itemsize = np.dtype(dtype).itemsize
    total, reused = _expected_plan_bytes(src, dst, itemsize)
    assert plan.total_bytes == total
    assert set(plan.reused) == reused
    assert sum(plan.bytes_by_devices.values()) == total
    for d in dst.fragments:  # every element of a destination is written exactly once
        if d.index not in reused:
            assert sum(c.size for c in plan.copies_into(d.index)) == d.size
    assert plan.cross_device_bytes == sum(
        n for (a, b), n in plan.bytes_by_devices.items() if a != b
    )
    assert "RedistributionPlan" in str(plan) and "reused" in repr(plan)


def test_plan_summary_and_fields():
    src = Layout.slab((8, 6), 0, ["cpu:0", "cpu:1"])
    dst = Layout.slab((8, 6), 1, ["cpu:0", "cpu:1", "cpu:2"])
    plan = dlmg.plan_redistribution(src, dst, "float64")
    assert plan.total_bytes == 8 * 6 * 8
    assert plan.bytes_by_devices == {
        (dlmg.Device("cpu", 0), dlmg.Device("cpu", 0)): 64,
        (dlmg.Device("cpu", 0), dlmg.Device("cpu", 1)): 64,
        (dlmg.Device("cpu", 0), dlmg.Device("cpu", 2)): 64,
        (dlmg.Device("cpu", 1), dlmg.Device("cpu", 0)): 64,
        (dlmg.Device("cpu", 1), dlmg.Device("cpu", 1)): 64,
        (dlmg.Device("cpu", 1), dlmg.Device("cpu", 2)): 64,
    }
    assert plan.cross_device_bytes == 4 * 64
    assert plan.ncopies == 6 and plan.sources[2] == (0, 1)
    c = plan.copies_into(1)[0]
    assert c.shape == (4, 2) and c.nbytes == 64 and c.src_strides == (6, 1) and c.dst_strides == (2, 1)
    text = plan.summary()
    assert "cpu:1 -> cpu:2: 64 bytes" in text and "6 strided copies" in text
    with pytest.raises(LayoutMismatchError):
        dlmg.plan_redistribution(src, Layout.single((8, 7)), "float32")


@settings(max_examples=60)
@given(shapes(min_ndim=1), st.data())
def test_copies_filling_consecutive_parts_of_one_buffer_join_into_one(shape, data):
    # what a scatter onto one GPU does with its destinations carved one after
    # another from one allocation: where their elements are consecutive in the
    # (C-contiguous) source, the plan's copies become one
    dst = data.draw(layouts(shape, jax_devices=False))
    plan = dlmg.plan_redistribution(Layout.single(shape), dst, "float32")
    members = [f.index for f in dst.fragments if f.size and f.index not in plan.reused]
    sizes = [dst.fragments[i].size for i in members]
    offsets = list(itertools.accumulate([0] + sizes[:-1]))
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    parts = [expected_fragment(x, dst, i).ravel() for i in members]
    consecutive = bool(parts) and np.array_equal(
        np.concatenate(parts), np.arange(parts[0][0], parts[0][0] + sum(sizes), dtype=np.float32)
    )
    joined = plan.joined(members, offsets, sizes)
    assert (joined is not None) == consecutive, (dst, members)
    assert plan.joined(members, offsets, sizes) is joined  # remembered
    if joined is None:
        return
    assert joined.shape == (sum(sizes),) and joined.nbytes == 4 * sum(sizes) and joined.dst_offset == 0
    from dlmg.movement.copies import Buffer, run_copies
    from dlmg.registry import get_adapter

    numpy, cpu = get_adapter("numpy"), dlmg.Device("cpu", 0)
    whole = np.full(sum(sizes), -1, np.float32)
    run_copies([joined], {0: Buffer(x, numpy, cpu)}, Buffer(whole, numpy, cpu), "float32")
    for part, offset, size in zip(parts, offsets, sizes):
        np.testing.assert_array_equal(whole[offset:offset + size], part)
    if len(members) > 1:  # a gap between two parts: no longer one copy
        gapped = [offset + (64 if k else 0) for k, offset in enumerate(offsets)]
        assert plan.joined(members, gapped, sizes) is None
        assert plan.joined(members[::-1], offsets, sizes[::-1]) is None  # the other order


def test_row_slabs_join_and_column_slabs_do_not():
    rows = Layout.slab((100, 33), 0, ["cpu"] * 8)  # 13 rows each, 9 in the last
    plan = dlmg.plan_redistribution(Layout.single((100, 33)), rows, "float64")
    sizes = [f.size for f in rows.fragments]
    offsets = list(itertools.accumulate([0] + sizes[:-1]))
    joined = plan.joined(range(8), offsets, sizes)
    assert joined is not None and joined.shape == (3300,) and joined.src_offset == 0 and joined.nbytes == 26400
    assert plan.joined(range(1, 8), offsets[1:], sizes[1:]).src_offset == 13 * 33  # a run that starts later
    # carved at 256-byte steps, 13 x 33 float64 leave gaps between the parts
    aligned = [k * -(-13 * 33 // 32) * 32 for k in range(8)]
    assert plan.joined(range(8), aligned, sizes) is None
    columns = Layout.slab((100, 33), 1, ["cpu"] * 3)
    plan = dlmg.plan_redistribution(Layout.single((100, 33)), columns, "float64")
    assert plan.joined(range(3), [0, 1100, 2200], [1100] * 3) is None


@settings(max_examples=100)
@given(shapes(min_ndim=1), st.data())
def test_copies_repeated_at_regular_steps_stack_into_one_per_source(shape, data):
    # what a redistribution onto one GPU does with destinations carved from one
    # allocation: where each source's copies into them are one view repeated at
    # regular steps, one copy per source with leading modes; whenever the plan
    # answers with such copies, running them must fill every part as the
    # plan's own copies would, and leave the padding between parts alone
    src = data.draw(layouts(shape, jax_devices=False))
    dst = data.draw(layouts(shape, jax_devices=False))
    plan = dlmg.plan_redistribution(src, dst, "float32")
    members = [f.index for f in dst.fragments if f.size and f.index not in plan.reused]
    sizes = [dst.fragments[i].size for i in members]
    pad = data.draw(st.sampled_from([0, 3]))
    gap = (max(sizes) if sizes else 0) + pad
    offsets = [k * gap for k in range(len(members))]
    stacked = plan.stacked(members, offsets, sizes)
    assert plan.stacked(members, offsets, sizes) is stacked  # remembered
    if len(members) < 2:
        assert stacked is None
    if stacked is None:
        return
    sources = {c.src for i in members for c in plan.copies_into(i)}
    assert sorted(c.src for c in stacked) == sorted(sources)
    assert sum(c.nbytes for c in stacked) == sum(c.nbytes for i in members for c in plan.copies_into(i))
    from dlmg.movement.copies import Buffer, run_copies
    from dlmg.registry import get_adapter

    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    numpy, cpu = get_adapter("numpy"), dlmg.Device("cpu", 0)
    held = {i: Buffer(np.ascontiguousarray(expected_fragment(x, src, i)), numpy, cpu) for i in sources}
    whole = np.full(gap * len(members), -1, np.float32)
    run_copies(list(stacked), held, Buffer(whole, numpy, cpu), "float32")
    for i, offset, size in zip(members, offsets, sizes):
        np.testing.assert_array_equal(whole[offset:offset + size], expected_fragment(x, dst, i).ravel())
        assert (whole[offset + size:offset + gap] == -1).all()


@settings(max_examples=100)
@given(shapes(min_ndim=1), st.data())
@example((64, 32), None)  # row slabs to column slabs, block grids, below
def test_copies_between_two_carved_allocations_become_one_where_they_step_regularly(shape, data):
    # a redistribution on one GPU between tensors whose fragments dlmg carved
    # out of one allocation each: where every piece steps regularly through
    # both allocations, one copy with leading modes; whenever one_copy answers,
    # running that copy must fill every part as the plan's copies would, and
    # leave the padding between parts alone
    from dlmg.movement.copies import Buffer, run_copies
    from dlmg.plans.plan import one_copy
    from dlmg.registry import get_adapter

    if data is None:
        cases = [(Layout.slab(shape, 0, ["cpu"] * 8), Layout.slab(shape, 1, ["cpu"] * 8), 0, 0),
                 (Layout(shape, block=(16, 16), grid=(4, 2), devices=["cpu"] * 8),
                  Layout(shape, block=(32, 8), grid=(2, 4), devices=["cpu"] * 8), 0, 0)]
    else:
        cases = [(data.draw(layouts(shape, jax_devices=False)), data.draw(layouts(shape, jax_devices=False)),
                  data.draw(st.sampled_from([0, 3])), data.draw(st.sampled_from([0, 5])))]
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    numpy, cpu = get_adapter("numpy"), dlmg.Device("cpu", 0)
    for src, dst, src_pad, dst_pad in cases:
        plan = dlmg.plan_redistribution(src, dst, "float32")
        members = [f.index for f in dst.fragments if f.size and f.index not in plan.reused]
        sizes = [dst.fragments[i].size for i in members]
        gap = (max(sizes) if sizes else 0) + dst_pad
        offsets = [k * gap for k in range(len(members))]
        held = [f.index for f in src.fragments if f.size]
        step = max((f.size for f in src.fragments), default=0) + src_pad
        places = {i: (-1, k * step) for k, i in enumerate(held)}
        merged = one_copy(members, offsets, places, plan.copies_into)
        pieces = [c for i in members for c in plan.copies_into(i)]
        if data is None:  # these two always step regularly
            assert merged is not None and merged.size == x.size
        if merged is None:
            continue
        assert merged.src == -1 and merged.nbytes == sum(c.nbytes for c in pieces)
        allocation = np.full(step * len(held), -7, np.float32)
        for i, (_, offset) in places.items():
            allocation[offset:offset + src.fragments[i].size] = expected_fragment(x, src, i).ravel()
        whole = np.full(gap * len(members), -1, np.float32)
        run_copies([merged], {-1: Buffer(allocation, numpy, cpu)}, Buffer(whole, numpy, cpu), "float32")
        for i, offset, size in zip(members, offsets, sizes):
            np.testing.assert_array_equal(whole[offset:offset + size], expected_fragment(x, dst, i).ravel())
            assert (whole[offset + size:offset + gap] == -1).all()
        elsewhere = {i: (-2 if k % 2 else -1, k * step) for k, i in enumerate(held)}
        if len({elsewhere[c.src][0] for c in pieces}) > 1:  # sources in two allocations: no one copy
            assert one_copy(members, offsets, elsewhere, plan.copies_into) is None


def test_cyclic_rows_grids_and_column_slabs_stack_and_others_do_not():
    single = Layout.single((64, 33))
    cyclic = Layout((64, 33), block=(1, 33), grid=(8, 1), devices=["cpu"] * 8)
    plan = dlmg.plan_redistribution(single, cyclic, "float32")
    (stacked,) = plan.stacked(range(8), [k * 8 * 33 for k in range(8)], [8 * 33] * 8)
    assert stacked.shape == (8, 8, 33) and stacked.src_strides == (33, 8 * 33, 1)
    (padded,) = plan.stacked(range(8), [k * 300 for k in range(8)], [8 * 33] * 8)
    assert padded.dst_strides == (300, 33, 1)
    assert plan.stacked(range(8), [k * 200 for k in range(8)], [8 * 33] * 8) is None  # parts would overlap
    assert plan.stacked([1, 0, 2], [0, 264, 528], [264] * 3) is None  # sources run backwards
    assert plan.stacked([0, 2, 3], [0, 264, 528], [264] * 3) is None  # uneven source steps
    assert plan.stacked([0], [0], [264]) is None  # one part is no stack
    columns = Layout.slab((100, 33), 1, ["cpu"] * 3)
    plan = dlmg.plan_redistribution(Layout.single((100, 33)), columns, "float64")
    assert plan.stacked(range(3), [0, 1100, 2200], [1100] * 3)[0].src_strides == (11, 33, 1)
    uneven = Layout.slab((100, 33), 0, ["cpu"] * 8)  # 13 rows each, 9 in the last
    plan = dlmg.plan_redistribution(Layout.single((100, 33)), uneven, "float64")
    sizes = [f.size for f in uneven.fragments]
    assert plan.stacked(range(8), [k * 429 for k in range(8)], sizes) is None
    grid = Layout((64, 64), block=(8, 8), grid=(4, 2), devices=["cpu"] * 8)  # fragment p + 4 q: two modes
    plan = dlmg.plan_redistribution(Layout.single((64, 64)), grid, "float32")
    (stacked,) = plan.stacked(range(8), [k * 512 for k in range(8)], [512] * 8)
    assert stacked.shape[:2] == (2, 4) and stacked.src_strides[:2] == (8, 8 * 64)
    assert stacked.dst_strides[:2] == (4 * 512, 512)
    rows = Layout.slab((64, 32), 0, ["cpu"] * 4)  # row slabs to column slabs: one copy per row slab
    cols = Layout.slab((64, 32), 1, ["cpu"] * 4)
    plan = dlmg.plan_redistribution(rows, cols, "float32")
    stacked = plan.stacked(range(4), [k * 512 for k in range(4)], [512] * 4)
    assert [c.src for c in stacked] == [0, 1, 2, 3] and all(c.shape[0] == 4 for c in stacked)


@settings(max_examples=60)
@given(shapes(min_ndim=1), st.data(), st.sampled_from(["numpy", "torch"]))
def test_gather_copies_that_tile_the_destination_run_as_one_concatenation(shape, data, framework):
    from dlmg.movement.copies import Buffer, _run_on_devices
    from dlmg.plans.plan import concatenation
    from dlmg.registry import get_adapter

    need(framework)
    src = data.draw(layouts(shape, jax_devices=False))
    copies = dlmg.plan_redistribution(src, Layout.single(shape), "float32").copies_into(0)
    compact = all(c.size == 1 or (c.src_strides[-1] == c.dst_strides[-1] == 1 and len(c.shape) == 1) for c in copies)
    run = concatenation(copies)
    # a copy of one block of rows is one contiguous range on both sides; the
    # destination is all covered, so the copies tile it when each is contiguous
    assert (run is not None) == (len(copies) > 1 and compact), copies
    if not copies:  # the one source fragment is the whole array: reused, nothing copied
        return
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    a, cpu = get_adapter(framework), dlmg.Device("cpu", 0)
    sources = {f.index: Buffer(make(expected_fragment(x, src, f.index).copy(), framework, "float32"), a, cpu)
               for f in src.fragments}
    out = a.full(shape, -1, "float32", cpu)
    _run_on_devices([(copies, sources, Buffer(out, a, cpu))], "float32", {}, None)  # the path of device copies
    np.testing.assert_array_equal(to_numpy(out), x)


_STACKED = [  # pairs whose copies stack along the destination's first axis (random pairs rarely do)
    (Layout.slab((12, 9), 0, ["cpu"] * 3), Layout.slab((12, 9), 1, ["cpu"] * 3)),
    (Layout.slab((7, 10), 0, ["cpu"] * 2), Layout((7, 10), block=(4, 3), grid=(1, 2), devices=["cpu"] * 2)),
    (Layout.slab((6, 4, 5), 0, ["cpu"] * 3), Layout.slab((6, 4, 5), 2, ["cpu"] * 2)),
]


@settings(max_examples=60)
@given(layout_pairs(jax_devices=False), st.sampled_from(["numpy", "torch"]))
@example(_STACKED[0], "torch")
@example(_STACKED[1], "numpy")
@example(_STACKED[2], "torch")
def test_device_copies_of_any_redistribution_write_every_fragment(pair, framework):
    """The path of device copies (flat concatenations, pieces stacked along their
    first axis, single copies) writes every destination fragment as NumPy says."""
    from dlmg.movement.copies import Buffer, _run_on_devices
    from dlmg.registry import get_adapter

    need(framework)
    src, dst = pair
    plan = dlmg.plan_redistribution(src, dst, "float32")
    x = np.arange(math.prod(src.shape), dtype=np.float32).reshape(src.shape)
    a, cpu = get_adapter(framework), dlmg.Device("cpu", 0)
    sources = {f.index: Buffer(make(expected_fragment(x, src, f.index).copy(), framework, "float32"), a, cpu)
               for f in src.fragments}
    written = {f.index: a.full(f.shape, -1, "float32", cpu) for f in dst.fragments if f.index not in plan.reused}
    _run_on_devices([(plan.copies_into(d), sources, Buffer(out, a, cpu)) for d, out in written.items()],
                    "float32", {}, None)
    for d, out in written.items():
        np.testing.assert_array_equal(to_numpy(out), expected_fragment(x, dst, d))


def test_row_slabs_give_column_slabs_stacked_bands_of_rows():
    from dlmg.plans.plan import concatenation, stacking

    plan = dlmg.plan_redistribution(Layout.slab((100, 33), 0, ["cpu"] * 4), Layout.slab((100, 33), 1, ["cpu"] * 3),
                                    "float32")
    for d, width in enumerate((11, 11, 11)):
        copies = plan.copies_into(d)
        assert concatenation(copies) is None  # strided sources: no flat pieces
        offset, shape, ordered = stacking(copies)
        assert offset == 0 and shape == (100, width)
        assert [c.shape for c in ordered] == [(25, width)] * 4 and [c.src for c in ordered] == [0, 1, 2, 3]
        assert [c.dst_offset for c in ordered] == [25 * width * k for k in range(4)]
    # the way back: each row slab takes strided columns from every column slab
    back = dlmg.plan_redistribution(Layout.slab((100, 33), 1, ["cpu"] * 3), Layout.slab((100, 33), 0, ["cpu"] * 4),
                                    "float32")
    assert all(stacking(back.copies_into(d)) is None for d in range(4))


def _made(sources, tiling):
    """A new fragment made from slices of ``sources`` as ``Rearranging.retile`` describes it, in NumPy."""
    from dlmg.adapters.capabilities import Slice

    if isinstance(tiling, Slice):
        box = tuple(slice(s, s + e) for s, e in zip(tiling.starts, tiling.extents))
        return sources[tiling.source].reshape(tiling.dims)[box].reshape(tiling.box)
    return np.concatenate([_made(sources, child) for child in tiling.children], axis=tiling.axis)


_TILED = [  # pairs whose new fragments are tilings of slices (random pairs rarely are)
    *_STACKED,
    (Layout.slab((12, 9), 1, ["cpu"] * 3), Layout.slab((12, 9), 0, ["cpu"] * 4)),  # columns -> rows
    (Layout((8, 6, 4), block=(4, 3, 4), grid=(2, 2, 1), devices=["cpu"] * 4), Layout.slab((8, 6, 4), 2, ["cpu"] * 2)),
    (Layout((8, 6), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4), Layout((8, 6), block=(4, 2), grid=(2, 3), devices=["cpu"] * 6)),
]


@settings(max_examples=80)
@given(layout_pairs(jax_devices=False))
@example(_TILED[0])
@example(_TILED[1])
@example(_TILED[2])
@example(_TILED[3])
@example(_TILED[4])
@example(_TILED[5])
def test_tilings_of_slices_make_every_fragment(pair):
    """Where every new fragment is a tiling of slices of the old ones
    (``movement.rearrange``), the tiling makes it, as NumPy says. Slabs to slabs
    along any axes and blocks to blocks are such tilings; block-cyclic columns
    are not (a piece holds several blocks of a row, which no single slice
    reaches)."""
    from dlmg.movement.rearrange import _tilings_of

    src, dst = pair
    plan = dlmg.plan_redistribution(src, dst, "float32")
    tilings = _tilings_of(plan, src, dst)
    if pair in _TILED:
        assert (tilings is not None) == (pair != _STACKED[1])
    if tilings is None:
        return
    x = np.arange(math.prod(src.shape), dtype=np.float32).reshape(src.shape)
    sources = [expected_fragment(x, src, f.index) for f in src.fragments]
    for frag, (shape, tiling) in zip(dst.fragments, tilings):
        assert shape == frag.shape
        np.testing.assert_array_equal(_made(sources, tiling).reshape(shape), expected_fragment(x, dst, frag.index))


def test_too_many_slices_are_left_to_the_gather_and_the_scatter():
    from dlmg.movement.rearrange import MOST_SLICES, _tilings_of

    k = 23  # 23 * 23 = 529 slices, row slabs to column slabs
    src, dst = Layout.slab((k * 2, k * 2), 0, ["cpu"] * k), Layout.slab((k * 2, k * 2), 1, ["cpu"] * k)
    assert k * k > MOST_SLICES and _tilings_of(dlmg.plan_redistribution(src, dst, "float32"), src, dst) is None
    src, dst = Layout.slab((44, 44), 0, ["cpu"] * 22), Layout.slab((44, 44), 1, ["cpu"] * 22)  # 484
    assert _tilings_of(dlmg.plan_redistribution(src, dst, "float32"), src, dst) is not None


def test_a_box_is_found_through_merged_axes():
    from dlmg.plans.plan import Copy
    from dlmg.movement.rearrange import box_of

    cpu = dlmg.Device("cpu", 0)

    def box(shape, offset, strides, into):
        return box_of(Copy(0, 0, shape, 0, (0,) * len(shape), offset, strides, cpu, cpu, 4 * math.prod(shape)), into)

    assert box((2, 3), 7, (6, 1), (4, 6)) == ((1, 1), (2, 3))  # rows 1-2, columns 1-3
    assert box((12,), 6, (1,), (4, 6)) == ((1, 0), (2, 6))  # two whole rows, merged into one axis
    assert box((12,), 7, (1,), (4, 6)) is None  # runs across rows from the middle of one
    assert box((2, 3), 7, (1, 6), (4, 6)) is None  # axes in the wrong order
    assert box((3, 2), 0, (6, 1), (4, 1, 6)) == ((0, 0, 0), (3, 1, 2))  # an axis of extent 1 skipped


def test_a_slice_is_refused_where_the_strides_do_not_nest():
    from dlmg.plans.plan import Copy
    from dlmg.movement.rearrange import slice_of

    cpu = dlmg.Device("cpu", 0)

    def piece(shape, offset, strides, size=60):
        return slice_of(Copy(0, 0, shape, offset, strides, 0, (0,) * len(shape), cpu, cpu, 4 * math.prod(shape)), size)

    assert piece((2, 2), 4, (6, 1)) == (0, (10, 6), (0, 4), (2, 2))  # rows 0-1, columns 4-5 of a 10 x 6 source
    assert piece((2, 3), 4, (6, 1)) is None  # the row would run into the next one
    assert piece((2, 3), 0, (6, 2)) == (0, (10, 3, 2), (0, 0, 0), (2, 3, 1))  # every other element
    assert piece((3,), 2, (6,)) == (0, (10, 6), (0, 2), (3, 1))  # a column: the dropped last axis put back
    assert piece((2, 3), 0, (7, 1)) is None  # rows of 7 do not tile the 60 elements
    assert piece((3, 2), 56, (6, 1)) is None  # past the end of the source
    assert piece((6,), 54, (1,)) == (0, (60,), (54,), (6,))


def test_row_slabs_gather_as_a_concatenation_and_column_slabs_do_not():
    from dlmg.plans.plan import concatenation

    rows = dlmg.plan_redistribution(Layout.slab((100, 33), 0, ["cpu"] * 8), Layout.single((100, 33)), "float32")
    offset, flat = concatenation(rows.copies_into(0))
    assert offset == 0 and [c.shape for c in flat] == [(13 * 33,)] * 7 + [(9 * 33,)]
    assert [c.dst_offset for c in flat] == [13 * 33 * k for k in range(8)]
    columns = dlmg.plan_redistribution(Layout.slab((100, 33), 1, ["cpu"] * 3), Layout.single((100, 33)), "float32")
    assert concatenation(columns.copies_into(0)) is None


def test_replicated_source_reads_the_replica_on_the_destination_device():
    src = Layout.replicated((6, 6), ["cpu:0", "cpu:1", "cpu:2"])
    dst = Layout.slab((6, 6), 0, ["cpu:2", "cpu:1"])
    plan = dlmg.plan_redistribution(src, dst, "float32")
    assert plan.cross_device_bytes == 0
    assert plan.sources == {0: (2,), 1: (1,)}


def test_unchanged_fragments_are_reused():
    src = Layout.slab((8,), 0, ["cpu:0", "cpu:1"])
    dst = Layout((8,), block=(4,), grid=(2,), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])  # + a replica
    plan = dlmg.plan_redistribution(src, dst, "float32")
    assert plan.reused == {0: 0, 1: 1}
    assert plan.total_bytes == 32 and plan.cross_device_bytes == 32
    x = np.arange(8, dtype=np.float32)
    dt = dlmg.scatter(x, src)
    out = dt.redistribute(dst)
    assert out.fragments[0].array is dt.fragments[0].array
    assert out.fragments[1].array is dt.fragments[1].array
    check_fragments(out, x)
    # a framework change is no reuse
    if have("torch"):
        t = dt.redistribute(dst, framework="torch")
        assert t.frameworks == ("torch",)
        check_fragments(t, x)


def test_same_layout_redistribution_copies_nothing():
    layout = Layout((9, 7), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4)
    dt = dlmg.scatter(reference(layout.shape, "int64"), layout)
    plan = dt.plan_redistribution(layout)
    assert plan.ncopies == 0 and len(plan.reused) == 4
    again = dt.redistribute(layout)
    assert all(a.array is b.array for a, b in zip(dt.fragments, again.fragments))


# -- executing -------------------------------------------------------------------------------
@st.composite
def redistribution_cases(draw):
    src_fw = draw(st.sampled_from(AVAILABLE))
    dst_fw = draw(st.sampled_from((None,) + AVAILABLE))
    jax_ok = "jax" in (src_fw, dst_fw)
    dtype = draw(st.sampled_from(("float32", "int32", "bool", "complex64")
                                 + (() if jax_ok else ("float64", "int64"))))
    a, b = draw(layout_pairs())
    return src_fw, dst_fw, dtype, a, b


@settings(max_examples=60)
@given(redistribution_cases())
def test_redistribution_round_trip_preserves_every_element(case):
    src_fw, dst_fw, dtype, a, b = case
    x = reference(a.shape, dtype, seed=7)
    dt = dlmg.scatter(make(x, src_fw, dtype), a, framework=src_fw)
    moved = dt.redistribute(b, framework=dst_fw)
    assert moved.layout == b and moved.dtype == dtype
    assert set(moved.frameworks) <= {dst_fw or src_fw}
    check_fragments(moved, x)
    back = moved.redistribute(a)
    check_fragments(back, x)
    np.testing.assert_array_equal(to_numpy(back.gather(framework="numpy")), x)


@pytest.mark.parametrize("src_fw", AVAILABLE)
@pytest.mark.parametrize("dst_fw", AVAILABLE)
def test_redistribute_between_framework_pairs_on_jax_devices(src_fw, dst_fw):
    if jax_cpus() < 8:
        pytest.skip("needs 8 JAX CPU devices")
    a = Layout((12, 10), block=(1, 3), grid=(4, 2), devices=[f"cpu:{i}" for i in range(8)])  # cyclic rows
    b = Layout((12, 10), block=(4, 10), grid=(3, 1), devices=["cpu:5", "cpu:6", "cpu:7"] * 2)  # slabs, 2 replicas
    x = reference(a.shape, "float32", seed=11)
    dt = dlmg.scatter(make(x, src_fw, "float32"), a, framework=src_fw)
    moved = dt.redistribute(b, framework=dst_fw)
    check_fragments(moved, x)
    if dst_fw == "jax":
        for f in moved.fragments:
            assert f.adapter.device_of(f.array) == f.device
    np.testing.assert_array_equal(to_numpy(moved.gather()), x)


def test_redistribute_bfloat16():
    need("torch", "jax")
    a = Layout((6, 5), block=(2, 2), grid=(3, 1), devices=["cpu"] * 3)
    b = Layout.replicated((6, 5), ["cpu", "cpu"])
    x = reference(a.shape, "bfloat16")
    dt = dlmg.scatter(make(x, "torch", "bfloat16"), a)
    for fw in ("torch", "jax"):
        moved = dt.redistribute(b, framework=fw)
        check_fragments(moved, x)


def test_redistribute_errors():
    dt = dlmg.zeros(layout=Layout.slab((4, 4), 0, ["cpu"] * 2), dtype="float32")
    with pytest.raises(LayoutMismatchError, match="shape"):
        dt.redistribute(Layout.slab((4, 5), 0, ["cpu"] * 2))
    with pytest.raises(TypeError, match="Layout"):
        dt.redistribute((4, 4))
    with pytest.raises(dlmg.FrameworkError, match="framework="):  # numpy cannot hold CUDA fragments
        dt.redistribute(Layout.slab((4, 4), 0, ["cuda:0", "cuda:1"]))


def test_large_block_cyclic_redistribution_uses_few_copies():
    # cyclic to cyclic: one strided copy per fragment pair, whatever the extent
    plan = dlmg.plan_redistribution(Layout((100_000,), block=(1,), grid=(7,), devices=["cpu"] * 7),
                                    Layout((100_000,), block=(1,), grid=(5,), devices=["cpu"] * 5), "int8")
    assert plan.ncopies == 35 and plan.total_bytes == 100_000
    # block-cyclic with incommensurate blocks: runs repeat with the period of the two
    # patterns (lcm(8 * 3, 5 * 2) = 120 rows), each phase is one progression
    a = Layout((600, 500), block=(8, 16), grid=(3, 2), devices=["cpu"] * 6)
    b = Layout((600, 500), block=(5, 7), grid=(2, 3), devices=["cpu"] * 6)
    rows = dlmg.plan_redistribution(a.replace(block=(8, 500), grid=(3, 1), devices=["cpu"] * 3),
                                    b.replace(block=(5, 500), grid=(2, 1), devices=["cpu"] * 2), "float32")
    assert rows.ncopies <= 3 * 2 * 8  # at most a handful of phases per pair, not 75 + 120 blocks
    plan = dlmg.plan_redistribution(a, b, "float32")
    assert plan.total_bytes == 600 * 500 * 4
    x = reference(a.shape, "float32")
    moved = dlmg.scatter(x, a).redistribute(b)
    check_fragments(moved, x)
    assert math.prod(moved.shape) == x.size


# -- host copies on threads -------------------------------------------------------------
@pytest.mark.parametrize("framework", [f for f in ("numpy", "torch") if have(f)])
def test_threaded_host_copies_give_the_same_tensor(monkeypatch, framework):
    from dlmg.movement import copies as execute

    calls = []
    real_submit = execute._pool().submit if execute._pool() is not None else None
    if real_submit is None:
        pytest.skip("one CPU: dlmg never copies on threads here")
    monkeypatch.setattr(execute, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(execute, "PARALLEL_MIN_TASK_BYTES", 1)
    monkeypatch.setattr(execute._POOL[0], "submit", lambda *a, **k: calls.append(1) or real_submit(*a, **k))
    full = np.arange(48 * 40, dtype=np.float32).reshape(48, 40)
    src = dlmg.scatter(full, Layout.block_cyclic((48, 40), (5, 3), (2, 3), ["cpu"] * 6), framework=framework)
    assert calls, "scatter into 6 fragments ran on the pool"
    for dst in (Layout.slab((48, 40), 1, ["cpu"] * 4), Layout.block_cyclic((48, 40), (2, 7), (4, 1), ["cpu"] * 8)):
        out = src.redistribute(dst)
        assert np.array_equal(to_numpy(out.gather(framework="numpy")), full)
        check_fragments(out, full)


@pytest.mark.parametrize("framework", [f for f in ("numpy", "torch") if have(f)])
def test_small_pieces_run_as_one_task_per_destination(monkeypatch, framework):
    # pieces too small to be tasks of their own, destinations large enough: one
    # task per destination, each reading several sources
    from dlmg.movement import copies as execute

    if execute._pool() is None:
        pytest.skip("one CPU: dlmg never copies on threads here")
    full = np.arange(48 * 40, dtype=np.float32).reshape(48, 40)
    src = dlmg.scatter(full, Layout.block_cyclic((48, 40), (5, 3), (2, 3), ["cpu"] * 6), framework=framework)
    dst = Layout.slab((48, 40), 1, ["cpu"] * 4)
    calls = []
    real_submit = execute._pool().submit
    monkeypatch.setattr(execute, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(execute, "PARALLEL_MIN_TASK_BYTES", full.nbytes // 4)  # one destination's bytes
    monkeypatch.setattr(execute._POOL[0], "submit", lambda *a, **k: calls.append(1) or real_submit(*a, **k))
    out = src.redistribute(dst)
    assert len(calls) == 4
    assert np.array_equal(to_numpy(out.gather(framework="numpy")), full)
    check_fragments(out, full)


def test_threaded_copy_errors_reach_the_caller(monkeypatch):
    from dlmg.movement import copies as execute

    if execute._pool() is None:
        pytest.skip("one CPU: dlmg never copies on threads here")
    monkeypatch.setattr(execute, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(execute, "PARALLEL_MIN_TASK_BYTES", 1)

    def broken(*args, **kwargs):
        raise RuntimeError("copy failed on purpose")

    monkeypatch.setattr(execute, "run_copies", broken)
    full = np.ones((16, 16), dtype=np.float32)
    with pytest.raises(RuntimeError, match="on purpose"):
        dlmg.scatter(full, Layout.slab((16, 16), 0, ["cpu"] * 4))


def test_which_copies_need_no_host_side_wait():
    from dlmg.device import Device
    from dlmg.movement.copies import Buffer, stream_ordered
    from dlmg.registry import get_adapter

    def buf(framework, device):
        return Buffer(None, get_adapter(framework), Device.parse(device))

    assert stream_ordered([buf("torch", "cuda:0"), buf("torch", "cuda:1")])  # torch orders its peer copies
    assert stream_ordered([buf("cupy", "cuda:1"), buf("cupy", "cuda:1")])
    assert not stream_ordered([buf("cupy", "cuda:0"), buf("cupy", "cuda:1")])  # CuPy does not across devices
    assert not stream_ordered([buf("torch", "cuda:0"), buf("cupy", "cuda:0")])  # two frameworks, two streams
    assert not stream_ordered([buf("jax", "cpu:0"), buf("jax", "cpu:1")])


@st.composite
def _regular_grids(draw):
    ndim = draw(st.integers(1, 3))
    block = tuple(draw(st.integers(1, 4)) for _ in range(ndim))
    grid = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    per_fragment = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    shape = tuple(b * g * k for b, g, k in zip(block, grid, per_fragment))
    return Layout(shape, block=block, grid=grid, devices=["cpu"] * int(np.prod(grid)))


@settings(max_examples=80, deadline=None)
@given(_regular_grids())
def test_grid_geometry_stacks_fragments_into_the_tensor(layout):
    # an independent check of the geometry a framework without views composes a
    # gather from (and decomposes a scatter into): NumPy does the same steps
    from dlmg.movement.rearrange import grid_geometry

    x = np.arange(layout.size).reshape(layout.shape)
    order, stacked, axes = grid_geometry(layout)
    parts = [expected_fragment(x, layout, i) for i in order]
    assert sorted(order) == list(range(layout.nfragments))
    np.testing.assert_array_equal(np.stack(parts).reshape(stacked).transpose(axes).reshape(layout.shape), x)
    permuted = tuple(stacked[p] for p in axes)
    back = np.argsort(axes)
    cut = x.reshape(permuted).transpose(back).reshape((len(order), *layout.fragments[0].shape))
    for position, index in enumerate(order):
        np.testing.assert_array_equal(cut[position], expected_fragment(x, layout, index))


def test_grid_geometry_refuses_irregular_layouts():
    from dlmg.movement.rearrange import grid_geometry

    assert grid_geometry(Layout((10,), block=(3,), grid=(2,), devices=["cpu"] * 2)) is None  # a partial block
    assert grid_geometry(Layout((12,), block=(2,), grid=(4,), devices=["cpu"] * 4)) is None  # 6 blocks over 4
    assert grid_geometry(Layout.replicated((8,), ["cpu"] * 2)) is None
    assert grid_geometry(Layout((12,), block=(2,), grid=(3,), devices=["cpu"] * 3)) is not None


@pytest.mark.parametrize("dtype", ["int8", "float32", "complex64"])
def test_jax_slabs_on_one_device_are_redistributed_by_jax(dtype):
    # slabs to other (uneven) slabs on one device: JAX's own concatenation, then its
    # own cut; no staging array of another framework
    need("jax")
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = (np.arange(10 * 6).reshape(10, 6) % 11).astype(dtype)
    device = jax.devices("cpu")[0]
    fours = dlmg.scatter(jax.device_put(x, device), Layout.slab(x.shape, 0, ["cpu:0"] * 3))  # 4, 4, 2 rows
    threes = Layout.slab(x.shape, 0, ["cpu:0"] * 4)  # 3, 3, 3, 1 rows
    forget_compiled()
    for _ in range(2):
        out = fours.redistribute(threes)
        assert all(f.framework == "jax" and f.array.devices() == {device} for f in out.fragments)
        check_fragments(out, x)
    assert compiled_kinds() == ["retile"]  # one call, each new slab a tiling of slices of the old


@pytest.mark.parametrize(("shape", "axes"), [((12, 10), (0, 1)), ((12, 10), (0, 0)), ((6, 4, 10), (0, 2)),
                                             ((9, 5), (1, 0))])
def test_jax_redistributions_on_one_device_are_one_pass(shape, axes):
    # every new fragment a tiling of slices of the old (slabs along any axes): one
    # compiled call makes them all
    need("jax")
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    device = jax.devices("cpu")[0]
    old = dlmg.scatter(jax.device_put(x, device), Layout.slab(shape, axes[0], ["cpu:0"] * 4))
    new = Layout.slab(shape, axes[1], ["cpu:0"] * 3)
    forget_compiled()
    out = old.redistribute(new)
    check_fragments(out, x)
    assert all(f.framework == "jax" and f.array.devices() == {device} for f in out.fragments)
    assert compiled_kinds() == ["retile"]


@settings(max_examples=25, deadline=None)
@given(layout_pairs(jax_devices=False), st.sampled_from(["float32", "int32"]))
@example(_TILED[3], "float32")
@example(_TILED[5], "int32")
def test_jax_redistributions_on_one_device_write_every_fragment(pair, dtype):
    """JAX fragments on one device, any two layouts: whichever way dlmg takes (one
    pass of slices, JAX's gather and scatter, or the copies), every new fragment
    is a JAX array on that device holding what NumPy says."""
    need("jax")
    import jax

    src, dst = (Layout(lay.shape, block=lay.block, grid=lay.grid, devices=["cpu:0"] * lay.nfragments)
                for lay in pair)
    x = (np.arange(math.prod(src.shape)) % 97).astype(dtype).reshape(src.shape)
    device = jax.devices("cpu")[0]
    old = dlmg.scatter(jax.device_put(x, device), src)
    out = old.redistribute(dst)
    for frag in out.fragments:
        assert frag.framework == "jax" and frag.array.devices() == {device}
        np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(x, dst, frag.index))


def test_jax_redistributions_jax_cannot_cut_keep_the_copies(monkeypatch):
    # cyclic rows are no ranges of the whole (and JAX's grid cut declines host devices):
    # the gather is made once, the scatter declines, and later calls go straight to the copies
    need("jax")
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = np.arange(12 * 6, dtype=np.float32).reshape(12, 6)
    rows = dlmg.scatter(jax.device_put(x, jax.devices("cpu")[0]), Layout.slab(x.shape, 0, ["cpu:0"] * 3))
    columns = Layout((12, 6), block=(1, 6), grid=(3, 1), devices=["cpu:0"] * 3)  # cyclic rows: no stacks, no ranges
    jax_adapter = dlmg.get_adapter("jax")
    calls = []
    assemble = jax_adapter.assemble
    monkeypatch.setattr(jax_adapter, "assemble", lambda *a, **k: calls.append(1) or assemble(*a, **k))
    forget_compiled()
    for _ in range(3):
        check_fragments(rows.redistribute(columns), x)
    assert compiled_kinds() == ["assemble"] and len(calls) == 1  # gathered on the first call only
    # fragments on several devices, or into another framework: the copies as before
    spread = Layout.slab(x.shape, 0, ["cpu:0", "cpu:1", "cpu:0"])
    check_fragments(rows.redistribute(spread), x)
    check_fragments(rows.redistribute(Layout.slab(x.shape, 0, ["cpu:0"] * 4), framework="numpy"), x)


@pytest.mark.parametrize(
    "src, dst, modes",
    [
        ([0, 33, 66, 99], [0, 10, 20, 30], [(4, 33, 10)]),
        ([0, 512, 1024, 1536, 8, 520, 1032, 1544], [0, 1, 2, 3, 4, 5, 6, 7], [(2, 8, 4), (4, 512, 1)]),
        ([5, 5, 5], [0, 4, 8], [(3, 0, 4)]),  # one source view read by every part (replicas)
        ([0, 1, 5, 7], [0, 1, 2, 3], None),  # the first block repeats, the second does not
        ([0, 1, 2, 4, 5, 6], [0, 1, 2, 3, 4, 5], [(2, 4, 3), (3, 1, 1)]),
        ([0, 1, 2, 4, 5, 7], [0, 1, 2, 3, 4, 5], None),  # the last step breaks the pattern
        ([0, 2, 4, 6, 8, 10], [0, 1, 2, 3, 4, 5], [(6, 2, 1)]),
        ([3, 0], [0, 1], None),  # backwards in the source
        ([0, 1], [1, 0], None),  # backwards in the buffer
    ],
)
def test_leading_modes_enumerate_every_offset_pair(src, dst, modes):
    from dlmg.plans.plan import _leading_modes

    assert _leading_modes(src, dst) == modes


def test_exchange_copies_use_threads_only_with_two_cores_per_process():
    import os
    from types import SimpleNamespace

    from dlmg.movement.exchange import copy_threads

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    assert not copy_threads(SimpleNamespace(world_size=cores))  # one core per process or less: never
    assert not copy_threads(SimpleNamespace(world_size=cores + 1))
    assert copy_threads(SimpleNamespace(world_size=1)) is (cores >= 2)
    assert copy_threads(SimpleNamespace(world_size=max(1, cores // 2))) is (cores >= 2 * max(1, cores // 2))
