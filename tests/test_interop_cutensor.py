"""cuTENSORMg / cuTENSORMp descriptors of layouts, and layouts from descriptors."""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import math
import os
import sys

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dlmg import Layout, LayoutError  # noqa: E402
from dlmg.interop.cutensor import (  # noqa: E402
    CUTENSOR_MG_DEVICE_HOST,
    CUTENSOR_MG_DEVICE_HOST_PINNED,
    cutensormp,
    layout_from_cutensormg,
)


def _lists(args):
    return [a.tolist() if isinstance(a, np.ndarray) else a for a in args]


# -- the 9x9 example of the cuTENSORMg documentation ---------------------------------------
def _nine_by_nine(devices=(0, 1, 2, 3)) -> Layout:
    # column-major local memory sized for the largest fragment (5 x 5)
    return Layout((9, 9), block=(4, 2), grid=(2, 2), devices=list(devices), element_strides=(1, 5))


def test_nine_by_nine_descriptor_arrays():
    args = _nine_by_nine().cutensormg()
    assert _lists(args) == [2, [9, 9], [1, 5], [4, 2], [4, 10], [2, 2], 4, [0, 1, 2, 3]]
    assert [a.dtype for a in args if isinstance(a, np.ndarray)] == [
        np.int64, np.int64, np.int64, np.int64, np.int32, np.int32
    ]


def test_nine_by_nine_blocks_per_device_column_major():
    """Blocks per mode: 3 x 5 (4x2 blocks, partial ones at the edges). Devices are dealt
    column-major as the ``devices`` parameter says: device 1 sits below device 0
    (second block row), device 2 right of it. The documentation's prose counts
    6, 4, 3, 2 blocks for devices 0..3, a row-major numbering; dlmg's column-major
    reading gives 6, 3, 4, 2 -- the same tiles with devices 1 and 2 swapped."""
    lay = _nine_by_nine()
    assert lay.nblocks == (3, 5)
    counts = [math.prod(f.nblocks) for f in lay.fragments]
    assert counts == [6, 3, 4, 2]
    row_major_prose = {0: 6, 1: 4, 2: 3, 3: 2}
    assert [row_major_prose[d] for d in (0, 2, 1, 3)] == counts
    # the owner map, block row by block row, is the table of the documentation
    owner = [[lay.owners((4 * i, 2 * j))[0] for j in range(5)] for i in range(3)]
    assert owner == [[0, 2, 0, 2, 0], [1, 3, 1, 3, 1], [0, 2, 0, 2, 0]]
    assert [f.shape for f in lay.fragments] == [(5, 5), (4, 5), (5, 4), (4, 4)]


def test_nine_by_nine_replicated_on_eight_devices():
    lay = _nine_by_nine(range(8))
    args = lay.cutensormg()
    assert args.num_devices == 8 and args.devices.tolist() == list(range(8))
    assert lay.nreplicas == 2
    # "Dev. 1 & 5" hold the same blocks
    assert lay.fragments[1].blocks == lay.fragments[5].blocks
    back = Layout.from_cutensormg(*args)
    assert back == lay


def test_nine_by_nine_dense_is_refused_with_the_layout_to_use():
    dense = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=range(4))
    with pytest.raises(LayoutError, match=r"elementStride.*replace\(element_strides=\(5, 1\)\)"):
        dense.cutensormg()
    fixed = dense.replace(element_strides=(5, 1))
    assert fixed.cutensormg().element_stride.tolist() == [5, 1]
    assert [f.strides for f in fixed.fragments] == [(5, 1)] * 4


def test_even_dense_layout_round_trips_as_dense():
    lay = Layout((8, 6), block=(2, 3), grid=(2, 2), devices=range(4))
    args = lay.cutensormg()
    assert args.element_stride.tolist() == [3, 1]  # C strides of the local (4, 3)
    assert args.block_stride.tolist() == [6, 3]
    assert Layout.from_cutensormg(*args) == lay


# -- devices -------------------------------------------------------------------------------
def test_host_codes():
    assert CUTENSOR_MG_DEVICE_HOST == -1 and CUTENSOR_MG_DEVICE_HOST_PINNED == -2
    host = Layout.slab((4, 4), 0, ["cpu", "cpu"])
    assert host.cutensormg().devices.tolist() == [-1, -1]
    pinned = Layout.slab((4, 4), 0, ["cuda_host", "cuda_host"])
    assert pinned.cutensormg().devices.tolist() == [-2, -2]
    assert Layout.from_cutensormg(*pinned.cutensormg()) == pinned
    assert Layout.from_cutensormg(*host.cutensormg()) == host


def test_unknown_device_kind_and_codes_refused():
    with pytest.raises(LayoutError, match=r"devices\[0\] = rocm:0"):
        Layout((4,), devices=["rocm:0"]).cutensormg()
    with pytest.raises(LayoutError, match=r"devices\[1\] = -7"):
        layout_from_cutensormg(1, [4], None, None, None, [2], 2, [0, -7])


def test_zero_extent_refused():
    with pytest.raises(LayoutError, match=r"shape\[1\] = 0"):
        Layout((4, 0), devices=["cuda:0"]).cutensormg()


# -- from descriptors ----------------------------------------------------------------------
def test_null_pointers():
    # no blocks, no distribution, packed column-major: one fragment, Fortran order
    lay = layout_from_cutensormg(2, [3, 4], None, None, None, None, 1, [0])
    assert lay.block == (3, 4) and lay.grid == (1, 1)
    assert lay.element_strides == (1, 3)
    # NULL block strides: dense block-interleaved, block * element stride; that is
    # what a dense dlmg layout is here, so the dense layout comes back
    lay = layout_from_cutensormg(1, [8], [1], [2], None, [2], 2, [0, 1])
    assert lay.is_dense and lay.fragments[0].strides == (1,)
    lay = layout_from_cutensormg(1, [8], [2], [2], None, [2], 2, [0, 1])
    assert lay.block_strides == (4,) and lay.fragments[0].strides == (2,)


def test_inconsistent_descriptors_refused():
    with pytest.raises(LayoutError, match="numDevices = 3"):
        layout_from_cutensormg(1, [8], None, [2], None, [2], 3, [0, 1])
    with pytest.raises(LayoutError, match="extent has 1 entries, expected 2"):
        layout_from_cutensormg(2, [8], None, None, None, None, 1, [0])
    with pytest.raises(LayoutError, match=r"extent\[0\] = 0"):
        layout_from_cutensormg(1, [0], None, None, None, None, 1, [0])
    with pytest.raises(LayoutError, match="not a multiple"):
        layout_from_cutensormg(1, [8], None, [2], None, [2], 3, [0, 1, 2])
    with pytest.raises(LayoutError, match="overlap"):
        layout_from_cutensormg(2, [4, 4], [1, 1], None, None, None, 1, [0])


# -- cuTENSORMp ----------------------------------------------------------------------------
def test_cutensormp_arguments():
    lay = Layout((8, 8), block=(2, 4), grid=(2, 2), devices=range(4))
    args = cutensormp(lay, ranks=[0, 1, 2, 3])
    assert _lists(args) == [2, [8, 8], [4, 1], [2, 4], [8, 4], [2, 2], 4, [0, 1, 2, 3]]
    assert args.nranks_per_mode.dtype == np.int64 and args.ranks.dtype == np.int32
    assert lay.cutensormp(ranks=[3, 2, 1, 0]).ranks.tolist() == [3, 2, 1, 0]


def test_cutensormp_refuses_two_fragments_of_one_process():
    lay = Layout((8,), block=(4,), grid=(2,), devices=["cuda:0", "cuda:1"])
    with pytest.raises(LayoutError, match="fragments 0 and 1 .* rank 0"):
        lay.cutensormp()  # the layout's ranks: process 0 holds both
    spread = lay.replace(ranks=[1, 0])
    assert spread.cutensormp().ranks.tolist() == [1, 0]
    with pytest.raises(LayoutError, match="ranks has 1 entries"):
        lay.cutensormp(ranks=[0])
    one = Layout((8,), devices=["cuda:0"])
    assert one.cutensormp().ranks.tolist() == [0]


# -- round trips over random layouts -------------------------------------------------------
@st.composite
def layouts(draw) -> Layout:
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(ndim))
    block = tuple(draw(st.integers(1, n + 1)) for n in shape)
    grid = tuple(draw(st.integers(1, 3)) for _ in range(ndim))
    replicas = draw(st.integers(1, 2))
    n = math.prod(grid) * replicas
    host = draw(st.booleans())
    if host:
        kind = draw(st.sampled_from(["cpu", "cuda_host"]))
        devices = [kind] * n
    else:
        devices = [f"cuda:{draw(st.integers(0, 7))}" for _ in range(n)]
    lay = Layout(shape, block=block, grid=grid, devices=devices)
    style = draw(st.sampled_from(["dense", "strided", "padded"]))
    if style == "dense":
        return lay
    local = lay.fragments[0].shape
    order = draw(st.permutations(range(ndim)))  # which mode is fastest in memory
    es, step = [0] * ndim, 1
    for m in order:
        es[m] = step
        step *= max(local[m], 1)
    if style == "strided":
        return lay.replace(element_strides=es)
    # padded: every block packed in its own box, boxes spaced apart
    step = 1
    for m in order:
        es[m] = step
        step *= lay.block[m]
    step += draw(st.integers(0, 3))
    bs = [0] * ndim
    for m in order:
        bs[m] = step
        step *= max(-(-local[m] // lay.block[m]), 1)
    return lay.replace(element_strides=es, block_strides=bs)


def _expressible(lay: Layout) -> bool:
    try:
        lay.cutensormg()
    except LayoutError:
        return False
    return True


@settings(max_examples=200)
@given(layouts())
def test_cutensormg_round_trip(lay):
    if not _expressible(lay):  # dense layouts with uneven fragments: the error names the fix
        assert lay.is_dense
        with pytest.raises(LayoutError, match="replace"):
            lay.cutensormg()
        lay = lay.replace(element_strides=lay.fragments[0].strides)
    args = lay.cutensormg()
    back = Layout.from_cutensormg(*args)
    assert _lists(back.cutensormg()) == _lists(args)
    assert back.shape == lay.shape and back.block == lay.block and back.grid == lay.grid
    assert back.devices == lay.devices
    if not lay.is_dense:
        assert back.is_dense or back == lay
    # every element sits at the same offset of the same fragment's memory
    for f, g in zip(lay.fragments, back.fragments):
        assert f.shape == g.shape and f.span == g.span
        corner = tuple(n - 1 for n in f.shape)
        if f.size:
            assert f.memory_offset(corner) == g.memory_offset(corner)
    # the descriptor's offset formula, checked on the last element of fragment 0
    f0 = lay.fragments[0]
    if f0.size:
        idx = [n - 1 for n in f0.shape]
        offset = sum(
            (i // b) * bs + (i % b) * es
            for i, b, es, bs in zip(idx, args.block_size, args.element_stride, args.block_stride)
        )
        assert offset == f0.memory_offset(idx)


@settings(max_examples=200)
@given(layouts(), st.randoms(use_true_random=False))
def test_cutensormp_round_trip_of_the_shared_fields(lay, rnd):
    if not _expressible(lay):
        lay = lay.replace(element_strides=lay.fragments[0].strides)
    ranks = list(range(lay.nfragments))
    rnd.shuffle(ranks)
    mp = lay.cutensormp(ranks=ranks)
    mg = lay.cutensormg()
    assert _lists(mp)[:5] == _lists(mg)[:5]
    assert mp.nranks_per_mode.tolist() == mg.device_count.tolist()
    assert mp.nranks == mg.num_devices and mp.ranks.tolist() == ranks


# -- the library itself, where it is installed ---------------------------------------------
def _find_cutensormg() -> str | None:
    name = ctypes.util.find_library("cutensorMg")
    if name:
        return name
    for base in sys.path:
        for hit in glob.glob(os.path.join(base, "cutensor", "lib", "libcutensorMg.so*")):
            return hit
    return None


@pytest.mark.gpu
def test_cutensormg_accepts_the_descriptor():
    """Create the descriptors with libcutensorMg itself (the cutensor-cu12/cu13 wheels ship it)."""
    torch = pytest.importorskip("torch")  # loads the CUDA runtime libcutensorMg links against
    path = _find_cutensormg()
    if path is None:
        pytest.skip("needs libcutensorMg (pip install cutensor-cu12 or cutensor-cu13, matching CUDA)")
    try:
        for base in glob.glob(os.path.join(os.path.dirname(path), "libcutensor.so*")):
            ctypes.CDLL(base, mode=ctypes.RTLD_GLOBAL)  # its sibling, found without an rpath
            break
        lib = ctypes.CDLL(path)
    except OSError as exc:
        pytest.skip(f"libcutensorMg does not load: {exc}")
    ndev = torch.cuda.device_count()
    if ndev < 1:
        pytest.skip("needs a CUDA GPU")
    ids = (ctypes.c_int32 * ndev)(*range(ndev))
    handle = ctypes.c_void_p()
    assert lib.cutensorMgCreate(ctypes.byref(handle), ctypes.c_uint32(ndev), ids) == 0
    cuda_r_32f = 0  # cudaDataType_t
    layouts_ = [
        _nine_by_nine([i % ndev for i in range(4)]),
        Layout((8, 6), block=(2, 3), grid=(2, 2), devices=[i % ndev for i in range(4)]),
        Layout.slab((16, 4), 0, ["cpu"] * 2),
    ]
    try:
        for lay in layouts_:
            a = lay.cutensormg()
            p64 = lambda x: x.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))  # noqa: E731
            p32 = lambda x: x.ctypes.data_as(ctypes.POINTER(ctypes.c_int32))  # noqa: E731
            desc = ctypes.c_void_p()
            status = lib.cutensorMgCreateTensorDescriptor(
                handle, ctypes.byref(desc), ctypes.c_uint32(a.num_modes), p64(a.extent),
                p64(a.element_stride), p64(a.block_size), p64(a.block_stride), p32(a.device_count),
                ctypes.c_uint32(a.num_devices), p32(a.devices), ctypes.c_int(cuda_r_32f),
            )
            assert status == 0, f"cutensorMgCreateTensorDescriptor returned {status} for {lay!r}"
            lib.cutensorMgDestroyTensorDescriptor(desc)
    finally:
        lib.cutensorMgDestroy(handle)


@pytest.mark.parametrize("rank", [2**31, 2**40])
def test_cutensormp_rank_beyond_int32_is_a_layout_error(rank):
    lay = Layout.slab((8, 4), 0, ["cpu"] * 2)
    with pytest.raises(LayoutError, match=r"ranks\[1\] = \d+ does not fit the descriptor's int32"):
        cutensormp(lay, ranks=[0, rank])
