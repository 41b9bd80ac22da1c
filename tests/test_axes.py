"""Axis arguments are validated as NumPy validates them: out-of-range and repeated modes
raise (an ``AxisError``, also a ``ValueError`` and an ``IndexError``), never wrap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dlmg
from dlmg import array_api as xp
from dlmg._shapes import normalize_axes, normalize_axis

D = ["cpu:0", "cpu:1"]


@pytest.fixture()
def pair():
    A = np.arange(32.0).reshape(4, 8)
    B = np.arange(48.0).reshape(8, 6)
    a = dlmg.scatter(A, dlmg.Layout.slab((4, 8), 0, D))
    b = dlmg.scatter(B, dlmg.Layout.slab((8, 6), 0, D))
    return A, B, a, b


@pytest.mark.parametrize("axes", [([3], [0]), ([5], [0]), ([-3], [0]), ([1, 1], [0, 0]), ([1], [2])])
def test_tensordot_refuses_what_numpy_refuses(pair, axes):
    A, B, a, b = pair
    with pytest.raises((IndexError, ValueError)):
        np.tensordot(A, B, axes=axes)
    with pytest.raises(dlmg.AxisError):
        dlmg.tensordot(a, b, axes=axes)
    with pytest.raises(dlmg.AxisError):
        xp.tensordot(a, b, axes=axes)


@pytest.mark.parametrize("axes", [1, ([1], [0]), ([-1], [-2]), ([1], [-2])])
def test_tensordot_in_range_axes_agree_with_numpy(pair, axes):
    A, B, a, b = pair
    np.testing.assert_allclose(dlmg.tensordot(a, b, axes=axes).gather(framework="numpy"), np.tensordot(A, B, axes=axes))


def test_tensordot_refuses_float_axes(pair):
    _, _, a, b = pair
    with pytest.raises(TypeError, match="integer"):
        dlmg.tensordot(a, b, axes=([1.0], [0]))


@pytest.mark.parametrize("axis", [2, -3])
def test_vecdot_refuses_out_of_range_axis(pair, axis):
    _, _, a, _ = pair
    with pytest.raises(dlmg.AxisError):
        xp.vecdot(a, a, axis=axis)


@pytest.mark.parametrize("axis", [2, -3, (0, 0), (1, -1)])
def test_reductions_refuse_bad_axes(pair, axis):
    A, _, a, _ = pair
    with pytest.raises((ValueError, IndexError)):
        np.sum(A, axis=axis)
    with pytest.raises(dlmg.AxisError):
        xp.sum(a, axis=axis)


def test_reduction_axis_must_be_an_integer(pair):
    _, _, a, _ = pair
    with pytest.raises(TypeError, match="integer"):
        xp.sum(a, axis=1.5)


@pytest.mark.parametrize("axes", [(0, 0), (0, 2), (0,)])
def test_permute_dims_refuses_what_numpy_refuses(pair, axes):
    A, _, a, _ = pair
    with pytest.raises((ValueError, IndexError)):
        np.transpose(A, axes)
    with pytest.raises((dlmg.AxisError, ValueError)):
        xp.permute_dims(a, axes)


def test_axis_error_is_both_builtins():
    assert issubclass(dlmg.AxisError, ValueError) and issubclass(dlmg.AxisError, IndexError)
    assert issubclass(dlmg.AxisError, dlmg.DlmgError)


@given(st.integers(0, 6), st.integers(-10, 10))
def test_normalize_axis_matches_numpy(ndim, axis):
    try:
        expected = np.lib.array_utils.normalize_axis_index(axis, ndim)
    except Exception:
        expected = None
    if -ndim <= axis < ndim:
        assert normalize_axis(axis, ndim, "f") == axis % ndim
        if expected is not None:
            assert normalize_axis(axis, ndim, "f") == expected
    else:
        with pytest.raises(dlmg.AxisError):
            normalize_axis(axis, ndim, "f")


@given(st.integers(1, 5), st.lists(st.integers(-6, 6), max_size=6))
def test_normalize_axes_refuses_repeats_and_keeps_order(ndim, axes):
    modes = [a % ndim for a in axes if -ndim <= a < ndim]
    if len(modes) != len(axes) or len(set(modes)) != len(modes):
        with pytest.raises(dlmg.AxisError):
            normalize_axes(axes, ndim, "f")
    else:
        assert normalize_axes(axes, ndim, "f") == tuple(modes)
        assert normalize_axes(axes, ndim, "f", sort=True) == tuple(sorted(modes))


def test_plan_redistribution_names_a_tensor_given_for_a_layout(pair):
    _, _, a, _ = pair
    with pytest.raises(TypeError, match="src_layout must be a dlmg.Layout, got DistributedTensor.*x.layout"):
        dlmg.plan_redistribution(a, a.layout)
    with pytest.raises(TypeError, match="dst_layout must be a dlmg.Layout, got DistributedTensor"):
        dlmg.plan_redistribution(a.layout, a)
    with pytest.raises(TypeError, match="needs a dlmg.Layout, got DistributedTensor"):
        a.plan_redistribution(a)
