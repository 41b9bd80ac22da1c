"""The adapter contract for every framework, and one test per DLPack quirk.

The contract (:mod:`dlmg.testing`) runs once per framework and check, so one
failing framework or check does not hide the others; a framework that is not
installed is skipped with that reason. The quirk tests use the real
frameworks (no mocks) and pin the behaviour dlmg relies on, so a framework
release that changes it shows up here.
"""

from __future__ import annotations

import inspect

import importlib.util

import pytest

import dlmg
from dlmg import Device, get_adapter
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError, DtypeError, FragmentError, FrameworkError
from dlmg.testing import CHECKS, DEFAULT_DTYPES, ContractContext, host_values

np = pytest.importorskip("numpy")


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed")


_NO_X64 = tuple(d for d in DEFAULT_DTYPES if d not in ("int64", "uint64", "float64", "complex128"))
# (id, framework, device, dtypes, marks)
_TARGETS = [
    pytest.param("numpy", "cpu", DEFAULT_DTYPES, id="numpy"),
    pytest.param("torch", "cpu", DEFAULT_DTYPES, id="torch-cpu"),
    pytest.param("jax", "cpu:3", _NO_X64, id="jax-cpu3"),
    pytest.param("torch", "cuda:0", DEFAULT_DTYPES, id="torch-cuda", marks=pytest.mark.gpu),
    pytest.param("cupy", "cuda:0", DEFAULT_DTYPES, id="cupy-cuda", marks=pytest.mark.gpu),
    pytest.param("jax", "cuda:0", _NO_X64, id="jax-cuda", marks=pytest.mark.gpu),
]


@pytest.mark.parametrize("check", list(CHECKS))
@pytest.mark.parametrize(("framework", "device", "dtypes"), _TARGETS)
def test_contract(framework: str, device: str, dtypes: tuple[str, ...], check: str) -> None:
    _need(framework)
    adapter = get_adapter(framework)
    dev = Device.parse(device)
    if not adapter.supports(dev):
        pytest.skip(f"{framework} has no device {dev} here")
    # torch.compile's first host kernel builds C++ for tens of seconds: its kernels are
    # checked in test_ops_fused.py (test_torch_compile_builds_one_kernel_for_the_host)
    run_compiled = not (framework == "torch" and dev.is_host)
    CHECKS[check](ContractContext(adapter=adapter, device=dev, dtypes=dtypes, run_compiled=run_compiled))


# -- helpers ---------------------------------------------------------------------
@pytest.fixture
def jnp():
    """jax.numpy, with the host as JAX's default device (with a GPU present it is the GPU)."""
    _need("jax")
    import jax
    import jax.numpy as jnp

    with jax.default_device(jax.devices("cpu")[0]):
        yield jnp


@pytest.fixture
def torch():
    _need("torch")
    import torch

    return torch


@pytest.fixture(params=[False, True], ids=["x64-off", "x64-on"])
def x64(request):
    """Run with ``jax_enable_x64`` off and on, restoring the setting afterwards."""
    _need("jax")
    import jax

    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", request.param)
    try:
        yield request.param
    finally:
        jax.config.update("jax_enable_x64", before)


def aligned_empty(shape, dtype, align=64, misalign=0):
    """A NumPy array whose first element sits ``misalign`` bytes past an ``align`` boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape)) * dtype.itemsize
    raw = np.empty(nbytes + align + misalign, np.uint8)
    start = (-raw.ctypes.data) % align + misalign
    return raw[start:start + nbytes].view(dtype).reshape(shape)


J, T, N = (get_adapter(n) for n in ("jax", "torch", "numpy"))


# -- JAX -------------------------------------------------------------------------
def test_jax_exports_legacy_capsules_only(jnp):
    """JAX hands out a legacy "dltensor" capsule even when asked for a versioned one;
    NumPy and torch still take it in zero-copy."""
    from dlmg.testing import is_capsule

    x = jnp.arange(16, dtype=jnp.float32)
    cap = J.export(x, max_version=(1, 0))
    assert is_capsule(cap)
    import ctypes

    ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
    ctypes.pythonapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
    assert ctypes.pythonapi.PyCapsule_GetName(cap) == b"dltensor"
    del cap
    for consumer in (N, T):
        y = consumer.from_dlpack(x, copy=False)
        assert consumer.data_ptr(y) == J.data_ptr(x)
        assert np.array_equal(host_values(consumer, y), np.arange(16, dtype=np.float32))


def test_jax_export_of_a_sharded_array_names_its_shards(jnp):
    """An array on several devices is no single DLPack tensor: the error says how
    many devices and what to export instead, whatever keywords were asked."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices("cpu")[:2]), ("x",))
    for spec in (PartitionSpec("x"), PartitionSpec()):  # split, then replicated
        x = jax.device_put(np.ones(8, np.float32), NamedSharding(mesh, spec))
        for kwargs in ({"max_version": (1, 0)}, {}, {"stream": None, "max_version": (1, 0)}):
            with pytest.raises(DLPackError, match=r"on 2 devices .*addressable_shards\[i\]\.data"):
                J.export(x, **kwargs)


def test_jax_consumer_asks_for_legacy_only(jnp, torch):
    """JAX calls ``__dlpack__`` without ``max_version`` (it takes legacy capsules only);
    dlmg's route into JAX still works and stays zero-copy."""
    calls = []
    t = torch.arange(16, dtype=torch.float32)

    class Recording:  # a real torch tensor behind a recording producer
        def __dlpack__(self, **kwargs):
            calls.append(kwargs)
            return t.__dlpack__(**kwargs)

        def __dlpack_device__(self):
            return t.__dlpack_device__()

    import jax

    out = jax.dlpack.from_dlpack(Recording())
    assert calls and all(c.get("max_version") is None for c in calls)
    assert J.data_ptr(out) == t.data_ptr()
    y = J.from_dlpack(t, copy=False)
    assert J.data_ptr(y) == t.data_ptr()


_WIDE = {
    "float64": 2.0**24 + 1,  # loses its last bit in float32
    "int64": 2**40,  # becomes 0 in int32
    "uint64": 2**40 + 3,
    "complex128": complex(2.0**24 + 1, -1),
}


@pytest.mark.parametrize("dtype", list(_WIDE))
def test_jax_64bit_refused_without_x64(x64, dtype, torch):
    """With x64 off dlmg refuses 64-bit types (JAX would narrow them silently);
    with x64 on they come in zero-copy with exact values."""
    tdt = getattr(torch, dtype)
    t = torch.full((64,), _WIDE[dtype], dtype=tdt)
    if not x64:
        for call in (
            lambda: J.from_dlpack(t),
            lambda: J.from_dlpack(t, copy=True),
            lambda: J.empty((2,), dtype, Device("cpu", 0)),
            lambda: J.full((2,), 1, dtype, Device("cpu", 0)),
        ):
            with pytest.raises(DtypeError, match="jax_enable_x64"):
                call()
        return
    y = J.from_dlpack(t, copy=False)
    assert J.dtype_of(y) == dtype and J.data_ptr(y) == t.data_ptr()
    assert np.asarray(y)[0] == _WIDE[dtype]
    assert J.dtype_of(J.full((2,), 1, dtype, Device("cpu", 1))) == dtype


def test_jax_unaligned_host_buffer(jnp):
    """JAX copies host buffers not 64-byte aligned: copy=False raises CopyRequiredError,
    copy=None gives a correct copy; an aligned buffer comes in zero-copy."""
    bad = aligned_empty((4, 4), np.float32, misalign=16)
    bad[...] = np.arange(16, dtype=np.float32).reshape(4, 4)
    with pytest.raises(CopyRequiredError, match="64-byte aligned"):
        J.from_dlpack(bad, copy=False)
    y = J.from_dlpack(bad)
    assert J.data_ptr(y) != bad.ctypes.data
    assert np.array_equal(np.asarray(y), bad)
    good = aligned_empty((4, 4), np.float32)
    good[...] = bad
    z = J.from_dlpack(good, copy=False)
    assert J.data_ptr(z) == good.ctypes.data


@pytest.mark.parametrize("view", ["gaps", "negative", "broadcast"])
def test_jax_non_compact_strides(view, torch):
    """JAX cannot import non-compact strides: copy=False raises, copy=None copies right."""
    base = aligned_empty((6, 8), np.float32)
    base[...] = np.arange(48, dtype=np.float32).reshape(6, 8)
    x = {"gaps": base[:, ::2], "negative": base[::-1], "broadcast": np.broadcast_to(base[:1], (6, 8))}[view]
    with pytest.raises(CopyRequiredError, match="non-compact strides"):
        J.from_dlpack(x, copy=False)
    assert np.array_equal(np.asarray(J.from_dlpack(x)), x)
    if view == "gaps":  # the same through torch as producer
        t = torch.from_dlpack(base)[:, ::2]
        with pytest.raises(CopyRequiredError):
            J.from_dlpack(t, copy=False)
        assert np.array_equal(np.asarray(J.from_dlpack(t)), x)


def test_jax_transposed_import_is_zero_copy(torch):
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    y = J.from_dlpack(t.T, copy=False)
    assert J.data_ptr(y) == t.data_ptr()
    assert J.strides_of(y) == (1, 4)  # the layout is kept, so strides are reported
    assert np.array_equal(np.asarray(y), t.T.numpy())


def test_jax_cpu_devices_are_distinct_and_zero_copy(jnp, torch):
    """JAX's 8 CPU devices are distinct dlmg devices; host memory comes in on any of
    them zero-copy (JAX itself would copy for device=cpu:k)."""
    import jax

    if len(jax.devices("cpu")) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 before JAX starts")
    t = torch.arange(16, dtype=torch.float32)
    seen = set()
    for k in range(8):
        y = J.from_dlpack(t, device=Device("cpu", k), copy=False)
        assert J.device_of(y) == Device("cpu", k) and J.data_ptr(y) == t.data_ptr()
        seen.add(J.device_of(y))
    assert len(seen) == 8
    x = J.full((4,), 2, "float32", Device("cpu", 5))
    assert x.__dlpack_device__()[1] == 0  # JAX reports id 0 for every CPU device...
    assert J.device_of(x) == Device("cpu", 5)  # ...dlmg reads the real one
    moved = J.to_device(x, Device("cpu", 2))
    assert J.device_of(moved) == Device("cpu", 2) and J.data_ptr(moved) == J.data_ptr(x)
    assert J.from_dlpack(x) is x  # its own array on its own device: itself


def test_jax_multi_device_array_cannot_be_one_fragment(jnp):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    devs = jax.devices("cpu")
    if len(devs) < 2:
        pytest.skip("needs several JAX CPU devices")
    mesh = jax.sharding.Mesh(np.array(devs[:2]), ("x",))
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, PartitionSpec("x")))
    with pytest.raises(DeviceError, match="addressable_shards"):
        J.device_of(x)
    with pytest.raises(DLPackError, match="addressable_shards"):
        J.export(x)
    shard = x.addressable_shards[1].data
    assert J.device_of(shard) == Device("cpu", devs[1].id)


def test_jax_answers_kept_per_sharding_stay_right(jnp):
    """The DLPack device JAX arrays report is kept per single-device sharding: arrays
    sharing one, one device under another sharding type, and arrays on other devices
    all get their own answers (and devices); a multi-device array is never kept."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

    devs = jax.devices("cpu")
    if len(devs) < 2:
        pytest.skip("needs several JAX CPU devices")
    for d in devs[:2]:
        plain = jax.device_put(jnp.arange(4.0), SingleDeviceSharding(d))
        named = jax.device_put(jnp.arange(4.0), NamedSharding(Mesh(np.array([d]), ("x",)), PartitionSpec()))
        for x in (plain, named, plain + 1, named * 2):
            for _ in range(2):  # first answer, then the kept one
                assert J.device_of(x) == Device("cpu", d.id)
                assert J.dlpack_device(x) == tuple(int(v) for v in x.__dlpack_device__())
    both = jax.device_put(jnp.arange(8.0), NamedSharding(Mesh(np.array(devs[:2]), ("x",)), PartitionSpec("x")))
    for _ in range(2):
        with pytest.raises(DeviceError, match="on 2 devices"):
            J.device_of(both)


def test_jax_exporter_goes_through_jaxlib_for_what_the_array_gives_as_it_is(jnp):
    """A JAX fragment's exporter hands what a consumer asks of the array where it
    lies (a stream, a DLPack version) to jaxlib's export directly, where this
    jaxlib has it, and everything else (a copy, another device, a version JAX
    lacks) to the array's own ``__dlpack__``."""
    import jax
    import torch

    from dlmg.adapters.jax import _jaxlib as jax_adapter

    x = jnp.arange(4.0)
    export = J.exporter(x)
    if jax_adapter._ROUTE.find().exporter is None:
        assert export == x.__dlpack__
        return
    assert export != x.__dlpack__
    for keywords in ({}, {"stream": None}, {"stream": None, "max_version": (1, 0)},
                     {"stream": None, "max_version": (1, 0), "dl_device": None, "copy": False}):
        assert torch.from_dlpack(export(**keywords)).data_ptr() == x.unsafe_buffer_pointer()
    copied = torch.from_dlpack(export(stream=None, copy=True))  # only the array's own export copies
    assert copied.data_ptr() != x.unsafe_buffer_pointer()
    assert copied.tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(BufferError):
        export(max_version=(0, 1))  # JAX's own refusal
    on_three = jax.device_put(x, jax.devices("cpu")[3])
    moved = torch.from_dlpack(J.exporter(on_three)(stream=None))
    assert moved.data_ptr() == on_three.unsafe_buffer_pointer()
    shared = jax.sharding.NamedSharding(jax.sharding.Mesh(jax.devices("cpu")[:2], ("x",)),
                                        jax.sharding.PartitionSpec("x"))
    both = jax.device_put(x, shared)
    assert jax_adapter.quick_exporter(both, both.__dlpack__) is None  # no single-device array
    assert jax_adapter._ROUTE.exporter is not None  # no call refused its arguments


def test_jax_exporter_goes_the_arrays_own_way_when_jaxlib_refuses_the_call(jnp):
    """A jaxlib whose DLPack export takes other arguments (TypeError) sends exports
    to the array's own ``__dlpack__`` from then on, with the same capsule."""
    import torch

    from dlmg.adapters.jax import _jaxlib as jax_adapter

    if jax_adapter._ROUTE.find().exporter is None:
        pytest.skip("needs jaxlib's buffer_to_dlpack_managed_tensor (jaxlib 0.10.2 or later)")
    kept = jax_adapter._ROUTE.exporter
    calls = []

    def other_signature(*args, **keywords):
        calls.append(keywords)
        raise TypeError("buffer_to_dlpack_managed_tensor(): incompatible function arguments")

    x = jnp.arange(4.0)
    export = J.exporter(x)
    jax_adapter._ROUTE.exporter = other_signature
    try:
        for _ in range(2):
            assert torch.from_dlpack(export(stream=None)).data_ptr() == x.unsafe_buffer_pointer()
        assert len(calls) == 1 and jax_adapter._ROUTE.exporter is None
    finally:
        jax_adapter._ROUTE.exporter = kept


def test_jax_public_dlpack_api_takes_no_capsule(jnp):
    """Why the JAX adapter's quick DLPack route calls jaxlib's extension module
    (``dlmg.adapters.jax._jaxlib``) rather than public JAX API: ``jax.dlpack`` has
    only ``from_dlpack`` of a producer, which runs its Python checks on every
    import (35 against 6.4 us an array on the 2-core CPU), and no call taking a
    capsule onto a given device. When JAX's public API gains one, this fails:
    take the route through it instead."""
    import jax

    assert {n for n in dir(jax.dlpack) if not n.startswith("_")} == {"from_dlpack", "is_supported_dtype"}
    with pytest.raises(TypeError, match="__dlpack__"):
        jax.dlpack.from_dlpack(np.arange(4.0).__dlpack__())  # a capsule is no producer
    assert list(inspect.signature(jax.dlpack.from_dlpack).parameters) == ["external_array", "device", "copy"]


def test_jax_array_protocol_reads_no_frames(jnp):
    """The tensor's ``__jax_array__`` answers through JAX's public protocols alone:
    JAX's operators get an object that is no array (so Python goes on to the
    tensor's reflected operator), JAX's conversions read it through ``__array__``,
    which refuses saying what to call."""
    dt = dlmg.scatter(np.arange(8.0, dtype=np.float32), dlmg.Layout.slab((8,), 0, ["cpu"] * 2))
    answer = dt.__jax_array__()
    assert not hasattr(answer, "shape")  # no array: JAX's operators return NotImplemented
    with pytest.raises(TypeError, match=r"gather\(framework='jax'\)"):
        np.asarray(answer)
    np.testing.assert_array_equal(np.asarray((jnp.asarray(2.0, dtype=jnp.float32) * dt).gather()),
                                  2 * np.arange(8.0))
    with pytest.raises(TypeError, match=r"gather\(framework='jax'\)"):
        jnp.asarray(dt)


def test_jax_dlpack_signatures_are_read_from_the_class():
    """A producer class whose ``__dlpack__`` lacks the protocol's four keywords (an
    older JAX's) is read as such; its exports then go through the full export."""
    from dlmg.adapters.jax._jaxlib import takes_every_keyword as _takes_every_keyword

    class Older:  # the signature of a producer before the 2023 keywords
        def __dlpack__(self, stream=None):
            return None

    class Open:
        def __dlpack__(self, **kwargs):
            return None

    assert not _takes_every_keyword(Older)
    assert _takes_every_keyword(Open)


def test_deleted_jax_array_is_refused_by_name(jnp):
    """A deleted (or donated) JAX array has no memory to wrap: from_fragments names
    the fragment, also when arrays of its sharding were wrapped before."""
    import dlmg
    import jax

    d = jax.devices("cpu")[0]
    lay = dlmg.Layout.slab((8,), axis=0, devices=["cpu:0", "cpu:0"])
    alive = [jax.device_put(jnp.arange(4.0), d) for _ in range(2)]
    dlmg.from_fragments(alive, lay)  # the sharding's answers are now kept
    gone = jax.device_put(jnp.arange(4.0), d)
    gone.delete()
    with pytest.raises(FragmentError, match=r"fragment 1: .*JAX array .*deleted"):
        dlmg.from_fragments([alive[0], gone], lay)
    with pytest.raises(DeviceError, match="deleted"):
        J.device_of(gone)


def test_jax_has_no_views_and_is_immutable(jnp):
    x = jnp.arange(6.0)
    for call in (lambda: J.as_strided(x, (3,), (2,)), lambda: J.copy_into(x, x)):
        with pytest.raises(NotImplementedError):
            call()
        with pytest.raises(FrameworkError):
            call()


def test_jax_buffers_become_writable_in_torch(jnp):
    """torch ignores read-only-ness: a JAX buffer comes in writable. dlmg reports
    it through the producer's adapter (is_readonly), which fragments record."""
    x = jnp.arange(8, dtype=jnp.float32)
    t = T.from_dlpack(x, copy=False)
    assert T.data_ptr(t) == J.data_ptr(x)
    assert J.is_readonly(x) and not T.is_readonly(t)
    assert not t.is_inference() and t.requires_grad is False  # a plain writable tensor
    n = N.from_dlpack(x, copy=False)  # NumPy keeps it read-only
    assert N.is_readonly(n) and N.data_ptr(n) == J.data_ptr(x)


# -- NumPy -----------------------------------------------------------------------
def test_numpy_bfloat16_neither_imports_nor_exports(torch):
    t = torch.ones(4, dtype=torch.bfloat16)
    with pytest.raises(DtypeError, match="ml_dtypes") as info:
        N.from_dlpack(t)
    assert "torch, JAX or CuPy" in str(info.value)
    with pytest.raises(BufferError):  # also the protocol's exception
        N.from_dlpack(t)
    pytest.importorskip("ml_dtypes")
    a = N.full((4,), 1.5, "bfloat16", Device("cpu", 0))  # NumPy can hold it via ml_dtypes...
    assert N.dtype_of(a) == "bfloat16"
    with pytest.raises(DtypeError, match="bfloat16"):  # ...but not hand it over
        N.export(a)
    with pytest.raises(DtypeError, match="bfloat16"):
        T.from_dlpack(a)


def test_numpy_read_only_and_offsets():
    a = np.arange(24, dtype=np.float64)
    a.flags.writeable = False
    y = N.from_dlpack(a, copy=False)
    assert N.is_readonly(y) and N.data_ptr(y) == a.ctypes.data
    v = N.as_strided(np.arange(10.0)[::-1], (3,), (-2,), offset=-1)  # offsets count in memory elements
    assert v.tolist() == [8.0, 6.0, 4.0]
    assert not N.as_strided(a, (2,), (1,)).flags.writeable


def test_numpy_refuses_other_devices():
    with pytest.raises(DeviceError):
        N.empty((2,), "float32", Device("cuda", 0))
    assert N.supports(Device("cpu", 5)) and not N.supports(Device("cuda", 0))


# -- torch -----------------------------------------------------------------------
@pytest.mark.parametrize("producer", ["numpy", "dlpack-shim"])
def test_torch_negative_strides_do_not_crash(producer, torch):
    """torch.from_dlpack of negative strides aborts the process (C++ terminate);
    dlmg checks first: copy=False raises, copy=None copies right."""
    from dlmg.adapters._common import DLPackShim

    a = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1]
    src = a if producer == "numpy" else DLPackShim(a)
    with pytest.raises(CopyRequiredError, match="negative strides"):
        T.from_dlpack(src, copy=False)
    y = T.from_dlpack(src)
    assert np.array_equal(y.numpy(), a)
    with pytest.raises(NotImplementedError, match="negative"):
        T.as_strided(torch.arange(4.0), (2,), (-1,))


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "uint64", "float16", "float64", "complex64"])
def test_torch_takes_numpy_arrays_in_place(dtype, torch):
    """Writable NumPy arrays come in through torch.from_numpy: the same memory, no
    warning; what from_numpy refuses takes the general import and its messages."""
    import warnings

    a = np.ones((3, 4), dtype=dtype)[:, 1:]  # strided, non-zero offset
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = T.from_dlpack(a)
        frozen = np.ones(4, dtype=dtype)
        frozen.flags.writeable = False
        u = T.from_dlpack(frozen)  # torch.from_numpy would warn about a read-only array
    assert T.data_ptr(t) == a.ctypes.data and tuple(t.stride()) == (4, 1) and t.shape == (3, 3)
    assert T.data_ptr(u) == frozen.ctypes.data
    t[0, 0] = 0
    assert not a[0, 0]
    with pytest.raises(DLPackError, match="byte order"):
        T.from_dlpack(np.ones(3, ">f4"))
    backwards = a[::-1]
    with pytest.raises(CopyRequiredError, match="negative strides"):
        T.from_dlpack(backwards, copy=False)
    assert np.array_equal(T.from_dlpack(backwards).numpy(), backwards)


def test_torch_as_strided_storage_offset(torch):
    base = torch.arange(20.0)
    v = T.as_strided(base[4:], (2, 3), (5, 1), offset=2)
    assert v.tolist() == [[6.0, 7.0, 8.0], [11.0, 12.0, 13.0]]
    assert T.data_ptr(v) == base.data_ptr() + 6 * 4
    with pytest.raises(ValueError):
        T.as_strided(base[1:], (2,), (1,), offset=-5)


def test_torch_reads_numpy_read_only_as_writable(torch):
    a = aligned_empty((4,), np.float32)
    a.flags.writeable = False
    t = T.from_dlpack(a, copy=False)
    assert T.data_ptr(t) == a.ctypes.data and N.is_readonly(a) and not T.is_readonly(t)


def test_torch_grad_and_conj_exports(torch):
    """torch refuses to export tensors that require grad (dlmg exports the detached
    view, same memory) and tensors with the lazy conjugate bit (clear error)."""
    t = torch.arange(8.0, requires_grad=True)
    with pytest.raises(BufferError):
        t.__dlpack__()  # torch's own refusal
    for consumer in (N, J):
        y = consumer.from_dlpack(t, copy=False)
        assert consumer.data_ptr(y) == t.data_ptr()
    c = torch.ones(64, dtype=torch.complex64).conj()
    with pytest.raises(DLPackError, match="resolve_conj"):
        N.from_dlpack(c)
    with pytest.raises(DLPackError, match="resolve_conj"):
        T.export(c)


def test_copy_argument_is_validated(torch):
    for adapter, x in ((N, np.ones(2)), (T, torch.ones(2))):
        with pytest.raises(ValueError, match="copy"):
            adapter.from_dlpack(x, copy=1)


# -- generic ---------------------------------------------------------------------
def test_generic_adapter_holds_a_foreign_producer(torch):
    """Any __dlpack__ producer is held as is, described through dlmg.dlpack.inspect,
    and refuses math with a clear error."""
    from dlmg.adapters._common import DLPackShim
    from dlmg.registry import adapter_for

    t = torch.arange(12, dtype=torch.int16).reshape(3, 4).T
    foreign = DLPackShim(t)
    g = adapter_for(foreign)
    assert g.name == "dlpack" and g.from_dlpack(foreign) is foreign
    assert g.shape_of(foreign) == (4, 3) and g.strides_of(foreign) == (1, 4)
    assert g.dtype_of(foreign) == "int16" and g.data_ptr(foreign) == t.data_ptr()
    assert g.device_of(foreign) == Device("cpu", 0)
    for call in (g.namespace, lambda: g.empty((2,), "float32", Device("cpu", 0))):
        with pytest.raises(FrameworkError, match="import it"):
            call()
    y = T.from_dlpack(foreign, copy=False)
    assert y.data_ptr() == t.data_ptr()


def test_torch_allocation_of_names_the_tensor_a_view_was_carved_from(torch):
    # dlmg carves the fragments of one GPU out of one 1-D allocation; a copy plan
    # reads them all through it where the adapter can name it
    a = get_adapter("torch")
    whole = torch.arange(1000, dtype=torch.float32)
    view = a.as_strided(whole, (10, 10), (20, 1), 37)
    found, offset = a.allocation_of(view)
    assert found is whole and offset == 37 and float(found[offset + 21]) == float(view[1, 1])
    inner = whole[100:]  # a view of a view names the allocation: torch records the root
    assert a.allocation_of(a.as_strided(inner, (4,), (1,), 3)) == (whole, 103)
    assert a.allocation_of(whole) is None  # not a view
    assert a.allocation_of(torch.zeros(4, 5)[1:]) is None  # a view of a 2-D tensor
    found, offset = a.allocation_of(whole.view(torch.int32)[2:6])  # read as another dtype: its elements
    assert found.dtype == torch.int32 and offset == 2 and found.data_ptr() == whole.data_ptr()
