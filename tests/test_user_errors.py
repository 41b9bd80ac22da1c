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
        dlmg.zeros(layout=lay, dtype="float32")
    with pytest.raises(DeviceError, match=r"integers in a device list mean CUDA ordinals"):
        dlmg.scatter(np.ones((8, 4)), lay, framework="numpy")
    with pytest.raises(dlmg.FragmentError, match=r"lies on cpu:0.*integers in a device list mean CUDA ordinals"):
        dlmg.from_fragments([np.ones((4, 4)), np.ones((4, 4))], lay)


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
    from dlmg.adapters.cupy import CupyAdapter

    assert CupyAdapter().landing_device(Device("cpu:2")) == Device("cuda:0")
    assert CupyAdapter().landing_device(Device("cuda:1")) == Device("cuda:1")


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


@pytest.mark.gpu
def test_gather_host_fragments_to_cupy_lands_on_the_gpu():
    pytest.importorskip("cupy")
    host = np.arange(32, dtype=np.float32).reshape(8, 4)
    dt = dlmg.scatter(host, dlmg.Layout.slab((8, 4), 0, ["cpu", "cpu"]))
    got = dt.gather(framework="cupy")
    assert type(got).__module__.split(".")[0] == "cupy"
    np.testing.assert_array_equal(got.get(), host)


# -- regular arrays next to distributed tensors ----------------------------------------------------


@pytest.fixture
def dt():
    return dlmg.scatter(np.arange(32.0).reshape(8, 4), dlmg.Layout.slab((8, 4), 0, ["cpu", "cpu"]))


def _raises_scatter(fn):
    with pytest.raises(TypeError, match=r"shape \(8, 4\).*dlmg\.scatter\(array, (dt|tensor)\.layout\)"):
        fn()


def test_numpy_array_with_a_tensor_says_scatter(dt):
    _raises_scatter(lambda: dt + np.ones((8, 4)))
    _raises_scatter(lambda: np.ones((8, 4)) + dt)
    _raises_scatter(lambda: np.add(np.ones((8, 4)), dt))
    _raises_scatter(lambda: dlmg.add(dt, np.ones((8, 4))))
    _raises_scatter(lambda: np.where(np.ones((8, 4), bool), dt, 0))


def test_torch_tensor_with_a_tensor_says_scatter(dt):
    torch = pytest.importorskip("torch")
    _raises_scatter(lambda: dt + torch.ones(8, 4))
    _raises_scatter(lambda: torch.ones(8, 4) + dt)
    _raises_scatter(lambda: torch.add(torch.ones(8, 4), dt))
    with pytest.raises(TypeError, match=r"dlmg\.sum\(dt\).*gather\(framework='torch'\)"):
        torch.sum(dt)


def test_jax_array_with_a_tensor_names_gather_and_scatter(dt):
    jnp = pytest.importorskip("jax.numpy")
    _raises_scatter(lambda: dt + jnp.ones((8, 4)))
    with pytest.raises(TypeError, match=r"gather\(framework='jax'\).*dlmg\.scatter\(array, dt\.layout\)"):
        jnp.asarray(dt)
    _raises_scatter(lambda: jnp.ones((8, 4)) + dt)
    np.testing.assert_array_equal((jnp.asarray(2.0, dtype=jnp.float32) - dt).gather(), 2 - np.arange(32.0).reshape(8, 4))


def test_numpy_functions_run_as_dlmg_functions_where_dlmg_has_them(dt):
    host = np.arange(32.0).reshape(8, 4)
    assert float(np.sum(dt)) == host.sum()
    summed = np.sum(dt, axis=0)
    assert isinstance(summed, dlmg.DistributedTensor)
    np.testing.assert_array_equal(summed.gather(), host.sum(axis=0))
    root = np.sqrt(dt)
    assert isinstance(root, dlmg.DistributedTensor)
    np.testing.assert_allclose(root.gather(), np.sqrt(host))
    np.testing.assert_array_equal(np.maximum(dt, 3.0).gather(), np.maximum(host, 3.0))
    np.testing.assert_array_equal((np.float32(2) * dt).gather(), 2 * host)
    np.testing.assert_array_equal((np.asarray(2.0) + dt).gather(), 2 + host)


def test_numpy_functions_dlmg_lacks_say_gather(dt):
    with pytest.raises(TypeError, match=r"numpy\.concatenate.*dt\.gather\(framework='numpy'\)"):
        np.concatenate([dt, dt])
    with pytest.raises(TypeError, match=r"numpy\.add\.reduce.*gather"):
        np.add.reduce(dt)
    np.testing.assert_array_equal(np.asarray(dt), dt.gather(framework="numpy"))  # a host copy, in one process
    with pytest.raises(TypeError, match=r"numpy\.sqrt.*out.*dlmg\.sqrt"):
        np.sqrt(dt, out=np.empty((8, 4)))


def test_unknown_operands_still_defer_to_python(dt):
    class Other:
        def __radd__(self, other):
            return "other handled it"

    assert dt + Other() == "other handled it"


def test_slices_follow_numpy(dt):
    host = dt.gather(framework="numpy")
    for key in (slice(0, 2), (slice(None), 0), (0, ...), (None, 0), (np.arange(2), 0)):
        np.testing.assert_array_equal(dt[key].gather(framework="numpy"), host[key])
    assert dt[np.int64(7), 3] == 31.0
    with pytest.raises(IndexError, match="too many indices"):
        dt[0, 0, 0]


def test_mean_of_nothing_warns_like_numpy():
    empty = dlmg.zeros(layout=dlmg.Layout.slab((0, 4), 1, ["cpu", "cpu"]), dtype="float32")
    with pytest.warns(RuntimeWarning, match="empty"):
        value = dlmg.mean(empty)
    assert np.isnan(float(value))
    with pytest.warns(RuntimeWarning, match="empty"):
        dlmg.mean(empty, axis=0)


def test_missing_array_api_compat_names_the_package():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['array_api_compat'] = None\n"
        "import numpy as np, dlmg\n"
        "dt = dlmg.scatter(np.ones((4, 2)), dlmg.Layout.slab((4, 2), 0, ['cpu', 'cpu']))\n"
        "try:\n    dlmg.sqrt(dt)\nexcept Exception as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "pip install array-api-compat" in done.stdout, done.stdout + done.stderr


def test_protocol_answers_come_from_the_adapters():
    from dlmg.adapters.jax import JaxAdapter
    from dlmg.adapters.numpy import NumpyAdapter
    from dlmg.adapters.torch import TorchAdapter

    from dlmg._protocols import FrameworkProtocols, protocol_answer
    from dlmg.registry import BUILTIN_PROTOCOLS, protocol_hook

    for adapter, names in ((NumpyAdapter, {"__array_ufunc__", "__array_function__"}),
                           (JaxAdapter, {"__jax_array__"}), (TorchAdapter, {"__torch_function__"})):
        assert {hook.name for hook in adapter.traits.protocols} == names
        for name in names:
            # defined on the tensor's class (a base of it), declared by the adapter, answered by dlmg
            assert name in vars(FrameworkProtocols) and hasattr(dlmg.DistributedTensor, name)
            assert BUILTIN_PROTOCOLS[name] == adapter.name
            declared = next(hook for hook in adapter.traits.protocols if hook.name == name)
            assert protocol_hook(name) == (adapter.name, declared)
            assert callable(protocol_answer(name))
    assert set(BUILTIN_PROTOCOLS) == {n for n in vars(FrameworkProtocols) if n.startswith("__") and n.endswith("__")
                                      and callable(getattr(FrameworkProtocols, n)) and n not in vars(object)
                                      and n not in ("__init_subclass__", "__subclasshook__")}
