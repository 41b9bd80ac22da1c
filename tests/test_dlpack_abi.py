"""The DLPack ABI mirror and :func:`dlmg.dlpack.inspect`: layout, reading real
producers, negotiation, and rejection of malformed capsules built by hand."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import dlmg.dlpack as dl
from dlmg.device import DL_DEVICE_TYPES, Device
from dlmg.dlpack.capsule import capsule_name, new_capsule
from dlmg.errors import DLPackError

# --------------------------------------------------------------------------
# layout


@pytest.mark.parametrize(
    "struct, size, offsets",
    [
        (dl.DLDevice, 8, {"device_type": 0, "device_id": 4}),
        (dl.DLDataType, 4, {"code": 0, "bits": 1, "lanes": 2}),
        (dl.DLPackVersion, 8, {"major": 0, "minor": 4}),
        (
            dl.DLTensor,
            48,
            {"data": 0, "device": 8, "ndim": 16, "dtype": 20, "shape": 24, "strides": 32, "byte_offset": 40},
        ),
        (dl.DLManagedTensor, 64, {"dl_tensor": 0, "manager_ctx": 48, "deleter": 56}),
        (
            dl.DLManagedTensorVersioned,
            80,
            {"version": 0, "manager_ctx": 8, "deleter": 16, "flags": 24, "dl_tensor": 32},
        ),
    ],
)
def test_struct_sizes_and_offsets(struct, size, offsets):
    assert ctypes.sizeof(struct) == size
    assert {name: getattr(struct, name).offset for name, _ in struct._fields_} == offsets


def test_constants():
    assert (dl.READ_ONLY, dl.IS_COPIED, dl.IS_SUBBYTE_TYPE_PADDED) == (1, 2, 4)
    assert dl.DLPACK_FLAG_BITMASK_READ_ONLY == dl.READ_ONLY
    assert dl.DLPACK_VERSION == (1, 1)
    assert {int(m): m.name.lower() for m in dl.DLDeviceType} == DL_DEVICE_TYPES
    assert dl.DLDeviceType.CUDA == 2 and dl.DLDeviceType.ROCM == 10
    assert dl.DLDataTypeCode.BFLOAT == 4 and dl.DLDataTypeCode.BOOL == 6
    assert dl.DLDataTypeCode.FLOAT4_E2M1FN == 17


# --------------------------------------------------------------------------
# real producers


def _np_expect(arr: np.ndarray) -> dict:
    return {
        "shape": arr.shape,
        "strides": tuple(s // arr.itemsize for s in arr.strides),
        "ptr": arr.__array_interface__["data"][0],
        "dtype": arr.dtype.name,
    }


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: np.array(3.5, np.float64), id="0-d"),
        pytest.param(lambda: np.zeros((0, 3), np.float32), id="zero-size"),
        pytest.param(lambda: np.arange(12, dtype=np.int32).reshape(3, 4).T, id="transposed"),
        pytest.param(lambda: np.arange(24, dtype=np.float32).reshape(4, 6)[::2, 1::3], id="strided"),
        pytest.param(lambda: np.arange(10, dtype=np.int64)[3:7], id="offset"),
        pytest.param(lambda: np.arange(10, dtype=np.int16)[::-2], id="negative-stride"),
        pytest.param(lambda: np.array([True, False, True]), id="bool"),
        pytest.param(lambda: (np.arange(6) + 1j).astype(np.complex64).reshape(2, 3), id="complex64"),
        pytest.param(lambda: np.ones(4, np.complex128), id="complex128"),
        pytest.param(lambda: np.arange(5, dtype=np.uint8), id="uint8"),
    ],
)
def test_inspect_numpy(make):
    arr = make()
    info = dl.inspect(arr)
    expect = _np_expect(arr)
    assert info.shape == expect["shape"] and info.ndim == arr.ndim
    assert info.dtype == expect["dtype"] and info.itemsize == arr.itemsize
    assert info.device == Device("cpu", 0)
    if arr.size:
        assert info.ptr == expect["ptr"]
        assert info.strides == expect["strides"]
    assert info.is_c_contiguous == arr.flags.c_contiguous
    assert info.version is not None and info.version[0] == 1
    assert info.readonly is False and info.size == arr.size


def test_inspect_numpy_readonly():
    arr = np.arange(4.0)
    arr.flags.writeable = False
    info = dl.inspect(arr)
    assert info.readonly is True and info.flags & dl.READ_ONLY


@given(
    shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
    data=st.data(),
)
def test_inspect_numpy_random_views(shape, data):
    base = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    index = tuple(
        slice(data.draw(st.integers(0, n - 1)), None, data.draw(st.sampled_from([1, 2, -1])))
        for n in shape
    )
    view = base[index]
    info = dl.inspect(view)
    assert info.shape == view.shape
    assert info.strides == tuple(s // 4 for s in view.strides)
    assert info.ptr == view.__array_interface__["data"][0]


def test_inspect_torch():
    torch = pytest.importorskip("torch")
    cases = {
        "0-d": torch.tensor(2.0),
        "zero-size": torch.zeros(0, 4),
        "transposed": torch.arange(12.0).reshape(3, 4).t(),
        "strided": torch.arange(24.0).reshape(4, 6)[::2, 1::3],
        "offset": torch.arange(20, dtype=torch.int32).reshape(4, 5)[1:, 2:],
        "bool": torch.tensor([True, False]),
        "bfloat16": torch.ones(3, 2, dtype=torch.bfloat16),
        "complex64": torch.ones(2, dtype=torch.complex64),
        "float16": torch.ones(2, dtype=torch.float16),
    }
    for name, t in cases.items():
        info = dl.inspect(t)
        assert info.shape == tuple(t.shape), name
        assert info.dtype == str(t.dtype).removeprefix("torch."), name
        if t.numel():
            assert info.strides == tuple(t.stride()), name
            assert info.ptr == t.data_ptr(), name  # data + byte_offset, whichever torch uses
        assert info.is_c_contiguous == t.is_contiguous(), name
        assert info.version is not None and info.version[0] == 1, name
        assert info.readonly is False, name


def test_inspect_jax_is_legacy():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    with jax.default_device(jax.devices("cpu")[0]):  # with a GPU present JAX defaults to it
        _check_jax_cases(jnp)


def _check_jax_cases(jnp):
    cases = {
        "0-d": jnp.asarray(1.5, jnp.float32),
        "2-d": jnp.arange(12, dtype=jnp.int32).reshape(3, 4),
        "zero-size": jnp.zeros((0, 2), jnp.float32),
        "bool": jnp.asarray([True, False]),
        "bfloat16": jnp.ones((2, 3), jnp.bfloat16),
        "complex64": jnp.ones(3, jnp.complex64),
    }
    for name, x in cases.items():
        info = dl.inspect(x)
        assert info.version is None and info.readonly is False, name
        assert info.shape == x.shape and info.dtype == x.dtype.name, name
        assert info.is_c_contiguous, name
        if x.size:
            assert info.ptr == x.unsafe_buffer_pointer(), name
        assert info.device.kind == "cpu", name


def test_raw_capsule_is_consumed_once():
    arr = np.arange(6.0).reshape(2, 3)
    capsule = arr.__dlpack__(max_version=(1, 0))
    assert dl.device_of(capsule) == Device("cpu")  # reading the device does not consume
    assert dl.inspect(capsule).shape == (2, 3)
    assert capsule_name(capsule) == dl.USED_CAPSULE_NAME_VERSIONED
    with pytest.raises(DLPackError, match="already consumed"):
        dl.inspect(capsule)
    with pytest.raises(DLPackError):
        dl.device_of(capsule)


def test_device_of():
    assert dl.device_of(np.zeros(2)) == Device("cpu", 0)
    torch = pytest.importorskip("torch")
    assert dl.device_of(torch.zeros(2)) == Device("cpu", 0)
    with pytest.raises(TypeError, match="__dlpack_device__"):
        dl.device_of(object())

    class Odd:
        def __dlpack_device__(self):
            return (99, 0)

    with pytest.raises(DLPackError, match="99"):
        dl.device_of(Odd())


def test_not_a_producer():
    with pytest.raises(TypeError, match="no __dlpack__"):
        dl.inspect([1, 2, 3])

    class NotCapsule:
        def __dlpack__(self, **kwargs):
            return 42

    with pytest.raises(DLPackError, match="not a PyCapsule"):
        dl.inspect(NotCapsule())

    class Refuses:
        def __dlpack__(self, **kwargs):
            raise BufferError("sharded over 8 devices")

    with pytest.raises(DLPackError, match="sharded"):
        dl.inspect(Refuses())


# --------------------------------------------------------------------------
# hand-built capsules


class _Fake:
    """A producer whose capsule is built by hand; counts deleter calls."""

    def __init__(self, versioned=True, ndim=2, shape=(2, 3), strides=(3, 1), code=2, bits=32,
                 lanes=1, device=(1, 0), data=True, major=1, minor=1, flags=0, null_shape=False,
                 null_strides=False, legacy_only=False, reject_stream=False):
        self.calls = []
        self.deleted = 0
        self.legacy_only = legacy_only
        self.reject_stream = reject_stream
        self.versioned = versioned
        self.device = device
        self._memory = (ctypes.c_double * 8)()
        self._shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self._strides = (ctypes.c_int64 * max(len(strides), 1))(*strides)
        self.managed = dl.DLManagedTensorVersioned() if versioned else dl.DLManagedTensor()
        if versioned:
            self.managed.version.major, self.managed.version.minor = major, minor
            self.managed.flags = flags
        t = self.managed.dl_tensor
        t.data = ctypes.addressof(self._memory) if data else None
        t.device.device_type, t.device.device_id = device
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        if not null_shape:
            t.shape = self._shape
        if not null_strides:
            t.strides = self._strides

        def deleter(address):
            assert address == ctypes.addressof(self.managed)
            self.deleted += 1

        self._deleter = dl.DLPACK_DELETER(deleter)
        self.managed.deleter = self._deleter

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, **kwargs):
        self.calls.append({"stream": stream, "max_version": max_version, **kwargs})
        if self.legacy_only and (max_version is not None or kwargs):
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.reject_stream and stream == -1:
            raise ValueError("stream -1 not supported")
        return new_capsule(ctypes.addressof(self.managed), self.versioned)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"ndim": -1}, "negative ndim"),
        ({"ndim": 65}, "ndim=65"),
        ({"null_shape": True}, "NULL shape"),
        ({"shape": (2, -3)}, "negative extent -3 in mode 1"),
        ({"major": 2, "ndim": -7, "null_shape": True}, r"version 2\.1; dlmg reads major version 1"),
        ({"major": 0}, r"version 0\.1"),
        ({"code": 99}, "code=99"),
        ({"bits": 7}, "bits=7"),
        ({"lanes": 0}, "lanes=0"),
        ({"device": (99, 0)}, "device_type=99"),
        ({"device": (1, -1)}, "device_id=-1"),
        ({"data": False}, "NULL data"),
        ({"versioned": False, "ndim": -2}, "negative ndim"),
        ({"versioned": False, "code": 42}, "code=42"),
    ],
)
def test_bad_capsule_rejected_and_deleted_once(kwargs, message):
    producer = _Fake(**kwargs)
    with pytest.raises(DLPackError, match=message) as excinfo:
        dl.inspect(producer)
    assert isinstance(excinfo.value, BufferError)
    assert producer.deleted == 1


def test_null_data_allowed_when_empty_and_null_strides_mean_contiguous():
    producer = _Fake(shape=(0, 3), data=False, null_strides=True)
    info = dl.inspect(producer)
    assert info.data == 0 and info.size == 0 and producer.deleted == 1
    producer = _Fake(shape=(2, 3), strides=(99, 99), null_strides=True)
    info = dl.inspect(producer)
    assert info.strides == (3, 1) and info.strides_given is False and info.is_c_contiguous


def test_flags_and_versions_read():
    info = dl.inspect(_Fake(flags=dl.READ_ONLY | dl.IS_COPIED, minor=7))
    assert info.readonly and info.is_copied and info.version == (1, 7)
    info = dl.inspect(_Fake(versioned=False))
    assert info.version is None and info.flags == 0
    info = dl.inspect(_Fake(code=6, bits=8, shape=(3,), strides=(1,), ndim=1))
    assert info.dtype == "bool"
    info = dl.inspect(_Fake(code=17, bits=4, lanes=2, shape=(3,), strides=(1,), ndim=1))
    assert info.dtype == "float4_e2m1fn_x2" and info.itemsize == 1


def test_negotiation_asks_versioned_first_then_legacy():
    producer = _Fake()
    dl.inspect(producer)
    assert producer.calls == [{"stream": None, "max_version": dl.DLPACK_VERSION}]

    legacy = _Fake(versioned=False, legacy_only=True)
    assert dl.inspect(legacy).version is None
    assert [c["max_version"] for c in legacy.calls] == [dl.DLPACK_VERSION, None]
    assert legacy.deleted == 1


def test_negotiation_cuda_stream():
    cuda = _Fake(device=(2, 1))
    info = dl.inspect(cuda)  # metadata only: the fake device memory is never touched
    assert info.device == Device("cuda", 1)
    assert cuda.calls == [{"stream": -1, "max_version": dl.DLPACK_VERSION}]

    picky = _Fake(device=(2, 0), reject_stream=True)
    dl.inspect(picky)
    assert [c["stream"] for c in picky.calls] == [-1, None]
    assert picky.deleted == 1

    rocm_legacy = _Fake(device=(10, 0), versioned=False, legacy_only=True)
    dl.inspect(rocm_legacy)
    assert rocm_legacy.calls == [
        {"stream": -1, "max_version": dl.DLPACK_VERSION},
        {"stream": -1, "max_version": None},
    ]


def test_foreign_capsule_names():
    producer = _Fake()
    capsule = new_capsule(ctypes.addressof(producer.managed), versioned=True)
    dl.inspect(capsule)
    with pytest.raises(DLPackError, match="already consumed"):
        dl.inspect(capsule)
    assert producer.deleted == 1

    other = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
        ("PyCapsule_New", ctypes.pythonapi)
    )
    with pytest.raises(DLPackError, match="not a DLPack tensor"):
        dl.inspect(other(ctypes.addressof(producer.managed), b"something_else", None))
    assert producer.deleted == 1


# --------------------------------------------------------------------------
# CUDA producers (need a CUDA GPU)


@pytest.mark.gpu
def test_inspect_cuda_producers():
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    jnp = pytest.importorskip("jax.numpy")
    cuda0 = Device("cuda", 0)
    t = torch.arange(24.0, device="cuda").reshape(4, 6)
    for view in (t, t.t(), t[1:, 2:], torch.ones(3, dtype=torch.bfloat16, device="cuda")):
        info = dl.inspect(view)  # passes stream=-1: no synchronisation for metadata
        assert info.device == cuda0 and info.ptr == view.data_ptr()
        assert info.shape == tuple(view.shape) and info.strides == tuple(view.stride())
    c = cp.arange(12, dtype=cp.float32).reshape(3, 4)[:, ::2]
    info = dl.inspect(c)
    assert info.device == cuda0 and info.ptr == c.data.ptr and info.strides == (4, 2)
    x = jnp.ones((2, 3), jnp.float32)
    if x.devices().pop().platform == "gpu":
        info = dl.inspect(x)
        assert info.device == cuda0 and info.ptr == x.unsafe_buffer_pointer()
