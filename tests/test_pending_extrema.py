"""Pending maxima and minima (``partial="max"`` / ``"min"``) kept through the operations that
commute with them, each checked against the same operation on the resolved value; every
other operation refuses, naming ``redistribute``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dlmg
from dlmg import Layout

FAST = settings(max_examples=60, deadline=None)


@st.composite
def pending(draw, kind=None, dtype=np.float64):
    """A pending max or min over any split (uneven blocks, cyclic, modes of extent 0 locally),
    1 to 3 replicas, one host device per fragment; and its resolved value."""
    kind = kind or draw(st.sampled_from(["max", "min"]))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    block = tuple(draw(st.integers(1, n)) for n in shape)
    grid = tuple(draw(st.integers(1, 2)) for _ in shape)
    replicas = draw(st.integers(1, 3))
    count = math.prod(grid) * replicas
    layout = Layout(shape, block=block, grid=grid, devices=[f"cpu:{i % 8}" for i in range(count)], partial=kind)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    arrays = []
    for f in layout.fragments:
        values = rng.standard_normal(f.shape) * 10
        if np.dtype(dtype).kind == "f" and values.size and draw(st.booleans()):
            values.flat[0] = draw(st.sampled_from([np.inf, -np.inf, np.nan]))  # the order holds for these too
        arrays.append(values.astype(dtype))
    x = dlmg.from_fragments(arrays, layout)
    return x, x.gather()


finite = st.floats(-1e3, 1e3, allow_nan=False)
positive = st.floats(1e-3, 1e3)


def check(result, want, partial):
    assert result.layout.partial == (partial if result.layout.nreplicas > 1 else result.layout.partial)
    np.testing.assert_allclose(result.gather(), want, rtol=1e-12, atol=0)


@FAST
@given(pending(), finite)
def test_adding_or_subtracting_a_finite_scalar_keeps_it(xw, c):
    x, want = xw
    kind = x.layout.partial
    check(x + c, want + c, kind)
    check(c + x, c + want, kind)
    check(x - c, want - c, kind)
    check(dlmg.add(x, c), want + c, kind)
    check(dlmg.subtract(x, np.float64(c)), want - c, kind)  # a 0-d array too
    check(+x, want, kind)
    y = x + 0.0  # a fresh tensor to update in place
    y += c
    check(y, want + c, kind)


@FAST
@given(pending(), positive)
def test_multiplying_or_dividing_by_a_positive_finite_scalar_keeps_it(xw, c):
    x, want = xw
    kind = x.layout.partial
    check(x * c, want * c, kind)
    check(c * x, c * want, kind)
    check(x / c, want / c, kind)
    check(dlmg.multiply(x, c), want * c, kind)
    check(dlmg.divide(x, c), want / c, kind)


@FAST
@given(st.data())
def test_maximum_of_pending_maxima_alike_keeps_it(data):
    x, want = data.draw(pending())
    kind = x.layout.partial
    fn, np_fn = (dlmg.maximum, np.maximum) if kind == "max" else (dlmg.minimum, np.minimum)
    c = data.draw(finite)
    y = x * 2.0 - 1.0  # the same pending layout, other values
    check(fn(x, y), np_fn(want, want * 2.0 - 1.0), kind)
    check(fn(x, c), np_fn(want, c), kind)
    check(fn(c, x), np_fn(c, want), kind)


@FAST
@given(pending(dtype=np.int32))
def test_maximum_keeps_it_on_integers_too(xw):
    x, want = xw
    kind = x.layout.partial
    fn, np_fn = (dlmg.maximum, np.maximum) if kind == "max" else (dlmg.minimum, np.minimum)
    check(fn(x, x), np_fn(want, want), kind)
    check(fn(x, 3), np_fn(want, 3), kind)


@FAST
@given(st.data())
def test_the_same_reduction_over_some_modes_keeps_it(data):
    x, want = data.draw(pending())
    kind = x.layout.partial
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, x.ndim - 1), min_size=1))))
    reduce, np_reduce = (dlmg.max, np.max) if kind == "max" else (dlmg.min, np.min)
    got = reduce(x, axis=axes)
    check(got, np_reduce(want, axis=axes), kind)
    np.testing.assert_allclose(float(reduce(x)), np_reduce(want))  # over every mode: resolved first


def test_a_reduced_mode_empty_in_some_fragments_gives_them_the_identity():
    layout = Layout((2, 3), block=(1, 2), grid=(2, 2), devices=[f"cpu:{i}" for i in range(8)], partial="max")
    frags = [np.full(f.shape, float(i)) for i, f in enumerate(layout.fragments)]
    x = dlmg.from_fragments(frags, layout)
    np.testing.assert_allclose(dlmg.max(x, axis=1).gather(), x.gather().max(axis=1))
    ints = dlmg.from_fragments([a.astype(np.int16) - 20 for a in frags], layout)
    np.testing.assert_array_equal(dlmg.max(ints, axis=0).gather(), ints.gather().max(axis=0))


RESOLVED = {
    "negation": lambda x: -x,
    "negative": lambda x: dlmg.negative(x),
    "a negative factor": lambda x: x * -2.0,
    "a zero factor": lambda x: x * 0.0,
    "dividing a scalar": lambda x: 2.0 / x,
    "dividing by a negative": lambda x: x / -2.0,
    "scalar minus": lambda x: 1.0 - x,
    "an infinite scalar": lambda x: x + math.inf,
    "a complex scalar": lambda x: x + 1j,
    "the other extremum": lambda x, kind: dlmg.minimum(x, x) if kind == "max" else dlmg.maximum(x, x),
    "the other reduction": lambda x, kind: dlmg.min(x, axis=0) if kind == "max" else dlmg.max(x, axis=0),
    "a sum": lambda x: dlmg.sum(x, axis=0),
    "two pending added": lambda x: x + x,
    "a product of two": lambda x: x * x,
    "exp": lambda x: dlmg.exp(x),
    "abs": lambda x: abs(x),
    "keepdims": lambda x: dlmg.max(x, axis=0, keepdims=True),
}


def _value_twin(x):
    """``x``'s value as an ordinary tensor (the resolved twin)."""
    lay = x.layout
    return x.redistribute(lay.replace(devices=lay.devices[: lay.ngrid], ranks=lay.ranks[: lay.ngrid], partial=None))


@pytest.mark.parametrize("kind", ["max", "min"])
@pytest.mark.parametrize("name", sorted(RESOLVED))
def test_every_other_operation_resolves_first(kind, name):
    layout = Layout((3, 4), devices=["cpu:0", "cpu:1"], partial=kind)
    x = dlmg.from_fragments([np.arange(12.0).reshape(3, 4), -np.arange(12.0).reshape(3, 4)], layout)
    op = RESOLVED[name]
    run = (lambda t: op(t, kind)) if name.startswith("the other") else op
    got = run(x)
    assert got.layout.partial is None
    np.testing.assert_array_equal(got.gather(), run(_value_twin(x)).gather())
    np.testing.assert_array_equal(x.fragments[0].array, np.arange(12.0).reshape(3, 4))  # untouched


def test_a_write_into_a_pending_extremum_that_would_not_keep_it_is_refused():
    layout = Layout((3, 4), devices=["cpu:0", "cpu:1"], partial="max")
    x = dlmg.from_fragments([np.arange(12.0).reshape(3, 4), -np.arange(12.0).reshape(3, 4)], layout)
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        x *= -1.0
    np.testing.assert_array_equal(x.fragments[0].array, np.arange(12.0).reshape(3, 4))  # untouched


@pytest.mark.parametrize("op", [lambda x: x + 1, lambda x: x * 2, lambda x: x - 1])
def test_integers_resolve_what_would_wrap_around(op):
    layout = Layout((2,), devices=["cpu:0", "cpu:1"], partial="max")
    x = dlmg.from_fragments([np.array([250, 3], np.uint8), np.array([3, 250], np.uint8)], layout)
    got = op(x)
    assert got.layout.partial is None
    np.testing.assert_array_equal(got.gather(), op(np.array([250, 250], np.uint8)))
