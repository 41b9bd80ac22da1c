"""NumPy's data address read from the array's struct (the fragment check's fast path)
against ``__array_interface__['data'][0]``, for every kind of array NumPy makes."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import dlmg
from dlmg.adapters import numpy as numpy_adapter_module

ADAPTER = dlmg.get_adapter("numpy")
DTYPES = st.sampled_from(["<f8", ">f8", "<i4", ">i4", "u1", "b1", "<c16", ">c8", "<f2", "<U2", "M8[s]", "<i2,>f4"])


def interface_address(a):
    return a.__array_interface__["data"][0]


def signature_address(a):
    shape, strides, address = ADAPTER.memory_signature(a)
    assert (shape, strides) == (a.shape, a.strides)
    return address


@st.composite
def views(draw):
    """An owner (any dtype, byte order, shape, zero-size included) and a view of it:
    basic slices with steps of either sign, a transpose, a read-only flag."""
    dtype = draw(DTYPES)
    base = draw(hnp.arrays(np.dtype(dtype), hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)))
    index = tuple(
        slice(draw(st.integers(-n - 1, n + 1)), draw(st.integers(-n - 1, n + 1)),
              draw(st.sampled_from([1, 2, -1, -3])))
        for n in base.shape
    )
    view = base[(*index, Ellipsis)]  # (a view also of a 0-d array, not a scalar)
    if draw(st.booleans()):
        view = view.T
    if draw(st.booleans()):
        view.flags.writeable = False
    return view


def test_cpython_reads_the_struct_and_the_struct_reader_passed_its_probes():
    reader = numpy_adapter_module._address_reader()
    if sys.implementation.name != "cpython":
        assert reader is numpy_adapter_module._interface_address
    else:
        assert reader is not numpy_adapter_module._interface_address


@pytest.mark.parametrize("shift", [-8, 8, 16, 24])
def test_a_wrong_offset_fails_the_probes_and_would_not_be_used(shift):
    wrong = numpy_adapter_module._struct_reader(object.__basicsize__ + shift)
    assert not numpy_adapter_module._agrees_on_probes(wrong)


@settings(max_examples=300, deadline=None)
@given(views())
def test_the_struct_address_is_the_interface_address(view):
    assert signature_address(view) == interface_address(view)
    assert ADAPTER.data_ptr(view) == interface_address(view)


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float64, hnp.array_shapes(min_dims=2, max_dims=2, min_side=1, max_side=4)), st.integers(0, 3))
def test_subclasses_read_the_same_address(values, start):
    masked = np.ma.masked_array(values, mask=values > 0)
    for a in (np.matrix(values), masked.data, values.view(np.recarray), np.asarray(masked)):
        view = a[start:]
        assert signature_address(view) == interface_address(view)


def test_broadcast_zero_stride_buffer_and_memmap_arrays(tmp_path):
    mapped = np.memmap(tmp_path / "m", dtype=">f4", mode="w+", shape=(4, 3))
    for a in (np.broadcast_to(np.arange(3.0), (4, 3)), np.frombuffer(b"", np.uint8),
              np.frombuffer(bytearray(16), np.int32)[1:], np.array(2.5), mapped, mapped[1:, ::-1],
              np.lib.stride_tricks.as_strided(np.arange(8.0), (3,), (0,))):
        assert signature_address(a) == interface_address(a)


def test_an_object_that_is_not_an_ndarray_goes_through_its_interface():
    class Described:  # what a subclass adapter's arrays could be: no ndarray struct behind it
        def __init__(self, a):
            self.keep = a
            self.__array_interface__ = a.__array_interface__

    values = np.arange(6.0)[2:]
    reader = numpy_adapter_module._address_reader()
    assert reader(Described(values)) == interface_address(values)


def test_the_address_follows_a_reallocation():
    a = np.arange(12.0)
    was = signature_address(a)
    a.resize((1 << 20,), refcheck=False)
    a.resize((12,), refcheck=False)
    assert signature_address(a) == interface_address(a) != was
