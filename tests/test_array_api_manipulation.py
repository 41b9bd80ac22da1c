"""Shape changes, joining and reordering of the Array API namespace on distributed tensors:
the values, dtype and shape equal NumPy's on the gathered operands, and the result stays on
the lead operand's devices (never collected onto one fragment), over random layouts (slab,
cyclic, block-cyclic, uneven last blocks, replicas, several fragments per device) and
fragments of NumPy, torch, JAX and mixes of them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlmg
import dlmg.array_api as xp
from dlmg import Layout
from dlmg.errors import LayoutError

from _ops_support import ASSIGNMENT_PARAMS, EXAMPLES, build, gathered, jax_cpus, layouts, need

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
#: shapes for tensors with JAX fragments (JAX compiles per shape)
FEW_SHAPES = ((6, 4), (7,), (5, 3), (2, 3, 2))


def _layout(draw, shape, assignment):
    return draw(layouts(shape, jax_devices=jax_cpus() >= 4, ndevices=4))


@st.composite
def tensors(draw, assignment, min_ndim=1, max_ndim=3, nonempty=False):
    if assignment in ("jax", "mixed"):
        shape = draw(st.sampled_from(FEW_SHAPES))
    else:
        ndim = draw(st.integers(min_ndim, max_ndim))
        shape = tuple(draw(st.integers(1 if nonempty else 0, 7)) for _ in range(ndim))
    layout = _layout(draw, shape, assignment)
    values = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) * 1.5 - 3
    return build(values, layout, assignment), values


def _stays(result, x):
    """The result lies on the lead operand's devices and processes, split as the lead is."""
    assert set(result.layout.devices) == set(x.layout.devices), (result.layout, x.layout)
    assert set(result.layout.ranks) == set(x.layout.ranks)
    if x.layout.nfragments > 1:
        assert result.layout.nfragments > 1, (result.layout, x.layout)


def _same(result, want):
    got = gathered(result)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert result.dtype == str(want.dtype), (result.dtype, want.dtype)
    np.testing.assert_array_equal(got, want)


def _axis(draw, ndim, extra=0):
    return draw(st.integers(-(ndim + extra), ndim + extra - 1))


OPERATIONS = {}


def operation(fn):
    OPERATIONS[fn.__name__] = fn
    return fn


@operation
def expand_dims(draw, x, a):
    axis = _axis(draw, a.ndim, 1)
    return xp.expand_dims(x, axis=axis), np.expand_dims(a, axis)


@operation
def squeeze(draw, x, a):
    axis = _axis(draw, a.ndim, 1)
    y, b = xp.expand_dims(x, axis=axis), np.expand_dims(a, axis)
    return xp.squeeze(y, axis=axis), np.squeeze(b, axis)


@operation
def moveaxis(draw, x, a):
    src, dst = _axis(draw, a.ndim), _axis(draw, a.ndim)
    return xp.moveaxis(x, src, dst), np.moveaxis(a, src, dst)


@operation
def reshape(draw, x, a):
    n = a.size
    divisors = [d for d in range(1, n + 1) if n % d == 0] or [1]
    d = draw(st.sampled_from(divisors))
    shape = draw(st.sampled_from([(d, n // d) if n else (0, 3), (n,), (n // d, 1, d) if n else (3, 0)]))
    return xp.reshape(x, shape), np.reshape(a, shape)


@operation
def concat(draw, x, a):
    axis = _axis(draw, a.ndim)
    extra = list(a.shape)
    extra[axis] = draw(st.integers(0, 5))
    b = np.arange(int(np.prod(extra)), dtype=np.float32).reshape(extra) + 100
    lay = draw(layouts(tuple(extra), jax_devices=jax_cpus() >= 4, ndevices=4))
    other = build(b, lay, draw(st.sampled_from(["numpy", "torch"])))
    first = draw(st.booleans())
    if first:
        return xp.concat([x, other, x], axis=axis), np.concatenate([a, b, a], axis)
    return xp.concat([x, other], axis=axis), np.concatenate([a, b], axis)


@operation
def stack(draw, x, a):
    axis = _axis(draw, a.ndim, 1)
    return xp.stack([x, x * 2.0], axis=axis), np.stack([a, a * 2], axis)


@operation
def flip(draw, x, a):
    axis = draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1),
                          st.lists(st.integers(0, a.ndim - 1), min_size=1, max_size=a.ndim, unique=True)))
    axis = tuple(axis) if isinstance(axis, list) else axis
    return xp.flip(x, axis=axis), np.flip(a, axis)


@operation
def roll(draw, x, a):
    shift = draw(st.integers(-9, 9))
    axis = draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    return xp.roll(x, shift, axis=axis), np.roll(a, shift, axis)


@operation
def roll_several(draw, x, a):
    shifts = tuple(draw(st.integers(-9, 9)) for _ in range(a.ndim))
    axes = tuple(range(a.ndim))
    return xp.roll(x, shifts, axis=axes), np.roll(a, shifts, axes)


@operation
def repeat(draw, x, a):
    axis = draw(st.one_of(st.none(), st.integers(-a.ndim, a.ndim - 1)))
    n = a.size if axis is None else a.shape[axis]
    counts = draw(st.one_of(st.integers(0, 3), st.lists(st.integers(0, 3), min_size=n, max_size=n)))
    if isinstance(counts, list):
        counts = np.asarray(counts, dtype=np.int64)
    return xp.repeat(x, counts, axis=axis), np.repeat(a, counts, axis)


@operation
def tile(draw, x, a):
    reps = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.integers(1, a.ndim + 1))))
    return xp.tile(x, reps), np.tile(a, reps)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_operation_equals_numpy_and_stays_distributed(name, assignment):
    need(assignment)

    @settings(max_examples=EXAMPLES[assignment] * 2, **SETTINGS)
    @given(data=st.data())
    def check(data):
        x, a = data.draw(tensors(assignment))
        result, want = OPERATIONS[name](data.draw, x, a)
        _same(result, want)
        _stays(result, x)

    check()


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_unstack_gives_views_where_the_slices_lie(assignment):
    need(assignment)

    @settings(max_examples=EXAMPLES[assignment], **SETTINGS)
    @given(data=st.data())
    def check(data):
        x, a = data.draw(tensors(assignment, nonempty=True))
        axis = _axis(data.draw, a.ndim)
        parts = xp.unstack(x, axis=axis)
        want = np.moveaxis(a, axis, 0)
        assert len(parts) == a.shape[axis]
        on = set()
        for got, w in zip(parts, want):
            _same(got, w)
            on |= set(got.layout.devices)
            assert set(got.layout.devices) <= set(x.layout.devices)
        if a.ndim > 1 and x.layout.grid[axis % a.ndim] > 1:
            for got in parts:  # spread over the same devices as the operand
                assert set(got.layout.devices) == set(x.layout.devices)
        else:
            holding = {f.device for f in x.layout.fragments if f.shape[axis % a.ndim]}
            assert on == holding or x.layout.grid[axis % a.ndim] == 1

    check()


# -- the cases the algorithms name --------------------------------------------------


DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


def _slab(values, axis=0, devices=DEVICES):
    return dlmg.scatter(values, Layout.slab(values.shape, axis, devices))


def test_shape_only_functions_are_views_of_the_fragments():
    a = np.arange(24.0).reshape(8, 3)
    x = _slab(a)
    pointers = [f.adapter.data_ptr(f.array) for f in x.fragments]
    for y in (xp.expand_dims(x, axis=1), xp.squeeze(xp.expand_dims(x, axis=0), axis=0), xp.moveaxis(x, 0, 1),
              xp.reshape(x, (4, 2, 3))):
        assert [f.adapter.data_ptr(f.array) for f in y.fragments] == pointers
        assert y.layout.devices == x.layout.devices
    column = xp.unstack(x, axis=1)[2]  # mode 0 split: a view of every fragment
    assert [f.adapter.data_ptr(f.array) for f in column.fragments] == [p + 16 for p in pointers]
    np.testing.assert_array_equal(column.gather(), a[:, 2])
    element = xp.unstack(_slab(np.arange(8.0)))[5]  # element 5 lies in the fragment on cpu:2
    assert [str(d) for d in element.layout.devices] == ["cpu:2"] and float(element) == 5.0
    rows = xp.unstack(x, axis=0)  # split mode: one move spreads the rows over the devices
    assert all(set(r.layout.devices) == set(x.layout.devices) for r in rows)
    np.testing.assert_array_equal(rows[5].gather(), a[5])


def test_reshape_moves_once_into_the_nearest_layout():
    a = np.arange(6.0 * 10).reshape(6, 10)
    x = _slab(a, axis=1)  # columns split: (6, 10) -> (60,) cannot be a view
    with pytest.raises(LayoutError):
        xp.reshape(x, (60,), copy=False)
    y = xp.reshape(x, (60,))
    np.testing.assert_array_equal(y.gather(), a.reshape(60))
    assert set(y.layout.devices) == set(x.layout.devices) and y.layout.grid == (4,)
    z = xp.reshape(_slab(np.arange(15.0).reshape(3, 5)), (5, 3))  # through the flat form
    np.testing.assert_array_equal(z.gather(), np.arange(15.0).reshape(5, 3))
    assert len(set(z.layout.devices)) == 4


def test_concat_of_aligned_slabs_is_local():
    a = np.arange(32.0).reshape(8, 4)
    x = dlmg.scatter(a, Layout((8, 4), block=(1, 4), grid=(4, 1), devices=DEVICES))
    y = xp.concat([x, x], axis=0)  # each operand whole rounds of the grid: fragment by fragment
    assert y.layout.block == (1, 4) and y.layout.devices == x.layout.devices
    np.testing.assert_array_equal(y.gather(), np.concatenate([a, a]))
    z = xp.concat([x, x], axis=1)  # a whole mode
    assert z.layout.grid == (4, 1) and z.layout.devices == x.layout.devices
    np.testing.assert_array_equal(z.gather(), np.concatenate([a, a], axis=1))


def test_flip_renumbers_full_blocks():
    a = np.arange(16.0)
    x = _slab(a)
    y = xp.flip(x)
    assert y.layout.block == x.layout.block
    assert y.layout.devices == tuple(reversed(x.layout.devices))  # the fragments trade places
    np.testing.assert_array_equal(y.gather(), a[::-1])
    odd = xp.flip(_slab(np.arange(13.0)))  # a partial last block: one move into dividing blocks
    np.testing.assert_array_equal(odd.gather(), np.arange(13.0)[::-1])
    assert set(odd.layout.devices) == set(x.layout.devices)


def test_roll_by_whole_rounds_is_a_renumbering():
    a = np.arange(16.0)
    x = _slab(a)
    y = xp.roll(x, 4)
    assert y.layout.block == (4,)
    assert y.layout.devices == x.layout.devices[3:] + x.layout.devices[:3]
    np.testing.assert_array_equal(y.gather(), np.roll(a, 4))


def test_repeat_grows_the_blocks():
    a = np.arange(12.0).reshape(6, 2)
    x = _slab(a)
    y = xp.repeat(x, 3, axis=0)
    assert y.layout.block == (6, 2) and y.layout.devices == x.layout.devices
    np.testing.assert_array_equal(y.gather(), np.repeat(a, 3, axis=0))


def test_torch_fragments_flip_through_torch():
    need("torch")
    import torch

    a = np.arange(12.0).reshape(4, 3)
    lay = Layout.slab((4, 3), 0, DEVICES[:2])
    x = dlmg.from_fragments([torch.from_numpy(a[:2].copy()), torch.from_numpy(a[2:].copy())], lay)
    y = xp.flip(x, axis=(0, 1))
    assert y.frameworks == ("torch",)
    np.testing.assert_array_equal(y.gather(framework="numpy"), a[::-1, ::-1])


def test_pending_sums_are_resolved_on_entry():
    a = np.arange(12.0).reshape(4, 3)
    b = np.arange(6.0).reshape(3, 2)
    left = dlmg.scatter(a, Layout((4, 3), block=(4, 2), grid=(1, 2), devices=DEVICES[:2]))
    right = dlmg.scatter(b, Layout((3, 2), block=(2, 2), grid=(2, 1), devices=DEVICES[:2]))
    product = dlmg.matmul(left, right)
    want = a @ b
    for got, expect in ((xp.flip(product, axis=0), want[::-1]), (xp.expand_dims(product, axis=0), want[None]),
                        (xp.concat([product, product]), np.concatenate([want, want]))):
        assert got.layout.partial is None
        np.testing.assert_allclose(got.gather(), expect)


def test_bad_arguments_name_the_problem():
    x = _slab(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ValueError, match="extent 2"):
        xp.squeeze(x, axis=1)
    with pytest.raises(IndexError, match="out of range"):
        xp.expand_dims(x, axis=5)
    with pytest.raises(ValueError, match="differ outside mode"):
        xp.concat([x, _slab(np.arange(9.0).reshape(3, 3))], axis=0)
    with pytest.raises(ValueError, match="repeats"):
        xp.repeat(x, [1, 2, 3], axis=0)


def test_concat_of_slabs_holds_the_operands_fragments():
    a, b = np.arange(16.0).reshape(8, 2), np.arange(6.0).reshape(3, 2) + 50
    x = _slab(a)  # 2 rows on each of 4 devices
    y = dlmg.scatter(b, Layout((3, 2), block=(2, 2), grid=(2, 1), devices=DEVICES[2:]))
    z = xp.concat([x, y], axis=0)
    assert z.layout.grid == (6, 1) and z.layout.block == (2, 2)
    assert [f.adapter.data_ptr(f.array) for f in z.fragments] == (
        [f.adapter.data_ptr(f.array) for f in x.fragments] + [f.adapter.data_ptr(f.array) for f in y.fragments])
    assert [str(d) for d in z.layout.devices] == DEVICES + DEVICES[2:]
    np.testing.assert_array_equal(z.gather(), np.concatenate([a, b]))
