"""One public function namespace: ``dlmg``'s functions are ``dlmg.array_api``'s.

Every name the two share is one object; the operators give what the functions give;
dlmg's extensions are keyword-only extras; MatX's rule (nothing moves implicitly) is
``dlmg.strict()``; every public function is a definition a reader can find with grep.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp
from dlmg import Layout
from dlmg.errors import LayoutError, LayoutMismatchError

ROOT = Path(dlmg.__file__).resolve().parent
ROWS = Layout.slab((6, 4), 0, ["cpu:0", "cpu:1"])
COLS = Layout.slab((6, 4), 1, ["cpu:0", "cpu:1"])


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


def test_every_shared_name_is_one_object():
    shared = _public(dlmg) & _public(xp)
    differ = sorted(n for n in shared if getattr(dlmg, n) is not getattr(xp, n))
    assert not differ, differ
    # every function of the namespace is dlmg's too
    functions = [n for n in xp.__all__ if callable(getattr(xp, n)) and not isinstance(getattr(xp, n), type)]
    assert not [n for n in functions if n not in dlmg.__all__ and not n.startswith("__")]
    assert dlmg.linalg is xp.linalg and dlmg.fft is xp.fft
    for n in ("add", "sum", "zeros", "matmul", "reshape", "where", "round"):
        assert getattr(dlmg, n) is getattr(xp, n)


def test_numpy_names_are_the_standard_functions():
    for alias, target in (("absolute", "abs"), ("power", "pow"), ("arctan2", "atan2"), ("around", "round"),
                          ("true_divide", "divide"), ("mod", "remainder")):
        assert getattr(dlmg, alias) is getattr(xp, target)


def _pair():
    x = np.arange(24.0).reshape(6, 4)
    return x, dlmg.scatter(x, ROWS), dlmg.scatter(x[::-1].copy(), COLS)


def test_operators_give_what_the_functions_give():
    x, a, b = _pair()
    y = x[::-1]
    for op, fn, want in ((lambda p, q: p + q, dlmg.add, x + y), (lambda p, q: p - q, dlmg.subtract, x - y),
                         (lambda p, q: p * q, dlmg.multiply, x * y), (lambda p, q: p < q, dlmg.less, x < y),
                         (lambda p, q: p ** q, dlmg.pow, x ** y)):
        by_op, by_fn = op(a, b), fn(a, b)
        assert by_op.layout == by_fn.layout == ROWS  # the first operand's layout: b is aligned to it
        np.testing.assert_array_equal(by_fn.gather(), by_op.gather())
        np.testing.assert_allclose(by_fn.gather(), want)
    np.testing.assert_array_equal((a + 1).gather(), dlmg.add(a, 1).gather())
    np.testing.assert_allclose((a @ b.T).gather(), dlmg.matmul(a, b.T).gather())
    np.testing.assert_allclose(dlmg.where(a > 10, a, b).gather(), np.where(x > 10, x, y))


def test_strict_keeps_the_rule_that_nothing_moves_implicitly():
    _, a, b = _pair()
    assert dlmg.explain(a, b).moves_data
    with dlmg.strict():
        for attempt in (lambda: dlmg.add(a, b), lambda: a + b, lambda: dlmg.clip(a, b, None)):
            with pytest.raises(LayoutMismatchError, match="strict"):
                attempt()
        assert dlmg.add(a, a).layout == ROWS  # one layout: nothing to move
        with pytest.raises(LayoutError):  # a reshape that would move data
            dlmg.reshape(b, (24,))
    with pytest.raises(LayoutError):
        dlmg.reshape(b, (24,), copy=False)
    np.testing.assert_array_equal(dlmg.reshape(b, (24,)).gather(), b.gather().reshape(24))


def test_reductions_over_every_mode_give_a_zero_d_tensor():
    x, a, _ = _pair()
    for name in ("sum", "prod", "min", "max", "mean", "var", "std", "all", "any", "argmax", "argmin"):
        got = getattr(dlmg, name)(a)
        assert isinstance(got, dlmg.DistributedTensor) and got.shape == (), name
        np.testing.assert_allclose(float(got), float(getattr(np, name)(x)), rtol=1e-12)
    assert a.sum().layout == dlmg.sum(a).layout
    assert dlmg.sum(a).device == a.device  # on the input's devices
    assert float(dlmg.mean(a, dtype="float32")) == pytest.approx(x.mean())
    assert float(dlmg.var(a, ddof=1)) == pytest.approx(x.var(ddof=1))


def test_creation_takes_the_standard_arguments_and_dlmgs_as_keywords():
    z = dlmg.zeros((4, 3))
    assert z.dtype == "float64" and z.shape == (4, 3)
    lay = Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"])
    t = dlmg.ones(layout=lay, dtype="float32", framework="torch" if _have("torch") else "numpy")
    assert t.layout == lay and t.dtype == "float32"
    f = dlmg.full((4, 3), 2, layout=lay)
    assert f.dtype == "int64" and (f.gather() == 2).all()
    assert dlmg.empty(layout=lay).layout == lay
    for fn in (dlmg.zeros, dlmg.ones, dlmg.empty, dlmg.full):
        params = inspect.signature(fn).parameters
        assert params["layout"].kind is params["framework"].kind is inspect.Parameter.KEYWORD_ONLY
        with pytest.raises(TypeError, match="layout="):
            fn(lay) if fn is not dlmg.full else fn(lay, 1.0)
    assert dlmg.zeros_like(f, device="cpu:1").device == dlmg.Device("cpu", 1)


def test_contractions_take_pending_and_layout_as_keywords():
    x, a, _ = _pair()
    pending = dlmg.matmul(a.T, a, pending=True)  # a split contracted mode: addends on both devices
    assert pending.layout.partial == "sum"
    np.testing.assert_allclose(pending.gather(), x.T @ x)
    value = a.T @ a
    assert value.layout.partial is None and value.layout == dlmg.matmul(a.T, a).layout
    target = Layout.slab((4, 4), 1, ["cpu:0", "cpu:1"])
    placed = dlmg.matmul(a.T, a, layout=target)
    assert placed.layout == target
    np.testing.assert_allclose(placed.gather(), x.T @ x)
    np.testing.assert_allclose(dlmg.tensordot(a, a, axes=([0], [0]), layout=target).gather(), x.T @ x)
    np.testing.assert_allclose(dlmg.vecdot(a, a, axis=0).gather(), (x * x).sum(axis=0))  # any axis
    for fn in (dlmg.matmul, dlmg.tensordot, dlmg.vecdot):
        params = inspect.signature(fn).parameters
        assert params["pending"].kind is params["layout"].kind is inspect.Parameter.KEYWORD_ONLY


def test_every_public_function_is_a_definition_grep_finds():
    sources = "\n".join(p.read_text() for p in ROOT.rglob("*.py"))
    assert "globals()[" not in sources
    missing = []
    for name in dlmg.__all__:
        obj = getattr(dlmg, name)
        if inspect.isfunction(obj) and not re.search(rf"^\s*def {name}\(|^{name} = ", sources, re.M):
            missing.append(name)
    assert not missing, missing


def _have(framework: str) -> bool:
    try:
        __import__(framework)
    except ImportError:
        return False
    return True
