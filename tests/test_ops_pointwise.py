"""Elementwise operations against NumPy on the gathered data: operators, the
array API's elementwise functions, scalars and 0-d arrays of every framework,
mixed-framework operands, in-place forms, errors, and the dispatch itself."""

from __future__ import annotations

import operator
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings

import dlmg
from dlmg import Layout
from dlmg.errors import DtypeError, FragmentError, LayoutMismatchError
from _ops_support import (
    ASSIGNMENT_PARAMS,
    ASSIGNMENTS,
    EXAMPLES,
    UNIFORM,
    build,
    data,
    data_ptrs,
    fragment_dtypes,
    framework_of_fragment,
    gathered,
    layouts_for,
    need,
)

RTOL = 1e-5
ATOL = 1e-6

ARITH = [
    ("+", operator.add),
    ("-", operator.sub),
    ("*", operator.mul),
    ("/", operator.truediv),
    ("//", operator.floordiv),
    ("%", operator.mod),
    ("**", operator.pow),
    ("==", operator.eq),
    ("!=", operator.ne),
    ("<", operator.lt),
    ("<=", operator.le),
    (">", operator.gt),
    (">=", operator.ge),
]


def close(got, want, rtol=RTOL, atol=ATOL):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


# -- operators over random layouts and every framework ----------------------------------
@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_binary_operators_match_numpy(assignment):
    need(assignment)

    @settings(max_examples=EXAMPLES[assignment])
    @given(layout=layouts_for(assignment))
    def run(layout):
        check_binary_operators(layout, assignment)

    run()


def check_binary_operators(layout, assignment):
    xa = data(layout.shape, "float32", seed=1, low=0.5, high=3)
    xb = data(layout.shape, "float32", seed=2, low=0.5, high=3)
    a = build(xa, layout, assignment)
    b = build(xb, layout, "numpy" if assignment != "numpy" else "torch" if need_ok("torch") else "numpy")
    for symbol, op in ARITH:
        out = op(a, b)
        assert out.layout == layout, symbol
        assert [f.framework for f in out.fragments] == [f.framework for f in a.fragments], symbol
        close(gathered(out), op(xa, xb))
        assert fragment_dtypes(out) == {out.dtype}


def need_ok(name):
    try:
        need(name)
    except pytest.skip.Exception:
        return False
    return True


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_scalars_reflected_and_unary_operators(assignment):
    need(assignment)

    @settings(max_examples=EXAMPLES[assignment])
    @given(layout=layouts_for(assignment))
    def run(layout):
        check_scalars_and_unary(layout, assignment)

    run()


def check_scalars_and_unary(layout, assignment):
    x = data(layout.shape, "float32", seed=3, low=0.5, high=3)
    a = build(x, layout, assignment)
    close(gathered(a + 2), x + 2)
    close(gathered(2 - a), 2 - x)
    close(gathered(3.0 / a), np.float32(3.0) / x)
    close(gathered(2 ** a), np.float32(2) ** x)
    close(gathered(a ** 2), x**2)
    close(gathered(7 // a), 7 // x)
    close(gathered(5 % a), 5 % x)
    close(gathered(-a), -x)
    close(gathered(+a), +x)
    close(gathered(abs(a - 2)), abs(x - 2))
    close(gathered(1 < a), 1 < x)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_integer_and_bitwise_operators(assignment):
    need(assignment)
    layout = UNIFORM
    xa = data(layout.shape, "int32", seed=4, low=-20, high=20)
    xb = data(layout.shape, "int32", seed=5, low=1, high=5)
    a, b = build(xa, layout, assignment), build(xb, layout, assignment)
    for op in (operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift,
               operator.floordiv, operator.mod, operator.add, operator.mul):
        got = gathered(op(a, b))
        np.testing.assert_array_equal(got, op(xa, xb))
    np.testing.assert_array_equal(gathered(~a), ~xa)
    np.testing.assert_array_equal(gathered(a & 6), xa & 6)
    np.testing.assert_array_equal(gathered(3 | a), 3 | xa)
    ba, bb = build(xa > 0, layout, assignment), build(xb > 2, layout, assignment)
    np.testing.assert_array_equal(gathered(ba & bb), (xa > 0) & (xb > 2))
    np.testing.assert_array_equal(gathered(~ba), ~(xa > 0))


def test_zero_d_arrays_of_every_framework_broadcast():
    need("torch", "jax")
    import jax.numpy as jnp
    import torch

    layout = Layout((6, 3), block=(2, 3), grid=(3, 1), devices=["cpu:1", "cpu:2", "cpu:3"])
    x = data(layout.shape, "float32", seed=6)
    for assignment in ASSIGNMENTS:
        a = build(x, layout, assignment)
        for zero_d in (np.float32(2.5), np.asarray(2.5, dtype=np.float32), torch.tensor(2.5), jnp.asarray(2.5)):
            out = a * zero_d
            close(gathered(out), x * np.float32(2.5))
            assert out.dtype == "float32"
            assert [f.framework for f in out.fragments] == [f.framework for f in a.fragments]
            close(gathered(zero_d - a), np.float32(2.5) - x)


def test_regular_arrays_of_rank_above_zero_are_refused():
    layout = Layout.slab((4,), 0, ["cpu", "cpu"])
    a = build(np.arange(4.0, dtype=np.float32), layout)
    with pytest.raises(TypeError, match="scatter"):
        dlmg.add(a, np.ones(4, dtype=np.float32))
    with pytest.raises(TypeError):
        a + np.ones(4, dtype=np.float32)  # NumPy defers (__array_ufunc__ = None), then ours refuses
    with pytest.raises(TypeError):
        a + "text"


# -- elementwise functions -----------------------------------------------------------------
UNARY = [
    # name, numpy reference, (low, high) of the inputs
    ("abs", np.abs, (-3, 3)),
    ("acos", np.arccos, (-0.9, 0.9)),
    ("arccos", np.arccos, (-0.9, 0.9)),
    ("acosh", np.arccosh, (1.1, 4)),
    ("asin", np.arcsin, (-0.9, 0.9)),
    ("asinh", np.arcsinh, (-3, 3)),
    ("atan", np.arctan, (-3, 3)),
    ("atanh", np.arctanh, (-0.9, 0.9)),
    ("ceil", np.ceil, (-3, 3)),
    ("cos", np.cos, (-3, 3)),
    ("cosh", np.cosh, (-3, 3)),
    ("exp", np.exp, (-3, 3)),
    ("expm1", np.expm1, (-3, 3)),
    ("floor", np.floor, (-3, 3)),
    ("isfinite", np.isfinite, (-3, 3)),
    ("isinf", np.isinf, (-3, 3)),
    ("isnan", np.isnan, (-3, 3)),
    ("log", np.log, (0.1, 4)),
    ("log1p", np.log1p, (0.1, 4)),
    ("log2", np.log2, (0.1, 4)),
    ("log10", np.log10, (0.1, 4)),
    ("logical_not", np.logical_not, (-1, 1)),
    ("negative", np.negative, (-3, 3)),
    ("positive", np.positive, (-3, 3)),
    ("reciprocal", np.reciprocal, (0.5, 3)),
    ("round", np.round, (-3, 3)),
    ("sign", np.sign, (-3, 3)),
    ("signbit", np.signbit, (-3, 3)),
    ("sin", np.sin, (-3, 3)),
    ("sinh", np.sinh, (-3, 3)),
    ("square", np.square, (-3, 3)),
    ("sqrt", np.sqrt, (0, 4)),
    ("tan", np.tan, (-1, 1)),
    ("tanh", np.tanh, (-3, 3)),
    ("trunc", np.trunc, (-3, 3)),
]

BINARY = [
    ("add", np.add, (-3, 3)),
    ("subtract", np.subtract, (-3, 3)),
    ("multiply", np.multiply, (-3, 3)),
    ("divide", np.divide, (0.5, 3)),
    ("pow", np.power, (0.5, 3)),
    ("power", np.power, (0.5, 3)),
    ("floor_divide", np.floor_divide, (0.5, 3)),
    ("remainder", np.remainder, (0.5, 3)),
    ("maximum", np.maximum, (-3, 3)),
    ("minimum", np.minimum, (-3, 3)),
    ("atan2", np.arctan2, (-3, 3)),
    ("arctan2", np.arctan2, (-3, 3)),
    ("hypot", np.hypot, (-3, 3)),
    ("copysign", np.copysign, (-3, 3)),
    ("logaddexp", np.logaddexp, (-3, 3)),
    ("nextafter", np.nextafter, (-3, 3)),
    ("equal", np.equal, (-1, 1)),
    ("not_equal", np.not_equal, (-1, 1)),
    ("less", np.less, (-3, 3)),
    ("less_equal", np.less_equal, (-3, 3)),
    ("greater", np.greater, (-3, 3)),
    ("greater_equal", np.greater_equal, (-3, 3)),
    ("logical_and", np.logical_and, (-1, 1)),
    ("logical_or", np.logical_or, (-1, 1)),
    ("logical_xor", np.logical_xor, (-1, 1)),
]


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_unary_functions_match_numpy(assignment):
    need(assignment)
    layout = UNIFORM
    for name, ref, (low, high) in UNARY:
        x = data(layout.shape, "float32", seed=7, low=low, high=high)
        if name == "logical_not":
            x = np.round(x)
        got = gathered(getattr(dlmg, name)(build(x, layout, assignment)))
        close(got, ref(x), rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_binary_functions_match_numpy(assignment):
    need(assignment)
    layout = UNIFORM
    for name, ref, (low, high) in BINARY:
        x1 = data(layout.shape, "float32", seed=8, low=low, high=high)
        x2 = data(layout.shape, "float32", seed=9, low=low, high=high)
        if (low, high) == (-1, 1):
            x1, x2 = np.round(x1), np.round(x2)
        a1, a2 = build(x1, layout, assignment), build(x2, layout, "numpy")
        close(gathered(getattr(dlmg, name)(a1, a2)), ref(x1, x2), rtol=2e-5, atol=2e-6)
    x = data(layout.shape, "float32", seed=10)
    a = build(x, layout, assignment)
    close(gathered(dlmg.maximum(a, 0.5)), np.maximum(x, np.float32(0.5)))
    close(gathered(dlmg.pow(2.0, a)), np.power(np.float32(2.0), x), rtol=2e-5)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_where_clip_astype_and_complex_parts(assignment):
    need(assignment)
    layout = UNIFORM
    x = data(layout.shape, "float32", seed=11)
    y = data(layout.shape, "float32", seed=12)
    a, b = build(x, layout, assignment), build(y, layout, assignment)
    close(gathered(dlmg.where(a > b, a, b)), np.where(x > y, x, y))
    close(gathered(dlmg.where(a > 0, a, 0.0)), np.where(x > 0, x, np.float32(0)))
    close(gathered(dlmg.clip(a, -1.0, 2.0)), np.clip(x, -1, 2))
    close(gathered(dlmg.clip(a, max=b)), np.minimum(x, y))
    for dtype in ("int32", "float32", "int8", "bool", "uint8"):
        out = dlmg.astype(abs(a) * 10, dtype)  # negative floats to unsigned: undefined
        assert out.dtype == dtype and fragment_dtypes(out) == {dtype}
        np.testing.assert_array_equal(gathered(out), (abs(x) * 10).astype(dtype))
    assert a.astype("float32", copy=False) is a
    if assignment in ("jax", "mixed"):
        with pytest.raises(DtypeError, match="x64"):
            a.astype("float64")
    z = data(layout.shape, "complex64", seed=13)
    c = build(z, layout, assignment)
    close(gathered(c.real), z.real)
    close(gathered(c.imag), z.imag)
    close(gathered(c.conj()), np.conj(z))
    close(gathered(dlmg.abs(c)), np.abs(z))
    close(gathered(c * c + 1), z * z + 1)


# -- mixed frameworks ---------------------------------------------------------------------
def test_first_operand_framework_wins_and_handover_is_zero_copy():
    need("torch", "jax")
    layout = Layout((12, 4), block=(2, 4), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    x, y = data(layout.shape, seed=14), data(layout.shape, seed=15)
    torch_first = build(x, layout, "torch")
    mixed = build(y, layout, "mixed")  # torch, numpy, jax
    assert [f.framework for f in mixed.fragments] == ["torch", "numpy", "jax"]
    seen = []

    def record(p, q):
        seen.append((type(q).__module__.partition(".")[0], int(q.data_ptr())))
        return p + q

    out = dlmg.map_fragments(record, torch_first, mixed)
    close(gathered(out), x + y)
    assert [m for m, _ in seen] == ["torch"] * 3
    assert [ptr for _, ptr in seen] == data_ptrs(mixed)  # handed over without a copy
    assert [f.framework for f in (mixed + torch_first).fragments] == ["torch", "numpy", "jax"]
    assert [f.framework for f in (torch_first + mixed).fragments] == ["torch"] * 3


def test_mixed_fragments_get_one_dtype():
    need("torch", "jax")
    layout = Layout.slab((9,), 0, ["cpu:0", "cpu:1", "cpu:2"])
    x = data(layout.shape, "int32", seed=16, low=1, high=9)
    a = build(x, layout, "mixed")  # torch, numpy, jax fragments
    # int32 / int32 is float32 in torch and JAX, float64 in NumPy: fragment 0 (torch) decides
    out = a / a
    assert out.dtype == "float32" and fragment_dtypes(out) == {"float32"}
    close(gathered(out), np.ones(9))
    out = dlmg.sqrt(a)
    assert fragment_dtypes(out) == {out.dtype}
    close(gathered(out), np.sqrt(x), rtol=1e-6)


# -- replicas and layouts -------------------------------------------------------------------
def test_replicated_inputs_give_replicated_outputs():
    need("torch")
    layout = Layout((6, 4), block=(3, 4), grid=(2, 1), devices=["cpu"] * 6)  # 3 replicas
    x = data(layout.shape, seed=17)
    a = build(x, layout, "torch")
    out = a * 2 + 1
    assert out.layout == layout and out.layout.nreplicas == 3
    for frag in out.fragments:
        np.testing.assert_allclose(frag.array.numpy(), (x * 2 + 1)[frag.layout.global_slices()], rtol=RTOL)


def test_layout_mismatch_names_both_layouts_and_redistribute():
    la = Layout.slab((6, 4), 0, ["cpu", "cpu"])
    lb = Layout.slab((6, 4), 1, ["cpu", "cpu"])
    a = build(data(la.shape), la)
    b = build(data(lb.shape), lb)
    # one namespace: dlmg's functions and the operators align as xp.add does, in a's layout
    total = a + b
    assert total.layout == la
    np.testing.assert_array_equal(gathered(total), gathered(a) + gathered(b))
    for same in (dlmg.add(a, b), dlmg.array_api.add(a, b)):
        assert same.layout == la
        np.testing.assert_array_equal(gathered(same), gathered(total))
    np.testing.assert_array_equal(gathered(dlmg.maximum(a, b)), np.maximum(gathered(a), gathered(b)))
    # MatX's rule (identical layouts, nothing moves) is dlmg.strict(): every implicit move is refused
    for attempt in (lambda: dlmg.maximum(a, b), lambda: dlmg.where(a > 0, a, b), lambda: a + b):
        with dlmg.strict(), pytest.raises(LayoutMismatchError) as info:
            attempt()
        msg = str(info.value)
        assert "strict" in msg and "redistribute" in msg
    with dlmg.strict():
        with pytest.raises(LayoutMismatchError, match="strict.*redistribute"):
            a + b
        with pytest.raises(LayoutMismatchError, match="strict"):
            a += b
    lc = Layout.slab((6, 4), 0, ["cpu", "cpu", "cpu"])
    with dlmg.strict(), pytest.raises(LayoutMismatchError):
        a * build(data(lc.shape), lc)


def test_same_distribution_with_other_block_values_is_accepted():
    # a block larger than its extent along a grid-1 mode changes nothing
    la = Layout((6, 4), block=(3, 4), grid=(2, 1), devices=["cpu", "cpu"])
    lb = Layout((6, 4), block=(3, 9), grid=(2, 1), devices=["cpu", "cpu"])
    x, y = data(la.shape, seed=1), data(la.shape, seed=2)
    close(gathered(build(x, la) + build(y, lb)), x + y)


def test_dtype_errors_are_clear():
    layout = Layout.slab((6,), 0, ["cpu", "cpu"])
    f = build(data(layout.shape, "float32"), layout)
    i = build(data(layout.shape, "int32"), layout)
    for attempt in (lambda: f & f, lambda: f | 1, lambda: ~f, lambda: i << 1.5, lambda: dlmg.bitwise_xor(f, i),
                    lambda: dlmg.floor(build(data(layout.shape, "bool"), layout))):
        with pytest.raises(DtypeError, match="not defined for"):
            attempt()
    c = build(data(layout.shape, "complex64"), layout)
    with pytest.raises(DtypeError):
        c < c
    with pytest.raises(DtypeError):
        dlmg.maximum(c, c)


# -- in-place forms -------------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_in_place_operators_write_into_the_fragments(framework):
    need(framework)
    layout = Layout((7, 3), block=(2, 2), grid=(2, 2), devices=["cpu"] * 4)
    x = data(layout.shape, seed=18, low=1, high=3)
    y = data(layout.shape, seed=19, low=1, high=3)
    a, b = build(x, layout, framework), build(y, layout, "mixed" if need_ok("jax") and need_ok("torch") else framework)
    ptrs = data_ptrs(a)
    arrays = [f.array for f in a.fragments]
    ident = id(a)
    want = x.copy()
    for iop, op in ((operator.iadd, operator.add), (operator.isub, operator.sub), (operator.imul, operator.mul),
                    (operator.itruediv, operator.truediv), (operator.ipow, operator.pow)):
        a = iop(a, b)
        want = op(want, y)
        assert id(a) == ident
        assert data_ptrs(a) == ptrs
        assert all(f.array is arr for f, arr in zip(a.fragments, arrays))
        close(gathered(a), want, rtol=1e-4)
    a += 2
    a *= np.float32(0.5)
    want = (want + 2) * np.float32(0.5)
    close(gathered(a), want, rtol=1e-4)
    assert data_ptrs(a) == ptrs
    i = build(data(layout.shape, "int32", seed=20), layout, framework)
    iptrs = data_ptrs(i)
    i //= 2
    i %= 3
    i <<= 1
    i |= 1
    np.testing.assert_array_equal(gathered(i), ((data(layout.shape, "int32", seed=20) // 2 % 3) << 1) | 1)
    assert data_ptrs(i) == iptrs


def test_a_small_operand_on_other_devices_is_broadcast_by_views_not_copied_out():
    """A row of scales on one device, broadcast against a matrix split over four: each device
    receives the row, not the row copied out to its fragment's size (NumPy fragments, whose
    buffers tracemalloc sees)."""
    layout = Layout.slab((40000, 8), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = data(layout.shape, seed=21)
    row = data((1, 8), seed=22)
    a = build(x.copy(), layout, "numpy")
    s = dlmg.scatter(row, Layout.single((1, 8), "cpu:0"))
    warm = build(x.copy(), layout, "numpy")
    warm *= s  # a first call fills the caches of layouts and plans, kept for the next calls
    del warm
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        a *= s
        in_place = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        b = a * s
        out_of_place = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    close(gathered(a), x * row)
    close(gathered(b), x * row * row)
    assert in_place < x.nbytes / 10, f"x *= row allocated {in_place} bytes for a {x.nbytes}-byte x"
    assert out_of_place < 1.1 * x.nbytes, f"x * row allocated {out_of_place} bytes for a {x.nbytes}-byte result"


def test_in_place_on_jax_fragments_replaces_them_in_the_same_tensor():
    need("jax")
    layout = Layout.slab((8, 2), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = data(layout.shape, seed=21)
    a = build(x, layout, "jax")
    same = a
    old = [f.array for f in a.fragments]
    a += 1
    a *= 3
    assert a is same
    assert all(f.array is not o for f, o in zip(a.fragments, old))
    assert [str(next(iter(f.array.devices())).id) for f in a.fragments] == ["0", "1", "2", "3"]
    close(gathered(same), (x + 1) * 3)
    close(np.concatenate([np.asarray(o) for o in old]), x)  # arrays handed out before keep their values
    i = build(data(layout.shape, "int32", seed=22), layout, "jax")
    i += 1
    assert i.dtype == "int32" and fragment_dtypes(i) == {"int32"}


def test_in_place_refuses_a_change_of_kind():
    layout = Layout.slab((6,), 0, ["cpu", "cpu"])
    i = build(data(layout.shape, "int32"), layout)
    before = gathered(i)
    for attempt in ("i += 1.5", "i /= 2", "i *= build(data(layout.shape, 'float32'), layout)"):
        with pytest.raises(DtypeError, match="in-place"):
            exec(attempt, {"i": i, "build": build, "data": data, "layout": layout})
    np.testing.assert_array_equal(gathered(i), before)
    f = build(data(layout.shape, "float32"), layout)
    f += build(data(layout.shape, "int32"), layout)  # int into float: fine
    assert f.dtype == "float32"


def test_in_place_on_a_replica_sharing_memory_applies_once():
    layout = Layout((4,), devices=["cpu", "cpu"])  # two replicas
    shared = np.arange(4, dtype=np.float32)
    a = dlmg.from_fragments([shared, shared], layout)
    a += 1
    np.testing.assert_array_equal(shared, np.arange(4) + 1)


# -- map_fragments and the dispatch -----------------------------------------------------------------
@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_map_fragments_runs_in_each_fragments_framework(assignment):
    need(assignment)
    layout = Layout((6, 5), block=(2, 5), grid=(3, 1), devices=["cpu:4", "cpu:5", "cpu:6"])
    x = data(layout.shape, seed=23)
    a = build(x, layout, assignment)
    seen = []

    def fn(xp, arr):
        seen.append(type(arr).__module__.partition(".")[0])
        return xp.tanh(arr) * 2

    close(gathered(dlmg.map_fragments(fn, a, namespace=True)), np.tanh(x) * 2)
    want = [framework_of_fragment(assignment, i) for i in range(3)]
    assert [{"jaxlib": "jax"}.get(m, m) for m in seen] == want


def test_map_fragments_out_writes_in_place_and_casts():
    need("torch")
    layout = Layout.slab((6, 2), 0, ["cpu", "cpu", "cpu"])
    x = data(layout.shape, seed=24)
    a = build(x, layout, "torch")
    out = build(np.zeros(layout.shape, np.float64), layout, "numpy")
    ptrs = data_ptrs(out)
    got = dlmg.map_fragments(lambda p: p * 2, a, out=out)
    assert got is out and data_ptrs(out) == ptrs and out.dtype == "float64"
    close(gathered(out), x * 2)


def test_map_fragments_rejects_results_of_another_shape():
    layout = Layout.slab((6,), 0, ["cpu", "cpu"])
    a = build(data(layout.shape), layout)
    with pytest.raises(FragmentError, match="its fragment's shape"):
        dlmg.map_fragments(lambda p: p[:1], a)


def test_map_fragments_results_of_another_framework_are_new_memory():
    # t.numpy() of a torch fragment is a NumPy view of the fragment's memory: the
    # result is copied (in the fragment's framework), while a NumPy result in new
    # memory is kept as it is
    need("torch")
    layout = Layout((12, 6), block=(3, 6), grid=(4, 1), devices=["cpu"] * 4)
    x = data(layout.shape, seed=5)
    dt = build(x, layout, "torch")
    viewed = dlmg.map_fragments(lambda v: v.numpy(), dt)
    assert viewed.frameworks == ("torch",)
    assert not set(data_ptrs(viewed)) & set(data_ptrs(dt))
    np.testing.assert_array_equal(gathered(viewed), x)
    doubled = dlmg.map_fragments(lambda v: v.numpy() * 2, dt)
    assert doubled.frameworks == ("numpy",)
    tripled = doubled * 3  # runs in NumPy, its fragments' framework
    assert tripled.frameworks == ("numpy",)
    np.testing.assert_allclose(gathered(tripled), x * 6, rtol=1e-6)


def test_a_failure_names_fragment_device_and_framework():
    need("torch", "jax")
    layout = Layout.slab((6,), 0, ["cpu:0", "cpu:1", "cpu:2"])
    a = build(data(layout.shape), layout, "mixed")  # torch, numpy, jax

    def write(p):
        p[...] = 0  # JAX arrays are immutable: fails on fragment 2
        return p

    with pytest.raises(FragmentError) as info:
        dlmg.map_fragments(write, a)
    msg = str(info.value)
    assert "fragment 2" in msg and "cpu:2" in msg and "jax" in msg
    assert info.value.__cause__ is not None
    assert info.value.fragment == 2 and info.value.framework == "jax"


def test_synchronize_and_truth_values():
    need("jax")
    layout = Layout.slab((4,), 0, ["cpu:0", "cpu:1"])
    a = build(data(layout.shape, low=1, high=2), layout, "jax")
    b = a * 2
    assert b.synchronize() is b
    dlmg.synchronize()
    one = build(np.array([3.0], np.float32), Layout.single((1,)))
    assert bool(one > 2) and not bool(one < 2)
    with pytest.raises(ValueError, match="ambiguous"):
        bool(a > 0)
    assert len({a, b}) == 2  # tensors stay hashable (by identity) although == is elementwise


# --------------------------------------------------------------------------
# reuse of temporaries: ``a * b + c`` writes the sum into the product's memory


def _elided() -> int:
    from dlmg.ops import pointwise

    return pointwise.ELIDED[0]


@pytest.mark.skipif(
    __import__("dlmg.ops.pointwise", fromlist=["_"])._TEMPORARY_REFS is None,
    reason="this interpreter does not tell temporaries from named values; reuse is off",
)
class TestTemporaryReuse:
    layout = dlmg.Layout.slab((8, 6), axis=0, devices=["cpu"] * 3)

    def _operands(self, framework="numpy", dtype="float64"):
        base = np.arange(48, dtype=dtype).reshape(8, 6)
        a = dlmg.scatter(base + 1, self.layout, framework=framework)
        b = dlmg.scatter(base * 2, self.layout, framework=framework)
        return base, a, b

    @pytest.mark.parametrize("framework", ["numpy", "torch"])
    def test_temporary_is_reused_and_result_is_right(self, framework):
        base, a, b = self._operands(framework)
        before = _elided()
        r = a * b + 3.0
        assert _elided() == before + 1
        np.testing.assert_array_equal(r.gather(framework="numpy"), (base + 1) * (base * 2) + 3.0)
        r = (a - b) * (a + b) / 2.0
        assert _elided() == before + 3
        np.testing.assert_allclose(r.gather(framework="numpy"), ((base + 1) ** 2 - (base * 2) ** 2) / 2.0)

    def test_named_results_are_never_overwritten(self):
        base, a, b = self._operands()
        before = _elided()
        t = a * b
        pointers = [f.array.ctypes.data for f in t.fragments]
        r = t + 1.0
        assert _elided() == before
        np.testing.assert_array_equal(t.gather(), (base + 1) * (base * 2))
        assert [f.array.ctypes.data for f in r.fragments] != pointers
        held = (a * b).fragments  # a reference to the fragments keeps the tensor's memory visible
        np.testing.assert_array_equal(np.concatenate([f.array for f in held]), (base + 1) * (base * 2))

    def test_inputs_and_exported_memory_are_never_overwritten(self):
        base, a, b = self._operands()
        r = a + 0.0 + 1.0  # the second + may reuse the first's result, never a's memory
        np.testing.assert_array_equal(a.gather(), base + 1)
        np.testing.assert_array_equal(r.gather(), base + 2)
        shared = a.to("torch")  # shares a's memory; it is no operator result
        before = _elided()
        shared + 1.0
        assert _elided() == before
        np.testing.assert_array_equal(a.gather(), base + 1)

    def test_dtype_changes_are_not_reused(self):
        base, a, b = self._operands(dtype="int32")
        before = _elided()
        r = (a * b) / 2  # int32 / int -> float64: cannot live in int32 memory
        assert r.dtype == "float64"
        r = (a * b) + 0.5
        assert r.dtype == "float64"
        assert _elided() == before
        r = (a * b) + 1
        assert _elided() == before + 1 and r.dtype == "int32"

    def test_autograd_results_are_not_reused(self):
        torch = pytest.importorskip("torch")
        w = torch.ones(8, 6, dtype=torch.float64, requires_grad=True)
        x = dlmg.from_fragments([w[0:3], w[3:6], w[6:8]], self.layout)
        before = _elided()
        y = x * 2.0 + 1.0
        assert _elided() == before
        assert all(f.array.requires_grad for f in y.fragments)


def test_map_fragments_is_per_fragment_and_apply_is_its_deprecated_name():
    x = np.arange(8.0)
    two = dlmg.scatter(x, Layout.slab((8,), 0, ["cpu", "cpu"]))
    four = dlmg.scatter(x, Layout.slab((8,), 0, ["cpu"] * 4))
    centred = [dlmg.map_fragments(lambda t: t - t.mean(), d).gather() for d in (two, four)]
    assert not np.array_equal(centred[0], centred[1])  # each fragment's own mean: the layout shows
    whole = two - dlmg.mean(two)  # dlmg's functions mean the whole tensor
    np.testing.assert_array_equal(whole.gather(), x - x.mean())
    with pytest.warns(DeprecationWarning, match="map_fragments"):
        old = dlmg.apply(lambda t: t * 2, two)
    np.testing.assert_array_equal(old.gather(), x * 2)
    with pytest.raises(FragmentError, match="its fragment's shape"):
        dlmg.map_fragments(lambda t: t[:1], two)
