"""Operators on JAX fragments that share a device run as one compiled call per
device (``Traits.batches_operators``); results equal JAX's eager ones, and
everything else (mixed layouts, other frameworks) keeps the per-fragment path."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import dlmg
from dlmg.errors import LayoutMismatchError
from dlmg.ops.fused import batches_operators
from _ops_support import need

ARITHMETIC = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
BITWISE = ["and_", "or_", "xor", "lshift", "rshift"]
COMPARISON = ["eq", "ne", "lt", "le", "gt", "ge"]


def jax_tensor(values: np.ndarray, fragments: int = 4):
    need("jax")
    import jax.numpy as jnp

    layout = dlmg.Layout.slab(values.shape, axis=0, devices=["cpu:0"] * fragments)
    pieces = np.array_split(values, fragments)
    return dlmg.from_fragments([jnp.asarray(p) for p in pieces], layout), jnp.asarray(values)


def test_jax_fragments_on_one_device_batch_and_spread_ones_do_not():
    a, _ = jax_tensor(np.arange(12.0, dtype=np.float32).reshape(4, 3))
    assert batches_operators(a)
    spread = dlmg.Layout.slab((4, 3), axis=0, devices=["cpu:0", "cpu:1"])
    try:
        b = dlmg.scatter(np.ones((4, 3), np.float32), spread, framework="jax")
    except Exception:
        pytest.skip("needs 2 JAX CPU devices")
    assert not batches_operators(b)  # one fragment per device: nothing to batch
    n = dlmg.from_fragments([np.ones((2, 3), np.float32)] * 2, spread)
    assert not batches_operators(n)  # NumPy has no compiler


@pytest.mark.slow  # a JAX compilation per operator and dtype
@pytest.mark.parametrize("name", ARITHMETIC + COMPARISON)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_arithmetic_and_comparisons_equal_eager_jax(name, dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(1, 9, size=(8, 5)).astype(dtype)
    y = rng.integers(1, 9, size=(8, 5)).astype(dtype)
    op = getattr(operator, name)
    da, ja = jax_tensor(x)
    db, jb = jax_tensor(y)
    for got, want in [(op(da, db), op(ja, jb)), (op(da, 3), op(ja, 3)), (op(2, db), op(2, jb))]:
        assert got.dtype == str(want.dtype)
        np.testing.assert_allclose(np.asarray(got.gather(framework="numpy")), np.asarray(want), rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", BITWISE)
def test_bitwise_operators_equal_eager_jax(name):
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    op = getattr(operator, name)
    da, ja = jax_tensor(x)
    np.testing.assert_array_equal(np.asarray(op(da, 2).gather(framework="numpy")), np.asarray(op(ja, 2)))
    np.testing.assert_array_equal(np.asarray(op(da, da).gather(framework="numpy")), np.asarray(op(ja, ja)))


def test_chains_make_new_tensors_and_leave_operands_alone():
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)
    a, ja = jax_tensor(x, fragments=3)
    before = [f.array for f in a.fragments]
    y = a * a + a - 1.5
    np.testing.assert_allclose(np.asarray(y.gather(framework="numpy")), np.asarray(ja * ja + ja - 1.5), rtol=1e-6)
    assert all(f.array is b for f, b in zip(a.fragments, before))
    assert y.layout.same_distribution(a.layout)


def test_mismatched_layouts_still_say_so():
    a, _ = jax_tensor(np.ones((8, 2), np.float32), fragments=4)
    b, _ = jax_tensor(np.ones((8, 2), np.float32), fragments=2)
    with dlmg.strict(), pytest.raises(LayoutMismatchError, match=r"operator \+"):  # aligned, unless strict
        a + b
    np.testing.assert_array_equal((a + b).gather(framework="numpy"), np.full((8, 2), 2.0, np.float32))
