"""The Array API namespace, ``dlmg.array_api``, checked against NumPy on the same data.

Written from the standard's text (2024.12): every public function of the
namespace is called here, under the default layout policy (one fragment) and
under a slab policy over three host devices, on values Hypothesis draws.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import dlmg
import dlmg.array_api as xp
from _array_api_support import SLAB, gathered, layout_policy, policy  # noqa: F401 (a fixture)
from dlmg.errors import LayoutMismatchError
from dlmg.ops.pointwise import FUNCTIONS as _FUNCTIONS

# The policy fixture is entered once for all of a test's examples, which is what the tests want.
FAST = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)
floats = st.floats(-100, 100, allow_nan=False, width=64)


def _host(draw, shape=None, dtype=np.float64):
    shape = draw(shapes) if shape is None else shape
    return draw(hnp.arrays(dtype, shape, elements=floats if dtype == np.float64 else None))


# -- namespace, dtypes, inspection ------------------------------------------------------------

def test_namespace_is_reachable_from_every_tensor_and_checks_versions():
    x = xp.asarray([1.0, 2.0])
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="1999.01")
    assert xp.__array_api_version__ == "2024.12"
    assert xp.get_default_layout() == dlmg.get_default_layout() and xp.layout_for((3,)).shape == (3,)
    names = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
             "float64", "complex64", "complex128")
    assert [getattr(xp, n) for n in names] == list(names)
    assert xp.LayoutPolicy is dlmg.array_api.LayoutPolicy
    assert xp.default_layout is dlmg.default_layout and xp.set_default_layout is dlmg.set_default_layout
    assert (xp.e, xp.pi, xp.newaxis) == (math.e, math.pi, None)
    assert math.isinf(xp.inf) and math.isnan(xp.nan)


def test_dtype_objects_compare_equal_to_every_spelling():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    assert dlmg.float32 is xp.float32
    for same in ("float32", np.float32, np.dtype("f4"), torch.float32, jnp.float32):
        assert xp.float32 == same and same == xp.float32
    assert xp.float32 != np.float64 and xp.float32 != "int8" and xp.float32 != object()
    x = xp.asarray(np.ones(3, dtype=np.int16))
    assert x.dtype == np.int16 and x.dtype == torch.int16 and x.dtype == xp.int16
    assert {xp.int16: 1}["int16"] == 1  # hashes as its name
    assert copy.deepcopy(xp.uint8) is xp.uint8


def test_dtype_functions_follow_the_standard():
    assert xp.result_type(xp.int8, xp.uint8) == xp.int16
    assert xp.result_type(xp.float32, xp.float64) == xp.float64
    assert xp.result_type(xp.float32, 1.0) == xp.float32
    assert xp.result_type(xp.int8, xp.asarray(np.ones(2, np.int32))) == xp.int32
    assert xp.can_cast(xp.int8, xp.int64) and not xp.can_cast(xp.int64, xp.int8)
    assert not xp.can_cast(xp.int32, xp.float64)  # mixed kinds are left out
    assert xp.isdtype(xp.float64, "real floating") and xp.isdtype(xp.uint8, ("bool", "integral"))
    assert not xp.isdtype(xp.complex64, "real floating") and xp.isdtype(xp.int8, xp.int8)
    assert xp.finfo(xp.float32).eps == np.finfo(np.float32).eps and xp.finfo(xp.complex64).dtype == xp.float32
    assert (xp.iinfo(xp.int8).min, xp.iinfo(xp.int8).max, xp.iinfo(xp.int8).bits) == (-128, 127, 8)
    info = xp.__array_namespace_info__()
    assert info.capabilities()["boolean indexing"] and info.default_device() == dlmg.Device("cpu:0")
    assert info.default_dtypes()["real floating"] == xp.float64 and info.devices() == [dlmg.Device("cpu:0")]
    assert set(info.dtypes(kind="integral")) == {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}


# -- the default layout policy ------------------------------------------------------------------

def test_default_layout_policy_single_slab_callable_and_nesting():
    assert xp.zeros((4, 3)).layout.nfragments == 1
    with dlmg.default_layout("slab", devices=SLAB) as policy:
        x = xp.ones((6, 2))
        assert x.layout == dlmg.Layout.slab((6, 2), 0, SLAB) and policy.kind == "slab"
        assert isinstance(x.device, dlmg.device.Placement) and len(x.device.devices) == 3
        with dlmg.default_layout(lambda shape: dlmg.Layout.single(shape, "cpu:2")):
            assert xp.empty(5).devices == (dlmg.Device("cpu:2"),)
        assert xp.asarray([1, 2, 3]).layout.grid == (3,)
        assert xp.zeros(()).layout.nfragments == 1  # 0-d tensors are one fragment
        # device= of a several-device tensor lays the new one out over the same devices
        assert xp.zeros(4, device=x.device).layout.grid == (3,)
    assert xp.zeros(2, device="cpu:1").devices == (dlmg.Device("cpu:1"),)
    with pytest.raises(ValueError, match="default layout kind"):
        dlmg.default_layout("diagonal").__enter__()
    previous = dlmg.set_default_layout("slab", devices=SLAB[:2], axis=1)
    try:
        assert xp.zeros((2, 4)).layout.grid == (1, 2)
    finally:
        dlmg.set_default_layout(previous.kind, devices=previous.devices, framework=previous.framework)
    assert xp.zeros(4).layout.nfragments == 1


def test_processes_policy_puts_one_piece_on_each_process():
    from dlmg.array_api._policy import LayoutPolicy, _layout

    layout = _layout(LayoutPolicy("processes"), (10, 3), 4, True)
    assert layout.ranks == (0, 1, 2, 3) and layout.grid == (4, 1)


def test_default_layout_from_the_environment(monkeypatch):
    from dlmg.array_api import _policy

    monkeypatch.setenv("DLMG_DEFAULT_LAYOUT", "slab")
    monkeypatch.setenv("DLMG_DEFAULT_DEVICES", "cpu:0,cpu:1")
    policy = _policy._from_environment()
    assert policy.kind == "slab" and len(policy.devices) == 2


def test_policy_framework_decides_the_fragments():
    torch = pytest.importorskip("torch")
    with dlmg.default_layout(framework="torch"):
        x = xp.arange(5)
        assert isinstance(x.fragments[0].array, torch.Tensor) and x.dtype == xp.int64


# -- creation -----------------------------------------------------------------------------------

def test_creation_functions_match_numpy(layout_policy):
    np.testing.assert_array_equal(gathered(xp.arange(2, 11, 3)), np.arange(2, 11, 3))
    np.testing.assert_array_equal(gathered(xp.arange(1.0, 2.0, 0.25)), np.arange(1.0, 2.0, 0.25))
    np.testing.assert_allclose(gathered(xp.linspace(0, 1, 7)), np.linspace(0, 1, 7))
    np.testing.assert_array_equal(gathered(xp.eye(4, 5, k=1)), np.eye(4, 5, k=1))
    np.testing.assert_array_equal(gathered(xp.full((3, 2), 7)), np.full((3, 2), 7))
    assert xp.full(3, True).dtype == xp.bool and xp.full(3, 1.5).dtype == xp.float64
    np.testing.assert_array_equal(gathered(xp.zeros((3, 2), dtype=xp.int8)), np.zeros((3, 2), np.int8))
    assert xp.empty((2, 2)).shape == (2, 2)
    base = xp.asarray([[1, 2], [3, 4], [5, 6]])
    for fn, fill in ((xp.zeros_like, 0), (xp.ones_like, 1)):
        np.testing.assert_array_equal(gathered(fn(base)), np.full((3, 2), fill))
    np.testing.assert_array_equal(gathered(xp.full_like(base, 9, dtype=xp.float32)), np.full((3, 2), 9.0))
    assert xp.empty_like(base).shape == (3, 2)
    a, b = xp.meshgrid(xp.arange(3), xp.arange(2))
    na, nb = np.meshgrid(np.arange(3), np.arange(2))
    np.testing.assert_array_equal(gathered(a), na), np.testing.assert_array_equal(gathered(b), nb)
    m = xp.reshape(xp.arange(1, 13), (3, 4))
    for k in (-1, 0, 2):
        np.testing.assert_array_equal(gathered(xp.tril(m, k=k)), np.tril(np.arange(1, 13).reshape(3, 4), k))
        np.testing.assert_array_equal(gathered(xp.triu(m, k=k)), np.triu(np.arange(1, 13).reshape(3, 4), k))


def test_asarray_wraps_without_copying_and_from_dlpack():
    host = np.arange(6.0)
    x = xp.asarray(host)
    assert np.shares_memory(x.fragments[0].array, host)
    assert not np.shares_memory(xp.asarray(host, copy=True).fragments[0].array, host)
    assert xp.asarray(x) is x and xp.asarray(x, dtype=xp.float32).dtype == xp.float32
    with pytest.raises(dlmg.CopyRequiredError):
        xp.asarray([1, 2], copy=False)
    y = xp.from_dlpack(host)
    assert np.shares_memory(y.fragments[0].array, host)
    assert xp.asarray(3).dtype == xp.int64 and xp.asarray([True]).dtype == xp.bool
    assert xp.asarray(2.5, dtype=xp.float32).dtype == xp.float32


# -- elementwise and broadcasting -----------------------------------------------------------

UNARY = [n for n in xp._elementwise.__all__ if _FUNCTIONS.get(n, (0, 0))[1] == 1]
BINARY = [n for n in xp._elementwise.__all__ if _FUNCTIONS.get(n, (0, 0))[1] == 2]
_NP = {"bitwise_invert": "invert", "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
       "pow": "power", "atan2": "arctan2", "acos": "arccos", "acosh": "arccosh", "asin": "arcsin",
       "asinh": "arcsinh", "atan": "arctan", "atanh": "arctanh", "conj": "conjugate"}


def _inputs(name):
    kinds = _FUNCTIONS[name][2]
    if kinds is not None and set(kinds) <= set("iub"):
        return np.array([[3, 5, 6], [1, 0, 2]], dtype=np.int32), np.array([1, 2, 0], dtype=np.int32)
    if name in ("acosh",):
        return np.array([[1.5, 2.0, 3.0], [4.0, 1.0, 9.0]]), np.array([1.0, 2.0, 3.0])
    return np.array([[0.25, -0.5, 0.75], [0.1, 0.9, -0.3]]), np.array([0.5, -0.25, 0.125])


@pytest.mark.parametrize("name", UNARY)
def test_unary_elementwise_functions_match_numpy(layout_policy, name):
    a, _ = _inputs(name)
    got = gathered(getattr(xp, name)(xp.asarray(a)))
    want = getattr(np, _NP.get(name, name))(a)
    np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True)


@pytest.mark.parametrize("name", BINARY)
def test_binary_elementwise_functions_broadcast_like_numpy(layout_policy, name):
    a, b = _inputs(name)
    if name in ("bitwise_left_shift", "bitwise_right_shift", "floor_divide", "remainder"):
        b = np.where(b == 0, 1, b)
    fn = getattr(xp, name)
    got = gathered(fn(xp.asarray(a), xp.asarray(b)))  # (2, 3) with (3,)
    scalar = gathered(fn(xp.asarray(a), 2 if a.dtype.kind in "iu" else 0.5))
    np_fn = getattr(np, _NP.get(name, name))
    np.testing.assert_allclose(got, np_fn(a, b), rtol=1e-12)
    np.testing.assert_allclose(scalar, np_fn(a, 2 if a.dtype.kind in "iu" else 0.5), rtol=1e-12)


@FAST
@given(data=st.data())
def test_broadcasting_of_two_shapes_matches_numpy(data):
    shape = data.draw(shapes)
    other = tuple(data.draw(st.sampled_from([1, n])) for n in shape[data.draw(st.integers(0, len(shape))):])
    a, b = _host(data.draw, shape), _host(data.draw, other)
    np.testing.assert_allclose(gathered(xp.multiply(xp.asarray(a), xp.asarray(b))), a * b)
    np.testing.assert_allclose(gathered(xp.asarray(b) - xp.asarray(a)), b - a)  # operators broadcast too
    np.testing.assert_array_equal(gathered(xp.broadcast_to(xp.asarray(b), shape)), np.broadcast_to(b, shape))
    outs = xp.broadcast_arrays(xp.asarray(a), xp.asarray(b))
    assert [o.shape for o in outs] == [shape, shape]


def test_broadcasting_moves_only_the_operand_that_must_move():
    with dlmg.default_layout("slab", devices=SLAB):
        m = xp.reshape(xp.arange(12.0), (4, 3))
        host = np.arange(12.0).reshape(4, 3)
        row = xp.asarray([1.0, 2.0, 3.0])  # split over the devices along its only mode: moved to m's
        np.testing.assert_array_equal(gathered(m + row), host + [1, 2, 3])
        np.testing.assert_array_equal(gathered(xp.add(m, row)), host + [1, 2, 3])
        centred = m - xp.mean(m, axis=0)  # the mean lives with fragment 0: moved to every device
        np.testing.assert_allclose(gathered(centred), host - host.mean(axis=0))
        col = xp.reshape(xp.arange(4.0), (4, 1))  # whole along the broadcast mode: views, no copy
        np.testing.assert_array_equal(gathered(m * col), host * np.arange(4.0)[:, None])
        m += row
        np.testing.assert_array_equal(gathered(m), host + [1, 2, 3])
        other = xp.reshape(xp.arange(12.0), (4, 3)).redistribute(dlmg.Layout.slab((4, 3), 1, SLAB))
        np.testing.assert_array_equal(gathered(m + other), 2 * host + [1, 2, 3])  # aligned as xp.add
        with dlmg.strict(), pytest.raises(LayoutMismatchError, match="redistribute"):  # unless strict
            m + other


def test_where_clip_and_astype(layout_policy):
    a = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]])
    x = xp.asarray(a)
    np.testing.assert_array_equal(gathered(xp.where(x > 0, x, xp.asarray([0.0, 10.0, 20.0]))),
                                  np.where(a > 0, a, [0.0, 10.0, 20.0]))
    np.testing.assert_array_equal(gathered(xp.clip(x, -3.0, 4.0)), np.clip(a, -3, 4))
    ints = xp.asarray(np.array([1, 100, -100], np.int8))
    np.testing.assert_array_equal(gathered(xp.clip(ints, -1000, 50)), [1, 50, -100])
    assert xp.astype(x, xp.int32).dtype == xp.int32


# -- reductions ------------------------------------------------------------------------------

@FAST
@given(data=st.data())
def test_reductions_match_numpy(layout_policy, data):
    a = _host(data.draw)
    axis = data.draw(st.sampled_from([None, 0, -1]))
    keep = data.draw(st.booleans())
    x = xp.asarray(a)
    for name in ("sum", "prod", "min", "max", "mean", "var", "std"):
        got = getattr(xp, name)(x, axis=axis, keepdims=keep)
        assert isinstance(got, dlmg.DistributedTensor)
        np.testing.assert_allclose(gathered(got), getattr(np, name)(a, axis=axis, keepdims=keep), rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(gathered(xp.var(x, correction=1 if a.size > 1 else 0)),
                               np.var(a, ddof=1 if a.size > 1 else 0), rtol=1e-9, atol=1e-9)
    for name in ("argmax", "argmin"):
        one = None if axis is None else axis
        np.testing.assert_array_equal(gathered(getattr(xp, name)(x, axis=one, keepdims=keep if one is not None else False)),
                                      getattr(np, name)(a, axis=one, keepdims=keep if one is not None else False))
    b = a > 0
    for name in ("all", "any"):
        np.testing.assert_array_equal(gathered(getattr(xp, name)(xp.asarray(b), axis=axis)), getattr(np, name)(b, axis=axis))
    np.testing.assert_array_equal(gathered(xp.count_nonzero(xp.asarray(b), axis=axis)), np.count_nonzero(b, axis=axis))


def test_cumulative_functions_and_diff(layout_policy):
    a = np.arange(1.0, 13.0).reshape(3, 4)
    x = xp.asarray(a)
    np.testing.assert_array_equal(gathered(xp.cumulative_sum(x, axis=1)), np.cumsum(a, axis=1))
    np.testing.assert_array_equal(gathered(xp.cumulative_sum(x, axis=0, include_initial=True)),
                                  np.concatenate([np.zeros((1, 4)), np.cumsum(a, axis=0)]))
    np.testing.assert_array_equal(gathered(xp.cumulative_prod(x, axis=1)), np.cumprod(a, axis=1))
    np.testing.assert_array_equal(gathered(xp.diff(x, axis=0)), np.diff(a, axis=0))


# -- indexing ------------------------------------------------------------------------------------

@st.composite
def basic_keys(draw, shape):
    key = []
    for n in shape:
        if draw(st.booleans()):
            key.append(draw(st.integers(-n, n - 1)))
        else:
            key.append(slice(draw(st.none() | st.integers(-n - 1, n + 1)), draw(st.none() | st.integers(-n - 1, n + 1)),
                             draw(st.sampled_from([None, 1, 2, -1, -2]))))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()) and key:
        cut = draw(st.integers(0, len(key) - 1))
        key = key[:cut] + [Ellipsis]
    return tuple(key)


@FAST
@given(data=st.data())
def test_basic_indexing_matches_numpy(layout_policy, data):
    a = _host(data.draw)
    key = data.draw(basic_keys(a.shape))
    x = xp.asarray(a)
    got = x[key]
    assert isinstance(got, dlmg.DistributedTensor)
    np.testing.assert_array_equal(gathered(got), a[key])
    y = xp.asarray(a.copy())
    expected = a.copy()
    expected[key] = -7.0
    y[key] = -7.0
    np.testing.assert_array_equal(gathered(y), expected)


def test_slicing_a_whole_mode_is_a_view_and_writes_through():
    with dlmg.default_layout("slab", devices=SLAB):
        x = xp.reshape(xp.arange(18.0), (6, 3))
        col = x[:, 1]
        for frag, part in zip(x.fragments, col.fragments):
            assert np.shares_memory(frag.array, part.array)
        x[:, 2] = xp.asarray([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
        np.testing.assert_array_equal(gathered(x)[:, 2], [1, 2, 3, 4, 5, 6])
        np.testing.assert_array_equal(gathered(x[1:4]), np.arange(18.0).reshape(6, 3)[1:4] * [1, 1, 0]
                                      + [[0, 0, 2], [0, 0, 3], [0, 0, 4]])


def test_integer_and_mask_indexing_and_take(layout_policy):
    a = np.arange(12.0).reshape(3, 4)
    x = xp.asarray(a)
    np.testing.assert_array_equal(gathered(x[x > 5.0]), a[a > 5])
    np.testing.assert_array_equal(gathered(x[xp.asarray([2, 0])]), a[[2, 0]])
    np.testing.assert_array_equal(gathered(xp.take(x, xp.asarray([3, 1]), axis=1)), np.take(a, [3, 1], axis=1))
    idx = np.argsort(-a, axis=1)
    np.testing.assert_array_equal(gathered(xp.take_along_axis(x, xp.asarray(idx), axis=1)),
                                  np.take_along_axis(a, idx, axis=1))
    y = xp.asarray(a.copy())
    y[y > 5.0] = 0.0
    np.testing.assert_array_equal(gathered(y), np.where(a > 5, 0, a))


# -- manipulation, searching, sorting, sets ---------------------------------------------------

def test_manipulation_functions_match_numpy(layout_policy):
    a = np.arange(24.0).reshape(4, 3, 2)
    x = xp.asarray(a)
    np.testing.assert_array_equal(gathered(xp.concat([x, x], axis=1)), np.concatenate([a, a], axis=1))
    np.testing.assert_array_equal(gathered(xp.concat([x, x], axis=None)), np.concatenate([a.ravel(), a.ravel()]))
    np.testing.assert_array_equal(gathered(xp.stack([x, x], axis=-1)), np.stack([a, a], axis=-1))
    np.testing.assert_array_equal(gathered(xp.flip(x, axis=0)), np.flip(a, axis=0))
    np.testing.assert_array_equal(gathered(xp.roll(x, 2, axis=0)), np.roll(a, 2, axis=0))
    np.testing.assert_array_equal(gathered(xp.squeeze(xp.expand_dims(x, axis=1), axis=1)), a)
    np.testing.assert_array_equal(gathered(xp.moveaxis(x, 0, -1)), np.moveaxis(a, 0, -1))
    np.testing.assert_array_equal(gathered(xp.permute_dims(x, (2, 0, 1))), np.transpose(a, (2, 0, 1)))
    np.testing.assert_array_equal(gathered(xp.matrix_transpose(x)), np.swapaxes(a, -1, -2))
    np.testing.assert_array_equal(gathered(xp.reshape(x, (2, 12))), a.reshape(2, 12))
    np.testing.assert_array_equal(gathered(xp.reshape(x, (-1,))), a.ravel())
    np.testing.assert_array_equal(gathered(xp.repeat(x, 2, axis=0)), np.repeat(a, 2, axis=0))
    np.testing.assert_array_equal(gathered(xp.tile(x, (1, 2, 1))), np.tile(a, (1, 2, 1)))
    parts = xp.unstack(x, axis=1)
    assert len(parts) == 3 and all(np.array_equal(gathered(p), a[:, i]) for i, p in enumerate(parts))


@FAST
@given(data=st.data())
def test_sorting_searching_and_sets_match_numpy(layout_policy, data):
    a = data.draw(hnp.arrays(np.int64, data.draw(shapes), elements=st.integers(-5, 5)))
    axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
    x = xp.asarray(a)
    np.testing.assert_array_equal(gathered(xp.sort(x, axis=axis)), np.sort(a, axis=axis))
    np.testing.assert_array_equal(gathered(xp.sort(x, axis=axis, descending=True)), -np.sort(-a, axis=axis))
    np.testing.assert_array_equal(gathered(xp.argsort(x, axis=axis, stable=True)), np.argsort(a, axis=axis, kind="stable"))
    np.testing.assert_array_equal(gathered(xp.unique_values(x)), np.unique(a))
    values, counts = xp.unique_counts(x)
    want_values, want_counts = np.unique(a, return_counts=True)
    np.testing.assert_array_equal(gathered(values), want_values), np.testing.assert_array_equal(gathered(counts), want_counts)
    inv = xp.unique_inverse(x)
    np.testing.assert_array_equal(gathered(inv.values)[gathered(inv.inverse_indices)], a)
    assert len(xp.unique_all(x)) == 4
    for got, want in zip(xp.nonzero(x), np.nonzero(a)):
        np.testing.assert_array_equal(gathered(got), want)
    ordered = np.sort(a.ravel())
    np.testing.assert_array_equal(gathered(xp.searchsorted(xp.asarray(ordered), xp.asarray([-1, 0, 3]))),
                                  np.searchsorted(ordered, [-1, 0, 3]))


# -- linear algebra, fft -------------------------------------------------------------------------

def test_linear_algebra_matches_numpy(layout_policy):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
    b = rng.standard_normal((4, 3))
    spd = a @ a.T
    x, y = xp.asarray(a), xp.asarray(b)
    np.testing.assert_allclose(gathered(xp.matmul(x, y)), a @ b)
    np.testing.assert_allclose(gathered(xp.tensordot(x, y, axes=1)), np.tensordot(a, b, axes=1))
    np.testing.assert_allclose(gathered(xp.vecdot(x, x)), np.sum(a * a, axis=-1))
    np.testing.assert_allclose(gathered(xp.linalg.inv(x)), np.linalg.inv(a))
    np.testing.assert_allclose(gathered(xp.linalg.det(x)), np.linalg.det(a))
    np.testing.assert_allclose(gathered(xp.linalg.cholesky(xp.asarray(spd))), np.linalg.cholesky(spd))
    np.testing.assert_allclose(gathered(xp.linalg.solve(x, y)), np.linalg.solve(a, b))
    np.testing.assert_allclose(gathered(xp.linalg.vector_norm(x)), np.linalg.norm(a))
    np.testing.assert_allclose(gathered(xp.linalg.matrix_norm(x)), np.linalg.norm(a, "fro"))
    np.testing.assert_allclose(gathered(xp.linalg.svdvals(x)), np.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(gathered(xp.linalg.trace(x)), np.trace(a))
    np.testing.assert_allclose(gathered(xp.linalg.diagonal(x)), np.diagonal(a))
    np.testing.assert_allclose(gathered(xp.linalg.outer(y[:, 0], y[:, 1])), np.outer(b[:, 0], b[:, 1]))
    np.testing.assert_allclose(gathered(xp.linalg.matrix_power(x, 3)), np.linalg.matrix_power(a, 3))
    assert int(xp.linalg.matrix_rank(x)) == 4
    np.testing.assert_allclose(gathered(xp.linalg.pinv(x)), np.linalg.pinv(a), atol=1e-10)
    np.testing.assert_allclose(gathered(xp.linalg.lstsq(x, y)), np.linalg.lstsq(a, b, rcond=None)[0], atol=1e-10)
    np.testing.assert_allclose(abs(gathered(xp.linalg.slogdet(x).logabsdet)), np.linalg.slogdet(a)[1])
    np.testing.assert_allclose(gathered(xp.linalg.eigvalsh(xp.asarray(spd))), np.linalg.eigvalsh(spd))
    assert len(xp.linalg.eigh(xp.asarray(spd))) == 2 and len(xp.linalg.qr(x)) == 2 and len(xp.linalg.svd(x)) == 3
    np.testing.assert_allclose(gathered(xp.linalg.cross(y, xp.flip(y, axis=0))), np.cross(b, b[::-1]))
    np.testing.assert_allclose(gathered(xp.linalg.matmul(x, y)), a @ b)
    np.testing.assert_allclose(gathered(xp.linalg.matrix_transpose(x)), a.T)
    np.testing.assert_allclose(gathered(xp.linalg.tensordot(x, y, axes=1)), a @ b)
    np.testing.assert_allclose(gathered(xp.linalg.vecdot(x, x)), np.sum(a * a, axis=-1))


def test_fft_matches_numpy(layout_policy):
    a = np.random.default_rng(1).standard_normal((4, 8))
    x = xp.asarray(a)
    for name in ("fft", "ifft", "fftn", "ifftn"):
        np.testing.assert_allclose(gathered(getattr(xp.fft, name)(x)), getattr(np.fft, name)(a), atol=1e-12)
    for name in ("rfft", "rfftn", "ihfft"):
        np.testing.assert_allclose(gathered(getattr(xp.fft, name)(x)), getattr(np.fft, name)(a), atol=1e-12)
    spectrum = np.fft.rfft(a)
    for name in ("irfft", "irfftn", "hfft"):
        np.testing.assert_allclose(gathered(getattr(xp.fft, name)(xp.asarray(spectrum))),
                                   getattr(np.fft, name)(spectrum), atol=1e-12)
    np.testing.assert_allclose(gathered(xp.fft.fftshift(x)), np.fft.fftshift(a))
    np.testing.assert_allclose(gathered(xp.fft.ifftshift(x)), np.fft.ifftshift(a))
    np.testing.assert_allclose(gathered(xp.fft.fftfreq(8, d=0.5)), np.fft.fftfreq(8, d=0.5))
    np.testing.assert_allclose(gathered(xp.fft.rfftfreq(8)), np.fft.rfftfreq(8))


# -- the array object ------------------------------------------------------------------------------

def test_dlpack_of_one_fragment_and_the_refusal_for_several():
    x = xp.asarray(np.arange(4.0))
    back = np.from_dlpack(x)
    assert np.shares_memory(back, x.fragments[0].array)
    with dlmg.default_layout("slab", devices=SLAB):
        y = xp.arange(6.0)
        with pytest.raises(BufferError, match="cannot be exported as one DLPack tensor"):
            y.__dlpack__()
        with pytest.raises(BufferError):
            y.__dlpack_device__()


def test_to_device_and_device():
    x = xp.asarray([1.0, 2.0, 3.0])
    assert x.device == dlmg.Device("cpu:0")
    y = x.to_device("cpu:1")
    assert y.devices == (dlmg.Device("cpu:1"),) and x.to_device(x.device) is x
    np.testing.assert_array_equal(gathered(y), [1, 2, 3])


def test_every_public_name_of_the_namespace_is_tested_here():
    import pathlib

    text = pathlib.Path(__file__).read_text()
    parametrised = set(UNARY) | set(BINARY)
    missing = [n for n in xp.__all__ if f"xp.{n}" not in text and f'"{n}"' not in text and n not in parametrised]
    assert not missing, missing
    for module, prefix in ((xp.linalg, "xp.linalg."), (xp.fft, "xp.fft.")):
        missing = [n for n in module.__all__ if f"{prefix}{n}" not in text and f'"{n}"' not in text]
        assert not missing, (module.__name__, missing)


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_searchsorted_and_argsort_give_the_default_index_dtype(framework):
    jax = pytest.importorskip("jax") if framework == "jax" else None
    pytest.importorskip(framework)
    with (jax.enable_x64(True) if jax is not None else dlmg.default_layout()):  # JAX alone gives int32 here
        with dlmg.default_layout(framework=framework):
            x = xp.asarray([1, 3, 5], dtype=xp.uint8)
            wanted = xp.__array_namespace_info__().default_dtypes()["indexing"]
            found = xp.searchsorted(x, xp.asarray([2, 6], dtype=xp.uint8))
            assert found.dtype == wanted == xp.int64 and found.tolist() == [1, 3]
            assert xp.argsort(x).dtype == wanted


def test_asarray_of_a_tensor_honours_device_with_copy_and_its_own_placement_without():
    with policy("slab"):
        x = xp.matrix_transpose(xp.zeros((3, 1)))         # split along mode 1: not the policy's layout
        assert xp.asarray(x, device=x.device, copy=False) is x
        assert xp.from_dlpack(x, device=x.device, copy=False) is x
        moved = xp.asarray(xp.zeros((0,)), device=dlmg.as_device("cpu:0"), copy=True)
        assert moved.device == dlmg.as_device("cpu:0")
        y = xp.asarray(x, device=dlmg.as_device("cpu:1"), copy=True)
        assert y.device == dlmg.as_device("cpu:1") and y.shape == x.shape


def test_functions_beyond_the_standard_that_consumers_call():
    """NumPy's NaN-ignoring functions and pad (tests/test_nan_and_pad.py tests them over layouts)."""
    a = np.array([[1.0, np.nan, 3.0], [4.0, 5.0, np.nan]])
    x = xp.asarray(a)
    for fn, np_fn in ((xp.nansum, np.nansum), (xp.nanprod, np.nanprod), (xp.nanmean, np.nanmean),
                      (xp.nanmax, np.nanmax), (xp.nanmin, np.nanmin), (xp.nanvar, np.nanvar),
                      (xp.nanstd, np.nanstd), (xp.nancumsum, np.nancumsum), (xp.nancumprod, np.nancumprod)):
        np.testing.assert_allclose(gathered(fn(x, axis=0)), np_fn(a, axis=0))
    np.testing.assert_array_equal(gathered(xp.pad(x, 1, mode="edge")), np.pad(a, 1, mode="edge"))
