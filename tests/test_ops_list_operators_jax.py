"""Arithmetic operators on JAX fragments spread one per device run each
fragment through ``jax.jit`` of the operator (``Adapter.list_operator``), a
cheaper call than the eager operator; fragments sharing a device run as one
compiled call per device. Results, dtypes, devices and refusals equal JAX's
operators applied fragment by fragment; ``**`` with a scalar exponent and
in-place operators keep the per-fragment path."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import dlmg
from dlmg.ops._lists import on_lists as _on_collected
from dlmg.ops.dispatch import collect

from _ops_support import compare_operator, same_outcome

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

DTYPES = ["bool", "uint8", "int32", "float16", "bfloat16", "float32", "complex64"]
OPERATORS = ["add", "sub", "mul", "truediv", "pow"]


def on_lists(name, lead, other, in_place, label):
    """The list path for ``lead <op> other``, the operands collected (checked) as an operator does first."""
    return _on_collected(name, collect((lead, other), label), in_place, label)


def _devices(platform: str) -> list:
    """Two devices: two CPUs (one fragment each: the lists), or one CPU or GPU
    holding both (one compiled call per device for all of its fragments)."""
    try:
        found = jax.devices("cpu" if platform.startswith("cpu") else platform)
    except RuntimeError:
        found = []
    if platform == "cpu" and len(found) < 2:
        pytest.skip("needs 2 JAX CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    if not found:
        pytest.skip("needs a CUDA GPU with JAX")
    return found[:2] if platform == "cpu" else found[:1] * 2


PLATFORMS = ["cpu", "cpu-one-device", pytest.param("gpu", marks=pytest.mark.gpu)]


def fragments(dtype: str, platform: str, seed: int) -> list:
    values = np.random.default_rng(seed).integers(1, 5, size=(6, 5))
    return [jax.device_put(jnp.asarray(values[3 * k:3 * k + 3]).astype(dtype), d)
            for k, d in enumerate(_devices(platform))]


def wrap(frags: list):
    devices = [dlmg.registry.get_adapter("jax").device_of(f) for f in frags]
    return dlmg.from_fragments(frags, dlmg.Layout.slab((6, 5), axis=0, devices=devices))


def same(got, want) -> None:
    def arrays(g, w):
        assert g.dtype == w.dtype and g.devices() == w.devices() and g.weak_type == w.weak_type
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))

    same_outcome(got, want, arrays)


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operators_equal_jax_fragment_by_fragment(platform, name, dtype):
    op = getattr(operator, name)
    a, b = wrap(fragments(dtype, platform, 1)), wrap(fragments(dtype, platform, 2))
    c = wrap(fragments("float32", platform, 3))
    compare_operator(op, a, b, c, same)


def test_operators_run_through_the_lists_and_only_out_of_place():
    fa, fb = fragments("float32", "cpu", 1), fragments("float32", "cpu", 2)
    a, b = wrap(fa), wrap(fb)
    out = on_lists("multiply", a, b, False, "operator *")
    assert out is not None and out.layout is a.layout
    for got, x, y in zip(out.fragments, fa, fb):
        assert got.array.devices() == x.devices()
        np.testing.assert_array_equal(np.asarray(got.array), np.asarray(x * y))
    assert on_lists("add", a, 2.0, False, "operator +") is not None
    assert on_lists("add", a, b, True, "operator +") is None  # immutable arrays: the per-fragment path
    assert on_lists("pow", a, 2, False, "operator **") is None
    before = [np.asarray(x) for x in fa]
    a += b  # new arrays in place of the old
    for got, x, y in zip(a.fragments, before, fb):
        np.testing.assert_array_equal(np.asarray(got.array), x + np.asarray(y))


def test_fragments_sharing_a_device_are_one_list_call():
    fa, fb = fragments("float32", "cpu-one-device", 1), fragments("float32", "cpu-one-device", 2)
    a, b = wrap(fa), wrap(fb)
    for other, partners in ((b, fb), (0.5, [0.5] * len(fa))):
        out = on_lists("divide", a, other, False, "operator /")
        assert out is not None and out.layout is a.layout
        for got, x, y in zip(out.fragments, fa, partners):
            want = x / y
            assert got.array.dtype == want.dtype and got.array.devices() == want.devices()
            np.testing.assert_array_equal(np.asarray(got.array), np.asarray(want))


def test_a_refusal_comes_from_the_per_fragment_path():
    a = wrap(fragments("int32", "cpu", 1))
    # too large for int32: JAX's refusal, raised by the per-fragment path with the fragment named
    with pytest.raises(dlmg.FragmentError, match="fragment 0.*OverflowError"):
        a + 2**40
