"""Scans, sorting, searching, unique values and ``nonzero`` stay distributed (one process).

Hypothesis draws block-cyclic layouts (slabs, cyclic, uneven last blocks,
replicas, several fragments per device) and a framework per fragment (NumPy,
torch, JAX: mixed); every result is compared with array-api-compat's NumPy
function on the gathered operand (values, dtype, shape) and must sit on the
operand's devices, split as the operand was (or, for results whose size
depends on the data, as a balanced slab over its fragments' devices).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dlmg
import dlmg.array_api as xp
from dlmg import Layout
from dlmg.ops import scan as _scan

from _strategies import expected_fragment, have, jax_cpus, to_numpy

cnp = pytest.importorskip("array_api_compat.numpy")

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FRAMEWORKS = ["numpy"] + [f for f in ("torch", "jax") if have(f)]


@st.composite
def tensors(draw, ndim: int | None = None, max_extent: int = 13, dtypes=("float64", "int32", "float32"),
            nan: bool = True, small: bool = False):
    """A distributed tensor of random layout and frameworks, and its NumPy value."""
    nd = draw(st.integers(1, 2)) if ndim is None else ndim
    shape = tuple(draw(st.integers(0 if nd == 1 else 1, max_extent)) for _ in range(nd))
    block = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    grid = tuple(draw(st.integers(1, 4 if nd == 1 else 2)) for _ in range(nd))
    replicas = draw(st.integers(1, 2))
    cells = int(np.prod(grid)) * replicas
    frameworks = [draw(st.sampled_from(FRAMEWORKS)) for _ in range(cells)]
    dtype = draw(st.sampled_from(dtypes))
    if "jax" in frameworks and dtype in ("float64", "int64"):
        dtype = {"float64": "float32", "int64": "int32"}[dtype]
    ncpu = jax_cpus()
    devices = [f"cpu:{draw(st.integers(0, max(ncpu, 1) - 1))}" for _ in range(cells)]
    layout = Layout(shape, block=block, grid=grid, devices=devices)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    top = 4 if small else 50
    value = rng.integers(-top, top, size=shape).astype(dtype)
    if nan and dtype.startswith("float") and value.size and draw(st.booleans()):
        value.reshape(-1)[rng.integers(0, value.size, size=max(1, value.size // 5))] = np.nan
    arrays = [_make(expected_fragment(value, layout, f.index), fw, layout.fragments[f.index].device)
              for f, fw in zip(layout.fragments, frameworks)]
    return dlmg.from_fragments(arrays, layout), value


def _make(a: np.ndarray, framework: str, device) -> object:
    a = np.ascontiguousarray(a)
    if framework == "torch":
        import torch

        return torch.from_numpy(a.copy())
    if framework == "jax":
        import jax

        return jax.device_put(a, jax.devices("cpu")[device.index])
    return a.copy()


def _host(t) -> np.ndarray:
    return to_numpy(t.gather())


def _index_dtype(t) -> str:
    return "int32" if "jax" in t.frameworks else "int64"


def _same_place(result, x) -> None:
    """The result lies on ``x``'s devices and processes."""
    assert set(result.layout.devices) <= set(x.layout.devices), (result.layout, x.layout)
    assert set(result.layout.ranks) <= set(x.layout.ranks)


def _equal(got: np.ndarray, want: np.ndarray, **kw) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, equal_nan=True, **kw)
    else:
        np.testing.assert_array_equal(got, want)


# -- scans ----------------------------------------------------------------------------


@SETTINGS
@given(tensors(), st.data())
def test_cumulative_sum_and_prod_match_numpy(pair, data):
    x, value = pair
    axis = data.draw(st.integers(0, x.ndim - 1))
    include = data.draw(st.booleans())
    for name in ("cumulative_sum", "cumulative_prod"):
        want = getattr(cnp, name)(value, axis=axis, include_initial=include)
        if "jax" in x.frameworks and want.dtype == np.int64:
            want = want.astype(np.int32)
        got = getattr(xp, name)(x, axis=axis, include_initial=include)
        assert str(got.dtype) == str(want.dtype), (name, got.dtype, want.dtype)
        with np.errstate(over="ignore"):
            _equal(_host(got), want, rtol=1e-4 if value.dtype == np.float32 else 1e-10)
        _same_place(got, x)
        shape = list(x.shape)
        shape[axis] += include
        assert got.layout.same_distribution(_scan._grown(x.layout.dense, axis, int(include)))


@SETTINGS
@given(tensors(dtypes=("float64", "int32")), st.data())
def test_cumulative_sum_dtype_argument(pair, data):
    x, value = pair
    got = xp.cumulative_sum(x, axis=0, dtype=xp.float32)
    assert got.dtype == "float32"
    _equal(_host(got), cnp.cumulative_sum(value, axis=0, dtype=np.float32), rtol=1e-4)


@SETTINGS
@given(tensors(dtypes=("float64", "int32")), st.data())
def test_diff_matches_numpy(pair, data):
    x, value = pair
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = data.draw(st.integers(0, 3))
    got = xp.diff(x, axis=axis, n=n)
    want = np.diff(value, axis=axis, n=n)
    assert str(got.dtype) == str(want.dtype)
    _equal(_host(got), want)
    _same_place(got, x)


@SETTINGS
@given(tensors(dtypes=("float64", "int32")), tensors(dtypes=("float64", "int32")), st.data())
def test_diff_with_prepend_and_append_matches_numpy(pair, other, data):
    """``prepend``/``append`` (tensors of any layout, host arrays, scalars) are joined by the
    distributed ``concat``: NumPy's values, the result on ``x``'s devices."""
    x, value = pair
    axis = data.draw(st.integers(0, x.ndim - 1))
    n = data.draw(st.integers(0, 2))
    shape = list(value.shape)
    shape[axis] = data.draw(st.integers(1, 3))
    host = (np.arange(int(np.prod(shape))).reshape(shape) % 5).astype(value.dtype)
    kinds = ["scalar", "host", "tensor", None]
    kw, hkw = {}, {}
    for name in ("prepend", "append"):
        kind = data.draw(st.sampled_from(kinds))
        if kind == "scalar":
            kw[name], hkw[name] = 2, np.asarray(2, dtype=value.dtype)  # a Python scalar takes x's dtype
        elif kind == "host":
            kw[name] = hkw[name] = host
        elif kind == "tensor":
            o, _ = other
            devices = sorted({f.device for f in o.layout.fragments}, key=str)[:2]
            kw[name] = dlmg.scatter(host, Layout.slab(tuple(shape), 0, devices))
            hkw[name] = host
    got = xp.diff(x, axis=axis, n=n, **kw)
    want = np.diff(value, axis=axis, n=n, **hkw)
    assert str(got.dtype) == str(want.dtype) or "jax" in x.frameworks
    _equal(_host(got), want.astype(str(got.dtype)))
    _same_place(got, x)


def test_scan_of_a_slab_moves_no_fragment_and_keeps_the_layout():
    layout = Layout.slab((10,), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = dlmg.scatter(np.arange(1.0, 11.0), layout)
    got = xp.cumulative_sum(x)
    assert got.layout.same_distribution(layout)
    assert [f.device for f in got.fragments] == [f.device for f in x.fragments]
    np.testing.assert_array_equal(got.gather(), np.cumsum(np.arange(1.0, 11.0)))


@st.composite
def many_blocks(draw, frameworks=("numpy",)):
    """A tensor whose fragments hold more than 64 small blocks along mode ``axis`` (a cyclic
    deal, the last block often short, the other mode split too, replicas), and its value."""
    nd = draw(st.integers(1, 2))
    axis = draw(st.integers(0, nd - 1))
    b, g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    n = draw(st.integers(65 * b * g, 70 * b * g + b - 1))
    shape = tuple(n if m == axis else draw(st.integers(0, 3)) for m in range(nd))
    block = tuple(b if m == axis else draw(st.integers(1, 2)) for m in range(nd))
    grid = tuple(g if m == axis else draw(st.integers(1, 2)) for m in range(nd))
    replicas = draw(st.integers(1, 2))
    cells = int(np.prod(grid)) * replicas
    chosen = [draw(st.sampled_from(frameworks)) for _ in range(cells)]
    devices = [f"cpu:{draw(st.integers(0, max(jax_cpus(), 1) - 1))}" for _ in range(cells)]
    layout = Layout(shape, block=block, grid=grid, devices=devices)
    assert max(f.nblocks[axis] for f in layout.fragments) > 64
    dtype = draw(st.sampled_from(("float64", "int64", "int32", "complex128", "bool")))
    if "jax" in chosen:
        dtype = {"float64": "float32", "int64": "int32", "complex128": "complex64"}.get(dtype, dtype)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype.startswith(("float", "complex")):  # products that neither overflow nor vanish
        value = rng.choice(np.array([-1, 1, 0.5, 2]), size=shape).astype(dtype)
        if dtype.startswith("complex"):
            value += 1j * rng.choice(np.array([0, 0, 0.5]), size=shape).astype(dtype)
    else:  # integer products wrap as NumPy's do
        value = rng.choice(np.array([-1, 1, 1, 2, 3]), size=shape).astype(dtype)
    arrays = [_make(expected_fragment(value, layout, f.index), fw, f.device)
              for f, fw in zip(layout.fragments, chosen)]
    return dlmg.from_fragments(arrays, layout), value, axis


def _scans_match_numpy(x, value, axis, data) -> None:
    include = data.draw(st.booleans())
    dtype = data.draw(st.sampled_from([None, "float32" if "jax" in x.frameworks else "float64", "int32"]))
    with pytest.MonkeyPatch.context() as patch:  # every block is scanned where it lies
        patch.setattr(type(x), "redistribute", _refuse)
        for name in ("cumulative_sum", "cumulative_prod"):
            if dtype is not None and value.dtype.kind == "c":
                continue
            with np.errstate(over="ignore"):
                want = getattr(cnp, name)(value, axis=axis, include_initial=include, dtype=dtype)
                got = getattr(xp, name)(x, axis=axis, include_initial=include, dtype=dtype)
            if "jax" in x.frameworks and want.dtype in (np.int64, np.uint64):
                want = want.astype(np.int32)
            assert str(got.dtype) == str(want.dtype), (name, got.dtype, want.dtype)
            if want.dtype.kind in "fc":
                np.testing.assert_allclose(_host(got), want, rtol=1e-4 if want.dtype in (np.float32, np.complex64) else 1e-10)
            else:
                np.testing.assert_array_equal(_host(got), want)
            assert got.layout.same_distribution(_scan._grown(x.layout.dense, axis, int(include)))
            assert [f.device for f in got.fragments] == [f.device for f in x.fragments]


def _refuse(*args, **kwargs):
    raise AssertionError("redistributed")


@SETTINGS
@given(many_blocks(), st.data())
def test_scans_of_many_blocks_per_fragment_match_numpy(triple, data):
    """More than 64 blocks per fragment are scanned where they lie, whole fragments at a time:
    NumPy's values (integer products wrap as NumPy's do), with ``include_initial`` and ``dtype``."""
    x, value, axis = triple
    _scans_match_numpy(x, value, axis, data)


@SETTINGS
@pytest.mark.skipif(not (have("torch") and have("jax")), reason="needs torch and JAX")
@given(many_blocks(frameworks=("torch", "jax", "numpy")), st.data())
def test_scans_of_many_blocks_in_torch_and_jax_fragments(triple, data):
    """The same with torch and JAX fragments (JAX's immutable arrays offset out of place), each
    result fragment an array of its operand fragment's framework."""
    x, value, axis = triple
    _scans_match_numpy(x, value, axis, data)
    got = xp.cumulative_sum(x, axis=axis)
    assert [f.framework for f in got.fragments] == [f.framework for f in x.fragments]


def test_scans_of_a_short_last_block_of_torch_and_jax_fragments():
    """Blocks of 2 dealt over a torch and a JAX fragment, the last block short, both scans with
    and without ``include_initial``: NumPy's values, each fragment in its own framework."""
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    layout = Layout((301,), block=(2,), grid=(2,), devices=["cpu:0", "cpu:1"])
    value = (np.arange(301) % 5 - 1).astype(np.int32)
    parts = [expected_fragment(value, layout, i) for i in range(2)]
    x = dlmg.from_fragments([torch.from_numpy(parts[0].copy()), jax.device_put(parts[1], jax.devices("cpu")[1])],
                            layout)
    for include in (False, True):
        got = xp.cumulative_sum(x, include_initial=include)
        np.testing.assert_array_equal(_host(got), cnp.cumulative_sum(value, include_initial=include, dtype=np.int32))
        assert isinstance(got.fragments[0].array, torch.Tensor) and isinstance(got.fragments[1].array, jax.Array)
        with np.errstate(over="ignore"):
            got = xp.cumulative_prod(x, include_initial=include)
            np.testing.assert_array_equal(_host(got), cnp.cumulative_prod(value, include_initial=include,
                                                                          dtype=np.int32))


@pytest.mark.parametrize("devices", [["cpu:0"] * 4, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]],
                         ids=["one-executor", "four-executors"])
def test_scans_in_one_process_read_no_block_total_back_to_the_host(monkeypatch, devices):
    """In one process the blocks' totals and offsets stay arrays of the fragments' framework
    (scanned once where they all lie on one executor, else on each fragment's)."""
    torch = pytest.importorskip("torch")
    layout = Layout((1000,), block=(3,), grid=(4,), devices=devices)
    value = np.random.default_rng(7).integers(-5, 9, 1000).astype(np.float64)
    x = dlmg.from_fragments([torch.from_numpy(expected_fragment(value, layout, i).copy()) for i in range(4)], layout)
    monkeypatch.setattr(_scan, "host", _refuse)
    for include in (False, True):
        got = xp.cumulative_sum(x, include_initial=include)
        assert all(isinstance(f.array, torch.Tensor) for f in got.fragments)
        np.testing.assert_allclose(_host(got), cnp.cumulative_sum(value, include_initial=include))


@pytest.mark.gpu
def test_scans_of_many_blocks_on_gpu_fragments_stay_on_their_devices():
    torch = pytest.importorskip("torch")
    value = np.random.default_rng(6).integers(-3, 9, 5000).astype(np.float64)
    devices = [f"cuda:{i % torch.cuda.device_count()}" for i in range(4)]
    layout = Layout((5000,), block=(7,), grid=(4,), devices=devices)
    x = dlmg.scatter(torch.from_numpy(value).cuda(), layout)
    for include in (False, True):
        got = xp.cumulative_sum(x, include_initial=include)
        assert all(f.array.is_cuda and f.device == d for f, d in zip(got.fragments, layout.devices))
        np.testing.assert_allclose(to_numpy(got.gather()), cnp.cumulative_sum(value, include_initial=include))


def test_diff_and_searchsorted_of_cyclic_blocks_redistribute_nothing(monkeypatch):
    """Blocks dealt out cyclically are differenced and searched where they lie: a halo per
    block, a search per fragment (its blocks, in order, are sorted)."""
    layout = Layout((40,), block=(3,), grid=(4,), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    value = np.random.default_rng(4).integers(0, 20, 40).astype(np.float64)
    value[::7] = np.nan
    x = dlmg.scatter(value, layout)
    ordered = dlmg.scatter(np.sort(value), layout)

    def refuse(*args, **kwargs):
        raise AssertionError("redistributed")

    monkeypatch.setattr(type(x), "redistribute", refuse)
    for n in (1, 2):
        got = xp.diff(x, n=n)
        assert (got.layout.block, got.layout.grid) == (layout.block, layout.grid)
        assert [f.device for f in got.fragments] == [f.device for f in x.fragments]
        _equal(_host(got), np.diff(value, n=n))
    for side in ("left", "right"):
        got = xp.searchsorted(ordered, x, side=side)
        np.testing.assert_array_equal(_host(got), np.searchsorted(np.sort(value), value, side=side))


# -- sorting and searching -----------------------------------------------------------------


@SETTINGS
@given(tensors(), st.data())
def test_sort_and_argsort_match_numpy(pair, data):
    x, value = pair
    axis = data.draw(st.integers(0, x.ndim - 1))
    descending = data.draw(st.booleans())
    stable = data.draw(st.booleans())  # unstable: each fragment's fastest local sort, the same values
    got = xp.sort(x, axis=axis, descending=descending, stable=stable)
    want = cnp.sort(value, axis=axis, descending=descending)
    assert got.dtype == x.dtype
    _equal(_host(got), want)
    assert got.layout.same_distribution(x.layout.dense)
    order = xp.argsort(x, axis=axis, descending=descending, stable=True)
    assert str(order.dtype) == _index_dtype(x)
    _equal(_host(order), cnp.argsort(value, axis=axis, descending=descending, stable=True).astype(_index_dtype(x)))
    assert order.layout.same_distribution(x.layout.dense)


@SETTINGS
@given(tensors(ndim=1, small=True, nan=False, dtypes=("int32", "float64")))
def test_stable_argsort_keeps_the_order_of_equal_values(pair):
    x, value = pair  # few distinct values: long runs of equal values split between fragments
    got = _host(xp.argsort(x, stable=True))
    np.testing.assert_array_equal(got, np.argsort(value, kind="stable"))


def test_sort_of_bools_and_of_a_long_run_of_equal_values():
    layout = Layout((40,), block=(3,), grid=(4,), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    b = np.arange(40) % 3 == 0
    np.testing.assert_array_equal(xp.sort(dlmg.scatter(b, layout)).gather(), np.sort(b))
    same = np.zeros(40)
    same[7] = -1.0
    np.testing.assert_array_equal(xp.sort(dlmg.scatter(same, layout), descending=True).gather(), -np.sort(-same))


def test_sort_refuses_complex_values():
    x = dlmg.scatter(np.ones(4, dtype=complex), Layout.slab((4,), 0, ["cpu:0", "cpu:1"]))
    with pytest.raises(dlmg.DtypeError, match="complex"):
        xp.sort(x)


@SETTINGS
@given(tensors(ndim=1, nan=False), tensors(dtypes=("float64", "int32", "float32"), nan=False), st.data())
def test_searchsorted_matches_numpy(sorted_pair, values_pair, data):
    x1, v1 = sorted_pair
    x1 = xp.sort(x1)
    v1 = np.sort(v1)
    x2, v2 = values_pair
    side = data.draw(st.sampled_from(["left", "right"]))
    got = xp.searchsorted(x1, x2, side=side)
    want = np.searchsorted(v1.astype(np.result_type(v1, v2)), v2, side=side)
    index = "int32" if "jax" in x1.frameworks + x2.frameworks else "int64"
    assert str(got.dtype) == index
    _equal(_host(got), want.astype(index))
    assert got.layout.same_distribution(x2.layout.dense)
    _same_place(got, x2)


@SETTINGS
@given(tensors(ndim=1, nan=False), tensors(dtypes=("float64", "int32", "float32"), nan=False), st.data())
def test_searchsorted_with_a_sorter_matches_numpy(unsorted_pair, values_pair, data):
    """The sorter read by a routed ``take`` (host or distributed, any layout): NumPy's answers
    in ``x2``'s layout; a host ``x2`` beside a distributed ``x1`` lands on ``x1``'s devices."""
    x1, v1 = unsorted_pair
    x2, v2 = values_pair
    order = np.argsort(v1, kind="stable")
    side = data.draw(st.sampled_from(["left", "right"]))
    if order.size and data.draw(st.booleans()):
        devices = sorted({f.device for f in x1.layout.fragments}, key=str)
        block = data.draw(st.integers(1, order.size))
        sorter = dlmg.scatter(order, Layout(order.shape, block=(block,), grid=(len(devices),), devices=devices))
    else:
        sorter = order
    got = xp.searchsorted(x1, x2, side=side, sorter=sorter)
    want = np.searchsorted(v1.astype(np.result_type(v1, v2)), v2, side=side, sorter=order)
    index = "int32" if "jax" in x1.frameworks + x2.frameworks else "int64"
    _equal(_host(got), want.astype(index))
    assert got.layout.same_distribution(x2.layout.dense)
    hosted = xp.searchsorted(x1, v2, side=side, sorter=sorter)
    _equal(_host(hosted).astype(np.int64), want)
    _same_place(hosted, x1)


# -- data-dependent sizes ----------------------------------------------------------------


def _balanced(result, x) -> None:
    """A 1-D slab over the devices of ``x``'s fragments of replica 0."""
    lay = result.layout
    assert lay.ndim == 1 and lay.grid[0] == x.layout.ngrid
    assert lay.block[0] == max(-(-lay.shape[0] // lay.grid[0]), 1)
    assert list(lay.devices) == [x.layout.fragments[i].device for i in range(x.layout.ngrid)]


@SETTINGS
@given(tensors(small=True))
def test_unique_values_and_counts_match_numpy(pair):
    x, value = pair
    got = xp.unique_values(x)
    _equal(_host(got), cnp.unique_values(value))
    assert got.dtype == x.dtype
    _balanced(got, x)
    values, counts = xp.unique_counts(x)
    want_values, want_counts = cnp.unique_counts(value)
    _equal(_host(values), want_values)
    _equal(_host(counts), want_counts.astype(_index_dtype(x)))
    _balanced(counts, x)


@SETTINGS
@given(tensors(small=True))
def test_unique_all_and_inverse_match_numpy(pair):
    x, value = pair
    got = xp.unique_all(x)
    want = cnp.unique_all(value)
    for g, w in zip(got, want):
        _equal(_host(g), w.astype(g.dtype) if w.dtype.kind in "iu" else w)
    assert got.inverse_indices.layout.same_distribution(x.layout.dense)
    inv = xp.unique_inverse(x)
    _equal(_host(inv.values), want.values)
    # each NaN is its own value: the inverse must point at a NaN, in some order
    back = want.values[_host(inv.inverse_indices)]
    _equal(back, value)


def test_unique_of_bools():
    b = np.array([True, False, True, True])
    x = dlmg.scatter(b, Layout.slab((4,), 0, ["cpu:0", "cpu:1"]))
    np.testing.assert_array_equal(xp.unique_values(x).gather(), [False, True])
    assert xp.unique_values(x).dtype == "bool"


@SETTINGS
@given(tensors(small=True, nan=False))
def test_nonzero_matches_numpy(pair):
    x, value = pair
    got = xp.nonzero(x)
    want = np.nonzero(value)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _equal(_host(g), w.astype(_index_dtype(x)))
        _balanced(g, x)


@pytest.mark.gpu
def test_on_gpu_fragments_each_fragment_works_on_its_device():
    torch = pytest.importorskip("torch")
    value = np.random.default_rng(5).integers(0, 9, 1000).astype(np.float64)
    value[::11] = np.nan
    layout = Layout((1000,), block=(64,), grid=(4,), devices=["cuda:0"] * 4)
    x = dlmg.scatter(torch.from_numpy(value).cuda(), layout)
    got = xp.sort(x)
    assert all(f.array.is_cuda for f in got.fragments)
    np.testing.assert_array_equal(to_numpy(got.gather()), np.sort(value))
    np.testing.assert_array_equal(to_numpy(xp.argsort(x, descending=True).gather()),
                                  cnp.argsort(value, descending=True))
    np.testing.assert_allclose(to_numpy(xp.cumulative_sum(x).gather()), np.cumsum(value), equal_nan=True)
    np.testing.assert_array_equal(to_numpy(xp.unique_values(x).gather()), cnp.unique_values(value))
    np.testing.assert_array_equal(to_numpy(xp.nonzero(x)[0].gather()), np.nonzero(value)[0])
    ordered = xp.sort(x)
    np.testing.assert_array_equal(to_numpy(xp.searchsorted(ordered, x).gather()),
                                  np.searchsorted(np.sort(value), value))
