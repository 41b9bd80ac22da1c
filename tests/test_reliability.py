"""What dlmg promises about wrong input and shared memory, one test per broken promise found.

Each test reproduces a case an adversarial review found (see docs/reliability.md):
a result that aliased its input, a write into read-only or immutable memory,
uninitialised memory for a missing fill value, an in-place operation that
stopped half-way, an unsigned reduction torch could not run, and errors of
the wrong type. The crash on impossible DLPack metadata is covered by
``test_dlpack_bounds.py``.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlmg
from dlmg.errors import DtypeError, LayoutError

torch = pytest.importorskip("torch")


def _layout(n=8, parts=2):
    return dlmg.Layout.slab((n,), 0, ["cpu"] * parts)


def _torch_tensor(values=(1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0), dtype=torch.float32):
    t = torch.tensor(values, dtype=dtype)
    return dlmg.from_fragments([t[:4].clone(), t[4:].clone()], _layout())


# -- 2. results are fresh arrays in every framework ------------------------------
@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda d: +d, id="unary-plus"),
        pytest.param(lambda d: dlmg.positive(d), id="positive"),
        pytest.param(lambda d: d.conj(), id="conj-real"),
        pytest.param(lambda d: dlmg.conj(d), id="dlmg.conj-real"),
        pytest.param(lambda d: d.real, id="real-of-real"),
        pytest.param(lambda d: dlmg.astype(d, "float32"), id="astype-same"),
    ],
)
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_results_are_fresh(make, framework):
    d = _torch_tensor()
    if framework == "numpy":
        d = d.to("numpy", copy=True)
    before = d.gather("numpy").copy()
    e = make(d)
    e += 100
    assert np.array_equal(d.gather("numpy"), before)
    for fd, fe in zip(d.fragments, e.fragments):
        assert fd.adapter.data_ptr(fd.array) != fe.adapter.data_ptr(fe.array)


# -- 4. a missing fill value is an error, not uninitialised memory ---------------
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_full_without_a_value_is_a_type_error(framework):
    with pytest.raises(TypeError, match="fill_value"):
        dlmg.full(_layout(), None, framework=framework)


# -- 6. unsigned sums and products in torch ---------------------------------------
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
@pytest.mark.parametrize("name", ["sum", "prod"])
def test_unsigned_reductions_in_torch_match_numpy(dtype, name):
    values = np.array([200, 250, 3, 7, 255, 1, 2, 90], dtype=dtype)
    if name == "prod":
        values = np.array([3, 2, 5, 7, 1, 2, 9, 4], dtype=dtype)
    dt = dlmg.scatter(values, _layout())
    t = dt.to("torch")
    want = getattr(np, name)(values)
    got = getattr(dlmg, name)(t)
    assert str(got.dtype).removeprefix("torch.") == str(want.dtype)
    assert int(got) == int(want)
    per_mode = getattr(dlmg, name)(t, axis=0)
    assert per_mode.dtype == str(want.dtype) and int(per_mode.gather("numpy")) == int(want)


@pytest.mark.parametrize("lead", ["numpy", "torch"])
def test_unsigned_reductions_over_mixed_frameworks(lead):
    values = np.array([2**64 - 1, 7, 2**63, 9], dtype=np.uint64)
    dt = dlmg.scatter(values, dlmg.Layout.slab((4,), 0, ["cpu"] * 2))
    other = "torch" if lead == "numpy" else "numpy"
    arrays = [dt.to(lead).fragments[0].array, dt.to(other).fragments[1].array]
    mixed = dlmg.from_fragments(arrays, dt.layout)
    for name in ("sum", "prod"):
        got = getattr(dlmg, name)(mixed, axis=0)
        assert got.dtype == "uint64"
        assert int(got.gather("numpy")) == int(getattr(np, name)(values))


def test_unsigned_sum_wraps_as_numpy():
    values = np.array([2**63, 2**63, 5, 1], dtype=np.uint64)
    t = dlmg.scatter(values, dlmg.Layout.slab((4,), 0, ["cpu"] * 2)).to("torch")
    assert int(dlmg.sum(t)) == int(np.sum(values)) == 6


# -- 7. errors of the right type, naming the limit -------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_zeros_over_the_byte_limit_is_a_dlmg_error(framework):
    with pytest.raises((LayoutError, DtypeError), match=r"2\*\*63"):
        dlmg.zeros(dlmg.Layout((2**31, 2**31), devices=["cpu"]), "float64", framework=framework)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize(
    "value, dtype, limit",
    [(300, "int8", r"\[-128, 127\]"), (-1, "uint8", r"\[0, 255\]"), (2**64, "int64", "9223372036854775807"),
     (1e300, "float32", "3.4028235e"), (float("nan"), "int32", "not a finite number")],
)
def test_full_out_of_range_is_a_dtype_error(framework, value, dtype, limit):
    with pytest.raises(DtypeError, match=rf"fill_value = {re.escape(repr(value))}.*{dtype}.*{limit}") as excinfo:
        dlmg.full(_layout(), value, dtype, framework=framework)
    assert isinstance(excinfo.value, ValueError)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_full_edges_of_the_range_are_kept(framework):
    for value, dtype in [(127, "int8"), (-128, "int8"), (255, "uint8"), (2**63 - 1, "int64"),
                         (float("inf"), "float32"), (3.4028234e38, "float32"), (1 + 0j, "float32")]:
        got = dlmg.full(_layout(), value, dtype, framework=framework).gather("numpy")
        assert got[0] == np.array(value.real if isinstance(value, complex) else value).astype(dtype)
