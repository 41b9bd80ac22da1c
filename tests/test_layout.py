"""Layouts: the cuTENSORMg 9x9 example, constructors, validation, strides and rendering."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest

import dlmg
from dlmg import Device, FragmentLayout, Layout, LayoutError

CUDA4 = [f"cuda:{i}" for i in range(4)]
CUDA8 = [f"cuda:{i}" for i in range(8)]


@pytest.fixture
def doc_example() -> Layout:
    """The 9x9 matrix of the cuTENSORMg descriptor documentation: block 4x2, grid 2x2."""
    return Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA4)


# ---------------------------------------------------------------------------
# the documentation's example


def test_doc_example_blocks_and_local_shapes(doc_example):
    # The document's worked example numbers its devices row-major over the grid
    # (its "Dev. 1" owns mode-0 block 0 and mode-1 blocks 1, 3), while its
    # parameter list says column-major. dlmg follows the parameter list: fragment
    # f has coords (f % 2, f // 2), so fragment 1 is coords (1, 0) and the
    # document's "Dev. 1" is dlmg's fragment 2 (and vice versa).
    lay = doc_example
    assert lay.nblocks == (3, 5)
    assert lay.nfragments == 4 and lay.nreplicas == 1 and not lay.is_replicated
    expected = {
        0: ((0, 0), ((0, 2), (0, 2, 4)), (5, 5)),
        1: ((1, 0), ((1,), (0, 2, 4)), (4, 5)),
        2: ((0, 1), ((0, 2), (1, 3)), (5, 4)),
        3: ((1, 1), ((1,), (1, 3)), (4, 4)),
    }
    for f, (coords, blocks, shape) in expected.items():
        frag = lay.fragment(f)
        assert frag.index == f
        assert frag.coords == coords
        assert frag.blocks == blocks
        assert frag.shape == shape
        assert frag.device == Device("cuda", f)
        assert frag.replica == 0
    # block counts of the document: 6, 3 (its Dev. 2 = our fragment 1), 4, 2
    assert [len(f.blocks[0]) * len(f.blocks[1]) for f in lay.fragments] == [6, 3, 4, 2]
    assert lay.fragment(0).ranges == (((0, 4), (8, 9)), ((0, 2), (4, 6), (8, 9)))
    assert sum(f.size for f in lay.fragments) == lay.size == 81


def test_doc_example_index_math(doc_example):
    lay = doc_example
    assert lay.owners((0, 0)) == (0,)
    assert lay.owners((4, 0)) == (1,)
    assert lay.owners((0, 2)) == (2,)
    assert lay.owners((8, 8)) == (0,)
    assert lay.global_to_local((8, 8)) == ((0, (4, 4)),)
    assert lay.global_to_local((5, 3)) == ((3, (1, 1)),)
    assert lay.local_to_global(0, (4, 4)) == (8, 8)
    assert lay.local_to_global(2, (4, 3)) == (8, 7)
    np.testing.assert_array_equal(lay.owned_indices(0, 0), [0, 1, 2, 3, 8])
    np.testing.assert_array_equal(lay.owned_indices(2, 1), [2, 3, 6, 7])
    assert lay.owned_indices(0, 0).dtype == np.int64


def test_doc_example_replicated_over_8_devices():
    lay = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA8)
    assert lay.nreplicas == 2 and lay.is_replicated and lay.nfragments == 8
    assert lay.owners((0, 0)) == (0, 4)
    assert lay.owners((4, 2)) == (3, 7)
    assert lay.global_to_local((4, 2)) == ((3, (0, 0)), (7, (0, 0)))
    for f in range(4):
        a, b = lay.fragment(f), lay.fragment(f + 4)
        assert (a.coords, a.blocks, a.shape) == (b.coords, b.blocks, b.shape)
        assert (a.replica, b.replica) == (0, 1)
        assert b.device == Device("cuda", f + 4)


# ---------------------------------------------------------------------------
# constructors and value semantics


def test_defaults_one_block_per_mode_and_grid_one():
    lay = Layout((3, 0, 5), devices=["cpu"])
    assert lay.block == (3, 1, 5)
    assert lay.grid == (1, 1, 1)
    assert lay.nblocks == (1, 0, 1)
    assert lay.fragment(0).shape == (3, 0, 5)
    assert lay.fragment(0).blocks == ((0,), (), (0,))
    assert lay.size == 0 and lay.on_host and lay.is_dense
    assert list(lay.fragment(0).block_slices()) == []


def test_value_semantics():
    a = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA4)
    b = Layout([9, np.int64(9)], block=np.array([4, 2]), grid=(2, 2),
               devices=[Device("cuda", i) for i in range(4)])
    assert a == b and hash(a) == hash(b)
    assert a.fragments  # fill the caches: equality and hashing ignore them
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert type(a.shape[1]) is int
    assert Layout(9, devices="cpu") == Layout((9,), block=(9,), devices=[Device("cpu", 0)])
    assert a != a.with_devices(CUDA8)
    with pytest.raises(AttributeError):
        a.shape = (1, 1)  # type: ignore[misc]
    assert eval(repr(a), {"Layout": Layout}) == a
    assert pickle.loads(pickle.dumps(a)) == a
    assert "fragments" not in pickle.loads(pickle.dumps(a)).__dict__


def test_fragment_layout_values(doc_example):
    frag = doc_example.fragment(1)
    assert isinstance(frag, FragmentLayout)
    assert frag == doc_example.fragments[1] and hash(frag) == hash(doc_example.fragment(-3))
    assert frag != doc_example.fragment(2)
    assert "coords=(1, 0)" in repr(frag)
    with pytest.raises(IndexError):
        doc_example.fragment(4)
    with pytest.raises(IndexError):
        FragmentLayout(doc_example, 4)
    assert FragmentLayout(doc_example, 1) == frag
    assert doc_example.local_shapes == ((5, 5), (4, 5), (5, 4), (4, 4))


def test_exported_from_dlmg():
    assert dlmg.Layout is Layout and dlmg.FragmentLayout is FragmentLayout


def test_slab_even_and_uneven():
    lay = Layout.slab((8, 3), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    assert [f.shape for f in lay.fragments] == [(2, 3)] * 4
    uneven = Layout.slab((5, 3), 0, CUDA4)  # block ceil(5/4) = 2: pieces 2, 2, 1, 0
    assert uneven.block == (2, 3) and uneven.grid == (4, 1)
    assert [f.shape[0] for f in uneven.fragments] == [2, 2, 1, 0]
    assert [f.global_slices() for f in uneven.fragments][3] == (slice(0, 0), slice(0, 3))
    ten = Layout.slab(10, -1, CUDA4)  # block 3: 3, 3, 3, 1
    assert [f.shape for f in ten.fragments] == [(3,), (3,), (3,), (1,)]
    assert Layout.slab((0, 4), 0, CUDA4).block == (1, 4)


def test_block_cyclic_replicated_single():
    bc = Layout.block_cyclic((9, 9), (4, 2), (2, 2), CUDA4)
    assert bc == Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA4)
    rep = Layout.replicated((3, 4), ["cpu:0", "cpu:1", "cpu:2"])
    assert rep.grid == (1, 1) and rep.nreplicas == 3
    assert rep.owners((2, 3)) == (0, 1, 2)
    assert all(f.shape == (3, 4) for f in rep.fragments)
    single = Layout.single((2, 3))
    assert single.devices == (Device("cpu", 0),) and single.nfragments == 1
    assert Layout.single((2,), "cuda:1").devices == (Device("cuda", 1),)


def test_rank_zero():
    lay = Layout((), devices=["cpu:0", "cpu:1"])
    assert lay.ndim == 0 and lay.grid == () and lay.block == () and lay.size == 1
    assert lay.nreplicas == 2
    assert lay.owners(()) == (0, 1)
    assert lay.global_to_local(()) == ((0, ()), (1, ()))
    assert lay.local_to_global(1, ()) == ()
    frag = lay.fragment(1)
    assert frag.shape == () and frag.coords == () and frag.replica == 1 and frag.size == 1
    assert list(frag.block_slices()) == [((), ())]
    assert frag.memory_offset(()) == 0 and frag.span == 1 and frag.strides == ()
    assert lay.nbytes("float64") == (8, 8)


def test_same_device_several_fragments():
    lay = Layout((6,), block=(1,), grid=(3,), devices=["cpu", "cpu", "cpu"])
    assert [f.device for f in lay.fragments] == [Device("cpu", 0)] * 3
    np.testing.assert_array_equal(lay.owned_indices(1, 0), [1, 4])
    assert lay.fragment(1).global_slices() == (slice(1, 5, 3),)


def test_block_larger_than_extent_and_grid_larger_than_blocks():
    lay = Layout((3,), block=(8,), grid=(4,), devices=CUDA4)
    assert [f.shape for f in lay.fragments] == [(3,), (0,), (0,), (0,)]


def test_replace_with_devices_drop_modes(doc_example):
    lay = doc_example
    assert lay.replace(grid=(1, 4)).grid == (1, 4)
    assert lay.replace(shape=(8, 8)).block == (4, 2)
    with pytest.raises(TypeError, match="nonsense"):
        lay.replace(nonsense=1)
    with pytest.raises(LayoutError, match="devices"):
        lay.with_devices(["cuda:0"] * 3)
    on_host = lay.with_devices([f"cpu:{i}" for i in range(4)])
    assert on_host.on_host and on_host.grid == lay.grid
    # a reduction over mode 1 keeps the fragments with coordinate 0 along it
    row = lay.drop_modes(1)
    assert row == Layout((9,), block=(4,), grid=(2,), devices=["cuda:0", "cuda:1"])
    col = lay.drop_modes([-2])
    assert col == Layout((9,), block=(2,), grid=(2,), devices=["cuda:0", "cuda:2"])
    assert lay.drop_modes((0, 1)) == Layout((), devices=["cuda:0"])
    replicated = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA8).drop_modes(0)
    assert replicated.devices == tuple(Device("cuda", i) for i in (0, 2, 4, 6))
    assert replicated.nreplicas == 2
    with pytest.raises(LayoutError, match="axes"):
        lay.drop_modes(2)
    with pytest.raises(LayoutError, match="twice"):
        lay.drop_modes((1, -1))


def test_nbytes(doc_example):
    assert doc_example.nbytes("float32") == (100, 80, 80, 64)
    assert doc_example.nbytes(np.complex128) == (400, 320, 320, 256)


def test_out_of_range_indices(doc_example):
    with pytest.raises(IndexError, match="out of bounds"):
        doc_example.owners((9, 0))
    with pytest.raises(IndexError, match="entries"):
        doc_example.global_to_local((1,))
    with pytest.raises(IndexError, match="local shape"):
        doc_example.local_to_global(3, (4, 0))
    with pytest.raises(IndexError):
        doc_example.owned_indices(0, 2)


# ---------------------------------------------------------------------------
# validation: every invalid descriptor names the field, the mode and the value


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        (dict(shape=(3, -1)), r"shape\[1\] = -1 must be non-negative"),
        (dict(shape=(3, 2.0)), r"shape\[1\] = 2\.0 .*not an int"),
        (dict(shape=(True, 2)), r"shape\[0\] = True is a bool"),
        (dict(shape="ab"), r"shape must be a sequence"),
        (dict(shape=(3, 3), block=(0, 1)), r"block\[0\] = 0 must be positive .*shape=\(3, 3\)"),
        (dict(shape=(3, 3), block=(2,)), r"block has 1 entries but the layout has 2 modes"),
        (dict(shape=(3, 3), block=(2, "2")), r"block\[1\] = '2'"),
        (dict(shape=(3, 3), block=3), r"block must be a sequence"),
        (dict(shape=(3, 3), grid=(1, -2)), r"grid\[1\] = -2 must be positive \(mode 1; shape=\(3, 3\)"),
        (dict(shape=(3, 3), grid=(1, 1, 1)), r"grid has 3 entries"),
        (dict(shape=(3, 3), grid=(2, 1.5)), r"grid\[1\] = 1\.5"),
        (dict(shape=(3, 3), grid=(2, 2), devices=["cuda:0"] * 6), r"devices has 6 entries, not a multiple of prod\(grid\) = 4 .*grid=\(2, 2\)"),
        (dict(shape=(3, 3), devices=[]), r"devices is empty"),
        (dict(shape=(3,), grid=(2,), devices=["cpu", "cuda:0"]), r"devices mixes host \(cpu:0\) and non-host \(cuda:0\)"),
        (dict(shape=(3,), devices=["tpu:0"]), r"devices\[0\] = 'tpu:0' is not a device"),
        (dict(shape=(3, 3), element_strides=(3,)), r"element_strides has 1 entries"),
        (dict(shape=(3, 3), element_strides=(3, 0)), r"element_strides\[1\] = 0 must be positive"),
        (dict(shape=(3, 3), block_strides=(-1, 1)), r"block_strides\[0\] = -1 must be positive"),
        (dict(shape=(4, 4), block=(2, 2), element_strides=(1, 1)), r"element_strides=\(1, 1\) .*overlap"),
        (dict(shape=(4, 4), block=(2, 2), element_strides=(2, 1), block_strides=(4, 1)), r"block_strides=\(4, 1\) .*overlap"),
    ],
)
def test_invalid_descriptors(kwargs, match):
    kwargs.setdefault("devices", ["cuda:0"])
    with pytest.raises(LayoutError, match=match):
        Layout(**kwargs)


def test_invalid_errors_are_value_errors():
    with pytest.raises(ValueError):
        Layout((-1,), devices=["cpu"])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (((3, 3), 2, CUDA4), r"axis = 2 is out of range for shape \(3, 3\)"),
        (((3, 3), -3, CUDA4), r"axis = -3"),
        (((3, 3), 0.5, CUDA4), r"axis = 0\.5 .*not an int"),
        (((), 0, CUDA4), r"axis = 0 is out of range"),
        (((3, 3), 0, []), r"devices is empty"),
    ],
)
def test_invalid_slab(args, match):
    with pytest.raises(LayoutError, match=match):
        Layout.slab(*args)


# ---------------------------------------------------------------------------
# explicit strides


def test_element_strides_with_row_padding():
    # every fragment of the 9x9 example in rows of 8 elements: padded, still one strided array
    lay = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA4, element_strides=(8, 1))
    assert lay.block_strides == (32, 2) and not lay.is_dense
    frag = lay.fragment(0)  # local shape (5, 5)
    assert frag.is_strided and frag.strides == (8, 1)
    assert frag.span == 4 * 8 + 4 + 1 > frag.size
    assert lay.nbytes("float64") == tuple(8 * f.span for f in lay.fragments)
    assert frag.memory_offset((4, 4)) == 36


def test_padded_block_strides_span_and_injective_offsets():
    lay = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA4, element_strides=(8, 1), block_strides=(40, 3))
    for frag in lay.fragments:
        offsets = [frag.memory_offset(i) for i in np.ndindex(*frag.shape)]
        assert len(set(offsets)) == frag.size  # injective
        assert max(offsets) + 1 == frag.span > frag.size
    frag = lay.fragment(0)
    assert frag.memory_offset((4, 2)) == 40 + 3
    assert not frag.is_strided
    with pytest.raises(LayoutError, match="no single strided array"):
        frag.strides
    # fragment 3 holds one block per mode: its memory is one strided array again
    assert lay.fragment(3).shape == (4, 4) and not lay.fragment(3).is_strided
    assert Layout((4, 2), block=(4, 2), devices=CUDA4[:1], element_strides=(8, 1), block_strides=(40, 3)).fragment(0).strides == (8, 1)


def test_block_strides_only_makes_blocks_contiguous():
    lay = Layout((4, 4), block=(2, 2), devices=["cpu"], block_strides=(8, 4))
    assert lay.element_strides == (2, 1)  # each 2x2 block C-contiguous
    frag = lay.fragment(0)
    block_starts = [frag.memory_offset((r, c)) for r in (0, 2) for c in (0, 2)]
    assert block_starts == [0, 4, 8, 12]
    assert frag.span == 16 == frag.size and not frag.is_strided


def test_interleaved_strides_accepted_when_exactly_disjoint():
    # two blocks interleaved element by element: element stride 2, block stride 1
    lay = Layout((4,), block=(2,), devices=["cpu"], element_strides=(2,), block_strides=(1,))
    assert sorted(lay.fragment(0).memory_offset((i,)) for i in range(4)) == [0, 1, 2, 3]


def test_dense_strides_are_c_contiguous(doc_example):
    assert doc_example.fragment(1).strides == (5, 1)
    assert doc_example.fragment(1).span == 20
    assert doc_example.fragment(1).memory_offset((3, 4)) == 19


def test_global_slices_rejects_separated_blocks(doc_example):
    with pytest.raises(LayoutError, match="separated blocks along mode 0"):
        doc_example.fragment(0).global_slices()
    with pytest.raises(LayoutError, match="along mode 1"):
        doc_example.fragment(3).global_slices()
    lay = Layout((9, 9), block=(4, 9), grid=(2, 1), devices=CUDA4[:2])
    assert lay.fragment(1).global_slices() == (slice(4, 8), slice(0, 9))


def test_block_slices_cover_the_fragment(doc_example):
    frag = doc_example.fragment(0)
    pieces = list(frag.block_slices())
    assert len(pieces) == 6
    assert pieces[0] == ((slice(0, 4), slice(0, 2)), (slice(0, 4), slice(0, 2)))
    assert pieces[-1] == ((slice(8, 9), slice(8, 9)), (slice(4, 5), slice(4, 5)))
    glob = np.arange(81).reshape(9, 9)
    local = np.empty(frag.shape, dtype=glob.dtype)
    for g, loc in pieces:
        local[loc] = glob[g]
    np.testing.assert_array_equal(local, glob[np.ix_(frag.owned_indices(0), frag.owned_indices(1))])


# ---------------------------------------------------------------------------
# rendering

DOC_TABLE = """\
          0:2     2:4     4:6     6:8     8:9
  0:4  cuda:0  cuda:2  cuda:0  cuda:2  cuda:0
  4:8  cuda:1  cuda:3  cuda:1  cuda:3  cuda:1
  8:9  cuda:0  cuda:2  cuda:0  cuda:2  cuda:0"""


def test_str_of_doc_example(doc_example):
    text = str(doc_example)
    assert DOC_TABLE in text
    assert "1         (1, 0)  0        cuda:1  (4, 5)       ([1], [0, 2, 4])" in text


def test_str_of_replicated_doc_example():
    text = str(Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA8))
    assert "cuda:0 & cuda:4  cuda:2 & cuda:6  cuda:0 & cuda:4" in text
    assert "cuda:1 & cuda:5  cuda:3 & cuda:7  cuda:1 & cuda:5" in text


def test_str_other_ranks():
    assert "cpu:0  cpu:1  cpu:0" in str(Layout((6,), block=(2,), grid=(2,), devices=["cpu:0", "cpu:1"]))
    assert "#1 cpu:0" in str(Layout((6,), block=(2,), grid=(2,), devices=["cpu", "cpu"]))
    assert "cut at index 0 of modes 2" in str(Layout((4, 4, 4), grid=(1, 1, 1), devices=["cpu"]))
    assert "extent 0" in str(Layout((0, 4), devices=["cpu"]))
    assert "cpu:0" in str(Layout((), devices=["cpu"]))
    big = str(Layout((1000, 1000), block=(1, 1), grid=(3, 3), devices=[f"cuda:{i}" for i in range(9)]))
    assert "..." in big and len(big.splitlines()) < 60


def test_repr_is_short(doc_example):
    assert repr(doc_example) == (
        "Layout((9, 9), block=(4, 2), grid=(2, 2), devices=('cuda:0', 'cuda:1', 'cuda:2', 'cuda:3'))"
    )
    assert repr(Layout((3,), devices=["cpu"])) == "Layout((3,), devices=('cpu:0',))"


def test_plot_returns_a_figure(doc_example):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig = doc_example.plot()
    try:
        assert isinstance(fig, Figure)
        ax = fig.axes[0]
        assert len(ax.patches) == 15
        assert {t.get_text() for t in ax.texts} == {"cuda:0", "cuda:1", "cuda:2", "cuda:3"}
    finally:
        plt.close(fig)
    fig2, ax2 = plt.subplots()
    try:
        assert Layout((9, 9), block=(4, 2), grid=(2, 2), devices=CUDA8).plot(ax2) is fig2
        assert Layout((), devices=["cpu"]).plot(ax2) is fig2
    finally:
        plt.close(fig2)


def test_plot_without_matplotlib(doc_example, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'dlmg\[plot\]'"):
        doc_example.plot()


def test_layout_imports_no_framework():
    code = (
        "import sys, dlmg.layout as L; "
        "l = L.Layout((9, 9), block=(4, 2), grid=(2, 2), devices=['cuda:0'] * 4); str(l); "
        "bad = [m for m in ('torch', 'jax', 'cupy', 'matplotlib') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
