"""Reductions against NumPy on the gathered data, over random layouts (blocks,
grids, replicas, empty fragments), axes, keepdims and every framework."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.errors import DtypeError
from _ops_support import (
    ASSIGNMENT_PARAMS,
    EXAMPLES,
    build,
    data,
    fragment_dtypes,
    gathered,
    layouts_for,
    need,
    to_numpy,
)

pytestmark = pytest.mark.filterwarnings(
    "ignore:Mean of empty slice:RuntimeWarning", "ignore:invalid value encountered:RuntimeWarning"
)

#: float32 sums of values in [0, 1): relative error of the partial-sum order
RTOL = 1e-5

REDUCTIONS = ("sum", "prod", "min", "max", "mean", "all", "any", "argmax")


@st.composite
def axes_for(draw, ndim: int, single: bool = False):
    """None, an int (maybe negative) or a tuple of distinct modes."""
    if ndim == 0 or draw(st.booleans()):
        return None
    if single or draw(st.booleans()):
        return draw(st.integers(-ndim, ndim - 1))
    modes = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim))
    return tuple(m - ndim if draw(st.booleans()) else m for m in modes)


def reference_input(name: str, shape, seed: int) -> np.ndarray:
    if name in ("all", "any"):
        return data(shape, "bool", seed=seed)
    if name == "prod":
        return data(shape, "float32", seed=seed, low=0.95, high=1.05)
    if name == "argmax":
        return data(shape, "int32", seed=seed, low=0, high=4)  # many ties
    if name in ("min", "max"):
        return data(shape, "int32", seed=seed, low=-50, high=50)
    return data(shape, "float32", seed=seed, low=0, high=1)


def numpy_reduce(name: str, x: np.ndarray, axis, keepdims: bool):
    if name == "argmax":
        return np.argmax(x, axis=axis, keepdims=keepdims)
    return getattr(np, name)(x, axis=axis, keepdims=keepdims)


def expected_layout(layout: Layout, axis, keepdims: bool) -> Layout:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes:
        return layout
    out = layout.drop_modes(axes)
    if keepdims:
        norm = sorted(a % layout.ndim for a in axes)
        shape, block, grid = list(out.shape), list(out.block), list(out.grid)
        for a in norm:
            shape.insert(a, 1)
            block.insert(a, 1)
            grid.insert(a, 1)
        out = Layout(shape, block=block, grid=grid, devices=out.devices)
    return _all_reduced(layout, out, sorted(a % layout.ndim for a in axes), keepdims)


def _all_reduced(layout: Layout, out: Layout, removed: list[int], keepdims: bool) -> Layout:
    """The device rule of a reduction over split modes: each result is replicated over the
    distinct devices its fragments sit on, when every result has the same number of them."""
    on: dict[tuple, dict] = {}
    for f in layout.fragments:
        kept = tuple(c for m, c in enumerate(f.coords) if m not in removed)
        on.setdefault((kept, f.replica), {}).setdefault((layout.devices[f.index], layout.ranks[f.index]), None)
    widths = {len(v) for v in on.values()}
    if len(widths) != 1 or widths == {1}:
        return out
    (width,) = widths
    devices, ranks = [], []
    for r in range(out.nreplicas):
        for k in range(width):
            for g in range(out.ngrid):
                coords = out.fragments[g].coords
                kept = tuple(c for m, c in enumerate(coords) if not (keepdims and m in removed))
                device, rank = list(on[(kept, r)])[k]
                devices.append(device)
                ranks.append(rank)
    return Layout(out.shape, block=out.block, grid=out.grid, devices=devices, ranks=ranks)


def check_reduction(name: str, layout: Layout, assignment: str, axis, keepdims: bool, seed: int = 0) -> None:
    x = reference_input(name, layout.shape, seed)
    a = build(x, layout, assignment)
    reduced = range(layout.ndim) if axis is None else [axis] if isinstance(axis, int) else axis
    if name in ("min", "max", "argmax") and any(layout.shape[m] == 0 for m in reduced):
        with pytest.raises(ValueError, match="no identity"):
            getattr(dlmg, name)(a, axis=axis, keepdims=keepdims)
        return
    got = getattr(dlmg, name)(a, axis=axis, keepdims=keepdims)
    want = numpy_reduce(name, x, axis, keepdims)
    # axis=None reduces every mode: a 0-d distributed tensor (the array API's rule), on the
    # input's devices; argmax's flat index is one value, laid out by the creation policy
    assert isinstance(got, dlmg.DistributedTensor)
    if not (axis is None and name == "argmax"):
        every = tuple(range(layout.ndim)) if axis is None else axis
        assert got.layout == expected_layout(layout, every, keepdims)
    assert fragment_dtypes(got) == {got.dtype}
    value = gathered(got)
    assert value.shape == np.shape(want), (value.shape, np.shape(want))
    if name in ("sum", "mean", "prod"):
        np.testing.assert_allclose(value, want, rtol=RTOL if name != "prod" else 1e-4, atol=1e-6)
    else:
        np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_reductions_match_numpy(assignment):
    need(assignment)

    @settings(max_examples=EXAMPLES[assignment] + 4 * (assignment in ('numpy', 'torch')))
    @given(layout=layouts_for(assignment), data_=st.data())
    def run(layout, data_):
        for name in REDUCTIONS:
            axis = data_.draw(axes_for(layout.ndim, single=name == "argmax"), label=name)
            keepdims = data_.draw(st.booleans())
            check_reduction(name, layout, assignment, axis, keepdims, seed=layout.size)

    run()


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_integer_sums_are_exact_and_use_numpys_accumulator(assignment):
    need(assignment)
    layout = Layout((9, 8), block=(2, 3), grid=(3, 2), devices=["cpu:0", "cpu:1", "cpu:2"] * 2)
    x = data(layout.shape, "int32", seed=3, low=-1000, high=1000)
    a = build(x, layout, assignment)
    wide = "int32" if assignment in ("jax", "mixed") else "int64"  # JAX without x64 has no int64
    total = dlmg.sum(a)
    assert int(to_numpy(total)) == int(x.sum()) and dlmg.dtypes.canonical(total.dtype) == wide
    cols = a.sum(axis=0)
    assert cols.dtype == wide
    np.testing.assert_array_equal(gathered(cols), x.sum(axis=0))
    np.testing.assert_array_equal(gathered(a.max(axis=1)), x.max(axis=1))
    m = dlmg.mean(a)
    assert dlmg.dtypes.canonical(m.dtype) == ("float32" if assignment in ("jax", "mixed") else "float64")
    np.testing.assert_allclose(to_numpy(m), x.mean(), rtol=1e-6)


def test_reducing_local_modes_keeps_the_grid_and_each_fragments_framework():
    need("torch", "jax")
    layout = Layout((4, 5, 6), block=(2, 5, 2), grid=(2, 1, 3), devices=[f"cpu:{i % 3}" for i in range(6)])
    x = data(layout.shape, seed=4)
    a = build(x, layout, "mixed")
    out = a.sum(axis=1)
    assert out.layout.grid == (2, 3) and out.layout.devices == layout.devices
    assert [f.framework for f in out.fragments] == [f.framework for f in a.fragments]
    np.testing.assert_allclose(gathered(out), x.sum(axis=1), rtol=RTOL)


def test_reducing_a_distributed_mode_combines_onto_the_kept_fragments():
    need("torch", "jax")
    layout = Layout((6, 4), block=(1, 2), grid=(3, 2), devices=[f"cpu:{i}" for i in range(6)])
    x = data(layout.shape, seed=5)
    a = build(x, layout, "mixed")  # fragments cycle torch, numpy, jax
    out = a.max(axis=0)
    # an all-reduce: each column block replicated on the three devices that held its rows,
    # in the framework of the fragment on that device
    homes = [a.fragments[j + 3 * i] for i in range(2) for j in range(3)]  # (replica j of column block i)
    assert out.layout.grid == (2,) and out.layout.nreplicas == 3
    by_device = {f.device: f.framework for f in a.fragments}
    assert sorted(map(str, out.layout.devices)) == sorted(str(f.device) for f in homes)
    assert [f.framework for f in out.fragments] == [by_device[d] for d in out.layout.devices]
    np.testing.assert_array_equal(gathered(out), x.max(axis=0))
    for frag in out.fragments:  # JAX results stay on their fragment's JAX device
        assert frag.adapter.device_of(frag.array) == frag.device or frag.framework != "jax"


def test_replicas_are_counted_once():
    layout = Layout((6, 4), block=(3, 2), grid=(2, 2), devices=["cpu"] * 12)  # 3 replicas
    x = data(layout.shape, "int32", seed=6, low=0, high=10)
    a = build(x, layout)
    assert int(dlmg.sum(a)) == int(x.sum())
    assert float(dlmg.mean(a)) == pytest.approx(x.mean())
    per_col = a.sum(axis=0)
    assert per_col.layout.nreplicas == 3  # every replica reduces its own copy
    for frag in per_col.fragments:
        np.testing.assert_array_equal(frag.array, x.sum(axis=0)[frag.layout.global_slices()])


def test_empty_fragments_are_skipped():
    layout = Layout.slab((5, 3), 0, ["cpu"] * 4)  # pieces of 2, 2, 1, 0 rows
    assert layout.fragments[3].shape == (0, 3)
    x = data(layout.shape, "int32", seed=7, low=-9, high=9)
    a = build(x, layout)
    assert int(dlmg.min(a)) == x.min() and int(dlmg.max(a)) == x.max()
    assert int(dlmg.argmax(a)) == int(np.argmax(x))
    np.testing.assert_array_equal(gathered(dlmg.min(a, axis=0)), x.min(axis=0))
    np.testing.assert_array_equal(gathered(dlmg.argmax(a, axis=0)), np.argmax(x, axis=0))
    empty = build(np.zeros((0, 3), np.float32), Layout.slab((0, 3), 0, ["cpu"] * 2))
    assert float(dlmg.sum(empty)) == 0.0
    np.testing.assert_array_equal(gathered(dlmg.sum(empty, axis=0)), np.zeros(3))
    with pytest.raises(ValueError, match="no identity"):
        dlmg.max(empty)
    np.testing.assert_array_equal(gathered(dlmg.max(empty, axis=1)), np.zeros((0,)))


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_argmax_ties_and_nan_follow_numpy(assignment):
    need(assignment)
    layout = Layout((6, 5), block=(1, 2), grid=(3, 2), devices=[f"cpu:{i % 2}" for i in range(6)])
    x = np.zeros(layout.shape, np.float32)
    x[4, 3] = x[1, 4] = x[5, 0] = 7.0  # ties in different fragments: the first in row-major order wins
    a = build(x, layout, assignment)
    assert int(to_numpy(dlmg.argmax(a))) == int(np.argmax(x)) == 9
    np.testing.assert_array_equal(gathered(a.argmax(axis=0)), np.argmax(x, axis=0))
    np.testing.assert_array_equal(gathered(a.argmax(axis=-1, keepdims=True)), np.argmax(x, axis=-1, keepdims=True))
    x[3, 1] = x[5, 4] = np.nan
    a = build(x, layout, assignment)
    assert int(to_numpy(dlmg.argmax(a))) == int(np.argmax(x)) == 16
    np.testing.assert_array_equal(gathered(a.argmax(axis=0)), np.argmax(x, axis=0))
    assert np.isnan(to_numpy(dlmg.max(a)))
    b = build(x > 0, layout, assignment)  # bools (torch has no argmax of bools)
    np.testing.assert_array_equal(gathered(b.argmax(axis=1)), np.argmax(x > 0, axis=1))


def test_methods_and_keepdims_with_axis_none():
    layout = Layout((4, 6), block=(3, 2), grid=(2, 2), devices=["cpu"] * 4)
    x = data(layout.shape, seed=8)
    a = build(x, layout)
    for name in ("sum", "prod", "min", "max", "mean", "argmax"):
        got = getattr(a, name)(keepdims=True)
        assert tuple(got.shape) == (1, 1)
        np.testing.assert_allclose(to_numpy(got), numpy_reduce(name, x, None, True), rtol=1e-5)
    b = build(x > 0.5, layout)
    assert bool(b.any()) and not bool(b.all())
    np.testing.assert_array_equal(gathered(b.all(axis=(0, 1))), (x > 0.5).all())
    np.testing.assert_array_equal(gathered(a.sum(axis=())), x)
    assert a.sum(axis=(0, 1)).layout.ndim == 0  # every mode: a 0-d distributed tensor
    assert a.sum().layout == a.sum(axis=(0, 1)).layout and dlmg.sum(a).layout == a.sum().layout
    np.testing.assert_allclose(gathered(a.sum(axis=(0, 1))), x.sum(), rtol=RTOL)
    assert a.sum(dtype="float64").dtype == np.float64


def test_reduction_errors():
    layout = Layout.slab((4, 3), 0, ["cpu", "cpu"])
    c = build(data(layout.shape, "complex64"), layout)
    for name in ("min", "max", "argmax"):
        with pytest.raises(DtypeError, match="complex"):
            getattr(dlmg, name)(c)
    a = build(data(layout.shape), layout)
    with pytest.raises(ValueError, match="out of bounds"):
        a.sum(axis=2)
    with pytest.raises(ValueError, match="repeated"):
        a.sum(axis=(0, -2))
    with pytest.raises(TypeError):
        dlmg.argmax(a, axis=(0, 1))
    with pytest.raises(TypeError):
        dlmg.sum(np.ones(3))


def test_dispatch_failure_in_a_reduction_names_the_fragment():
    layout = Layout.slab((4,), 0, ["cpu", "cpu"])
    a = build(data(layout.shape, "float32"), layout)
    with pytest.raises(dlmg.FragmentError, match=r"fragment 0 \(device cpu:0, framework numpy\)"):
        dlmg.prod(a, dtype="float4_e2m1fn_x2")  # NumPy has no packed float4, not even through ml_dtypes


@pytest.mark.slow
def test_all_eight_jax_devices():
    need("jax")
    import jax

    if len(jax.devices("cpu")) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8")
    layout = Layout((8, 6), block=(1, 3), grid=(4, 2), devices=[f"cpu:{i}" for i in range(8)])
    x, y = data(layout.shape, seed=30), data(layout.shape, seed=31)
    a, b = build(x, layout, "jax"), build(y, layout, "jax")
    z = a * b + 1
    for frag in z.fragments:  # every fragment computed on its own JAX device
        assert frag.adapter.device_of(frag.array) == frag.device
    np.testing.assert_allclose(gathered(z), x * y + 1, rtol=1e-6)
    cols = z.sum(axis=0)
    assert set(cols.layout.devices) == set(layout.devices) and cols.layout.nreplicas == 4  # on the input's devices
    for frag in cols.fragments:
        assert frag.adapter.device_of(frag.array) == frag.device
    np.testing.assert_allclose(gathered(cols), (x * y + 1).sum(axis=0), rtol=RTOL)
    assert int(to_numpy(dlmg.argmax(z))) == int(np.argmax(x * y + 1))
