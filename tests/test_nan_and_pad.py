"""NumPy's NaN-ignoring functions and ``pad``, which array libraries call beyond the
standard: NumPy's values, computed where the fragments are, results on the input's devices."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

HOST = np.arange(40.0).reshape(8, 5) % 7 - 3.0
HOST[1, 1] = HOST[5, 0] = np.nan
HOST[:, 4] = np.nan  # an all-NaN column
FOUR = [f"cpu:{i}" for i in range(4)]

LAYOUTS = {
    "one fragment": Layout.single(HOST.shape, "cpu:0"),
    "row slabs": Layout.slab(HOST.shape, 0, FOUR),
    "column slabs": Layout.slab(HOST.shape, 1, FOUR[:2]),
    "2-D cyclic": Layout.block_cyclic(HOST.shape, (1, 2), (2, 2), FOUR),
}


# every layout with NumPy fragments, and row slabs of torch and JAX fragments
CASES = [(where, "numpy") for where in LAYOUTS] + [("row slabs", "torch"), ("row slabs", "jax")]


def tensor(layout, framework="numpy", host=HOST):
    pytest.importorskip(framework)
    if framework == "jax":
        host = host.astype(np.float32)
    return dlmg.scatter(host, layout, framework=framework)


@pytest.mark.parametrize("where,framework", CASES)
@pytest.mark.parametrize("name", ["nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd"])
def test_nan_reductions_match_numpy(name, where, framework):
    x = tensor(LAYOUTS[where], framework)
    host = HOST.astype(np.float32) if framework == "jax" else HOST
    rtol = 1e-5 if framework == "jax" else 1e-12
    for axis in (None, 0, 1, (0, 1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            want = getattr(np, name)(host, axis=axis)
            got = getattr(np, name)(x, axis=axis)  # NumPy's function reaches dlmg's
            direct = getattr(xp, name)(x, axis=axis, keepdims=True)
        assert isinstance(got, dlmg.DistributedTensor) and got.device == x.device
        np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, equal_nan=True)
        np.testing.assert_allclose(np.asarray(direct), getattr(np, name)(host, axis=axis, keepdims=True),
                                   rtol=rtol, equal_nan=True)


def test_nan_functions_warn_as_numpy_does_and_take_ddof():
    x = tensor(LAYOUTS["row slabs"])
    with pytest.warns(RuntimeWarning, match="Mean of empty slice"):
        xp.nanmean(x, axis=0)
    with pytest.warns(RuntimeWarning, match="All-NaN slice"):
        dlmg.nanmax(x, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for ddof in (0, 1, 7):
            np.testing.assert_allclose(np.asarray(np.nanstd(x, axis=0, ddof=ddof)), np.nanstd(HOST, axis=0, ddof=ddof),
                                       equal_nan=True)
            np.testing.assert_allclose(np.asarray(xp.nanvar(x, axis=1, ddof=ddof)), np.nanvar(HOST, axis=1, ddof=ddof),
                                       equal_nan=True)
    np.testing.assert_allclose(np.asarray(np.std(x[:, :4], axis=0, ddof=1)), np.std(HOST[:, :4], axis=0, ddof=1))
    with pytest.raises(TypeError, match="out="):
        xp.nansum(x, out=np.empty(5))


def test_nan_functions_of_integers_are_the_plain_reductions():
    ints = tensor(LAYOUTS["row slabs"], host=np.arange(40).reshape(8, 5))
    host = np.arange(40).reshape(8, 5)
    for name in ("nansum", "nanmax", "nanmin", "nanmean", "nanvar"):
        np.testing.assert_allclose(np.asarray(getattr(xp, name)(ints, axis=0)), getattr(np, name)(host, axis=0))


@pytest.mark.parametrize("where", list(LAYOUTS))
def test_nan_cumulative_functions_match_numpy(where):
    x = tensor(LAYOUTS[where])
    for axis in (0, 1, None):
        np.testing.assert_allclose(np.asarray(xp.nancumsum(x, axis=axis)), np.nancumsum(HOST, axis=axis))
        np.testing.assert_allclose(np.asarray(np.nancumprod(x, axis=axis)), np.nancumprod(HOST, axis=axis))


PLAIN = np.arange(40.0).reshape(8, 5)


@pytest.mark.parametrize("where,framework", CASES)
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_matches_numpy_and_stays_on_the_devices(mode, where, framework):
    x = tensor(LAYOUTS[where], framework, host=PLAIN)
    for width in (1, ((2, 1), (0, 0)), ((0, 0), (3, 1)), ((4, 0), (1, 2))):
        kw = {"constant_values": -1.5} if mode == "constant" else {}
        got = xp.pad(x, width, mode=mode, **kw)
        assert isinstance(got, dlmg.DistributedTensor) and got.device == x.device
        assert got.frameworks == (framework,)
        np.testing.assert_array_equal(np.asarray(got), np.pad(PLAIN, width, mode=mode, **kw))
    np.testing.assert_array_equal(np.asarray(np.pad(x, 2)), np.pad(PLAIN, 2))  # NumPy's function reaches dlmg's


def test_pad_of_unsplit_modes_is_local_and_keeps_the_layout():
    x = tensor(LAYOUTS["row slabs"], host=PLAIN)
    got = xp.pad(x, ((0, 0), (1, 2)), constant_values=((0, 0), (7.0, 9.0)))
    assert got.layout.grid == x.layout.grid and got.layout.devices == x.layout.devices
    np.testing.assert_array_equal(np.asarray(got), np.pad(PLAIN, ((0, 0), (1, 2)), constant_values=((0, 0), (7, 9))))


def test_pad_refuses_what_it_cannot_do_saying_why():
    x = tensor(LAYOUTS["row slabs"], host=PLAIN)
    with pytest.raises(NotImplementedError, match="constant, edge, reflect"):
        xp.pad(x, 1, mode="wrap")
    with pytest.raises(ValueError, match="reflect.*at most 7"):
        xp.pad(x, ((8, 0), (0, 0)), mode="reflect")
    line = dlmg.scatter(np.arange(8.0), Layout.slab((8,), 0, FOUR[:2]))
    with pytest.raises(NotImplementedError, match="redistribute"):
        xp.pad(line, 1)
    whole = line.redistribute(Layout.single((8,), "cpu:0"))
    np.testing.assert_array_equal(np.asarray(xp.pad(whole, 1, mode="edge")), np.pad(np.arange(8.0), 1, mode="edge"))
