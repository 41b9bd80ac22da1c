"""No read of a pending tensor's values returns an addend.

A tensor whose layout is ``partial="sum"`` holds in its replicas the addends of
its value. Every public function of :mod:`dlmg.array_api` and of :mod:`dlmg`
that takes a tensor, and every public method and property of
:class:`~dlmg.DistributedTensor`, found through ``dir()`` (so new ones join on
their own), is applied to a pending tensor and to its resolved twin: the
results must hold equal values (both may raise, with the same error type).
Writes into a pending tensor are refused, naming ``redistribute``.
"""

from __future__ import annotations

import cmath
import copy
import inspect
import types
import warnings

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

D4 = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
RNG = np.random.default_rng(7)
M = RNG.standard_normal((4, 8))
VALUE = M @ M.T  # symmetric positive definite: every linalg function has something to do


def pending() -> dlmg.DistributedTensor:
    """``M @ M.T`` contracted over the split mode and left pending: 4 addends over 4 devices."""
    m = dlmg.scatter(M, Layout.slab((4, 8), 1, D4))
    c = dlmg.einsum("ik,jk->ij", m, m, pending=True)
    assert c.layout.partial == "sum" and c.layout.nreplicas == 4
    return c


def twin(x: dlmg.DistributedTensor) -> dlmg.DistributedTensor:
    """The resolved value of ``x`` as an ordinary tensor."""
    lay = x.layout
    return x.redistribute(lay.replace(devices=lay.devices[: lay.ngrid], ranks=lay.ranks[: lay.ngrid], partial=None))


def scalar(x: dlmg.DistributedTensor) -> dlmg.DistributedTensor:
    """A 0-d tensor: ``x``'s trace, pending when ``x`` is (a contraction of a pending lead)."""
    return dlmg.einsum("ii->", x, pending=True)


# -- what each public name is called with -------------------------------------------------
#: Arguments per name (x: the tensor, pending or its twin); names not here get the tensor
#: for every required parameter (one-operand and two-operand elementwise functions...).
RECIPES = {
    "astype": lambda f, x: f(x, "float32"),
    "asarray": lambda f, x: [f(x), f(x, copy=True), f(x, dtype="float32")],
    "broadcast_to": lambda f, x: f(x, (2, 4, 4)),
    "reshape": lambda f, x: f(x, (16,)),
    "permute_dims": lambda f, x: f(x, (1, 0)),
    "transpose": lambda f, x: f(x),
    "expand_dims": lambda f, x: f(x, axis=0),
    "squeeze": lambda f, x: f(xp.reshape(x, (1, 4, 4)), axis=0),
    "moveaxis": lambda f, x: f(x, 0, 1),
    "repeat": lambda f, x: f(x, 2, axis=0),
    "tile": lambda f, x: f(x, (1, 2)),
    "roll": lambda f, x: f(x, 1, axis=0),
    "take": lambda f, x: f(x, xp.asarray(np.array([2, 0])), axis=0),
    "take_along_axis": lambda f, x: f(x, xp.asarray(np.zeros((4, 1), dtype=np.int64)), axis=1),
    "searchsorted": lambda f, x: f(xp.sort(xp.reshape(x, (16,))), xp.reshape(x, (16,))),
    "concat": lambda f, x: f([x, x], axis=0),
    "stack": lambda f, x: f([x, x]),
    "unstack": lambda f, x: f(x),
    "broadcast_arrays": lambda f, x: f(x, x),
    "meshgrid": lambda f, x: f(xp.reshape(x, (16,)), xp.reshape(x, (16,))),
    "where": lambda f, x: f(x > 5.0, x, -x),
    "clip": lambda f, x: f(x, 0.0, 5.0),
    "tensordot": lambda f, x: f(x, x, axes=1),
    "vecdot": lambda f, x: f(x, x),
    "outer": lambda f, x: f(xp.reshape(x, (16,)), xp.reshape(x, (16,))),
    "matrix_power": lambda f, x: f(x, 2),
    "cross": lambda f, x: f(x[:, :3], x[:, 1:]),
    "solve": lambda f, x: f(x, x),
    "einsum": lambda f, x: f("ij,jk->ik", x, x),
    "einsum_plan": None,  # a plan, not values: the pending operand is an input the plan resolves
    "full_like": lambda f, x: f(x, 2.5),
    "round": lambda f, x: f(x),
    "around": lambda f, x: f(x, 1),
    "isclose": lambda f, x: f(x, x * 1.0),
    "allclose": lambda f, x: f(x, x * 1.0),
    "map_fragments": lambda f, x: f(lambda a: a * a, x),
    "apply": lambda f, x: f(lambda a: a * a, x),
    "fuse": lambda f, x: f(lambda a: a * a)(x),
    "cumsum": lambda f, x: f(x, axis=0),
    "cumulative_sum": lambda f, x: f(x, axis=0),
    "cumulative_prod": lambda f, x: f(x, axis=0),
    "diff": lambda f, x: f(x, axis=0),
    "bitwise_left_shift": lambda f, x: f(xp.astype(x, xp.int64), 1),
    "bitwise_right_shift": lambda f, x: f(xp.astype(x, xp.int64), 1),
    "left_shift": lambda f, x: f(xp.astype(x, xp.int64), 1),
    "right_shift": lambda f, x: f(xp.astype(x, xp.int64), 1),
    "bitwise_and": lambda f, x: f(xp.astype(x, xp.int64), 3),
    "bitwise_or": lambda f, x: f(xp.astype(x, xp.int64), 3),
    "bitwise_xor": lambda f, x: f(xp.astype(x, xp.int64), 3),
    "bitwise_invert": lambda f, x: f(xp.astype(x, xp.int64)),
    "invert": lambda f, x: f(xp.astype(x, xp.int64)),
    "fftshift": lambda f, x: f(x),
    "to_device": lambda f, x: f(x, "cpu:1"),
    "save": None,  # its own test below (a path)
    "dcp_save": None,  # needs torch.distributed: tests/test_pending_multiprocess.py
    "to_dtensor": None,  # needs torch.distributed; a pending sum maps to DTensor's Partial
}

#: Public names of dlmg that take no tensor, each with why.
NO_TENSOR = {
    # making tensors from shapes, values, arrays or other libraries' objects (from_dlpack: a tensor
    # of several fragments, a pending one included, is no single DLPack buffer and is refused)
    "arange", "empty", "eye", "from_dlpack", "full", "linspace", "ones", "zeros", "fftfreq",
    "rfftfreq", "from_fragments", "from_pointers", "scatter", "from_jax", "from_dtensor", "from_partitioned",
    "load", "dcp_load", "saved_layout",
    # dtypes, devices, layouts, frameworks, policies: no values
    "can_cast", "finfo", "iinfo", "isdtype", "result_type", "as_device", "adapter_for", "framework_of",
    "get_adapter", "default_layout", "get_default_layout", "set_default_layout", "layout_for",
    "layout_from_sharding", "sharding_from_layout", "to_sharding", "delegation", "delegation_enabled",
    "plan_redistribution", "__array_namespace_info__", "synchronize",
    # what would move and the context that refuses moves: layouts, no values
    "explain", "strict", "strict_enabled",
}


def _public_functions():
    found = {}
    for owner, prefix in ((xp, "xp."), (xp.linalg, "xp.linalg."), (xp.fft, "xp.fft."), (dlmg, "dlmg."),
                          (dlmg.linalg, "dlmg.linalg."), (dlmg.fft, "dlmg.fft.")):
        for name in owner.__all__:
            fn = getattr(owner, name)
            if not callable(fn) or inspect.isclass(fn) or isinstance(fn, types.ModuleType):
                continue
            if isinstance(fn, type(np.float32)) or name in NO_TENSOR:
                continue
            found[prefix + name] = fn
    return found


FUNCTIONS = _public_functions()


def _call(name, fn, x):
    base = name.rpartition(".")[2]
    recipe = RECIPES.get(base, False)
    if recipe is not False:
        return recipe(fn, x)
    sig = inspect.signature(fn)
    required = [p for p in sig.parameters.values() if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return fn(*[x] * max(len(required), 1))


def _values(result):
    """``result`` with every tensor gathered (as NumPy), for comparison."""
    if isinstance(result, dlmg.DistributedTensor):
        return np.asarray(result.gather(framework="numpy"))
    if isinstance(result, types.GeneratorType):
        result = list(result)
    if isinstance(result, (tuple, list)):
        return [_values(r) for r in result]
    if isinstance(result, dict) and "partitions" in result:
        return _values(dlmg.from_partitioned(result))
    return result


def _same(got, want, what):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), what
        for g, w in zip(got, want):
            _same(g, w, what)
        return
    if isinstance(want, np.ndarray) or isinstance(got, np.ndarray):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        if got.dtype.kind in "fc":
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, equal_nan=True, err_msg=what)
        else:
            np.testing.assert_array_equal(got, want, err_msg=what)
        return
    if isinstance(want, (float, complex)) and isinstance(got, (float, complex)):
        assert cmath.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9) or (cmath.isnan(got) and cmath.isnan(want)), what
        return
    assert got == want, f"{what}: {got!r} != {want!r}"


def _outcome(run, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # log of negatives, divisions by zero: NaN alike on both sides
        try:
            return "value", _values(run(x))
        except Exception as exc:  # noqa: BLE001 - the error's type is compared
            return "error", type(exc)


def _agree(run, what, make=pending):
    c = make()
    t = twin(c)
    kind, got = _outcome(run, c)
    want_kind, want = _outcome(run, t)
    assert kind == want_kind, f"{what}: the pending tensor gave {kind} {got!r}, its value {want_kind} {want!r}"
    if kind == "error":
        assert got is want, f"{what}: {got.__name__} on the pending tensor, {want.__name__} on its value"
    else:
        _same(got, want, what)
    return c


@pytest.mark.parametrize("name", sorted(n for n in FUNCTIONS if RECIPES.get(n.rpartition(".")[2], False)
                                        is not None))
def test_every_public_function_reads_the_value(name):
    fn = FUNCTIONS[name]
    _agree(lambda x: _call(name, fn, x), name)


# -- the methods and properties of the tensor ---------------------------------------------
#: What the tensor's methods and properties are called with (x: the tensor).
METHOD_RECIPES = {
    "astype": lambda x: x.astype("float32"),
    "reshape": lambda x: x.reshape(16),
    "permute_dims": lambda x: x.permute_dims((1, 0)),
    "transpose": lambda x: x.transpose(),
    "to": lambda x: x.to("torch"),
    "to_device": lambda x: x.to_device("cpu:2"),
    "to_jax": None,  # JAX narrows float64 unless x64 is on: test_to_jax_exports_the_value
    "gather": lambda x: x.gather(),
    "tolist": lambda x: x.tolist(),
    "cumsum": lambda x: x.cumsum(axis=1),
    "fragment": None, "fragment_at": None, "fragment_for": None, "fragments_on": None,  # fragments, not values
    "local_fragments": None,
    "devices": None, "device": None, "frameworks": None,  # where, not what
    "redistribute": None, "plan_redistribution": None,  # the resolution itself, and its plan
    "register_method": None, "synchronize": None,
    "to_dtensor": None,  # needs torch.distributed; a pending sum maps to DTensor's Partial
    # a pending tensor of several fragments is no single buffer: refused, as for any such tensor
    "__dlpack__": None, "__dlpack_device__": None,
    "__hash__": None,
    # the frameworks' protocols run dlmg's functions (tested above); called below through NumPy
    "__array_ufunc__": None, "__array_function__": None, "__torch_function__": None, "__jax_array__": None,
    "__array_priority__": None, "__array_namespace__": None,
    "__getitem__": lambda x: [x[0, 0], x[0], x[:, 1:3], x[::-1], x[1, ...], x[None], x[x > 5.0]],
    "__iter__": lambda x: list(x),
    "__len__": lambda x: len(x),
    "__copy__": lambda x: copy.copy(x),
    "__deepcopy__": lambda x: copy.deepcopy(x),
    "__repr__": lambda x: repr(x).rpartition(",\n")[0],  # the values (the layout line differs)
    "__str__": lambda x: str(x).rpartition("\n(")[0],
    "__format__": lambda x: [f"{x}".rpartition("\n(")[0], f"{scalar(x):.6f}"],
    "__bool__": lambda x: bool(scalar(x) > 0.0),
    "__int__": lambda x: int(scalar(x)),
    "__float__": lambda x: float(scalar(x)),
    "__complex__": lambda x: complex(scalar(x)),
    "__index__": lambda x: scalar(x).__index__(),
    "item": lambda x: scalar(x).item(),
    "__round__": lambda x: round(x, 1),
    "__array__": lambda x: x.__array__(),
    "__matmul__": lambda x: x @ x,
    "__rmatmul__": lambda x: x.__rmatmul__(x),
}

_OBJECT = set(dir(object)) | {"__dict__", "__module__", "__slots__", "__annotations__", "__weakref__",
                             "__getstate__", "_CORE"}
#: Writes: refused into a pending tensor unless the operation keeps the pending sum.
WRITES = {"__setitem__", *(n for n in dir(dlmg.DistributedTensor) if n.startswith("__i")
                           and n not in ("__init__", "__init_subclass__", "__index__", "__int__", "__iter__",
                                         "__invert__"))}
METHODS = sorted(n for n in dir(dlmg.DistributedTensor)
                 if (not n.startswith("_") or n.startswith("__")) and n not in _OBJECT | WRITES
                 and METHOD_RECIPES.get(n, False) is not None)


def _method_call(name, x):
    recipe = METHOD_RECIPES.get(name, False)
    if recipe is not False:
        return recipe(x)
    attr = getattr(type(x), name)
    if isinstance(attr, property):
        return getattr(x, name)
    required = [p for p in list(inspect.signature(attr).parameters.values())[1:] if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return getattr(x, name)(*[x] * len(required))


@pytest.mark.parametrize("name", METHODS)
def test_every_method_and_property_reads_the_value(name):
    _agree(lambda x: _method_call(name, x), f"DistributedTensor.{name}")


def test_the_skipped_names_still_exist():
    """A skip-list entry that no longer names anything is removed, so the lists stay honest."""
    for name, recipe in METHOD_RECIPES.items():
        assert hasattr(dlmg.DistributedTensor, name), name
    names = {n.rpartition(".")[2] for n in FUNCTIONS} | NO_TENSOR
    public = {n for owner in (xp, xp.linalg, xp.fft, dlmg, dlmg.linalg, dlmg.fft) for n in owner.__all__}
    for name in NO_TENSOR:
        assert name in public, name
    assert {"matmul", "sum", "reshape", "exp", "concat", "save"} <= names


@pytest.mark.parametrize("name", sorted(WRITES))
def test_writes_are_refused_or_keep_the_pending_sum(name):
    c = pending()
    before = [np.array(f.array) for f in c.fragments]
    if name == "__setitem__":
        with pytest.raises(dlmg.LayoutError, match="redistribute"):
            c[0, 0] = 5.0
    else:
        operand = 2 if name in ("__ilshift__", "__irshift__", "__iand__", "__ior__", "__ixor__", "__imod__",
                                "__ifloordiv__", "__ipow__") else 2.0
        try:
            out = getattr(c, name)(operand)
        except (dlmg.LayoutError, dlmg.DtypeError, TypeError) as exc:
            if isinstance(exc, dlmg.LayoutError):
                assert "redistribute" in str(exc)
            for f, b in zip(c.fragments, before):  # nothing written
                np.testing.assert_array_equal(f.array, b)
            return
        assert out is c and c.layout.partial == "sum"  # kept: x *= 2, x /= 2 on every addend
        np.testing.assert_allclose(c.gather(), getattr(VALUE.copy(), name)(operand))


def test_in_place_sums_of_pending_tensors_alike_keep_it():
    c, d = pending(), pending()
    c += d
    c -= d * 0.5
    assert c.layout.partial == "sum"
    np.testing.assert_allclose(c.gather(), 1.5 * VALUE)


def test_assigning_a_pending_value_into_a_tensor_writes_its_value():
    t = dlmg.zeros(layout=Layout.slab((4, 4), 0, D4[:2]), dtype="float64")
    t[:] = pending()
    np.testing.assert_allclose(t.gather(), VALUE)
    t += pending()
    np.testing.assert_allclose(t.gather(), 2 * VALUE)


# -- the cases of the report, one by one ---------------------------------------------------
def test_the_reported_reads_return_values():
    D = D4
    A, B = RNG.standard_normal((4, 8)), RNG.standard_normal((8, 6))
    a, b = dlmg.scatter(A, Layout.slab((4, 8), 1, D)), dlmg.scatter(B, Layout.slab((8, 6), 0, D))
    C = A @ B
    c = dlmg.einsum("ik,kj->ij", a, b, pending=True)
    assert c.layout.partial == "sum"
    assert float(c[0, 0]) == pytest.approx(C[0, 0])
    np.testing.assert_allclose(c[0].gather(), C[0])
    np.testing.assert_allclose(c[:, 1:3].gather(), C[:, 1:3])
    np.testing.assert_allclose(c[::-1].gather(), C[::-1])
    np.testing.assert_allclose(c.T.gather(), C.T)
    np.testing.assert_allclose(c.mT.gather(), C.T)
    np.testing.assert_allclose(dlmg.reshape(c, (24,)).gather(), C.reshape(24))
    np.testing.assert_allclose(xp.permute_dims(c, (1, 0)).gather(), C.T)
    np.testing.assert_allclose(np.stack([r.gather() for r in list(c)]), C)
    assert float(c[0:1, 0:1]) == pytest.approx(C[0, 0])
    assert float(xp.sum(c)) == pytest.approx(C.sum())
    assert xp.sum(c).item() == pytest.approx(C.sum())
    assert dlmg.sum(c, axis=1)[0].item() == pytest.approx(C.sum(axis=1)[0])
    np.testing.assert_allclose((c @ c.mT).gather(), C @ C.T)
    np.testing.assert_allclose(dlmg.einsum("ii->i", c[:, :4]).gather(), np.diag(C[:, :4]))
    np.testing.assert_allclose(xp.linalg.inv(c[:, :4]).gather(), np.linalg.inv(C[:, :4]))
    np.testing.assert_allclose(copy.deepcopy(c).gather(), C)
    np.testing.assert_allclose(c.copy().gather(), C)
    shown = np.array2string(C[0], separator=", ")[:8]
    assert shown in repr(c) and shown in str(c) and shown in f"{c}"
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        c[0, 0] = 5
    np.testing.assert_allclose(c.gather(), C)  # untouched


def test_linear_operations_keep_the_pending_sum():
    c = pending()
    for view, want in ((c.T, VALUE.T), (c.mT, VALUE.T), (xp.permute_dims(c, (1, 0)), VALUE.T),
                       (xp.matrix_transpose(c), VALUE.T), (dlmg.reshape(c, (16,)), VALUE.reshape(16)),
                       (c.reshape(2, 8), VALUE.reshape(2, 8)), (c * 3.0, 3 * VALUE), (-c, -VALUE),
                       (2.0 * c.T - c, 2 * VALUE.T - VALUE), (dlmg.sum(c, axis=0), VALUE.sum(axis=0)),
                       (xp.expand_dims(c, axis=1), VALUE[:, None]), (xp.moveaxis(c, 0, 1), VALUE.T),
                       (xp.expand_dims(c.T, axis=0), VALUE.T[None]),
                       (xp.concat([c, 2.0 * c]), np.concatenate([VALUE, 2 * VALUE])),
                       (xp.concat([c, -c], axis=1), np.concatenate([VALUE, -VALUE], axis=1)),
                       (xp.stack([c, c * 3.0], axis=1), np.stack([VALUE, 3 * VALUE], axis=1))):
        assert view.layout.partial == "sum", view.layout
        np.testing.assert_allclose(view.gather(), want)


def test_save_writes_the_value(tmp_path):
    dlmg.save(tmp_path / "one", pending())
    np.testing.assert_allclose(dlmg.load(tmp_path / "one").gather(), VALUE)
    dlmg.save(tmp_path / "two", {"c": pending(), "t": twin(pending())})
    loaded = dlmg.load(tmp_path / "two")
    np.testing.assert_allclose(loaded["c"].gather(), VALUE)


def test_to_jax_exports_the_value():
    jax = pytest.importorskip("jax")
    m = dlmg.scatter(M.astype(np.float32), Layout.slab((4, 8), 1, D4))
    c = dlmg.einsum("ik,jk->ij", m, m, pending=True)
    np.testing.assert_allclose(np.asarray(jax.device_get(c.to_jax())), VALUE, rtol=1e-5)


def test_numpy_protocols_read_the_value():
    c = pending()
    np.testing.assert_allclose(np.exp(c).gather(), np.exp(VALUE))
    np.testing.assert_allclose(np.sum(c, axis=0).gather(), VALUE.sum(axis=0))
    assert float(np.sum(c)) == pytest.approx(VALUE.sum())


# -- @ is matmul: one rule for when a contraction is left pending --------------------------
@pytest.mark.parametrize("policy", ["single", "slab"])
def test_the_operator_is_the_namespace_matmul(policy):
    full = RNG.standard_normal((8, 3))
    x = dlmg.scatter(full, Layout.slab(full.shape, 0, D4))  # row slabs: x.T @ x contracts the split mode
    with dlmg.default_layout(policy, devices=D4):
        op, fn = x.T @ x, xp.matmul(x.T, x)
        assert op.layout.partial is None and fn.layout.partial is None
        assert op.layout == fn.layout
        gram = full.T @ full
        for got, want in ((op, gram), (fn, gram), ((x.T @ x).T, gram.T), (x.T @ x + 1.0, gram + 1.0),
                          (dlmg.matmul(x.T, x), gram), (dlmg.einsum("ki,kj->ij", x, x), gram),
                          (dlmg.tensordot(x.T, x, axes=1), gram), (xp.tensordot(x.T, x, axes=1), gram)):
            assert got.layout.partial is None
            np.testing.assert_allclose(got.gather(), want, rtol=1e-12, atol=1e-12)


def test_a_pending_sum_only_when_asked():
    full = RNG.standard_normal((8, 3))
    x = dlmg.scatter(full, Layout.slab(full.shape, 0, D4))
    asked = [dlmg.matmul(x.T, x, pending=True), dlmg.einsum("ki,kj->ij", x, x, pending=True),
             dlmg.tensordot(x.T, x, axes=1, pending=True), dlmg.dot(x.T, x, pending=True),
             dlmg.einsum("ki,kj->ij", x, x, layout=Layout((3, 3), devices=D4, partial="sum"))]
    for got in asked:
        assert got.layout.partial == "sum" and got.layout.nreplicas == 4
        np.testing.assert_allclose(got.gather(), full.T @ full)
    plan = dlmg.einsum_plan("ki,kj->ij", x, x)
    assert plan.out.partial is None and "resolve" in str(plan)  # the resolution is a step of the plan
    assert dlmg.einsum_plan("ki,kj->ij", x, x, pending=True).out.partial == "sum"
