"""The interchange matrix on CUDA: CuPy, torch and JAX producers x consumers.

Needs a CUDA GPU (``pytest -m gpu``); skipped, with the reason, without one.
Each cell proves zero-copy by data pointers and values, or expects the
documented error (the same rules as ``tests/test_interchange_matrix.py``).

torch refuses to export a CUDA tensor that is not on its current device;
dlmg's export goes through ``torch.cuda.device(index)``. With two or more GPUs
the test puts the tensor on ``cuda:1`` while ``cuda:0`` is current; with one
GPU it sets the current device explicitly and checks the export still goes
through dlmg's path (the refusal itself needs a second GPU to show).
"""

from __future__ import annotations

import importlib.util
import re

import pytest

pytestmark = pytest.mark.gpu

np = pytest.importorskip("numpy")

from dlmg import Device, get_adapter  # noqa: E402
from dlmg.errors import CopyRequiredError, DeviceError, DtypeError  # noqa: E402
from dlmg.testing import host_values, importer_agrees  # noqa: E402

FRAMEWORKS = ("cupy", "torch", "jax")
DTYPES = ("bool", "int8", "int32", "float16", "bfloat16", "float32", "float64", "complex64")
KINDS = ("contiguous", "transposed", "strided", "offset")
GPU0 = Device("cuda", 0)


def _need_all() -> None:
    missing = [m for m in FRAMEWORKS if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} with CUDA")


def _ml_dtypes():
    return pytest.importorskip("ml_dtypes")


def reference(dtype: str, shape) -> np.ndarray:
    n = int(np.prod(shape))
    v = np.arange(n).reshape(shape) % 100
    if dtype == "bool":
        return (v % 2).astype(bool)
    if dtype.startswith("complex"):
        return (v - 1j * (v + 1)).astype(dtype)
    return v.astype(np.float32 if dtype == "bfloat16" else dtype)


def _view(x, kind: str, lib: str):
    if kind == "transposed":
        return x.permute(2, 0, 1) if lib == "torch" else x.transpose(2, 0, 1)
    if kind == "strided":
        return x[:, ::2]
    if kind == "offset":
        return x[1:]
    return x


_SHAPES = {"contiguous": (2, 3, 4), "transposed": (2, 3, 4), "strided": (4, 8), "offset": (4, 8)}


def make_producer(producer: str, dtype: str, kind: str):
    """(array on cuda:0, address of its first element, expected values)."""
    ref = reference(dtype, _SHAPES[kind])
    want = _view(ref, kind, "numpy")
    if producer == "cupy":
        import cupy as cp

        with cp.cuda.Device(0):
            host = ref.astype(_ml_dtypes().bfloat16) if dtype == "bfloat16" else ref
            x = _view(cp.asarray(host), kind, "cupy")
        return x, int(x.data.ptr), want
    if producer == "torch":
        import torch

        t = torch.from_numpy(np.array(ref, order="C")).to("cuda:0")
        if dtype == "bfloat16":
            t = t.to(torch.bfloat16)
        x = _view(t, kind, "torch")
        return x, x.data_ptr(), want
    import jax
    import jax.numpy as jnp

    get_adapter("jax").check_dtype(dtype)
    dev = get_adapter("jax").native_device(GPU0)
    x = _view(jax.device_put(jnp.asarray(ref, dtype=jnp.dtype(dtype)), dev), kind, "jax")
    return x, x.unsafe_buffer_pointer(), want


def expected(producer: str, consumer: str, dtype: str, kind: str, x64: bool):
    """(error class, message pattern) or None for zero-copy."""
    if producer == "jax" and dtype == "float64" and not x64:
        return DtypeError, "jax_enable_x64"
    if producer == consumer:
        return None
    if consumer == "jax":
        if dtype == "float64" and not x64:
            return DtypeError, "jax_enable_x64"
        if producer != "jax" and kind == "strided":
            return CopyRequiredError, "non-compact strides"
    return None


def _cells():
    for p in FRAMEWORKS:
        for c in FRAMEWORKS:
            for d in DTYPES:
                for k in KINDS:
                    yield pytest.param(p, c, d, k, id=f"{p}->{c}-{d}-{k}")


@pytest.mark.parametrize(("producer", "consumer", "dtype", "kind"), list(_cells()))
def test_cuda_cell(producer, consumer, dtype, kind):
    _need_all()
    import jax

    adapter = get_adapter(consumer)
    exp = expected(producer, consumer, dtype, kind, bool(jax.config.jax_enable_x64))
    if exp is not None:
        with pytest.raises(exp[0], match=exp[1]):
            x, _, _ = make_producer(producer, dtype, kind)
            adapter.from_dlpack(x, copy=False)
        return
    x, ptr, want = make_producer(producer, dtype, kind)
    out = adapter.from_dlpack(x, copy=False)
    adapter.synchronize_array(out)
    assert adapter.device_of(out) == GPU0
    assert adapter.shape_of(out) == want.shape and adapter.dtype_of(out) == dtype
    assert adapter.data_ptr(out) == ptr, "not zero-copy"
    got = host_values(adapter, out)
    assert np.array_equal(got, want.astype(got.dtype)), f"values differ:\n{got}\n!=\n{want}"


def test_cupy_refuses_host_memory_with_the_fix():
    _need_all()
    import torch

    cupy = get_adapter("cupy")
    for host in (np.arange(6, dtype=np.float32), torch.arange(6, dtype=torch.float32)):
        with pytest.raises(DeviceError, match=re.escape("to_device")):
            cupy.from_dlpack(host)
        with pytest.raises(DeviceError):
            cupy.from_dlpack(host, copy=False)
        moved = cupy.to_device(np.asarray(host), GPU0)  # the fix the message names
        assert cupy.device_of(moved) == GPU0
        copied = cupy.from_dlpack(host, copy=True)
        assert cupy.device_of(copied) == GPU0
        assert np.array_equal(host_values(cupy, copied), np.arange(6, dtype=np.float32))


def test_numpy_takes_cuda_memory_only_as_a_copy():
    _need_all()
    import cupy as cp

    x = cp.arange(6, dtype=cp.float32)
    with pytest.raises(CopyRequiredError):
        get_adapter("numpy").from_dlpack(x, copy=False)


def test_torch_export_whatever_the_current_device():
    """dlmg's export of a torch CUDA tensor works whatever device is current.

    With >= 2 GPUs: the tensor is on cuda:1 while cuda:0 is current, where
    torch's own ``__dlpack__`` raises BufferError. With one GPU the current
    device is set explicitly and the export checked through the same path.
    """
    _need_all()
    import torch

    T = get_adapter("torch")
    n = torch.cuda.device_count()
    idx = 1 if n >= 2 else 0
    t = torch.arange(8, dtype=torch.float32, device=f"cuda:{idx}")
    torch.cuda.set_device(0)
    try:
        if n >= 2:
            with pytest.raises(BufferError):
                t.__dlpack__(stream=None)  # torch's own refusal (the quirk)
        cap = T.export(t, max_version=(1, 0))
        from dlmg.testing import is_capsule

        assert is_capsule(cap)
        del cap
        for consumer in ("cupy", "jax"):
            a = get_adapter(consumer)
            out = a.from_dlpack(t, copy=False)
            assert a.data_ptr(out) == t.data_ptr() and a.device_of(out) == Device("cuda", idx)
            assert np.array_equal(host_values(a, out), np.arange(8, dtype=np.float32))
    finally:
        torch.cuda.set_device(0)


def test_cuda_moves_between_frameworks_and_host():
    _need_all()
    cupy, torch_a, jax_a = (get_adapter(n) for n in FRAMEWORKS)
    for a in (cupy, torch_a, jax_a):
        x = a.full((3, 4), 2, "float32", GPU0)
        assert a.device_of(x) == GPU0 and a.supports(GPU0)
        a.synchronize(GPU0)
        if a.name != "cupy":
            h = a.to_device(x, Device("cpu", 0))
            assert a.device_of(h).kind == "cpu"
            assert np.all(host_values(a, h) == 2)
    v = cupy.as_strided(cupy.full((4, 6), 1, "float32", GPU0), (3, 2), (1, 6), offset=7)
    assert cupy.strides_of(v) == (1, 6)


@pytest.mark.parametrize(("producer", "consumer", "dtype", "kind"),
                         [c for c in _cells() if c.values[0] != c.values[1]])
def test_cuda_importer_agrees_with_from_dlpack(producer, consumer, dtype, kind):
    """The importer ``to()`` uses gives, wherever it answers, what ``from_dlpack``
    gives (dtype, shape, values, zero-copy); where ``from_dlpack`` refuses, it
    declines or raises, so that ``to()`` reaches the clear error."""
    _need_all()
    try:
        x, _, _ = make_producer(producer, dtype, kind)
    except DtypeError:  # 64-bit JAX with x64 off: no such array
        return
    adapter = get_adapter(consumer)
    outcome = importer_agrees(adapter, get_adapter(producer), x, dtype, GPU0)
    if outcome == "declined":  # the quick import must exist for CUDA arrays of another framework
        assert adapter.importer(get_adapter(producer), dtype, x.shape) is not None


@pytest.mark.parametrize(("producer", "consumer"),
                         [(p, c) for p in FRAMEWORKS for c in FRAMEWORKS if p != c])
def test_cuda_importer_takes_plain_arrays_itself(producer, consumer):
    """Between different frameworks on a GPU, float32 fragments of a plain tensor
    have an importer, and it takes a contiguous array in zero-copy itself:
    neither declining nor raising, either of which sends ``to()`` to the full
    import."""
    _need_all()
    x, ptr, want = make_producer(producer, "float32", "contiguous")
    source, adapter = get_adapter(producer), get_adapter(consumer)
    take_in = adapter.importer(source, "float32", source.shape_of(x))
    assert take_in is not None
    for _ in range(2):
        got = take_in(x, GPU0)
        assert got is not None
        adapter.synchronize_array(got)
        assert adapter.data_ptr(got) == ptr
        assert np.array_equal(host_values(adapter, got), want)


@pytest.mark.parametrize("producer", FRAMEWORKS)
def test_cuda_fragments_report_and_export_like_their_arrays(producer):
    """A fragment of a CUDA array reports the array's own DLPack device from the
    start (wrapped, handed over by ``to()``, or a result), and every consumer takes
    it without a copy on the first export and on later ones (the kept exporter)."""
    _need_all()
    import dlmg

    arrays = [make_producer(producer, "float32", "contiguous")[0] for _ in range(2)]
    layout = dlmg.Layout.slab((4, 3, 4), 0, ["cuda:0", "cuda:0"])
    dt = dlmg.from_fragments(arrays, layout)
    for tensor in (dt, dt.to("torch"), dt.to("cupy"), dt + 1):
        for frag in tensor.fragments:
            own = frag.array.__dlpack_device__()
            assert frag.__dlpack_device__() == (int(own[0]), int(own[1]))
            for consumer in FRAMEWORKS:
                a = get_adapter(consumer)
                for _ in range(2):
                    if consumer == "jax" and frag.readonly and frag.framework != "jax":
                        # legacy capsules cannot say read-only (JAX's own arrays are taken as they are)
                        with pytest.raises(CopyRequiredError, match="read-only"):
                            a.from_dlpack(frag, copy=False)
                        continue
                    out = a.from_dlpack(frag, copy=False)
                    assert a.data_ptr(out) == frag.adapter.data_ptr(frag.array), f"{consumer} copied"
                    assert a.device_of(out) == GPU0


def test_torch_cuda_fragment_exports_after_its_tensor_changes():
    """What the kept exporter of a torch CUDA fragment checks on every export:
    grad turned on after the first export, and the current device."""
    _need_all()
    import cupy as cp
    import torch

    import dlmg

    t = torch.arange(6, dtype=torch.float32, device="cuda:0")
    dt = dlmg.from_fragments([t], dlmg.Layout.slab((6,), 0, ["cuda:0"]))
    frag = dt.fragments[0]
    assert int(cp.from_dlpack(frag).data.ptr) == t.data_ptr()
    t.requires_grad_(True)  # torch's own __dlpack__ refuses it now; dlmg exports through detach()
    with pytest.raises((RuntimeError, BufferError)):
        t.__dlpack__()
    assert int(cp.from_dlpack(frag).data.ptr) == t.data_ptr()
    torch.cuda.set_device(0)
    assert int(cp.from_dlpack(frag).data.ptr) == t.data_ptr()


def _capsule_name(capsule) -> str:
    import ctypes

    get = ctypes.pythonapi.PyCapsule_GetName
    get.restype, get.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return get(capsule).decode()


def test_torch_cuda_export_makes_the_capsule_itself_only_on_torchs_stream():
    """A torch CUDA tensor's export (a fragment's, or the producer to() hands to
    CuPy and JAX) makes the capsule without ``Tensor.__dlpack__`` only where the
    consumer names torch's current stream and asks nothing else; any other
    stream, a copy, or grad goes through the full export, which orders the
    streams or refuses."""
    _need_all()
    from functools import partial

    import torch

    from dlmg.adapters.torch._export import _same_stream_export
    from dlmg.adapters.torch._export import capsule_makers as _capsule_makers

    if _capsule_makers(torch) is None:
        pytest.skip("needs torch's CUDA capsule makers (torch._C._to_dlpack_versioned)")
    torch.cuda.set_device(0)
    t = torch.arange(8, dtype=torch.float32, device="cuda:0")
    full = []

    def slow(**keywords):
        full.append(keywords)
        return t.__dlpack__(**keywords)

    export = partial(_same_stream_export, torch, t, 0, slow)
    for keywords, name in (({"stream": 1, "max_version": (1, 0)}, "dltensor_versioned"),
                           ({"stream": None}, "dltensor"), ({}, "dltensor"),
                           ({"stream": 1, "max_version": (1, 0), "dl_device": (2, 0), "copy": False},
                            "dltensor_versioned")):
        capsule = export(**keywords)
        assert _capsule_name(capsule) == name
        assert torch.from_dlpack(capsule).data_ptr() == t.data_ptr()
    assert full == []
    side = torch.cuda.Stream()
    export(stream=side.cuda_stream, max_version=(1, 0))
    assert len(full) == 1  # another stream: torch's own export makes it wait
    with torch.cuda.stream(side):
        export(stream=side.cuda_stream)
    assert len(full) == 1  # torch's current stream is the side stream now
    export(stream=1, copy=True)
    export(stream=1, dl_device=(1, 0))
    assert len(full) == 3

    class Passing(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Passing():  # a mode may intercept __dlpack__: torch's own export runs under it
        export(stream=1)
    assert len(full) == 4
    sparse = t.to_sparse()
    with pytest.raises(BufferError, match="layout"):  # torch's own refusal, not a failing capsule maker
        _same_stream_export(torch, sparse, 0, sparse.__dlpack__, stream=1)
    t.requires_grad_(True)
    with pytest.raises(BufferError, match="gradient"):
        export(stream=1)
    assert len(full) == 5


def test_torch_importer_names_torchs_current_stream():
    """torch's importer asks a CUDA producer for the stream ``torch.from_dlpack``
    would name: its current stream on the array's device, 1 for the legacy
    default one, a side stream while one is current."""
    _need_all()
    import torch

    from dlmg.adapters.torch._export import consumer_stream as _consumer_stream

    torch.cuda.set_device(0)
    default = torch.cuda.current_stream(0).cuda_stream
    assert _consumer_stream(torch, 0) == (1 if default == 0 else default)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        assert _consumer_stream(torch, 0) == side.cuda_stream != 1


@pytest.mark.parametrize("consumer", ["cupy", "jax"])
def test_torch_cuda_hand_over_waits_for_torchs_queued_work(consumer):
    """Values torch is still writing on its stream when CuPy (on its default
    stream, torch's own, or a stream of its own) or JAX takes a fragment in,
    through an export or ``to()``, are the values read: the consumer's stream
    waits for torch's."""
    _need_all()
    import contextlib

    import cupy as cp
    import torch

    import dlmg

    torch.cuda.set_device(0)
    n = 1 << 20
    layout = dlmg.Layout.slab((2 * n,), 0, ["cuda:0", "cuda:0"])
    streams = ("own stream", "default stream") if consumer == "cupy" else ("own stream",)
    for route in ("export", "to"):
        for where in streams:
            arrays = [torch.zeros(n, device="cuda:0") for _ in range(2)]
            dt = dlmg.from_fragments(arrays, layout)
            side = cp.cuda.Stream(non_blocking=True)
            torch.cuda._sleep(200_000_000)  # about 0.1 s of GPU time on torch's stream, then the writes
            for a in arrays:
                a.fill_(7.0)
            with side if where == "own stream" else contextlib.nullcontext():
                if route == "export":
                    import jax.dlpack

                    take = cp.from_dlpack if consumer == "cupy" else jax.dlpack.from_dlpack
                    taken = [take(f) for f in dt.fragments]
                else:
                    taken = [f.array for f in dt.to(consumer).fragments]
                sums = [x.sum() for x in taken]
                if consumer == "cupy":
                    cp.cuda.get_current_stream().synchronize()
            got = [float(x) for x in sums]
            assert got == [7.0 * n] * 2, f"{route}, {consumer} on its {where}: read before torch's writes ({got})"
