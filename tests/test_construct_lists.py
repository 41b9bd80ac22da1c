"""Wrapping a list of arrays: ``from_fragments`` checks a list of like arrays as a
whole (one type, one dtype object) and each array's shape and device, and its
fragments are the ones the fragment-by-fragment path makes of the same arrays
(a mapping takes that path): the same arrays, zero-copy exports, the same
refusals naming the fragment, the field and the value."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dlmg
from dlmg import Layout
from dlmg.construct import _wrap_alike
from dlmg.errors import DLPackError, FragmentError, ReadOnlyError

torch = pytest.importorskip("torch")


def _pieces(layout: Layout, dtype=np.float32, start: float = 0.0) -> list[np.ndarray]:
    return [np.full(f.shape, start + f.index, dtype=dtype) for f in layout.fragments]


def _facts(dt) -> list[tuple]:
    """What each fragment is: its array (by identity), framework, rank, DLPack device,
    read-only flag and export target."""
    out = []
    for frag in dt.fragments:
        out.append((id(frag.array), frag.framework, frag.rank, frag.__dlpack_device__(), frag.readonly,
                    torch.from_dlpack(frag).data_ptr(), frag.shape))
    return out


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(0, 7), min_size=1, max_size=3),
    grid0=st.integers(1, 4),
    host_devices=st.booleans(),
    replicas=st.integers(1, 2),
)
def test_a_list_wraps_as_the_fragment_by_fragment_path_does(shape, grid0, host_devices, replicas):
    grid = (grid0,) + (1,) * (len(shape) - 1)
    block = tuple(max(1, -(-n // g)) for n, g in zip(shape, grid))
    count = grid0 * replicas
    devices = [f"cpu:{k}" for k in range(count)] if host_devices else ["cpu"] * count
    layout = Layout(shape, block=block, grid=grid, devices=devices)
    arrays = _pieces(layout)
    as_list = dlmg.from_fragments(arrays, layout)
    as_mapping = dlmg.from_fragments(dict(enumerate(arrays)), layout)  # the fragment-by-fragment path
    assert _facts(as_list) == _facts(as_mapping)
    assert _wrap_alike(arrays, layout, None) is not None  # the list was checked as a whole
    assert as_list.dtype == as_mapping.dtype == "float32"
    for frag, array in zip(as_list.fragments, arrays):
        assert frag.array is array
        if host_devices:
            assert frag.__dlpack_device__() == (1, 0)  # NumPy memory: DLPack's one CPU device


@pytest.mark.parametrize("count", [8, 64])
def test_wrapped_lists_export_zero_copy(count):
    layout = Layout.slab((count * 16,), 0, ["cpu"] * count)
    arrays = _pieces(layout)
    dt = dlmg.from_fragments(arrays, layout)
    for _ in range(2):  # the first export and the later ones
        for frag, array in zip(dt.fragments, arrays):
            assert torch.from_dlpack(frag).data_ptr() == array.ctypes.data
            assert np.from_dlpack(frag).ctypes.data == array.ctypes.data
    assert dt.fragments[0].__dlpack__ == arrays[0].__dlpack__  # no step of dlmg's between


@pytest.mark.parametrize("where", [0, 3, 7])
def test_an_array_of_another_shape_is_refused_wherever_it_sits(where):
    layout = Layout.slab((8, 4), 0, ["cpu"] * 8)
    arrays = _pieces(layout)
    arrays[where] = np.zeros((2, 4), np.float32)
    with pytest.raises(FragmentError, match=rf"fragment {where}: .* shape \(2, 4\), but fragment {where} .* \(1, 4\)"):
        dlmg.from_fragments(arrays, layout)


@pytest.mark.parametrize("where", [0, 5])
def test_an_array_of_another_dtype_is_refused_naming_both(where):
    layout = Layout.slab((6,), 0, ["cpu"] * 6)
    arrays = _pieces(layout)
    arrays[where] = np.zeros(1, np.float64)
    first = 1 if where == 0 else 0
    with pytest.raises(FragmentError, match=rf"fragment {max(where, first)} has dtype float(64|32), but fragment "
                                            rf"{min(where, first)} has float(32|64)"):
        dlmg.from_fragments(arrays, layout)
    with pytest.raises(FragmentError, match="fragment 0 has dtype float32, but dtype= has int8"):
        dlmg.from_fragments(_pieces(layout), layout, dtype="int8")


def test_other_refusals_name_the_fragment():
    layout = Layout.slab((4,), 0, ["cpu"] * 4)
    arrays = _pieces(layout)
    with pytest.raises(FragmentError, match="fragment 0 .* no array was given"):
        dlmg.from_fragments([None] + arrays[1:], layout)
    with pytest.raises(FragmentError, match="got 3 entries"):
        dlmg.from_fragments(arrays[:3], layout)
    with pytest.raises(FragmentError, match=r"fragment 0: the numpy array lies on cpu:0, but .* cuda:0"):
        dlmg.from_fragments(arrays[:2], Layout.slab((2,), 0, ["cuda:0", "cuda:1"]))


def test_mixed_frameworks_in_a_list_keep_each_its_own_adapter():
    layout = Layout.slab((3, 2), 0, ["cpu"] * 3)
    arrays = [np.zeros((1, 2), np.float32), torch.ones(1, 2), np.full((1, 2), 2, np.float32)]
    dt = dlmg.from_fragments(arrays, layout)
    assert [f.framework for f in dt.fragments] == ["numpy", "torch", "numpy"]
    assert [f.array is a for f, a in zip(dt.fragments, arrays)] == [True] * 3
    np.testing.assert_array_equal(dt.gather(), [[0, 0], [1, 1], [2, 2]])


def test_read_only_arrays_stay_read_only():
    layout = Layout.slab((8,), 0, ["cpu"] * 4)
    arrays = _pieces(layout)
    for a in arrays:
        a.flags.writeable = False
    dt = dlmg.from_fragments(arrays, layout)
    assert all(f.readonly for f in dt.fragments)
    with pytest.raises(ReadOnlyError):
        dt += 1
    assert all(not a.flags.writeable for a in arrays)
    np.testing.assert_array_equal(dt.gather(), np.repeat(np.arange(4.0), 2))  # nothing was written
    for frag in dt.fragments:
        assert not np.from_dlpack(frag).flags.writeable


def test_an_array_changed_after_wrapping_is_refused_before_it_is_read():
    """Shapes are checked when wrapping and again before any read: an array reshaped
    in place afterwards makes the read fail, never read a wrong element."""
    layout = Layout.slab((8,), 0, ["cpu"] * 2)
    arrays = _pieces(layout)
    dt = dlmg.from_fragments(arrays, layout)
    arrays[1].shape = (2, 2)
    with pytest.raises(FragmentError, match=r"fragment 1 .* shape \(2, 2\)"):
        dt.gather()
    with pytest.raises(FragmentError, match=r"fragment 1 .* shape \(2, 2\)"):
        dt + 1


def test_fragments_that_cannot_export_say_why_on_every_call():
    layout = Layout.slab((4,), 0, ["cpu"] * 2, ranks=[0, 1])
    dt = dlmg.from_fragments([np.zeros(2, np.float32), None], layout)
    for _ in range(2):
        with pytest.raises(DLPackError, match="held by process 1"):
            dt.fragments[1].__dlpack__()
    assert hasattr(dt.fragments[1], "__dlpack__")
