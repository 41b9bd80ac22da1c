"""Devices and element types: parsing, normalisation and clear errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlmg
from dlmg import dtypes
from dlmg.device import DL_DEVICE_TYPES, Device, as_device


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cpu", Device("cpu", 0)),
        ("CPU:3", Device("cpu", 3)),
        ("cuda", Device("cuda", 0)),
        ("cuda:1", Device("cuda", 1)),
        ("gpu:2", Device("cuda", 2)),
        (" cuda : 7 ", Device("cuda", 7)),
    ],
)
def test_parse(text, expected):
    assert Device.parse(text) == expected
    assert as_device(text) == expected


@pytest.mark.parametrize("bad", ["", "cuda:", "cuda:-1", "tpu:0", "cuda:x", "cpu:1:2"])
def test_parse_rejects(bad):
    with pytest.raises(dlmg.DeviceError, match="device"):
        Device.parse(bad)


def test_device_errors_name_the_value():
    with pytest.raises(ValueError, match="'tpu'"):
        Device("tpu", 0)
    with pytest.raises(ValueError, match="-1"):
        Device("cuda", -1)
    with pytest.raises(dlmg.DeviceError, match="object"):
        as_device(object())
    with pytest.raises(dlmg.DeviceError, match="True"):
        as_device(True)


@given(st.sampled_from(sorted(DL_DEVICE_TYPES)), st.integers(0, 1 << 20))
def test_dlpack_round_trip(code, index):
    device = Device.from_dlpack(code, index)
    assert device.dlpack == (code, index)
    assert Device.parse(str(device)) == device
    assert hash(device) == hash(Device(device.kind, device.index))


def test_host_kinds():
    assert Device("cpu").is_host
    assert Device("cuda_host").is_host
    assert not Device("cuda", 0).is_host
    with pytest.raises(dlmg.DeviceError, match="99"):
        Device.from_dlpack(99, 0)


def test_framework_device_objects():
    torch = pytest.importorskip("torch")
    assert as_device(torch.device("cpu")) == Device("cpu", 0)
    assert as_device(torch.device("cuda", 1)) == Device("cuda", 1)
    jax = pytest.importorskip("jax")
    devices = jax.devices("cpu")
    assert as_device(devices[-1]) == Device("cpu", devices[-1].id)
    assert as_device((2, 3)) == Device("cuda", 3)


@pytest.mark.parametrize("name", dtypes.NAMES)
def test_every_name_round_trips_through_its_code(name):
    record = dtypes.info(name)
    assert dtypes.from_dlpack_code(*record.dlpack) is record
    assert record.itemsize >= 1


def test_dlpack_codes_match_the_standard():
    assert dtypes.info("bool").dlpack == (6, 8, 1)
    assert dtypes.info("bfloat16").dlpack == (4, 16, 1)
    assert dtypes.info("complex64").dlpack == (5, 64, 1)
    assert dtypes.info("float8_e4m3fn").dlpack == (10, 8, 1)
    assert dtypes.info("float4_e2m1fn_x2").dlpack == (17, 4, 2)
    assert dtypes.info("float4_e2m1fn_x2").itemsize == 1
    assert dtypes.info("float6_e3m2fn").dlpack == (16, 6, 1)


def test_canonical_from_frameworks():
    np = pytest.importorskip("numpy")
    assert dtypes.canonical(np.float32) == "float32"
    assert dtypes.canonical(np.dtype("c16")) == "complex128"
    assert dtypes.canonical(np.bool_) == "bool"
    assert dtypes.canonical("double") == "float64"
    torch = pytest.importorskip("torch")
    assert dtypes.canonical(torch.bfloat16) == "bfloat16"
    assert dtypes.canonical(torch.complex64) == "complex64"
    jnp = pytest.importorskip("jax.numpy")
    assert dtypes.canonical(jnp.bfloat16) == "bfloat16"
    ml_dtypes = pytest.importorskip("ml_dtypes")
    assert dtypes.canonical(ml_dtypes.float8_e5m2) == "float8_e5m2"


def test_canonical_rejects_unknown():
    with pytest.raises(dlmg.DtypeError, match="float7"):
        dtypes.canonical("float7")
    with pytest.raises(TypeError, match="object"):
        dtypes.canonical(object())
    with pytest.raises(dlmg.DtypeError, match="code=2, bits=24"):
        dtypes.from_dlpack_code(2, 24, 1)


def test_ambiguous_spellings_are_refused():
    # torch.float is float32 where NumPy's "float" is float64: dlmg takes neither guess
    for word in ("float", "int", "complex"):
        with pytest.raises(dlmg.DtypeError, match=word):
            dtypes.canonical(word)


def test_cache_keeps_types_apart():
    np = pytest.importorskip("numpy")
    assert dtypes.canonical(np.dtype("float64")) == "float64"
    assert dtypes.canonical(np.dtype("float64")) == "float64"  # cached answer
    with pytest.raises(dlmg.DtypeError):
        dtypes.canonical("float")  # equal to np.dtype("float64") but a different type
