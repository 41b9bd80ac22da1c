"""The aliasing rule, as a property: results never share memory with inputs.

For every operation and every framework assignment (NumPy, torch, and
tensors mixing torch, NumPy and JAX fragments): a result's fragments are
writable, writing into every fragment of a result leaves every input
unchanged, and writing into every input leaves the result unchanged. JAX arrays cannot be written; their fragments take part
as inputs.

The documented exceptions share memory on purpose, and the last tests prove
that they do: ``to()`` (zero-copy hand-over), ``redistribute`` (fragments
that stay where they are are reused) and exporting a fragment through DLPack.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlmg  # noqa: E402
from dlmg.ops.pointwise import FUNCTIONS as _FUNCTIONS  # noqa: E402

from _ops_support import build, data, need  # noqa: E402

EXAMPLES = int(os.environ.get("DLMG_ALIASING_EXAMPLES", "1"))
ASSIGNMENTS = ["numpy", "torch", "mixed"]

# Layouts whose last mode stays whole (matmul, fft) and whose fragments sit on
# JAX's CPU devices 0..3, so mixed tensors really put JAX fragments there.
LAYOUTS = st.sampled_from([
    dlmg.Layout((4, 3), block=(2, 3), grid=(2, 1), devices=["cpu:0", "cpu:1"]),
    dlmg.Layout((4, 3), block=(1, 3), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"]),
    dlmg.Layout((5, 3), block=(2, 3), grid=(2, 1), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"]),
])
SQUARE = dlmg.Layout((4, 3, 3), block=(2, 3, 3), grid=(2, 1, 1), devices=["cpu:0", "cpu:1"])


def _kind_dtype(kinds: frozenset[str] | None) -> str:
    if kinds is None or "f" in kinds:
        return "float32"
    return "int32"


def _ops() -> list[tuple[str, object, str, object]]:
    """(name, function of (x, y), dtype, layout or None) for every operation."""
    out = []
    for name, (_std, nargs, kinds, _doc) in _FUNCTIONS.items():
        fn = getattr(dlmg, name)
        call = (lambda f: lambda x, y: f(x))(fn) if nargs == 1 else (lambda f: lambda x, y: f(x, y))(fn)
        out.append((name, call, _kind_dtype(kinds), None))
    ops = {
        "x + y": lambda x, y: x + y, "x - 1": lambda x, y: x - 1, "2 * x": lambda x, y: 2 * x,
        "x / y": lambda x, y: x / y, "x ** 2": lambda x, y: x**2, "x // 3": lambda x, y: x // 3,
        "x % 3": lambda x, y: x % 3, "-x": lambda x, y: -x, "+x": lambda x, y: +x, "abs(x)": lambda x, y: abs(x),
        "x < y": lambda x, y: x < y, "x == y": lambda x, y: x == y, "x.conj()": lambda x, y: x.conj(),
        "x.real": lambda x, y: x.real, "x.imag": lambda x, y: x.imag,
        "astype same": lambda x, y: dlmg.astype(x, x.dtype), "astype float64": lambda x, y: dlmg.astype(x, "float32"),
        "where": lambda x, y: dlmg.where(x < y, x, y), "clip": lambda x, y: dlmg.clip(x, -1, 1),
        "clip none": lambda x, y: dlmg.clip(x), "apply identity": lambda x, y: dlmg.apply(lambda a: a, x),
        "fuse": lambda x, y: dlmg.fuse(lambda a, b: a * b + 1)(x, y),
        "sum axis 1": lambda x, y: dlmg.sum(x, axis=1), "sum axis 0": lambda x, y: dlmg.sum(x, axis=0),
        "sum axis ()": lambda x, y: dlmg.sum(x, axis=()), "max axis 1": lambda x, y: dlmg.max(x, axis=1),
        "mean axis 1 keepdims": lambda x, y: dlmg.mean(x, axis=1, keepdims=True),
        "argmax axis 1": lambda x, y: dlmg.argmax(x, axis=1), "prod": lambda x, y: dlmg.prod(x),
        "any axis ()": lambda x, y: dlmg.any(x, axis=()), "fft": lambda x, y: dlmg.fft.fft(x, axis=1),
        "rfft": lambda x, y: dlmg.fft.rfft(x, axis=1),
    }
    out += [(name, fn, "float32", None) for name, fn in ops.items()]
    out += [("x & y", lambda x, y: x & y, "int32", None), ("~x", lambda x, y: ~x, "int32", None),
            ("x ^ True", lambda x, y: x ^ True, "bool", None)]
    out += [("matmul", lambda x, y: dlmg.matmul(x, y), "float32", SQUARE),
            ("cholesky", lambda x, y: dlmg.linalg.cholesky(x), "float32", SQUARE)]
    return out


OPS = _ops()


def _snapshot(obj) -> np.ndarray:
    if isinstance(obj, dlmg.DistributedTensor):
        return np.array(obj.gather("numpy"), copy=True)
    mod = type(obj).__module__.partition(".")[0]
    if mod == "torch":
        return obj.detach().resolve_conj().numpy().copy()
    return np.array(obj, copy=True)


def _scribble(obj) -> None:
    """Overwrite every element of every writable fragment (or of a regular array)."""
    arrays = []
    if isinstance(obj, dlmg.DistributedTensor):
        arrays = [f.array for f in obj.fragments if f.is_local and f.adapter.traits.mutable and f.size]
    elif type(obj).__module__.partition(".")[0] in ("numpy", "torch") and getattr(obj, "ndim", None) is not None:
        arrays = [obj]
    for a in arrays:
        if getattr(a, "flags", None) is not None and not a.flags.writeable:
            continue
        value = True if "bool" in str(a.dtype) else 7
        a[...] = value


def _inputs(layout, dtype, assignment, seed):
    if layout is SQUARE:
        eye = np.broadcast_to(np.eye(3, dtype=dtype) * 4, (4, 3, 3))
        x = np.ascontiguousarray(eye + data(layout.shape, dtype, seed, 0, 1) * np.eye(3, dtype=dtype))
        return build(x, layout, assignment), build(np.ascontiguousarray(x + 1), layout, assignment)
    low, high = (0.1, 0.9) if dtype.startswith("float") else (1, 4)  # inside every function's domain
    x = data(layout.shape, dtype, seed, low, high)
    y = data(layout.shape, dtype, seed + 1, low, high)
    return build(x, layout, assignment), build(y, layout, assignment)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
@pytest.mark.parametrize(
    "name, op, dtype, fixed",
    # fuse compiles (torch.compile, jax.jit): outside the fast loop
    [pytest.param(*o, id=o[0], marks=[pytest.mark.slow] if o[0] == "fuse" else []) for o in OPS],
)
def test_results_and_inputs_never_share_memory(name, op, dtype, fixed, assignment):
    need("torch")
    if assignment == "mixed":
        need("jax")

    @settings(max_examples=EXAMPLES)
    @given(layout=LAYOUTS if fixed is None else st.just(fixed), seed=st.integers(0, 3))
    def check(layout, seed):
        x, y = _inputs(layout, dtype, assignment, seed)
        inputs = [_snapshot(x), _snapshot(y)]
        try:
            result = op(x, y)
        except dlmg.FragmentError:  # not defined in this framework (torch imag of real data): nothing to alias
            return
        if isinstance(result, dlmg.DistributedTensor):
            assert not any(f.readonly for f in result.fragments if f.adapter.traits.mutable), f"{name} gave read-only memory"
        _scribble(result)
        after = [_snapshot(x), _snapshot(y)]
        for was, now in zip(inputs, after):
            np.testing.assert_array_equal(now, was, err_msg=f"writing into the result of {name} changed an input")
        result_now = _snapshot(result)
        _scribble(x)
        _scribble(y)
        np.testing.assert_array_equal(_snapshot(result), result_now,
                                      err_msg=f"writing into an input changed the result of {name}")

    check()


# -- the documented views: memory shared on purpose --------------------------------
def test_to_shares_memory():
    need("torch")
    x = build(np.arange(12, dtype=np.float32).reshape(4, 3), dlmg.Layout.slab((4, 3), 0, ["cpu"] * 2))
    t = x.to("torch")
    _scribble(t)
    assert (x.gather("numpy") == 7).all()


def test_redistribute_reuses_fragments_that_stay():
    lay = dlmg.Layout.slab((4, 3), 0, ["cpu"] * 2)
    x = build(np.arange(12, dtype=np.float32).reshape(4, 3), lay)
    same = x.redistribute(lay)
    _scribble(same)
    assert (x.gather("numpy") == 7).all()


def test_exported_fragments_share_memory():
    need("torch")
    import torch

    x = build(np.arange(12, dtype=np.float32).reshape(4, 3), dlmg.Layout.slab((4, 3), 0, ["cpu"] * 2))
    torch.from_dlpack(x.fragments[0])[...] = 7
    assert (x.gather("numpy")[:2] == 7).all()
