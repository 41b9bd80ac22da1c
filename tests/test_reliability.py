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
from dlmg.dlpack import READ_ONLY
from dlmg.errors import DtypeError, LayoutError, ReadOnlyError

from _capsule_structs import Producer

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
        pytest.param(lambda d: d.imag, id="imag-of-real"),
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


# -- 3. read-only and immutable memory is never written -------------------------
def _readonly_numpy():
    parts = [np.arange(4.0), np.arange(4.0, 8.0)]
    for p in parts:
        p.flags.writeable = False
    return parts


def test_readonly_numpy_to_torch_refuses_in_place():
    parts = _readonly_numpy()
    dt = dlmg.from_fragments(parts, _layout())
    t = dt.to("torch")
    assert all(f.readonly for f in t.fragments)
    assert t.fragments[0].array.data_ptr() == parts[0].ctypes.data  # still zero-copy
    with pytest.raises(ReadOnlyError, match="fragment 0"):
        t += 1
    assert parts[0].tolist() == [0, 1, 2, 3] and parts[1].tolist() == [4, 5, 6, 7]


def test_jax_to_torch_refuses_in_place():
    jnp = pytest.importorskip("jax.numpy")
    import jax

    cpus = jax.devices("cpu")[:2]
    parts = [jax.device_put(jnp.arange(4.0, dtype=jnp.float32), cpus[0]),
             jax.device_put(jnp.arange(4.0, 8.0, dtype=jnp.float32), cpus[1])]
    lay = dlmg.Layout.slab((8,), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.from_fragments(parts, lay)
    t = dt.to("torch")
    with pytest.raises(ReadOnlyError):
        t += 1
    assert np.asarray(parts[0]).tolist() == [0, 1, 2, 3]


def test_readonly_capsule_through_torch_refuses_in_place():
    producers = [Producer(versioned=True, flags=READ_ONLY, shape=(4,), strides=(1,)) for _ in range(2)]
    dt = dlmg.from_fragments(producers, _layout())
    assert all(f.readonly for f in dt.fragments)
    t = dt.to("torch")
    with pytest.raises(ReadOnlyError):
        t += 1
    assert not any(p.memory[i] for p in producers for i in range(4))


# -- 4. a missing fill value is an error, not uninitialised memory ---------------
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_full_without_a_value_is_a_type_error(framework):
    with pytest.raises(TypeError, match="fill_value"):
        dlmg.full(layout=_layout(), fill_value=None, dtype="float32", framework=framework)


# -- 5. in-place operations are all or nothing ------------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_in_place_checks_every_fragment_before_writing(framework):
    first = np.arange(4.0)
    second = np.arange(4.0, 8.0)
    second.flags.writeable = False
    dt = dlmg.from_fragments([first, second], _layout())
    if framework == "torch":
        dt = dt.to("torch")
    with pytest.raises(ReadOnlyError, match="fragment 1"):
        dt += 100
    assert first.tolist() == [0, 1, 2, 3]  # fragment 0 untouched


def test_in_place_dtype_refusal_writes_nothing():
    dt = dlmg.from_fragments([np.arange(4, dtype=np.int32), np.arange(4, 8, dtype=np.int32)], _layout())
    with pytest.raises(DtypeError):
        dt += 0.5
    assert dt.gather("numpy").tolist() == list(range(8))


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
def test_layout_extent_over_int64_is_a_layout_error():
    with pytest.raises(LayoutError, match=r"shape.*2\*\*63"):
        dlmg.Layout((2**70,), devices=["cpu"])
    with pytest.raises(LayoutError, match=r"2\*\*63"):
        dlmg.Layout((2**40, 2**40), devices=["cpu"])


def test_scatter_of_2_to_the_80_elements_is_a_dlmg_error():
    producer = Producer(ndim=2, shape=(2**40, 2**40), strides=(0, 0))
    with pytest.raises(LayoutError, match=r"2\*\*63"):
        dlmg.scatter(producer, dlmg.Layout((2**40, 2**40), devices=["cpu"]))
    with pytest.raises(dlmg.DLPackError, match=r"2\*\*63"):  # the producer alone, into a small layout
        dlmg.scatter(producer, _layout())
    assert producer.deleted == producer.exports


def test_layout_strides_past_int64_are_a_layout_error():
    with pytest.raises(LayoutError, match=r"2\*\*63"):
        dlmg.Layout((4, 4), devices=["cpu"], element_strides=(2**62, 1))
    with pytest.raises(LayoutError, match=r"block\[0\] = 9223372036854775808"):
        dlmg.Layout((4,), block=(2**63,), devices=["cpu"])


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_zeros_over_the_byte_limit_is_a_dlmg_error(framework):
    with pytest.raises((LayoutError, DtypeError), match=r"2\*\*63"):
        dlmg.zeros(layout=dlmg.Layout((2**31, 2**31), devices=["cpu"]), dtype="float64", framework=framework)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize(
    "value, dtype, limit",
    [(300, "int8", r"\[-128, 127\]"), (-1, "uint8", r"\[0, 255\]"), (2**64, "int64", "9223372036854775807"),
     (1e300, "float32", "3.4028235e"), (float("nan"), "int32", "not a finite number")],
)
def test_full_out_of_range_is_a_dtype_error(framework, value, dtype, limit):
    with pytest.raises(DtypeError, match=rf"fill_value = {re.escape(repr(value))}.*{dtype}.*{limit}") as excinfo:
        dlmg.full(layout=_layout(), fill_value=value, dtype=dtype, framework=framework)
    assert isinstance(excinfo.value, ValueError)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_full_edges_of_the_range_are_kept(framework):
    for value, dtype in [(127, "int8"), (-128, "int8"), (255, "uint8"), (2**63 - 1, "int64"),
                         (float("inf"), "float32"), (3.4028234e38, "float32"), (1 + 0j, "float32")]:
        got = dlmg.full(layout=_layout(), fill_value=value, dtype=dtype, framework=framework).gather("numpy")
        assert got[0] == np.array(value.real if isinstance(value, complex) else value).astype(dtype)


# -- the same on CUDA --------------------------------------------------------------
CUDA = dlmg.Layout.slab((8,), 0, ["cuda:0", "cuda:0"])


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("make", [lambda d: +d, lambda d: d.conj(), lambda d: d.real], ids=["plus", "conj", "real"])
def test_results_are_fresh_on_cuda(framework, make):
    d = dlmg.scatter(np.arange(8.0, dtype=np.float32), CUDA, framework=framework)
    e = make(d)
    e += 100
    np.testing.assert_array_equal(d.gather("numpy"), np.arange(8.0, dtype=np.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["uint8", "uint32", "uint64"])
def test_unsigned_sums_on_cuda_torch(dtype):
    values = np.array([200, 250, 3, 7, 255, 1, 2, 90], dtype=dtype)
    t = dlmg.scatter(values, CUDA, framework="torch")
    got = dlmg.sum(t)
    assert got.dtype == str(np.sum(values).dtype) and int(got) == int(np.sum(values))
    assert str(got.fragments[0].array.dtype) == f"torch.{np.sum(values).dtype}"


@pytest.mark.gpu
def test_in_place_on_cuda_is_all_or_nothing():
    jax = pytest.importorskip("jax")
    torch = pytest.importorskip("torch")
    first = torch.arange(4.0, device="cuda:0")
    second = jax.device_put(np.arange(4.0, 8.0, dtype=np.float32), jax.devices("gpu")[0])
    t = dlmg.from_fragments([first, second], CUDA).to("torch")  # fragment 1: JAX memory, read-only
    assert [f.readonly for f in t.fragments] == [False, True]
    with pytest.raises(ReadOnlyError, match="fragment 1"):
        t += 1
    np.testing.assert_array_equal(t.gather("numpy"), np.arange(8.0, dtype=np.float32))
