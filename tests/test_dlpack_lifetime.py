""":class:`dlmg.dlpack.DLPackExporter`: the protocol, zero-copy hand-over to
NumPy, PyTorch and JAX, and lifetime (owners, deleters, leaks, shutdown)."""

from __future__ import annotations

import ctypes
import gc
import operator
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import weakref

import numpy as np
import pytest

import dlmg.dlpack as dl
from dlmg.dlpack import DLPackExporter, live_exports
from dlmg.dlpack.capsule import capsule_name
from dlmg.errors import DLPackError, DeviceError, DtypeError


def aligned(n: int, dtype=np.float32, align: int = 64) -> np.ndarray:
    """A 1-d array whose data is ``align``-byte aligned (JAX imports those in place)."""
    dtype = np.dtype(dtype)
    raw = np.empty(n * dtype.itemsize + align, np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start : start + n * dtype.itemsize].view(dtype)


class Owner:
    """Host memory with a release counter, standing in for a foreign allocator."""

    def __init__(self, nbytes: int, released: list):
        self.memory = (ctypes.c_char * (nbytes + 64))()
        self.address = (ctypes.addressof(self.memory) + 63) & ~63
        weakref.finalize(self, released.append, 1)


class _Holder:
    """A producer around one capsule (NumPy's from_dlpack wants an object)."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


# --------------------------------------------------------------------------
# zero-copy hand-over


def test_numpy_consumer_zero_copy():
    base = np.arange(12, dtype=np.float32)
    exporter = DLPackExporter(base, (3, 4), "float32", "cpu")
    view = np.from_dlpack(exporter)
    assert view.ctypes.data == base.ctypes.data
    np.testing.assert_array_equal(view, base.reshape(3, 4))
    view[0, 0] = 42.0  # shared memory
    assert base[0] == 42.0
    assert exporter.owner.obj is base


def test_numpy_consumer_strides_offset_negative():
    base = np.arange(32, dtype=np.int32)
    address = base.ctypes.data
    t = np.from_dlpack(DLPackExporter(address, (4, 8), np.int32, "cpu", strides=(1, 4), owner=base))
    np.testing.assert_array_equal(t, base.reshape(8, 4).T)
    o = np.from_dlpack(DLPackExporter(address, (3,), "int32", "cpu", byte_offset=8, owner=base))
    assert o.ctypes.data == address + 8 and o.tolist() == [2, 3, 4]
    r = np.from_dlpack(DLPackExporter(address + 4 * 31, (32,), "int32", "cpu", strides=(-1,), owner=base))
    np.testing.assert_array_equal(r, base[::-1])


def test_torch_consumer_zero_copy():
    torch = pytest.importorskip("torch")
    base = np.arange(24, dtype=np.float64)
    address = base.ctypes.data
    t = torch.from_dlpack(DLPackExporter(base, (4, 6), "float64", "cpu"))
    assert t.data_ptr() == address and t.tolist() == base.reshape(4, 6).tolist()
    tt = torch.from_dlpack(DLPackExporter(address, (6, 4), "float64", "cpu", strides=(1, 6), owner=base))
    assert tt.data_ptr() == address and tt.stride() == (1, 6)
    assert torch.equal(tt, torch.from_numpy(base.reshape(4, 6)).t())
    off = torch.from_dlpack(DLPackExporter(address, (2,), "float64", "cpu", byte_offset=16, owner=base))
    assert off.data_ptr() == address + 16 and off.tolist() == [2.0, 3.0]
    bf = torch.from_dlpack(DLPackExporter(np.zeros(4, np.uint16), (4,), "bfloat16", "cpu"))
    assert bf.dtype == torch.bfloat16
    boolean = np.array([True, False, True])
    b = torch.from_dlpack(DLPackExporter(boolean, (3,), "bool", "cpu"))
    assert b.tolist() == [True, False, True] and b.data_ptr() == boolean.ctypes.data
    c = np.arange(4, dtype=np.complex64) * 1j
    tc = torch.from_dlpack(DLPackExporter(c, (4,), "complex64", "cpu"))
    assert tc.data_ptr() == c.ctypes.data and np.array_equal(tc.numpy(), c)


def test_jax_consumer_zero_copy_needs_alignment():
    jnp = pytest.importorskip("jax.numpy")
    base = aligned(12)
    base[:] = np.arange(12)
    exporter = DLPackExporter(base, (3, 4), "float32", "cpu")
    x = jnp.from_dlpack(exporter)  # JAX asks for a legacy capsule
    assert x.unsafe_buffer_pointer() == base.ctypes.data
    np.testing.assert_array_equal(np.asarray(x), base.reshape(3, 4))
    bf = aligned(6, np.uint16)
    xb = jnp.from_dlpack(DLPackExporter(bf, (2, 3), "bfloat16", "cpu"))
    assert xb.dtype == jnp.bfloat16 and xb.unsafe_buffer_pointer() == bf.ctypes.data
    # JAX copies memory that is not 64-byte aligned, or refuses with copy=False.
    shifted = aligned(13)[1:]
    live = live_exports()
    with pytest.raises(ValueError, match="aligned"):
        jnp.from_dlpack(DLPackExporter(shifted, (12,), "float32", "cpu"), copy=False)
    gc.collect()
    assert live_exports() == live  # released even when the consumer refuses


def test_readonly():
    base = np.arange(4.0)
    base.flags.writeable = False
    exporter = DLPackExporter(base, (4,), "float64", "cpu")
    assert exporter.readonly  # inferred from the buffer
    view = np.from_dlpack(exporter)
    assert not view.flags.writeable and view.ctypes.data == base.ctypes.data
    assert dl.inspect(exporter).readonly
    with pytest.raises(BufferError, match="read-only"):
        exporter.__dlpack__()  # legacy capsules cannot carry read-only-ness
    capsule = exporter.__dlpack__(copy=True)  # ...but a private copy is fine
    copied = np.from_dlpack(_Holder(capsule))
    assert copied.ctypes.data != base.ctypes.data and copied.tolist() == base.tolist()
    assert DLPackExporter(np.zeros(2), (2,), "float64", "cpu", readonly=True).readonly


def test_copy_true_sets_is_copied_and_keeps_layout():
    base = np.arange(20, dtype=np.int16)
    exporter = DLPackExporter(base.ctypes.data + 2 * 19, (5, 2), "int16", "cpu", strides=(-2, -10), owner=base)
    info = dl.inspect(_Holder(exporter.__dlpack__(max_version=(1, 1), copy=True)))
    assert info.is_copied and not info.readonly and info.strides == (-2, -10)
    assert info.ptr != exporter.ptr
    copied = np.from_dlpack(_Holder(exporter.__dlpack__(max_version=(1, 0), copy=True)))
    np.testing.assert_array_equal(copied, np.from_dlpack(exporter))
    assert info.data % 64 == 0  # copies are 64-byte aligned, so JAX takes them in place
    empty = DLPackExporter(base, (0, 3), "int16", "cpu")
    assert dl.inspect(_Holder(empty.__dlpack__(max_version=(1, 0), copy=True))).size == 0


def test_protocol_arguments():
    base = np.zeros(4, np.float32)
    exporter = DLPackExporter(base, (4,), "float32", "cpu")
    assert exporter.__dlpack_device__() == (dl.DLDeviceType.CPU, 0)
    assert capsule_name(exporter.__dlpack__()) == b"dltensor"
    assert capsule_name(exporter.__dlpack__(max_version=(0, 8))) == b"dltensor"
    assert capsule_name(exporter.__dlpack__(max_version=(1, 0))) == b"dltensor_versioned"
    assert dl.inspect(_Holder(exporter.__dlpack__(max_version=(2, 5)))).version == (1, 1)
    assert capsule_name(exporter.__dlpack__(dl_device=(1, 0), copy=False)) == b"dltensor"
    with pytest.raises(ValueError, match="stream must be None"):
        exporter.__dlpack__(stream=1)
    with pytest.raises(ValueError, match="stream must be None"):
        exporter.__dlpack__(stream=-1)
    with pytest.raises(BufferError, match="dl_device=.2, 0."):
        exporter.__dlpack__(dl_device=(2, 0))
    with pytest.raises(TypeError, match="max_version"):
        exporter.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="dl_device"):
        exporter.__dlpack__(dl_device="cpu")
    with pytest.raises(TypeError, match="copy"):
        exporter.__dlpack__(copy="yes")


def test_device_memory_streams_and_copies():
    # Never dereferenced: the capsules are only created, inspected and dropped.
    cuda = DLPackExporter(0x7F0000000000, (8,), "float32", "cuda:1")
    assert cuda.__dlpack_device__() == (dl.DLDeviceType.CUDA, 1)
    for stream in (None, -1, 1, 2, 0xDEADBEEF):
        capsule = cuda.__dlpack__(stream=stream, max_version=(1, 1))
        assert dl.device_of(capsule) == dl.device_of(cuda)
    with pytest.raises(ValueError, match="stream=0"):
        cuda.__dlpack__(stream=0)
    with pytest.raises(TypeError, match="stream"):
        cuda.__dlpack__(stream=1.5)
    with pytest.raises(BufferError, match="host memory only"):
        cuda.__dlpack__(copy=True)
    with pytest.raises(BufferError, match="does not move"):
        cuda.__dlpack__(dl_device=(2, 0))
    rocm = DLPackExporter(0x7F0000000000, (8,), "float32", "rocm")
    rocm.__dlpack__(stream=0)
    with pytest.raises(ValueError, match="stream=1"):
        rocm.__dlpack__(stream=1)
    pinned = DLPackExporter(0x7F0000000000, (8,), "float32", "cuda_host")
    assert dl.device_of(pinned.__dlpack__(dl_device=(1, 0))) == dl.device_of(np.zeros(1))
    gc.collect()
    live_exports()


@pytest.mark.parametrize(
    "args, kwargs, error, message",
    [
        ((0, (3,), "float32", "cpu"), {}, ValueError, "pointer is 0"),
        ((-8, (3,), "float32", "cpu"), {}, ValueError, "non-negative address"),
        ((2**64, (3,), "float32", "cpu"), {}, ValueError, "non-negative address"),
        ((4096, (3, -1), "float32", "cpu"), {}, ValueError, r"shape\[1\] must be >= 0, got -1"),
        ((4096, (3, 2), "float32", "cpu"), {"strides": (1,)}, ValueError, "strides has 1 entries"),
        ((4096, (3,), "float33", "cpu"), {}, DtypeError, "float33"),
        ((4096, (3,), "float32", "tpu"), {}, DeviceError, "tpu"),
        ((4096, (3,), "float32", "cpu"), {"byte_offset": -4}, ValueError, "byte_offset"),
        ((4096, (3,), "float32", "cpu"), {"readonly": 1}, TypeError, "readonly"),
        ((4096, (3.0,), "float32", "cpu"), {}, TypeError, r"shape\[0\]"),
        ((4096, "abc", "float32", "cpu"), {}, TypeError, "shape"),
        ((4096, (1,) * 65, "float32", "cpu"), {}, ValueError, "65 modes"),
        (("text", (3,), "float32", "cpu"), {}, TypeError, "buffer protocol"),
        ((np.zeros(4, np.float32), (5,), "float32", "cpu"), {}, ValueError, "outside the 16-byte buffer"),
        ((np.zeros(4, np.float32), (2,), "float32", "cpu"), {"strides": (-1,)}, ValueError, "outside"),
        ((np.zeros(4, np.float32), (4,), "float32", "cuda"), {}, ValueError, "host"),
    ],
)
def test_exporter_validation(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        DLPackExporter(*args, **kwargs)


def test_exporter_address_forms():
    base = np.arange(4, dtype=np.int32)
    for address in (base.ctypes.data, np.intp(base.ctypes.data), ctypes.c_void_p(base.ctypes.data)):
        exporter = DLPackExporter(address, (4,), "int32", "cpu", owner=base)
        assert exporter.pointer == base.ctypes.data and exporter.owner is base
        assert np.from_dlpack(exporter).tolist() == [0, 1, 2, 3]
    with pytest.raises(TypeError, match="True"):
        DLPackExporter(True, (0,), "int32", "cpu")


def test_exporter_accepts_empty_null_and_bytes():
    empty = DLPackExporter(0, (0, 4), "float32", "cpu")
    assert dl.inspect(empty).data == 0
    frozen = DLPackExporter(b"\x01\x00\x00\x00\x02\x00\x00\x00", (2,), "int32", "cpu")
    assert frozen.readonly and np.from_dlpack(frozen).tolist() == [1, 2]
    assert "int32" in repr(frozen)
    info = dl.inspect(DLPackExporter(np.zeros(4, np.uint8), 4, "float4_e2m1fn", "cpu"))
    assert info.is_subbyte_padded and info.dtype == "float4_e2m1fn"


# --------------------------------------------------------------------------
# lifetime


def test_consumers_outlive_the_producer_and_release_the_owner_once():
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    released: list = []
    owner = Owner(64, released)
    ctypes.memmove(owner.address, np.arange(16, dtype=np.float32).ctypes.data, 64)
    exporter = DLPackExporter(owner.address, (16,), "float32", "cpu", owner=owner)
    start = live_exports()
    a = np.from_dlpack(exporter)
    t = torch.from_dlpack(exporter)
    x = jnp.from_dlpack(exporter)
    assert x.unsafe_buffer_pointer() == owner.address
    del owner, exporter
    gc.collect()
    assert released == [] and live_exports() == start + 3
    expected = list(range(16))
    assert a.tolist() == expected and t.tolist() == expected and np.asarray(x).tolist() == expected
    del a
    gc.collect()
    assert released == []
    del t
    assert released == []
    del x
    gc.collect()
    assert released == [1] and live_exports() == start
    gc.collect()
    assert released == [1]


def test_capsule_consumed_once():
    torch = pytest.importorskip("torch")
    released: list = []
    owner = Owner(16, released)
    exporter = DLPackExporter(owner.address, (4,), "int32", "cpu", owner=owner)
    del owner
    capsule = exporter.__dlpack__(max_version=(1, 0))
    t = torch.from_dlpack(capsule)
    with pytest.raises(RuntimeError, match="consumed"):
        torch.from_dlpack(capsule)
    with pytest.raises(DLPackError, match="already consumed"):
        dl.inspect(capsule)
    del exporter, capsule
    live_exports()
    assert released == []
    del t
    assert released == [1]


def test_unconsumed_capsule_is_reclaimed():
    released: list = []
    owner = Owner(16, released)
    exporter = DLPackExporter(owner.address, (4,), "int32", "cpu", owner=owner)
    del owner
    start = live_exports()
    capsules = [exporter.__dlpack__(), exporter.__dlpack__(max_version=(1, 1))]
    del exporter
    assert live_exports() == start + 2 and released == []
    capsules.pop()
    assert live_exports() == start + 1 and released == []
    capsules.pop()
    assert live_exports() == start and released == [1]


def test_consumer_rejection_keeps_its_error():
    # NumPy cannot import bfloat16 and drops the capsule with its error set;
    # no capsule destructor runs Python then, so the error arrives intact.
    released: list = []
    owner = Owner(8, released)
    exporter = DLPackExporter(owner.address, (4,), "bfloat16", "cpu", owner=owner)
    del owner
    with pytest.raises(Exception) as excinfo:
        np.from_dlpack(exporter)
    assert not isinstance(excinfo.value, SystemError)
    del exporter
    live_exports()
    assert released == [1]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_deleter_with_exception_pending_still_releases():
    released: list = []
    owner = Owner(16, released)
    exporter = DLPackExporter(owner.address, (4,), "int32", "cpu", owner=owner)
    del owner
    live = live_exports()

    class Index:
        def __index__(self):
            return [np.from_dlpack(exporter)]  # noqa: F821 (exporter is deleted before this runs) freed by CPython after it sets TypeError

    with pytest.raises((TypeError, SystemError)):
        operator.index(Index())
    del exporter
    gc.collect()
    assert released == [1] and live_exports() == live


def test_deleter_called_from_another_thread():
    torch = pytest.importorskip("torch")
    released: list = []
    owner = Owner(16, released)
    t = torch.from_dlpack(DLPackExporter(owner.address, (4,), "int32", "cpu", owner=owner))
    del owner
    box = [t]
    del t
    worker = threading.Thread(target=box.clear)
    worker.start()
    worker.join()
    assert released == [1]


def _rss() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return None


@pytest.mark.slow
def test_memory_flat_over_many_cycles():
    torch = pytest.importorskip("torch")
    base = np.arange(16, dtype=np.float32)
    exporter = DLPackExporter(base, (4, 4), "float32", "cpu")

    def cycle(n: int) -> None:
        for i in range(n):
            np.from_dlpack(exporter)
            if i % 5 == 0:
                torch.from_dlpack(exporter)
                exporter.__dlpack__(max_version=(1, 1))  # dropped unconsumed

    cycle(2_000)
    gc.collect()
    live = live_exports()
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    cycle(5_000)
    gc.collect()
    assert live_exports() == live
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename"))
    assert grown < 64 * 1024, f"{grown} bytes more after 5,000 export/import cycles"

    rss = _rss()
    cycle(100_000)
    gc.collect()
    assert live_exports() == live
    if rss is not None:
        assert _rss() - rss < 8 * 2**20, "RSS grew over 100,000 export/import cycles"


_SHUTDOWN_SCRIPT = textwrap.dedent(
    """
    import atexit, ctypes, numpy as np, torch, jax.numpy as jnp
    import dlmg.dlpack as dl

    class Owner:
        def __init__(self, tag):
            self.tag = tag
            self.memory = (ctypes.c_char * 128)()
            self.address = (ctypes.addressof(self.memory) + 63) & ~63
        def __del__(self):
            print("released", self.tag, flush=True)

    def exporter(tag):
        owner = Owner(tag)
        return dl.DLPackExporter(owner.address, (16,), "float32", "cpu", owner=owner)

    KEEP_NP = np.from_dlpack(exporter("np"))
    KEEP_TORCH = torch.from_dlpack(exporter("torch"))
    KEEP_JAX = jnp.from_dlpack(exporter("jax"))
    KEEP_CAPSULES = [exporter("capsule").__dlpack__(), exporter("capsule").__dlpack__(max_version=(1, 1))]
    CYCLE = [np.from_dlpack(exporter("cycle"))]
    CYCLE.append(CYCLE)
    AT_EXIT = [torch.from_dlpack(exporter("atexit"))]
    atexit.register(AT_EXIT.clear)
    print("ok", flush=True)
    """
)


@pytest.mark.slow
def test_deleters_at_interpreter_shutdown():
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    env = dict(os.environ, JAX_PLATFORMS="cpu", TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", _SHUTDOWN_SCRIPT], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.split()
    assert lines[:1] == ["ok"]
    # Released normally while atexit handlers run; at finalisation deleters do nothing.
    assert "atexit" in lines


@pytest.mark.gpu
def test_cuda_memory_exported_zero_copy():
    torch = pytest.importorskip("torch")
    cp = pytest.importorskip("cupy")
    jnp = pytest.importorskip("jax.numpy")
    released: list = []
    source = torch.arange(12.0, device="cuda").reshape(3, 4)
    address = source.data_ptr()
    weakref.finalize(source, released.append, 1)
    live = live_exports()
    exporter = DLPackExporter(address, (3, 4), "float32", "cuda:0", owner=source)
    t = torch.from_dlpack(exporter)  # torch passes its current stream
    c = cp.from_dlpack(exporter)
    assert t.data_ptr() == address and c.data.ptr == address
    consumers = [t, c]
    x = jnp.ones(1)
    if x.devices().pop().platform == "gpu":
        consumers.append(jnp.from_dlpack(exporter))
        assert consumers[-1].unsafe_buffer_pointer() == address
    del source, exporter, t, c
    gc.collect()
    assert released == []
    expected = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(consumers[0].cpu().numpy(), expected)
    np.testing.assert_array_equal(cp.asnumpy(consumers[1]), expected)
    if len(consumers) == 3:
        np.testing.assert_array_equal(np.asarray(consumers[2]), expected)
    consumers.clear()
    gc.collect()
    torch.cuda.synchronize()
    assert released == [1] and live_exports() == live
