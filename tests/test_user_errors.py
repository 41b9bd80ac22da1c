"""Common mistakes get dlmg's own message, and it names the fix.

Devices written as text or integers, gathering GPU fragments into NumPy, and
(when the protocols are in place) mixing distributed tensors with regular
arrays of NumPy, torch and JAX.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Device, DeviceError


def test_device_accepts_kind_and_index_in_one_string():
    assert Device("cpu:3") == Device("cpu", 3) == dlmg.as_device("cpu:3")
    assert Device("CUDA:1") == Device("cuda", 1)
    assert Device("gpu") == Device("cuda", 0)
    assert Device("cpu:3", 3) == Device("cpu", 3)
    with pytest.raises(DeviceError, match="give the index once"):
        Device("cuda:1", 2)
    with pytest.raises(DeviceError, match="'tpu'"):
        Device("tpu:0")
    with pytest.raises(DeviceError, match="string"):
        Device(3)  # type: ignore[arg-type]


def test_layout_devices_and_device_agree():
    lay = dlmg.Layout.slab((4, 2), 0, ["cpu:3", "cpu:1"])
    assert lay.devices == (Device("cpu:3"), Device("cpu:1"))


def _cuda_available() -> bool:
    from conftest import HAS_CUDA

    return HAS_CUDA


def test_integer_devices_mean_cuda_and_the_error_says_so():
    if _cuda_available():
        pytest.skip("needs a machine without a CUDA GPU")
    lay = dlmg.Layout.slab((8, 4), 0, [0, 1])
    assert [str(d) for d in lay.devices] == ["cuda:0", "cuda:1"]
    with pytest.raises(dlmg.FrameworkError, match=r"integers in a device list mean CUDA ordinals.*'cpu:k'"):
        dlmg.scatter(np.ones((8, 4)), lay)
    with pytest.raises(DeviceError, match=r"integers in a device list mean CUDA ordinals"):
        dlmg.zeros(lay)
    with pytest.raises(DeviceError, match=r"integers in a device list mean CUDA ordinals"):
        dlmg.scatter(np.ones((8, 4)), lay, framework="numpy")


def test_host_devices_get_no_cuda_hint():
    from dlmg.device import unreachable_hint

    assert unreachable_hint([Device("cpu:1")]) == ""
    assert "CUDA ordinals" in unreachable_hint([Device("cuda:1")])


def test_numpy_lands_on_the_host():
    numpy_adapter = dlmg.get_adapter("numpy")
    assert numpy_adapter.landing_device(Device("cuda:1")) == Device("cpu")
    assert numpy_adapter.landing_device(Device("cpu:3")) == Device("cpu:3")
    torch_adapter = dlmg.get_adapter("torch")
    assert torch_adapter.landing_device(Device("cpu:2")) == Device("cpu:2")


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_gather_gpu_fragments_to_numpy_lands_on_the_host(framework):
    pytest.importorskip(framework)
    lay = dlmg.Layout.slab((8, 4), 0, ["cuda:0", "cuda:0"])
    host = np.arange(32, dtype=np.float32).reshape(8, 4)
    dt = dlmg.scatter(host, lay, framework=framework)
    got = dt.gather(framework="numpy")
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, host)
    assert type(dt.gather()).__module__.split(".")[0] == framework  # the fragments' framework keeps the GPU
