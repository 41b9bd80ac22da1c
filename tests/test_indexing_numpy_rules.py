"""Indexing and assignment give NumPy's values or NumPy's errors, whatever framework holds the fragments.

Bounds are checked before any framework sees an index (JAX clamps, torch reads
negative indices from the end), float index arrays are refused, lists and
boolean scalars mean what they mean to NumPy, negative steps work on torch
fragments, assigned values broadcast and cast by NumPy's rules, and an operand
sharing memory with the target of an in-place write is read as it was before.
Each case runs on NumPy, torch and JAX fragments, in one fragment and in row and
column slabs over ``cpu:0`` .. ``cpu:3``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

DEVICES = [f"cpu:{i}" for i in range(4)]
HOST = np.arange(20.0).reshape(4, 5)
LAYOUTS = {
    "one": Layout.single((4, 5), "cpu:0"),
    "rows": Layout.slab((4, 5), 0, DEVICES[:2]),
    "cols": Layout.slab((4, 5), 1, DEVICES),
}
FRAMEWORKS = ["numpy", "torch", "jax"]


def _make(framework, layout, host=HOST):
    pytest.importorskip(framework)
    if framework == "jax" and host.dtype == np.float64:
        host = host.astype(np.float32)
    return dlmg.scatter(host, layout, framework=framework)


def _values(t):
    return np.asarray(t.gather(framework="numpy"))


cases = pytest.mark.parametrize("framework", FRAMEWORKS)
layouts = pytest.mark.parametrize("where", sorted(LAYOUTS))


@cases
@layouts
def test_out_of_bounds_index_arrays_raise(framework, where):
    x = _make(framework, LAYOUTS[where])
    with pytest.raises(IndexError, match="out of bounds"):
        x[np.array([4])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[np.array([-5])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[np.array([0, 4])] = 1
    with pytest.raises(IndexError, match="out of bounds"):
        x[0, 5] = 1
    with pytest.raises(IndexError, match="out of bounds"):
        x[:, np.array([5])]
    np.testing.assert_array_equal(_values(x), HOST)  # nothing written


@cases
@layouts
def test_index_arrays_as_numpy_reads_them(framework, where):
    x = _make(framework, LAYOUTS[where])
    with pytest.raises(IndexError, match="integer"):
        x[np.array([0.5])]
    with pytest.raises(IndexError, match="integer"):
        x[[0.5]]
    for key in [np.True_, True, (np.False_,), [0, 2], ([0, 2], [1, 3]), np.array([-1, 0]), (slice(None), [4, 0]),
                (1, [0, 1, 1]), ([[0], [3]], [1, 2]), (np.array([True, False, True, False]),),
                HOST > 7, (slice(None), np.array([True, False, True, False, True])), (None, [1, 2]),
                ([1, 2], None, slice(1, 3)), ([0, 1], ...)]:
        np.testing.assert_array_equal(_values(x[key]), HOST[key], err_msg=f"key {key!r}")
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match="too many"):
        x[0, 0, 0]


@cases
@layouts
def test_negative_steps(framework, where):
    x = _make(framework, LAYOUTS[where])
    for key in [slice(None, None, -1), (slice(None), slice(None, None, -2)), (slice(3, 0, -2), slice(4, None, -3)),
                (slice(None, None, -1), 2), (slice(-1, -5, -1),)]:
        np.testing.assert_array_equal(_values(x[key]), HOST[key], err_msg=f"key {key!r}")
    y = _make(framework, LAYOUTS[where])
    y[::-1] = _make(framework, LAYOUTS[where])
    np.testing.assert_array_equal(_values(y), HOST[::-1])
    z = _make(framework, LAYOUTS[where])
    z[:, ::-2] = np.array([7.0, 8.0, 9.0])
    want = HOST.copy()
    want[:, ::-2] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(_values(z), want)


@cases
@layouts
def test_assigned_values_broadcast_as_numpy(framework, where):
    x = _make(framework, LAYOUTS[where])
    with pytest.raises(ValueError, match="broadcast"):
        x[:] = np.ones((2, 5))
    with pytest.raises(ValueError, match="broadcast"):
        x[:, 0] = np.ones(5)
    np.testing.assert_array_equal(_values(x), HOST)
    x[:, 0] = np.arange(4.0) + 100
    x[1] = np.ones((1, 5))  # leading ones dropped, as NumPy does
    x[2:] = np.array([[-1.0], [-2.0]])
    x[np.array([0, 3]), 1:3] = np.array([50.0, 60.0])
    want = HOST.copy()
    want[:, 0] = np.arange(4.0) + 100
    want[1] = np.ones((1, 5))
    want[2:] = np.array([[-1.0], [-2.0]])
    want[np.array([0, 3]), 1:3] = np.array([50.0, 60.0])
    np.testing.assert_array_equal(_values(x), want)
    v = _make(framework, LAYOUTS["one"])
    x[:] = v[0:1]  # a distributed value broadcast over the rows
    np.testing.assert_array_equal(_values(x), np.broadcast_to(HOST[0:1], (4, 5)))


@cases
@layouts
def test_assigned_values_cast_as_numpy(framework, where):
    x = _make(framework, LAYOUTS[where])
    with pytest.raises(TypeError, match="complex"):
        x[0, 0] = 1 + 2j
    with pytest.raises(TypeError, match="same_kind"):
        x[0] = np.ones(5, dtype=np.complex64)
    u = _make(framework, LAYOUTS[where], HOST.astype(np.uint8))
    with pytest.raises(OverflowError):
        u[0, 0] = -1
    with pytest.raises(OverflowError):
        u[0, 0] = 256
    with pytest.raises(TypeError, match="same_kind"):
        u[0] = np.ones(5)
    with pytest.raises(ValueError, match="NaN"):
        u[0, 0] = float("nan")
    np.testing.assert_array_equal(_values(u), HOST.astype(np.uint8))
    u[0, 0] = 255
    u[1, 1] = 2.7  # NumPy truncates a Python float into an integer tensor
    assert _values(u)[0, 0] == 255 and _values(u)[1, 1] == 2
    with pytest.raises(TypeError, match="integer"):
        xp.reshape(x, (2.0, 10))
    with pytest.raises(TypeError, match="integer"):
        x.reshape((2.5, 8))


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@layouts
def test_operands_that_alias_the_target_are_read_first(framework, where):
    for action, expect in [
        (lambda x: x.__isub__(x[0]), lambda a: a - a[0]),
        (lambda x: x.__imul__(x[:, 0:1]), lambda a: a * a[:, 0:1]),
        (lambda x: x.__iadd__(x[::-1]), lambda a: a + a[::-1]),
    ]:
        x = _make(framework, LAYOUTS[where])
        action(x)
        np.testing.assert_array_equal(_values(x), expect(HOST.copy()))
    x = _make(framework, LAYOUTS[where])
    x[:, 1:] = x[:, :-1]
    want = HOST.copy()
    want[:, 1:] = want[:, :-1].copy()
    np.testing.assert_array_equal(_values(x), want)
    x = _make(framework, LAYOUTS[where])
    x[1:] = x[:-1]
    want = HOST.copy()
    want[1:] = want[:-1].copy()
    np.testing.assert_array_equal(_values(x), want)


def test_views_stay_views_where_fragments_hold_the_modes():
    x = dlmg.scatter(HOST, LAYOUTS["rows"])
    v = x[:, ::-1]
    assert np.shares_memory(v.fragments[0].array, x.fragments[0].array)
    np.testing.assert_array_equal(_values(v), HOST[:, ::-1])


_KEY_PART = st.one_of(
    st.integers(-4, 3),
    st.slices(4),
    st.just(None),
    st.lists(st.integers(-4, 3), min_size=0, max_size=3).map(lambda v: np.array(v, dtype=np.int64)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(framework=st.sampled_from(["numpy", "torch"]), block=st.tuples(st.integers(1, 4), st.integers(1, 6)),
       grid=st.sampled_from([(1, 1), (2, 1), (1, 2), (2, 2)]), replicas=st.integers(1, 2),
       key=st.lists(_KEY_PART, min_size=1, max_size=3), value=st.booleans())
def test_random_keys_and_layouts_match_numpy(framework, block, grid, replicas, key, value):
    host = np.arange(24.0).reshape(4, 6)
    ndev = grid[0] * grid[1] * replicas
    layout = Layout((4, 6), block=block, grid=grid, devices=[f"cpu:{i % 8}" for i in range(ndev)])
    x = dlmg.scatter(host, layout, framework=framework)
    key = tuple(k if not isinstance(k, int) else min(max(k, -4), 3) for k in key)
    try:
        want = host[key]
    except IndexError as exc:
        with pytest.raises(IndexError):
            x[key]
        del exc
        return
    got = x[key]
    np.testing.assert_array_equal(_values(got), want)
    assert set(got.layout.devices) <= set(layout.devices)
    if value:
        h = host.copy()
        h[key] = -np.ones(np.shape(want))
        x[key] = -np.ones(np.shape(want))
        np.testing.assert_array_equal(_values(x), h)


@pytest.mark.parametrize("index_framework", ["torch", "jax"])
def test_index_arrays_of_any_framework(index_framework):
    mod = pytest.importorskip(index_framework)
    make = mod.tensor if index_framework == "torch" else mod.numpy.array
    x = dlmg.scatter(HOST, LAYOUTS["rows"])
    np.testing.assert_array_equal(_values(x[make([3, 0])]), HOST[[3, 0]])
    np.testing.assert_array_equal(_values(x[make([True, False, True, False])]), HOST[[True, False, True, False]])
    with pytest.raises(IndexError, match="integer"):
        x[make([0.5])]
    with pytest.raises(IndexError, match="out of bounds"):
        x[make([4])]
