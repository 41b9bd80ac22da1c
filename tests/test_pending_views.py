"""Basic indexing and reshapes of a pending sum keep it pending.

Indexing with integers, slices of any step, ``None`` and ``...`` is linear: each
addend indexed alike gives the addends of the indexed value. The result keeps
``partial="sum"`` over random layouts and keys, and its resolved value is
NumPy's ``value[key]``. Where the key cuts only modes the fragments hold whole,
each result fragment is a view of its addend; where it cuts a split mode, each
addend's selection is read from its owners. Index arrays and masks read the
value. Writes into a pending tensor, or into a pending view of one, are refused.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

FAST = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
D4 = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


@st.composite
def pending(draw, framework=None):
    """A pending sum over any split (uneven blocks, cyclic), 1 to 3 addends, one host device
    per fragment, of NumPy or torch fragments; and its value (the sum of the addends)."""
    framework = framework or draw(st.sampled_from(["numpy", "torch"]))
    ndim = draw(st.integers(1, 3))
    shape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    block = tuple(draw(st.integers(1, n)) for n in shape)
    grid = tuple(draw(st.integers(1, 2)) for _ in shape)
    replicas = draw(st.integers(1, 3))
    count = math.prod(grid) * replicas
    layout = Layout(shape, block=block, grid=grid, devices=[f"cpu:{i % 8}" for i in range(count)], partial="sum")
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    addends = [rng.standard_normal(shape) for _ in range(replicas)]
    value = sum(addends)
    arrays = []
    for f in layout.fragments:  # fragment f of replica r: addend r's elements at the fragment's place
        piece = np.ascontiguousarray(addends[f.replica][np.ix_(*(layout.owned_indices(f.index, m)
                                                                  for m in range(ndim)))])
        arrays.append(piece if framework == "numpy" else __import__("torch").from_numpy(piece))
    return dlmg.from_fragments(arrays, layout), value


@st.composite
def basic_keys(draw, shape):
    """A basic key of ``shape``: per mode an integer (from either end) or a slice of any step,
    ``None`` anywhere, and, where drawn, ``...`` standing for the modes between those given."""
    def entry(n):  # (a mode of extent 0, from an earlier slice, takes slices only)
        return draw(st.one_of(st.integers(-n, n - 1), st.slices(n)) if n else st.slices(n))

    head = draw(st.integers(0, len(shape)))
    parts: list = [entry(n) for n in shape[:head]]
    if draw(st.booleans()):
        tail = draw(st.integers(head, len(shape)))
        parts += [Ellipsis] + [entry(n) for n in shape[tail:]]
    for _ in range(draw(st.integers(0, 2))):
        parts.insert(draw(st.integers(0, len(parts))), None)
    return tuple(parts)


def _value(x: dlmg.DistributedTensor) -> np.ndarray:
    return np.asarray(x.gather(framework="numpy"))


@FAST
@given(st.data())
def test_basic_keys_keep_the_pending_sum(data):
    c, value = data.draw(pending())
    key = data.draw(basic_keys(c.shape))
    got = c[key]
    assert got.layout.partial == "sum", (key, got.layout)
    assert got.layout.nreplicas == c.layout.nreplicas
    np.testing.assert_allclose(_value(got), value[key], rtol=1e-12, atol=1e-12, err_msg=str(key))
    # the addends are still those of c: c resolved afterwards is untouched
    np.testing.assert_allclose(_value(c), value, rtol=1e-12, atol=1e-12)


@FAST
@given(st.data())
def test_keys_of_keys_keep_it(data):
    c, value = data.draw(pending(framework="numpy"))
    first = data.draw(basic_keys(c.shape))
    view = c[first]
    second = data.draw(basic_keys(view.shape))
    got = view[second]
    assert got.layout.partial == "sum"
    np.testing.assert_allclose(_value(got), value[first][second], rtol=1e-12, atol=1e-12)


@FAST
@given(st.data())
def test_view_reshapes_keep_it_and_moving_ones_give_the_value(data):
    c, value = data.draw(pending(framework="numpy"))
    size = c.size
    divisors = [d for d in range(1, size + 1) if size % d == 0]
    shape = data.draw(st.sampled_from([(size,), (1, size), (size, 1)]
                                      + [(d, size // d) for d in divisors]))
    try:
        view = c.reshape(shape, copy=False)  # a view or an error, never a move
    except dlmg.LayoutError:
        view = None
    if view is not None:
        assert view.layout.partial == "sum"
        np.testing.assert_allclose(_value(view), value.reshape(shape), rtol=1e-12, atol=1e-12)
    for got in (dlmg.reshape(c, shape), c.reshape(shape)):  # the view, or the value moved
        assert (got.layout.partial == "sum") == (view is not None)
        np.testing.assert_allclose(_value(got), value.reshape(shape), rtol=1e-12, atol=1e-12)


@FAST
@given(st.data())
def test_squeeze_and_unstack_keep_it_where_they_are_views(data):
    c, value = data.draw(pending(framework="numpy"))
    axis = data.draw(st.integers(0, c.ndim - 1))
    moves = c.layout.grid[axis] > 1 and c.ndim > 1  # the split goes to another mode: the value moves
    for i, part in enumerate(xp.unstack(c, axis=axis)):
        assert part.layout.partial == (None if moves else "sum")
        np.testing.assert_allclose(_value(part), np.take(value, i, axis=axis), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_value(xp.squeeze(c[None], axis=0)), value, rtol=1e-12, atol=1e-12)
    assert xp.squeeze(c[None], axis=0).layout.partial == "sum"
    units = tuple(m for m, n in enumerate(c.shape) if n == 1)
    if units:
        got = xp.squeeze(c, axis=units)
        split = any(c.layout.grid[m] > 1 for m in units)
        assert got.layout.partial == (None if split else "sum")
        np.testing.assert_allclose(_value(got), np.squeeze(value, axis=units), rtol=1e-12, atol=1e-12)


def _product(dtype=np.float64):
    """``A @ B`` over 4 devices, left pending: 4 addends, each holding the whole (6, 5) result."""
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((6, 8)).astype(dtype), rng.standard_normal((8, 5)).astype(dtype)
    a, b = dlmg.scatter(A, Layout.slab(A.shape, 1, D4)), dlmg.scatter(B, Layout.slab(B.shape, 0, D4))
    c = dlmg.matmul(a, b, pending=True)
    assert c.layout.partial == "sum" and c.layout.nreplicas == 4 and c.layout.ngrid == 1
    return c, A @ B


@pytest.mark.parametrize("key", [np.s_[0:2], np.s_[:, 1], np.s_[..., ::2], np.s_[None], np.s_[1, ::-1],
                                 np.s_[::-2, None, 1:4]])
def test_slices_of_whole_addends_are_views_of_them(key):
    c, value = _product()
    got = c[key]
    assert got.layout.partial == "sum" and got.layout.nreplicas == 4
    for src, frag in zip(c.fragments, got.fragments):  # each addend sliced in place: no copy
        assert frag.device == src.device
        assert np.shares_memory(frag.array, src.array)
    np.testing.assert_allclose(_value(got), value[key])


def test_a_split_mode_cut_reads_each_addend_from_its_owners():
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((6, 8)), rng.standard_normal((8, 5))
    a = dlmg.scatter(A, Layout(A.shape, block=(3, 4), grid=(2, 2), devices=D4))
    b = dlmg.scatter(B, Layout(B.shape, block=(4, 5), grid=(2, 1), devices=D4[:2]))
    c = dlmg.einsum("ik,kj->ij", a, b, pending=True)
    assert c.layout.partial == "sum" and c.layout.grid == (2, 1) and c.layout.nreplicas == 2
    value = A @ B
    for key in (np.s_[0:2], np.s_[1:5:3], np.s_[::-1], np.s_[4:1:-2, 1], np.s_[2:2]):
        got = c[key]
        assert got.layout.partial == "sum" and got.layout.nreplicas == 2, key
        for r in range(2):  # replica r of the result lies on replica r's devices
            mine = set(c.layout.devices[r * c.layout.ngrid:(r + 1) * c.layout.ngrid])
            assert set(got.layout.devices[r * got.layout.ngrid:(r + 1) * got.layout.ngrid]) <= mine
        np.testing.assert_allclose(_value(got), value[key], err_msg=str(key))


def test_jax_addends_keep_it():
    pytest.importorskip("jax")
    c, value = _product(np.float32)  # (JAX narrows float64 unless x64 is on)
    j = c.to("jax")
    for key in (np.s_[0:2], np.s_[:, 1], np.s_[..., ::-2], np.s_[None, 3]):
        got = j[key]
        assert got.layout.partial == "sum"
        np.testing.assert_allclose(_value(got), value[key], rtol=1e-5, atol=1e-5)


def test_index_arrays_and_masks_read_the_value():
    c, value = _product()
    for key in (np.array([0, 2]), (slice(None), np.array([4, 0, 4])), value > 0):
        got = c[key]
        assert got.layout.partial is None
        np.testing.assert_allclose(_value(got), value[key])
    mask = dlmg.scatter(value > 0, Layout.slab(value.shape, 0, D4[:2]))
    np.testing.assert_allclose(_value(c[mask]), value[value > 0])


@pytest.mark.parametrize("key", [np.s_[0], np.s_[0:2], np.s_[:, 1], np.s_[...], np.s_[0, 0]])
def test_writes_into_a_pending_sum_or_its_views_are_refused(key):
    c, value = _product()
    before = [np.array(f.array) for f in c.fragments]
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        c[key] = 1.0
    view = c[0:3]
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        view[key] = np.ones(view[key].shape)
    for f, b in zip(c.fragments, before):  # no addend written
        np.testing.assert_array_equal(f.array, b)
    np.testing.assert_allclose(_value(c), value)


def test_the_resolved_value_takes_writes():
    c, value = _product()
    v = c.redistribute(Layout.slab(c.shape, 0, D4[:2]))
    v[0:2] = 1.0
    value[0:2] = 1.0
    np.testing.assert_allclose(_value(v), value)
