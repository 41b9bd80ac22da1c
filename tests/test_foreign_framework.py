"""A framework dlmg does not know becomes a full member through one adapter.

The adapter below, for ``array_api_strict`` (the array API's reference
implementation), is written against the documented contract
(:class:`dlmg.adapters.Adapter`) only and added with
:func:`dlmg.registry.register`: nothing in dlmg names the framework. The
tensor machinery then works on its arrays as on any built-in framework's:
the contract suite, ``from_fragments``, DLPack export, pointwise operations,
gather and redistribution.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Device, Layout
from dlmg.adapters import Adapter, Traits
from dlmg.dlpack import inspect as dlpack_inspect
from dlmg.registry import adapter_for, register, unregister
from dlmg.testing import check_adapter

xp = pytest.importorskip("array_api_strict")

HOST = Device("cpu", 0)
DTYPES = ("bool", "int8", "int32", "int64", "uint8", "float32", "float64", "complex64")


class StrictAdapter(Adapter):
    """``array_api_strict`` arrays: host memory, writable, no strided views."""

    name = "array_api_strict"
    modules = ("array_api_strict",)
    package = "array_api_strict"
    install_hint = "pip install array-api-strict"
    traits = Traits(done_on_return=True)

    def owns(self, array):
        return super().owns(array) and type(array).__name__ == "Array"

    def namespace(self):
        return self.module()

    def device_of(self, array):
        return HOST

    def strides_of(self, array):
        return dlpack_inspect(array).strides

    def data_ptr(self, array):
        return dlpack_inspect(array).ptr

    def supports(self, device):
        return device.kind == "cpu"

    def empty(self, shape, dtype, device):
        return self.module().empty(tuple(shape), dtype=self.native_dtype(dtype))

    def full(self, shape, fill_value, dtype, device):
        return self.module().full(tuple(shape), fill_value, dtype=self.native_dtype(dtype))

    def from_dlpack(self, obj, *, device=None, copy=None):
        if copy not in (None, True, False):
            raise ValueError(f"copy must be None, True or False, got {copy!r}")
        return self.module().from_dlpack(obj, copy=copy)

    def to_device(self, array, device):
        return array

    def ascontiguous(self, array):
        return self.module().asarray(array, copy=True)


@pytest.fixture
def strict():
    adapter = register(StrictAdapter)
    yield adapter
    unregister(adapter.name)


def _arrays(layout, dtype="float32"):
    """One strict array per fragment of a slab layout, cut from arange(n); and the whole in NumPy."""
    whole = np.arange(np.prod(layout.shape), dtype=dtype).reshape(layout.shape)
    return [xp.asarray(whole[f.global_slices()]) for f in layout.fragments], whole


def test_contract_suite_passes(strict):
    notes = check_adapter(strict, device="cpu", dtypes=DTYPES)
    assert notes == ["array_api_strict: no strided views"]


def test_registered_arrays_are_recognised(strict):
    x = xp.asarray([1.0, 2.0])
    assert adapter_for(x) is strict
    assert dlmg.framework_of(x) == "array_api_strict"


def test_from_fragments_keeps_the_arrays(strict):
    layout = Layout.slab((6, 4), axis=0, devices=["cpu"] * 3)
    arrays, whole = _arrays(layout)
    dt = dlmg.from_fragments(arrays, layout)
    assert dt.frameworks == ("array_api_strict",)
    assert all(f.array is a for f, a in zip(dt.fragments, arrays))
    np.testing.assert_array_equal(dt.gather(framework="numpy"), whole)


def test_fragments_export_without_a_copy(strict):
    layout = Layout.slab((6, 4), axis=0, devices=["cpu"] * 2)
    arrays, _ = _arrays(layout)
    dt = dlmg.from_fragments(arrays, layout)
    for frag, array in zip(dt.fragments, arrays):
        exported = np.from_dlpack(frag)
        assert exported.ctypes.data == strict.data_ptr(array)


def test_pointwise_runs_in_the_framework(strict):
    layout = Layout.slab((6, 4), axis=1, devices=["cpu"] * 2)
    arrays, whole = _arrays(layout)
    dt = dlmg.from_fragments(arrays, layout)
    out = dlmg.sqrt(dt * 2 + 1)
    assert out.frameworks == ("array_api_strict",)
    np.testing.assert_allclose(out.gather(framework="numpy"), np.sqrt(whole * 2 + 1), rtol=1e-6)


def test_mixed_with_a_builtin_framework(strict):
    layout = Layout.slab((4, 4), axis=0, devices=["cpu"] * 2)
    arrays, whole = _arrays(layout)
    dt = dlmg.from_fragments(arrays, layout)
    other = dlmg.scatter(np.ones((4, 4), np.float32), layout)
    np.testing.assert_array_equal((dt + other).gather(framework="numpy"), whole + 1)


def test_gather_into_the_framework(strict):
    layout = Layout.block_cyclic((7, 5), block=(2, 2), grid=(2, 1), devices=["cpu"] * 2)
    whole = np.arange(35, dtype=np.float32).reshape(7, 5)
    dt = dlmg.scatter(whole, layout, framework="array_api_strict")
    got = dt.gather()
    assert adapter_for(got) is strict
    np.testing.assert_array_equal(np.from_dlpack(got), whole)


def test_redistribution_keeps_the_framework(strict):
    src = Layout.slab((8, 6), axis=0, devices=["cpu"] * 4)
    dst = Layout.block_cyclic((8, 6), block=(3, 2), grid=(2, 2), devices=["cpu"] * 4)
    arrays, whole = _arrays(src)
    dt = dlmg.from_fragments(arrays, src)
    moved = dt.redistribute(dst)
    assert moved.frameworks == ("array_api_strict",)
    np.testing.assert_array_equal(moved.gather(framework="numpy"), whole)
    back = moved.redistribute(src)
    np.testing.assert_array_equal(back.gather(framework="numpy"), whole)


def test_scatter_into_the_framework(strict):
    layout = Layout.slab((6, 4), axis=0, devices=["cpu"] * 2)
    whole = np.arange(24, dtype=np.float32).reshape(6, 4)
    dt = dlmg.scatter(whole, layout, framework="array_api_strict")
    assert dt.frameworks == ("array_api_strict",)
    np.testing.assert_array_equal(dt.gather(framework="numpy"), whole)
