"""Property tests of the layout index math over random ranks, shapes, blocks,
grids and replica counts (zero extents and rank 0 included)."""

from __future__ import annotations

import math

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import assume, event, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dlmg import Layout, LayoutError  # noqa: E402


@st.composite
def layouts(draw, max_rank: int = 4, host: bool | None = None) -> Layout:
    rank = draw(st.integers(0, max_rank))
    top = {0: 1, 1: 40, 2: 12, 3: 7, 4: 5}[rank]
    shape = tuple(draw(st.integers(0, top)) for _ in range(rank))
    block = tuple(draw(st.integers(1, max(n, 1) + 2)) for n in shape)
    grid = tuple(draw(st.integers(1, {1: 5, 2: 4, 3: 3, 4: 2}[rank])) for _ in shape)
    cells = math.prod(grid)
    replicas = draw(st.integers(1, 3))
    on_host = draw(st.booleans()) if host is None else host
    kind = "cpu" if on_host else "cuda"
    # devices may repeat: draw the indices freely
    indices = draw(st.lists(st.integers(0, 7), min_size=cells * replicas, max_size=cells * replicas))
    return Layout(shape, block=block, grid=grid, devices=[f"{kind}:{i}" for i in indices])


def _local_indices(frag):
    return np.ndindex(*frag.shape)


@given(layouts())
def test_every_element_has_one_owner_per_replica(lay):
    k = lay.nreplicas
    count = np.zeros((k,) + lay.shape, dtype=np.int64)
    for frag in lay.fragments:
        for glob, _ in frag.block_slices():
            count[(frag.replica,) + glob] += 1
    assert (count == 1).all()
    for idx in np.ndindex(*lay.shape):
        owners = lay.owners(idx)
        assert len(owners) == k
        assert [lay.fragment(f).replica for f in owners] == list(range(k))
        assert len({lay.fragment(f).coords for f in owners}) == 1


@given(layouts())
def test_local_shapes_add_up(lay):
    per_replica = [0] * lay.nreplicas
    for frag in lay.fragments:
        per_replica[frag.replica] += frag.size
        assert frag.size == math.prod(frag.shape)
        for m in range(lay.ndim):
            assert frag.shape[m] == sum(stop - start for start, stop in frag.ranges[m])
    assert per_replica == [lay.size] * lay.nreplicas
    # along each mode, the local extents of one grid line add up to the extent
    for m in range(lay.ndim):
        line = [f for f in lay.fragments if f.replica == 0 and all(c == 0 for i, c in enumerate(f.coords) if i != m)]
        assert len(line) == lay.grid[m]
        assert sum(f.shape[m] for f in line) == lay.shape[m]


@given(layouts())
def test_global_and_local_indices_are_inverse_bijections(lay):
    seen = set()
    for frag in lay.fragments:
        for local in _local_indices(frag):
            glob = lay.local_to_global(frag.index, local)
            assert (frag.index, local) in lay.global_to_local(glob)
            seen.add((frag.replica, glob))
    assert len(seen) == lay.size * lay.nreplicas
    for glob in np.ndindex(*lay.shape):
        for f, local in lay.global_to_local(glob):
            assert lay.local_to_global(f, local) == glob


@given(layouts())
def test_owned_indices_match_blocks_and_ranges(lay):
    for frag in lay.fragments:
        for m in range(lay.ndim):
            owned = lay.owned_indices(frag.index, m)
            assert owned.dtype == np.int64
            expected = [i for start, stop in frag.ranges[m] for i in range(start, stop)]
            np.testing.assert_array_equal(owned, expected)
            assert list(owned) == sorted(owned)
            assert len(owned) == frag.shape[m]
            assert frag.blocks[m] == tuple(range(frag.coords[m], lay.nblocks[m], lay.grid[m]))
            assert all(i // lay.block[m] % lay.grid[m] == frag.coords[m] for i in owned)


@given(layouts())
def test_block_slices_reassemble_the_fragment(lay):
    glob = np.arange(lay.size, dtype=np.int64).reshape(lay.shape)
    for frag in lay.fragments:
        local = np.full(frag.shape, -1, dtype=np.int64)
        for g, loc in frag.block_slices():
            local[loc] = glob[g]
        expected = glob[np.ix_(*[frag.owned_indices(m) for m in range(lay.ndim)])] if lay.ndim else glob
        np.testing.assert_array_equal(local, expected)


@given(layouts(max_rank=3), st.data())
def test_ceil_block_is_the_slab_distribution(lay, data):
    assume(lay.ndim > 0)
    block = tuple(max(-(-n // g), 1) for n, g in zip(lay.shape, lay.grid))
    blocked = lay.replace(block=block)
    for frag in blocked.fragments:
        for m in range(lay.ndim):
            slab = Layout.slab(lay.shape, m, [f"cuda:{i}" for i in range(lay.grid[m])])
            # fragment c of the slab along m holds what coordinate c along m holds here
            np.testing.assert_array_equal(
                blocked.owned_indices(frag.index, m), slab.owned_indices(frag.coords[m], m)
            )
            assert len(frag.blocks[m]) <= 1


@given(layouts(max_rank=3))
def test_block_one_is_cyclic(lay):
    cyclic = lay.replace(block=(1,) * lay.ndim)
    for frag in cyclic.fragments:
        for m in range(lay.ndim):
            c, g = frag.coords[m], lay.grid[m]
            np.testing.assert_array_equal(cyclic.owned_indices(frag.index, m), np.arange(lay.shape[m])[c::g])
        key = frag.global_slices()
        glob = np.arange(lay.size).reshape(lay.shape)
        assert glob[key].shape == frag.shape


@given(layouts())
def test_value_semantics_and_dense_memory(lay):
    assert lay == lay.replace() and hash(lay) == hash(lay.replace())
    assert lay.nfragments == len(lay.devices) == math.prod(lay.grid) * lay.nreplicas
    for frag in lay.fragments:
        assert frag.span == frag.size
        assert frag.strides == tuple(np.empty(frag.shape, dtype=np.int8).strides) or frag.size == 0
        if frag.size:
            last = tuple(n - 1 for n in frag.shape)
            assert frag.memory_offset(last) == frag.size - 1
    assert lay.nbytes("int16") == tuple(2 * f.size for f in lay.fragments)


@given(layouts(max_rank=3), st.data())
def test_explicit_strides_accepted_iff_no_overlap(lay, data):
    es = tuple(data.draw(st.integers(1, 12)) for _ in range(lay.ndim))
    bs = tuple(data.draw(st.integers(1, 40)) for _ in range(lay.ndim))

    def offsets(frag):
        return [
            sum((i // b) * s + (i % b) * e for i, b, e, s in zip(idx, lay.block, es, bs))
            for idx in np.ndindex(*frag.shape)
        ]

    disjoint = all(len(set(offsets(f))) == f.size for f in lay.fragments)
    try:
        strided = lay.replace(element_strides=es, block_strides=bs)
    except LayoutError as exc:
        event("strides rejected")
        assert not disjoint, exc
        assert "overlap" in str(exc)
        return
    assert disjoint
    event("strides accepted")
    for frag in strided.fragments:
        offs = [frag.memory_offset(i) for i in np.ndindex(*frag.shape)]
        assert offs == offsets(frag)
        assert frag.span == (max(offs) + 1 if offs else 0)
        if frag.is_strided:
            assert offs == [sum(i * s for i, s in zip(idx, frag.strides)) for idx in np.ndindex(*frag.shape)]
    assert strided.nbytes("float32") == tuple(4 * f.span for f in strided.fragments)


@given(layouts(max_rank=3))
def test_drop_modes_keeps_coordinate_zero_fragments(lay):
    assume(lay.ndim > 0)
    dropped = lay.drop_modes(0)
    kept = [f for f in lay.fragments if f.coords[0] == 0]
    assert dropped.devices == tuple(f.device for f in kept)
    assert dropped.nreplicas == lay.nreplicas
    for new, old in zip(dropped.fragments, kept):
        assert new.shape == old.shape[1:]
        assert new.blocks == old.blocks[1:]
