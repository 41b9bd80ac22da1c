"""Array habits of NumPy, PyTorch and JAX users on a distributed tensor.

``.T``/``permute_dims``/``transpose`` (no data moves), ``reshape`` where the
layout allows it, ``argmin``, ``var``/``std``, ``cumsum`` along a whole mode,
the ``*_like`` constructors, ``isclose``/``allclose``, ``round``, ``.device``,
``keepdims``; each checked against NumPy on the same data.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

import dlmg
from dlmg import Layout, LayoutError

HOST = np.arange(48.0).reshape(8, 6) % 7 - 3.0
GRID = Layout((8, 6), block=(2, 3), grid=(2, 2), devices=[f"cpu:{i}" for i in range(4)])
ROWS = Layout.slab((8, 6), 0, ["cpu:0", "cpu:1"])


def _pointer(array) -> int:
    return array.ctypes.data if isinstance(array, np.ndarray) else array.data_ptr()


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_transpose_is_a_view_of_every_fragment(framework):
    pytest.importorskip(framework)
    dt = dlmg.scatter(HOST, GRID, framework=framework)
    t = dt.T
    np.testing.assert_array_equal(t.gather(framework="numpy"), HOST.T)
    assert t.layout.shape == (6, 8) and t.layout.grid == (2, 2) and t.layout.block == (3, 2)
    by_device = {f.device: f for f in t.fragments}
    for frag in dt.fragments:  # same device, same memory, transposed
        moved = by_device[frag.device]
        assert _pointer(moved.array) == _pointer(frag.array)
        assert tuple(moved.array.shape) == tuple(reversed(frag.array.shape))
    np.testing.assert_array_equal(dlmg.permute_dims(dt, (1, 0)).gather(framework="numpy"), HOST.T)
    np.testing.assert_array_equal(dt.transpose().gather(framework="numpy"), HOST.T)


def test_permute_dims_of_three_modes_and_errors():
    host = np.arange(2 * 3 * 4.0).reshape(2, 3, 4)
    lay = Layout((2, 3, 4), block=(1, 2, 4), grid=(2, 2, 1), devices=[f"cpu:{i}" for i in range(4)])
    dt = dlmg.scatter(host, lay)
    for axes in [(2, 0, 1), (1, 2, 0), (0, 2, 1), (-1, 0, 1)]:
        np.testing.assert_array_equal(dlmg.permute_dims(dt, axes).gather(), np.transpose(host, axes))
    with pytest.raises(ValueError, match="permutation"):
        dlmg.permute_dims(dt, (0, 0, 1))
    with pytest.raises(ValueError, match="permute_dims"):
        dt.T


def test_transpose_of_jax_fragments():
    jax = pytest.importorskip("jax")
    dt = dlmg.scatter(HOST.astype(np.float32), GRID, framework="jax")
    np.testing.assert_array_equal(dt.T.gather(framework="numpy"), HOST.T)
    assert [f.device for f in dt.T.fragments] == [dt.fragments[i].device for i in (0, 2, 1, 3)]
    assert jax is not None


def test_reshape_merges_and_splits_where_fragments_stay_whole():
    dt = dlmg.scatter(HOST, ROWS)
    flat = dt.reshape(48)
    assert flat.layout.block == (24,) and flat.layout.grid == (2,)
    assert np.shares_memory(flat.fragments[0].array, dt.fragments[0].array)
    np.testing.assert_array_equal(flat.gather(), HOST.ravel())
    for shape in [(4, 2, 6), (8, 2, 3), (8, 6, 1), (1, 8, 6), (2, 4, 3, 2), (-1, 3)]:
        np.testing.assert_array_equal(dt.reshape(shape).gather(), HOST.reshape(shape))
    np.testing.assert_array_equal(dlmg.reshape(flat, (8, 6)).gather(), HOST)


def test_reshape_that_moves_data_is_dlmg_reshape_and_copy_false_names_redistribute():
    dt = dlmg.scatter(HOST, GRID)
    moved = dt.reshape(48)  # the method is the namespace's reshape: one redistribution
    np.testing.assert_array_equal(moved.gather(), HOST.ravel())
    assert moved.layout.devices == dlmg.reshape(dt, (48,)).layout.devices
    with pytest.raises(LayoutError, match=r"redistribute\(.*\)\.reshape\(\(48,\)\)"):
        dt.reshape(48, copy=False)
    cols = dlmg.scatter(HOST, Layout.slab((8, 6), 1, ["cpu:0", "cpu:1"]))
    np.testing.assert_array_equal(cols.reshape(6, 8).gather(), HOST.reshape(6, 8))
    with pytest.raises(LayoutError, match="redistribute"):
        cols.reshape(6, 8, copy=False)
    with pytest.raises(ValueError, match="cannot reshape"):
        cols.reshape(5, 10)


@st.composite
def _layouts(draw):
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(ndim))
    grid = tuple(draw(st.integers(1, 2)) if n > 1 else 1 for n in shape)
    block = tuple(draw(st.integers(1, n)) if g > 1 else n for n, g in zip(shape, grid))
    devices = [f"cpu:{i}" for i in range(math.prod(grid))]
    return Layout(shape, block=block, grid=grid, devices=devices)


@given(_layouts(), st.data())
def test_reshape_gives_numpy_reshape_or_a_layout_error(layout, data):
    size = layout.size
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    first = data.draw(st.sampled_from(divisors))
    second = data.draw(st.sampled_from([d for d in divisors if (size // first) % d == 0]))
    shape = (first, second, size // first // second)
    host = np.arange(float(size)).reshape(layout.shape)
    dt = dlmg.scatter(host, layout)
    try:
        got = dt.reshape(shape)
    except LayoutError as exc:
        assert "redistribute" in str(exc)
        return
    np.testing.assert_array_equal(got.gather(), host.reshape(shape))
    assert got.layout.devices == layout.devices


def test_argmin_var_std_against_numpy():
    for lay in (GRID, ROWS):
        dt = dlmg.scatter(HOST, lay)
        assert int(dlmg.argmin(dt)) == HOST.argmin()
        np.testing.assert_array_equal(dt.argmin(axis=0).gather(), HOST.argmin(axis=0))
        np.testing.assert_array_equal(dlmg.argmin(dt, axis=1, keepdims=True).gather(), HOST.argmin(axis=1, keepdims=True))
        assert np.isclose(float(dlmg.var(dt)), HOST.var())
        np.testing.assert_allclose(dlmg.std(dt, axis=0).gather(), HOST.std(axis=0))
        np.testing.assert_allclose(dlmg.var(dt, axis=1, correction=1, keepdims=True).gather(),
                                   HOST.var(axis=1, ddof=1, keepdims=True))
        np.testing.assert_allclose(dt.var(axis=(0, 1)).gather(), HOST.var())


def test_var_is_exact_where_the_naive_formula_cancels():
    host = 1e8 + np.arange(16.0)
    dt = dlmg.scatter(host, Layout.slab((16,), 0, ["cpu"] * 4))
    assert float(dlmg.var(dt)) == pytest.approx(host.var(), rel=1e-12)


def test_cumsum_along_a_whole_mode_and_refused_across_fragments():
    dt = dlmg.scatter(HOST, ROWS)
    np.testing.assert_array_equal(dt.cumsum(axis=1).gather(), HOST.cumsum(axis=1))
    np.testing.assert_array_equal(dlmg.cumsum(dt, axis=-1, dtype="float32").gather(), HOST.cumsum(axis=1))
    with pytest.raises(LayoutError, match=r"cumsum along mode 0.*x\.redistribute\(Layout"):
        dt.cumsum(axis=0)
    with pytest.raises(ValueError, match="axis is required"):
        dlmg.cumsum(dt)


@pytest.mark.parametrize("name, fill", [("zeros_like", 0), ("ones_like", 1), ("full_like", 2.5), ("empty_like", None)])
def test_like_constructors_keep_layout_frameworks_and_devices(name, fill):
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    lay = Layout.slab((4, 2), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.from_fragments([torch.ones(2, 2), jax.device_put(np.ones((2, 2), np.float32), jax.devices("cpu")[1])], lay)
    fn = getattr(dlmg, name)
    out = fn(dt, 2.5) if name == "full_like" else fn(dt)
    assert out.layout == lay and out.frameworks == ("torch", "jax") and out.dtype == "float32"
    if fill is not None:
        np.testing.assert_array_equal(out.gather(framework="numpy"), np.full((4, 2), fill, np.float32))
    assert dlmg.zeros_like(dt, dtype="int32").dtype == "int32"


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:divide by zero:RuntimeWarning")
def test_isclose_allclose_round_device_keepdims():
    dt = dlmg.scatter(HOST, ROWS)
    assert dlmg.allclose(dt, dt + 1e-9) and not dlmg.allclose(dt, dt + 1)
    np.testing.assert_array_equal(dlmg.isclose(dt, 0.0).gather(), np.isclose(HOST, 0.0))
    nan = dt / 0.0 * 0.0
    assert not dlmg.allclose(nan, nan) and dlmg.allclose(nan, nan, equal_nan=True)
    np.testing.assert_array_equal(round(dt / 7, 2).gather(), np.round(HOST / 7, 2))
    np.testing.assert_array_equal(round(dt / 7).gather(), np.round(HOST / 7))
    one = dlmg.scatter(HOST, Layout.slab((8, 6), 0, ["cpu", "cpu"]))
    assert one.device == dlmg.Device("cpu:0")
    # several devices: the array API's device is their placement (creation functions take it back)
    assert dt.device == dlmg.device.Placement(ROWS.devices) and str(dt.device) == "[cpu:0, cpu:1]"
    assert dt.devices == ROWS.devices
    assert dlmg.sum(dt, axis=0, keepdims=True).shape == (1, 6)
    assert dt.astype("float32").dtype == "float32"
