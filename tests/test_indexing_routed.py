"""Integer-array indexing, masks, ``take`` and ``take_along_axis`` by owner-routed requests.

Property tests over random block-cyclic layouts (slab, cyclic, uneven last
blocks, replicas, several fragments per device) with fragments of mixed
frameworks (NumPy, torch, JAX): values, dtype and shape equal NumPy's on the gathered operands, and
the result lies on the lead operand's devices (or the index tensor's).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

from _strategies import expected_fragment, layouts

pytest.importorskip("torch")

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mixed(host: np.ndarray, layout: Layout, frameworks: list[str]):
    """``host`` in ``layout``, fragment ``i`` in ``frameworks[i % len(frameworks)]``."""
    import torch

    arrays = []
    for i in range(layout.nfragments):
        part = np.ascontiguousarray(expected_fragment(host, layout, i))
        arrays.append(torch.from_numpy(part.copy()) if frameworks[i % len(frameworks)] == "torch" else part.copy())
    return dlmg.from_fragments(arrays, layout)


def _values(t):
    return np.asarray(t.gather(framework="numpy"))


def _on_lead(result, lead) -> None:
    assert set(result.layout.devices) <= set(lead.layout.devices)


FRAMEWORK_MIXES = st.sampled_from([["numpy"], ["torch"], ["numpy", "torch"], ["torch", "numpy"]])


@SETTINGS
@given(layout=layouts(shape=(7, 5), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_integer_arrays_and_masks_match_numpy(layout, mix, data):
    host = np.arange(35.0).reshape(7, 5)
    x = _mixed(host, layout, mix)
    rows = np.array(data.draw(st.lists(st.integers(-7, 6), max_size=9)), dtype=np.int64)
    cols = np.array(data.draw(st.lists(st.integers(-5, 4), min_size=1, max_size=1)), dtype=np.int64)
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=35, max_size=35))).reshape(7, 5)
    for key in [rows, (rows, cols), (slice(None), cols), (slice(1, None, 2), rows % 5), mask, mask[:, 0]]:
        got = x[key]
        np.testing.assert_array_equal(_values(got), host[key])
        assert got.dtype == "float64"
        _on_lead(got, x)
    m = dlmg.scatter(mask, layout)
    got = x[m]
    np.testing.assert_array_equal(_values(got), host[mask])
    _on_lead(got, x)


@SETTINGS
@given(layout=layouts(shape=(6, 4), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_take_and_take_along_axis_match_numpy(layout, mix, data):
    host = np.arange(24.0).reshape(6, 4) * 1.5
    x = _mixed(host, layout, mix)
    axis = data.draw(st.integers(0, 1))
    n = host.shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), max_size=8)), dtype=np.int64)
    got = xp.take(x, idx, axis=axis)
    np.testing.assert_array_equal(_values(got), np.take(host, idx, axis=axis))
    _on_lead(got, x)
    if idx.size:
        ilay = Layout.slab(idx.shape, 0, sorted(set(layout.devices), key=str)[:2])
        didx = dlmg.scatter(idx, ilay)
        got = xp.take(x, didx, axis=axis)
        np.testing.assert_array_equal(_values(got), np.take(host, idx, axis=axis))
        assert got.layout.devices == didx.layout.devices  # the index's distribution kept
    along = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=24, max_size=24))).reshape(6, 4)
    if axis == 0:
        along = along[:3]
    got = xp.take_along_axis(x, along, axis=axis)
    np.testing.assert_array_equal(_values(got), np.take_along_axis(host, along, axis))
    _on_lead(got, x)
    dalong = dlmg.scatter(along, Layout.slab(along.shape, 0, list(dict.fromkeys(layout.devices))))
    got = xp.take_along_axis(x, dalong, axis=axis)
    np.testing.assert_array_equal(_values(got), np.take_along_axis(host, along, axis))


@SETTINGS
@given(layout=layouts(shape=(6, 5), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_assignment_by_index_arrays_and_masks(layout, mix, data):
    host = np.arange(30.0).reshape(6, 5)
    x = _mixed(host, layout, mix)
    rows = np.unique(np.array(data.draw(st.lists(st.integers(-6, 5), min_size=1, max_size=4)))) 
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=30, max_size=30))).reshape(6, 5)
    want = host.copy()
    want[rows] = -1.0
    x[rows] = -1.0
    want[mask] = np.arange(mask.sum()) + 100.0
    x[mask] = np.arange(mask.sum()) + 100.0
    want[rows, 1:3] = np.array([7.0, 8.0])
    x[rows, 1:3] = np.array([7.0, 8.0])
    np.testing.assert_array_equal(_values(x), want)
    for frag in x.fragments:  # every replica written
        np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(want, layout, frag.index))


def test_jax_fragments_and_errors():
    pytest.importorskip("jax")
    host = np.arange(20.0, dtype=np.float32).reshape(4, 5)
    x = dlmg.scatter(host, Layout((4, 5), block=(1, 2), grid=(2, 2), devices=[f"cpu:{i}" for i in range(4)]),
                     framework="jax")
    idx = np.array([3, -1, 0], dtype=np.int32)
    np.testing.assert_array_equal(_values(xp.take(x, idx, axis=1)), np.take(host, idx, axis=1))
    np.testing.assert_array_equal(_values(x[idx]), host[idx])
    with pytest.raises(IndexError, match="out of bounds"):
        xp.take(x, np.array([5], dtype=np.int32), axis=1)
    with pytest.raises(IndexError, match="out of bounds"):
        xp.take_along_axis(x, np.full((4, 1), 9, dtype=np.int32), axis=1)
    with pytest.raises(ValueError, match="axis"):
        xp.take(x, idx)
    x[idx[:2]] = 0.0
    want = host.copy()
    want[idx[:2]] = 0.0
    np.testing.assert_array_equal(_values(x), want)


def test_nothing_is_collected():
    """The result of every function here stays on the lead's devices, split."""
    host = np.arange(64.0).reshape(16, 4)
    devices = [f"cpu:{i}" for i in range(4)]
    x = dlmg.scatter(host, Layout.slab((16, 4), 0, devices))
    for got in [x[np.arange(16)[::-1]], xp.take(x, np.arange(16), axis=0), x[host > 3],
                xp.take_along_axis(x, np.zeros((16, 4), dtype=np.int64), axis=1), x[3:9:2]]:
        assert got.layout.nfragments == 4 and set(got.layout.devices) == set(x.layout.devices)


@SETTINGS
@given(layout=layouts(shape=(6, 4), jax_devices=False), data=st.data())
def test_distributed_integer_index_keeps_its_distribution(layout, data):
    host = np.arange(24.0).reshape(6, 4)
    x = dlmg.scatter(host, layout)
    axis = data.draw(st.integers(0, 1))
    n = host.shape[axis]
    idx = np.array(data.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=7)), dtype=np.int64)
    d = dlmg.scatter(idx, Layout.slab(idx.shape, 0, ["cpu:1", "cpu:2"]))
    key = (d,) if axis == 0 else (slice(None), d)
    got = x[key]
    np.testing.assert_array_equal(_values(got), host[(idx,) if axis == 0 else (slice(None), idx)])
    assert got.layout.devices == d.layout.devices


@SETTINGS
@given(layout=layouts(shape=(6, 4), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_assignment_through_distributed_indices_and_masks(layout, mix, data):
    host = np.arange(24.0).reshape(6, 4)
    x = _mixed(host, layout, mix)
    axis = data.draw(st.integers(0, 1))
    n = host.shape[axis]
    idx = np.unique(np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=4)), dtype=np.int64))
    d = dlmg.scatter(idx, Layout.slab(idx.shape, 0, ["cpu:1", "cpu:0"]))
    key = (d,) if axis == 0 else (slice(None), d)
    hkey = (idx,) if axis == 0 else (slice(None), idx)
    want = host.copy()
    value = np.arange(idx.size, dtype=np.float64) + 50 if axis == 1 else -2.0
    want[hkey] = value
    x[key] = value
    mask = want > 10
    want[mask] = 0.5
    x[dlmg.scatter(mask, Layout.slab((6, 4), 1, ["cpu:2", "cpu:3"]))] = 0.5
    np.testing.assert_array_equal(_values(x), want)
    for frag in x.fragments:
        np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(want, layout, frag.index))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout=layouts(shape=(5, 6), jax_devices=True), data=st.data())
def test_mixed_numpy_torch_jax_fragments(layout, data):
    jax = pytest.importorskip("jax")
    import torch

    host = (np.arange(30.0).reshape(5, 6) * 0.5).astype(np.float32)
    arrays = []
    for i in range(layout.nfragments):
        part = np.ascontiguousarray(expected_fragment(host, layout, i))
        kind = i % 3
        if kind == 0:
            arrays.append(jax.device_put(part, jax.devices("cpu")[layout.devices[i].index]))
        elif kind == 1:
            arrays.append(torch.from_numpy(part.copy()))
        else:
            arrays.append(part.copy())
    x = dlmg.from_fragments(arrays, layout)
    rows = np.array(data.draw(st.lists(st.integers(-5, 4), max_size=6)), dtype=np.int64)
    for key in [rows, (slice(None), rows % 6), host > 6.0, (slice(None, None, -2), 3)]:
        np.testing.assert_array_equal(_values(x[key]), host[key])
    np.testing.assert_array_equal(_values(xp.take(x, rows, axis=0)), np.take(host, rows, axis=0))
    want = host.copy()
    want[rows] = -1.0
    x[rows] = -1.0
    np.testing.assert_array_equal(_values(x), want)
    for frag in x.fragments:  # every replica, JAX ones replaced
        np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(want, layout, frag.index))


def _index_layout(shape, data):
    """A random slab or cyclic layout of an index tensor over two or three host devices."""
    devices = data.draw(st.sampled_from([["cpu:1", "cpu:2"], ["cpu:3", "cpu:0", "cpu:1"]]))
    if not shape or shape[0] == 0:
        return Layout.single(shape, devices[0])
    block = data.draw(st.integers(1, max(shape[0], 1)))
    return Layout(shape, block=(block,) + tuple(max(n, 1) for n in shape[1:]),
                  grid=(len(devices),) + (1,) * (len(shape) - 1), devices=devices)


@SETTINGS
@given(layout=layouts(shape=(6, 4, 5), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_several_distributed_index_arrays(layout, mix, data):
    """Keys with several distributed index arrays (mixed with host arrays, integers,
    slices, ``None`` and masks of some modes) read and write by owner-routed requests:
    NumPy's values, the result on the first index's devices."""
    host = np.arange(120.0).reshape(6, 4, 5)
    x = _mixed(host, layout, mix)
    n = data.draw(st.integers(1, 5))
    a = np.array(data.draw(st.lists(st.integers(-6, 5), min_size=n, max_size=n)), dtype=np.int64)
    b = np.array(data.draw(st.lists(st.integers(-4, 3), min_size=n, max_size=n)), dtype=np.int64)
    c = np.array(data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3)), dtype=np.int64)
    da = dlmg.scatter(a, _index_layout(a.shape, data))
    db = dlmg.scatter(b, _index_layout(b.shape, data))
    dc = dlmg.scatter(c[:, None], _index_layout((c.size, 1), data))
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=24, max_size=24))).reshape(6, 4)
    dmask = dlmg.scatter(mask, _index_layout((6, 4), data))
    cases = [((da, db), (a, b)), ((da, slice(1, None), db % 5), (a, slice(1, None), b % 5)),
             ((da, 2, db % 5), (a, 2, b % 5)), ((slice(None), db, a % 5), (slice(None), b, a % 5)),
             ((None, da, db), (None, a, b)), ((dc, db), (c[:, None], b)), ((dc, db, da % 5), (c[:, None], b, a % 5)),
             ((dmask,), (mask,)), ((dmask, db[:1] % 5), (mask, b[:1] % 5))]
    for key, hkey in cases:
        got = x[key]
        np.testing.assert_array_equal(_values(got), host[hkey], err_msg=str(hkey))
        assert got.dtype == "float64"
        lead = next(k for k in key if isinstance(k, dlmg.DistributedTensor))
        assert set(got.layout.devices) <= set(lead.layout.devices), str(hkey)
    pairs = np.unique(np.stack([a % 6, b % 4]), axis=1)  # writes to distinct elements
    a, b = pairs
    da = dlmg.scatter(a.copy(), _index_layout(a.shape, data))
    db = dlmg.scatter(b.copy(), _index_layout(b.shape, data))
    want = host.copy()
    want[a, b] = -1.0
    x[da, db] = -1.0
    sel = host[a, 1:, b % 5]
    value = np.arange(sel.size, dtype=np.float64).reshape(sel.shape) + 500
    want[a, 1:, b % 5] = value
    x[da, 1:, db % 5] = value
    np.testing.assert_array_equal(_values(x), want)
    for frag in x.fragments:
        np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(want, layout, frag.index))


@SETTINGS
@given(layout=layouts(shape=(5, 4, 6), jax_devices=False), mix=FRAMEWORK_MIXES, data=st.data())
def test_integer_along_a_split_mode_is_a_view(layout, mix, data):
    """``x[3]``, ``x[:, 2]``, ``x[1, :, 4]``... with integers along split modes: each result
    fragment is a view of the fragment of ``x`` holding the integers' positions (on its
    device), so writes through the result land in ``x`` (NumPy's view semantics)."""
    host = np.arange(120.0).reshape(5, 4, 6)
    x = _mixed(host, layout, mix)
    key = []
    for n in host.shape:
        kind = data.draw(st.sampled_from(["int", "all", "part"]))
        key.append(data.draw(st.integers(-n, n - 1)) if kind == "int" else
                   slice(None) if kind == "all" else slice(1, None))
    if not any(isinstance(k, int) for k in key):
        key[0] = data.draw(st.integers(0, 4))
    key = tuple(key)
    got = x[key]
    np.testing.assert_array_equal(_values(got), host[key])
    split_sliced = any(isinstance(k, slice) and k != slice(None) and g > 1 for k, g in zip(key, layout.grid))
    if split_sliced:
        return  # a part of a split mode: read from the owners (a copy)
    assert set(got.layout.devices) <= set(layout.devices)
    for frag in got.fragments:  # every fragment a view of one of x's fragments on its device
        mine = np.asarray(frag.array)
        assert mine.size == 0 or any(np.shares_memory(mine, np.asarray(src.array)) and src.device == frag.device
                                     for src in x.fragments), (key, frag.index)
    if got.size:
        at = (0,) * got.ndim
        got[at] = -1.0
        want = host.copy()
        want[key + (Ellipsis,)][at] = -1.0
        np.testing.assert_array_equal(_values(x), want)
        for frag in x.fragments:  # every replica of x written
            np.testing.assert_array_equal(np.asarray(frag.array), expected_fragment(want, layout, frag.index))


def test_zero_d_mask_of_a_zero_d_tensor_on_several_devices():
    """A reduction over every mode is a 0-d tensor on its input's devices; NumPy's
    ``s[mask]`` with a 0-d mask gives shape (1,) or (0,) (SciPy's ``apply_where`` relies on it)."""
    x = dlmg.scatter(np.arange(40.0), Layout.slab((40,), 0, ["cpu:0", "cpu:1"]))
    s = xp.sum(x)
    assert s.ndim == 0 and len(s.fragments) == 2
    for mask, want in ((s > 1e9, np.asarray(780.0)[np.asarray(False)]), (s < 1e9, np.asarray(780.0)[np.asarray(True)])):
        got = s[mask]
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.gather(), want)
