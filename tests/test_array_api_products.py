"""The namespace's products (``matmul``, ``tensordot``, ``vecdot``, ``linalg.outer``,
``linalg.trace``), written from the standard's text and checked against NumPy.

They are dlmg's contractions over split operands: the tests check the values
under a slab policy (operands split along batch and contracted modes), that
the result keeps its split or is laid out by the policy (never one collected
fragment, never a pending sum), and the standard's errors.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dlmg
import dlmg.array_api as xp
from _array_api_support import POLICIES, gathered, layout_policy, policy  # noqa: F401 (a fixture)
from dlmg.array_api import _gathered

FAST = settings(max_examples=20, deadline=None)


def _values(rng, shape):
    return rng.integers(-4, 5, size=shape).astype(np.float64)


def test_products_are_contractions_not_collected_functions():
    for fn in (xp.matmul, xp.tensordot, xp.vecdot, xp.linalg.matmul, xp.linalg.tensordot, xp.linalg.vecdot,
               xp.linalg.outer, xp.linalg.trace):
        assert not isinstance(fn, _gathered.CollectedFunction), fn
    assert xp.linalg.matmul is xp.matmul and xp.linalg.vecdot is xp.vecdot


@FAST
@given(batch1=st.lists(st.sampled_from([1, 2, 3]), max_size=2), batch2=st.lists(st.sampled_from([1, 3]), max_size=2),
       m=st.integers(1, 4), k=st.integers(1, 5), n=st.integers(1, 4), seed=st.integers(0, 2**16),
       vec1=st.booleans(), vec2=st.booleans(), kind=st.sampled_from(POLICIES))
def test_matmul_broadcasts_batch_modes_and_vectors_like_numpy(batch1, batch2, m, k, n, seed, vec1, vec2, kind):
    rng = np.random.default_rng(seed)
    if batch1 and batch2 and len(batch1) == len(batch2):
        batch2 = [b if b == a or 1 in (a, b) else 1 for a, b in zip(batch1, batch2)]
    s1 = (k,) if vec1 else (*batch1, m, k)
    s2 = (k,) if vec2 else (*batch2, k, n)
    try:
        want = np.matmul(_values(rng, s1), _values(rng, s2))
    except ValueError:
        return  # batch modes NumPy refuses too
    a, b = _values(np.random.default_rng(seed), s1), _values(np.random.default_rng(seed), s2)
    with policy(kind):
        got = xp.matmul(xp.asarray(a), xp.asarray(b))
    assert got.layout.partial is None and got.shape == want.shape
    np.testing.assert_array_equal(gathered(got), np.matmul(a, b))


def test_matmul_over_a_split_contracted_mode_is_reduce_scattered_onto_the_operands_devices():
    rng = np.random.default_rng(0)
    a, b = _values(rng, (4, 6)), _values(rng, (6, 5))
    with policy("slab"):
        x, y = xp.asarray(a), xp.matrix_transpose(xp.asarray(b.T.copy()))  # y split along its columns
        at = xp.matrix_transpose(xp.asarray(a.T.copy()))                    # split along the contracted mode
        got = xp.matmul(at, xp.asarray(b))
        assert got.layout.partial is None
        assert got.layout.same_distribution(dlmg.Layout.slab(got.shape, 0, at.layout.devices))
        assert got.layout.same_distribution((at @ xp.asarray(b)).layout)  # @ is this matmul
        np.testing.assert_array_equal(gathered(got), a @ b)
        batched = xp.matmul(xp.asarray(np.stack([a] * 3)), xp.asarray(np.stack([b] * 3)))
        assert batched.layout.grid == (3, 1, 1)          # the batch-local product, not one fragment
        np.testing.assert_array_equal(gathered(batched), np.stack([a @ b] * 3))
        np.testing.assert_array_equal(gathered(xp.matmul(x, y)), a @ b)


@FAST
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data(), kind=st.sampled_from(POLICIES))
def test_vecdot_counts_axis_from_the_end_and_broadcasts(shape, data, kind):
    axis = data.draw(st.integers(-len(shape), -1))
    other = tuple(1 if data.draw(st.booleans()) and i != len(shape) + axis else s for i, s in enumerate(shape))
    other = other[data.draw(st.integers(0, len(shape) + axis)):]  # fewer leading modes
    rng = np.random.default_rng(len(shape))
    a, b = _values(rng, tuple(shape)) + 1j * _values(rng, tuple(shape)), _values(rng, other).astype(complex)
    with policy(kind):
        got = xp.vecdot(xp.asarray(a), xp.asarray(b), axis=axis)
    np.testing.assert_allclose(gathered(got), np.vecdot(a, b, axis=axis))


def test_tensordot_and_outer_match_numpy(layout_policy):
    rng = np.random.default_rng(2)
    a, b = _values(rng, (3, 4, 5)), _values(rng, (4, 5, 2))
    x, y = xp.asarray(a), xp.asarray(b)
    for axes in (0, 2, ((1,), (0,)), ((-1, 1), (1, 0))):
        got = xp.tensordot(x, y, axes=axes)
        assert got.layout.partial is None
        np.testing.assert_array_equal(gathered(got), np.tensordot(a, b, axes=axes))
    np.testing.assert_array_equal(gathered(xp.linalg.outer(x[:, 0, 0], y[0, 0])), np.outer(a[:, 0, 0], b[0, 0]))


def test_products_refuse_what_the_standard_refuses(layout_policy):
    m, v, s = xp.ones((3, 4)), xp.ones((3, 2, 5)), xp.asarray(1.0)
    with pytest.raises(ValueError, match="inner extents"):
        xp.matmul(m, m)
    with pytest.raises(ValueError, match="at least one mode"):
        xp.matmul(s, m)
    with pytest.raises(ValueError, match="extents along axis"):
        xp.vecdot(m, v)
    with pytest.raises(ValueError, match="out of range"):
        xp.vecdot(m, m, axis=-3)
    with pytest.raises(ValueError, match="differ"):
        xp.tensordot(m, v, axes=((0,), (1,)))
    with pytest.raises(ValueError, match="vectors"):
        xp.linalg.outer(m, m)
    with pytest.raises(ValueError, match="2 modes"):
        xp.linalg.trace(xp.ones(3))


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_trace_accumulates_like_sum(framework):
    pytest.importorskip(framework)
    a = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    with dlmg.default_layout(framework=framework):
        x = xp.asarray(a)
        got = xp.linalg.trace(x, offset=1)
        assert got.dtype == xp.sum(x[0]).dtype == xp.uint64
        np.testing.assert_array_equal(gathered(got), np.trace(a, offset=1, axis1=1, axis2=2))
        assert xp.linalg.trace(x, dtype=xp.int16).dtype == xp.int16
