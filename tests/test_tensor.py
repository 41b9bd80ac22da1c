"""DistributedTensor and Fragment: wrapping arrays and raw memory without a
copy, exporting fragments, to(), element access, allocation and every bad
input's error."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import DistributedTensor, Fragment, Layout
from dlmg.errors import (
    CopyRequiredError,
    DeviceError,
    DtypeError,
    FragmentError,
    FrameworkError,
    LayoutError,
)

from _strategies import (
    check_fragments,
    expected_fragment,
    have,
    layouts,
    need,
    reference,
    to_numpy,
)


@pytest.fixture
def torch():
    need("torch")
    import torch

    return torch


@pytest.fixture
def jnp():
    need("jax")
    import jax.numpy as jnp

    return jnp


@pytest.fixture
def jax():
    need("jax")
    import jax

    if len(jax.devices("cpu")) < 8:
        pytest.skip("needs 8 JAX CPU devices")
    return jax


def _ptr(a) -> int:
    return dlmg.adapter_for(a).data_ptr(a)


def _slab_torch(torch):
    layout = Layout.slab((6, 4), 0, ["cpu"] * 3)
    pieces = [torch.arange(8, dtype=torch.float32).reshape(2, 4) + 8 * i for i in range(3)]
    return dlmg.from_fragments(pieces, layout), pieces


# -- from_fragments: zero-copy wrap --------------------------------------------------
def test_from_fragments_is_zero_copy(torch):
    dt, pieces = _slab_torch(torch)
    assert isinstance(dt, DistributedTensor)
    assert dt.shape == (6, 4) and dt.ndim == 2 and dt.size == 24 and dt.dtype == "float32"
    assert dt.nbytes == 96 and dt.itemsize == 4
    assert dt.frameworks == ("torch",)
    for frag, piece in zip(dt.fragments, pieces):
        assert frag.array is piece
        assert frag.framework == "torch" and frag.rank == 0 and frag.is_local
        assert frag.device == dlmg.Device("cpu", 0)
    np.testing.assert_array_equal(dt.gather(framework="numpy"), np.arange(24, dtype=np.float32).reshape(6, 4))


def test_fragment_attributes():
    layout = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=["cpu"] * 8)  # 2 replicas
    dt = dlmg.zeros(layout=layout, dtype="float32")
    f = dt.fragment(5)
    assert f is dt.fragments[5] is dt.fragment(-3)
    assert f.index == 5 and f.coords == (1, 0) and f.replica == 1
    assert f.layout == layout.fragment(5)
    assert f.blocks == ((1,), (0, 2, 4)) and f.shape == (4, 5) and f.size == 20
    assert f.memory is None and not f.is_padded
    assert "Fragment(index=5" in repr(f)
    with pytest.raises(IndexError):
        dt.fragment(8)


def test_mixed_framework_tensor(torch, jnp, jax):
    layout = Layout((12, 3), block=(2, 3), grid=(3, 1), devices=["cpu:0", "cpu:1", "cpu:2"])
    x = reference(layout.shape, "float32")
    arrays = [
        np.ascontiguousarray(expected_fragment(x, layout, 0)),
        torch.from_numpy(np.ascontiguousarray(expected_fragment(x, layout, 1))),
        jax.device_put(jnp.asarray(expected_fragment(x, layout, 2)), jax.devices("cpu")[2]),
    ]
    dt = dlmg.from_fragments(arrays, layout)
    assert dt.frameworks == ("numpy", "torch", "jax")
    assert [f.array for f in dt.fragments][:2] == arrays[:2] or all(
        f.array is a for f, a in zip(dt.fragments, arrays)
    )
    for out in ("numpy", "torch", "jax"):
        np.testing.assert_array_equal(to_numpy(dt.gather(framework=out)), x)
    # redistribute keeps the framework of a fragment on the same device
    r = dt.redistribute(Layout.slab(layout.shape, 0, ["cpu:2", "cpu:1", "cpu:0"]))
    assert [f.framework for f in r.fragments] == ["jax", "torch", "numpy"]
    check_fragments(r, x)


def test_from_fragments_mapping_and_any_strides(torch):
    layout = Layout.slab((4, 6), 1, ["cpu", "cpu"])
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    left = torch.from_numpy(np.ascontiguousarray(x[:, :3].T)).T  # transposed memory
    right = np.asfortranarray(x[:, 3:])
    dt = dlmg.from_fragments({1: right, 0: left}, layout)
    assert dt.fragments[0].array is left and dt.fragments[1].array is right
    np.testing.assert_array_equal(dt.gather(), x)


# -- exporting fragments ----------------------------------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_fragment_dlpack_export_is_zero_copy(framework):
    need(framework)
    need("torch", "jax")
    import jax.numpy as jnp
    import torch

    layout = Layout.slab((8, 16), 0, ["cpu"] * 2)
    dt = dlmg.zeros(layout=layout, dtype="float32", framework=framework)
    for frag in dt.fragments:
        ptr = _ptr(frag.array)
        assert np.from_dlpack(frag).ctypes.data == ptr
        assert torch.from_dlpack(frag).data_ptr() == ptr
        if framework != "numpy" or ptr % 64 == 0:  # JAX copies unaligned host buffers
            assert jnp.from_dlpack(frag).unsafe_buffer_pointer() == ptr
        assert frag.__dlpack_device__() == (1, 0)


def test_jax_fragment_exports_onto_its_device(jax, jnp):
    layout = Layout.slab((16, 4), 0, [f"cpu:{i}" for i in range(8)])
    arrays = [jax.device_put(jnp.full((2, 4), i, jnp.float32), d) for i, d in enumerate(jax.devices("cpu"))]
    dt = dlmg.from_fragments(arrays, layout)
    for frag, dev in zip(dt.fragments, jax.devices("cpu")):
        back = jnp.from_dlpack(frag)
        assert back.devices() == {dev}
        assert back.unsafe_buffer_pointer() == frag.array.unsafe_buffer_pointer()
        assert frag.__dlpack_device__() == (1, dev.id)


def test_distributed_tensor_refuses_dlpack():
    dt = dlmg.zeros(layout=Layout.slab((4,), 0, ["cpu"] * 2), dtype="float32")
    with pytest.raises(BufferError, match="gather"):
        dt.__dlpack__()
    with pytest.raises(BufferError):
        dt.__dlpack_device__()
    with pytest.raises(BufferError):
        np.from_dlpack(dt)
    assert [float(x) for x in dt] == [0.0] * 4  # iteration walks mode 0, as NumPy's


# -- to() ---------------------------------------------------------------------------
@pytest.mark.parametrize("src,dst", [
    ("torch", "numpy"), ("numpy", "torch"), ("torch", "jax"), ("jax", "torch"), ("jax", "numpy"),
])
def test_to_is_zero_copy(src, dst):
    need(src, dst)
    layout = Layout.slab((8, 32), 0, ["cpu"] * 2)
    dt = dlmg.full(layout=layout, fill_value=2.5, dtype="float32", framework=src)
    for copy in (None, False):
        moved = dt.to(dst, copy=copy)
        assert moved.frameworks == (dst,) and moved.layout == layout
        for a, b in zip(dt.fragments, moved.fragments):
            assert _ptr(b.array) == _ptr(a.array)
    np.testing.assert_array_equal(to_numpy(moved.gather()), np.full((8, 32), 2.5, np.float32))
    same = dt.to(src)
    assert all(a.array is b.array for a, b in zip(dt.fragments, same.fragments))
    copied = dt.to(dst, copy=True)
    assert all(_ptr(a.array) != _ptr(b.array) for a, b in zip(dt.fragments, copied.fragments))


def test_to_jax_device_placement(jax):
    layout = Layout.slab((8, 32), 0, ["cpu:4", "cpu:5"])
    dt = dlmg.ones(layout=layout, dtype="float32", framework="torch")
    moved = dt.to("jax", copy=False)
    for frag, i in zip(moved.fragments, (4, 5)):
        assert frag.array.devices() == {jax.devices("cpu")[i]}
        assert _ptr(frag.array) == _ptr(dt.fragments[frag.index].array)


def _host_rows(src: str, want: np.ndarray, aligned: list[bool]) -> list:
    """Each row of ``want`` as its own ``src`` array, 64-byte aligned or not as ``aligned`` says."""
    out = []
    for row, ok in zip(want, aligned):
        pool = np.empty(row.size + 32, row.dtype)
        skip = (-pool.ctypes.data % 64) // row.itemsize + (0 if ok else 1)
        part = pool[skip:skip + row.size].reshape(1, -1)
        part[...] = row
        out.append(part)
    if src == "torch":
        import torch

        out = [torch.from_numpy(part) for part in out]
    return out


@pytest.mark.parametrize("src", ["numpy", "torch"])
def test_to_jax_lands_each_host_fragment_on_its_slot(src, jax):
    """to("jax") (copy=None) takes host fragments in onto their slots' JAX CPU
    devices, sharing memory exactly where the buffer is 64-byte aligned (JAX
    copies the others), through jaxlib's DLPack import where this jaxlib has
    the signature dlmg knows."""
    import jaxlib

    from dlmg.adapters.jax._jaxlib import JAXLIB_WITH_ROUTE, _release, buffer_import

    need(src)
    layout = Layout.slab((8, 64), 0, [f"cpu:{i}" for i in range(8)])
    want = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    aligned = [True, False] * 4
    dt = dlmg.from_fragments(_host_rows(src, want, aligned), layout)
    moved = dt.to("jax")
    assert moved.frameworks == ("jax",)
    for frag, old, ok in zip(moved.fragments, dt.fragments, aligned):
        assert frag.array.devices() == {jax.devices("cpu")[frag.index]}
        assert (_ptr(frag.array) == _ptr(old.array)) == ok
    np.testing.assert_array_equal(np.asarray(moved.gather("numpy")), want)
    if _release(jaxlib.__version__) >= JAXLIB_WITH_ROUTE:
        assert buffer_import() is not None, "jaxlib's DLPack import was not found"


def test_to_jax_goes_the_public_way_when_jaxlib_refuses_the_call(jax):
    """A jaxlib whose DLPack import takes other arguments (TypeError) makes to()
    import through jax.dlpack.from_dlpack from then on, with the same result."""
    from dlmg.adapters.jax import _jaxlib

    kept = _jaxlib._ROUTE.find().importer
    calls = []

    def other_signature(*args):
        calls.append(len(args))
        raise TypeError("dlpack_managed_tensor_to_buffer(): incompatible function arguments")

    _jaxlib._ROUTE.importer = other_signature
    try:
        layout = Layout.slab((2, 32), 0, ["cpu:1", "cpu:6"])
        want = np.arange(64, dtype=np.float32).reshape(2, 32)
        dt = dlmg.from_fragments(_host_rows("numpy", want, [True, True]), layout)
        moved = dt.to("jax")
        assert calls == [5]  # tried once, then never again
        assert _jaxlib._ROUTE.importer is None
        assert [f.array.devices() for f in moved.fragments] == [{jax.devices("cpu")[1]}, {jax.devices("cpu")[6]}]
        assert all(_ptr(b.array) == _ptr(a.array) for a, b in zip(dt.fragments, moved.fragments))
        np.testing.assert_array_equal(np.asarray(moved.gather("numpy")), want)
    finally:
        _jaxlib._ROUTE.importer = kept


@pytest.mark.parametrize("case", ["torch columns -> jax", "numpy flipped -> torch", "numpy read-only -> jax",
                                  "torch with grad -> numpy"])
def test_to_takes_in_what_the_quick_import_declines(case, jax):
    """to() imports fragments through the target's importer, and each fragment it
    cannot take as it is goes through the full import: strides JAX cannot take,
    negative strides torch cannot, a read-only producer JAX's legacy capsule
    cannot carry, a torch tensor that records gradients."""
    need("torch")
    import torch

    dst = case.split()[-1]
    layout = Layout.slab((4, 3), 0, ["cpu:2", "cpu:5"])
    want = np.arange(12, dtype=np.float32).reshape(4, 3)
    if case == "torch columns -> jax":
        wide = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        parts = [wide[0:2, ::2], wide[2:4, ::2]]
        want = wide[:, ::2].numpy().copy()
    elif case == "numpy flipped -> torch":
        flipped = want[::-1]  # a negative row stride
        parts, want = [flipped[0:2], flipped[2:4]], flipped.copy()
    elif case == "numpy read-only -> jax":
        parts = [want[0:2].copy(), want[2:4].copy()]
        for p in parts:
            p.flags.writeable = False
    else:
        parts = [torch.from_numpy(want[i:i + 2].copy()).requires_grad_() for i in (0, 2)]
    dt = dlmg.from_fragments(parts, layout)
    moved = dt.to(dst)
    assert moved.frameworks == (dst,)
    np.testing.assert_array_equal(to_numpy(moved.gather()), want)
    if dst == "jax":
        assert [f.array.devices() for f in moved.fragments] == [{jax.devices("cpu")[2]}, {jax.devices("cpu")[5]}]
    if case == "torch with grad -> numpy":
        assert all(_ptr(b.array) == _ptr(a.array) for a, b in zip(dt.fragments, moved.fragments))


def test_to_copy_false_raises_where_a_copy_is_needed(jnp):
    layout = Layout.slab((2, 3), 0, ["cpu"] * 2)
    misaligned = [np.empty(4, np.float32)[1:].reshape(1, 3) for _ in range(2)]  # 4 bytes past 64
    if all(_ptr(a) % 64 == 0 for a in misaligned):  # pragma: no cover - allocator dependent
        pytest.skip("could not make a misaligned buffer")
    dt = dlmg.from_fragments(misaligned, layout)
    with pytest.raises(CopyRequiredError):
        dt.to("jax", copy=False)
    moved = dt.to("jax")  # copy=None: copies where needed
    np.testing.assert_array_equal(to_numpy(moved.gather()), to_numpy(dt.gather()))
    with pytest.raises(FrameworkError):
        dt.to("no-such-framework")
    with pytest.raises(ValueError, match="copy"):
        dt.to("numpy", copy="yes")


def test_to_names_the_fragment_it_cannot_hand_over(torch):
    # the zero-copy hand-over and the one with copy= asked say which fragment failed and why
    ml_dtypes = pytest.importorskip("ml_dtypes")
    layout = Layout.slab((2, 3), 0, ["cpu"] * 2)
    dt = dlmg.from_fragments([np.ones((1, 3), ml_dtypes.bfloat16) for _ in range(2)], layout)
    with pytest.raises(FragmentError, match=r"fragment 0 \(numpy on cpu:0\) could not be handed to torch: .*bfloat16"):
        dt.to("torch")
    with pytest.raises(CopyRequiredError, match=r"fragment 0 \(numpy on cpu:0\) cannot be handed to torch without a copy"):
        dt.to("torch", copy=False)


# -- element access -----------------------------------------------------------------
@settings(max_examples=30)
@given(layouts(), st.data())
def test_getitem_reads_the_owner(layout, data):
    x = reference(layout.shape, "int32")
    dt = dlmg.scatter(x, layout)
    if layout.size == 0:
        return
    idx = tuple(data.draw(st.integers(-n, n - 1)) for n in layout.shape)
    got = dt[idx]  # a 0-d tensor (array API), on the device of a fragment holding the element
    assert got.shape == () and got.item() == x[idx] and isinstance(got.item(), int)


def test_getitem_errors_and_frameworks(torch):
    dt, _ = _slab_torch(torch)
    assert dt[5, 3] == 23.0 and dt[-1, -1] == 23.0 and isinstance(dt[0, 0].item(), float)
    with pytest.raises(IndexError, match="out of bounds"):
        dt[6, 0]
    with pytest.raises(IndexError, match="out of bounds"):
        dt[0, -5]
    with pytest.raises(IndexError, match="too many indices"):
        dt[1, 2, 3]
    host = dt.gather(framework="numpy")
    np.testing.assert_array_equal(dt[1].gather(framework="numpy"), host[1])  # slices follow NumPy
    np.testing.assert_array_equal(dt[0:2, 0].gather(framework="numpy"), host[0:2, 0])
    one = dlmg.scatter(np.arange(5), Layout.slab((5,), 0, ["cpu"] * 2))
    assert one[3] == 3 and one[-1] == 4 and len(one) == 5
    b = dlmg.scatter(np.array([True, False]), Layout.slab((2,), 0, ["cpu"] * 2))
    assert b[0].item() is True


# -- allocation ---------------------------------------------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_empty_zeros_ones_full(framework):
    need(framework)
    layout = Layout((5, 4), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4)
    for make, value in ((dlmg.zeros, 0), (dlmg.ones, 1)):
        dt = make(layout=layout, dtype="int32", framework=framework)
        assert dt.frameworks == (framework,) and dt.dtype == "int32"
        np.testing.assert_array_equal(to_numpy(dt.gather()), np.full((5, 4), value, np.int32))
    dt = dlmg.full(layout=layout, fill_value=7, dtype="float32", framework=framework)
    np.testing.assert_array_equal(to_numpy(dt.gather()), np.full((5, 4), 7, np.float32))
    e = dlmg.empty(layout=layout, dtype="bool", framework=framework)
    assert [to_numpy(f.array).shape for f in e.fragments] == [f.shape for f in layout.fragments]


def test_allocation_on_jax_devices(jax):
    layout = Layout.slab((16,), 0, [f"cpu:{i}" for i in range(8)])
    dt = dlmg.zeros(layout=layout, dtype="float32", framework="jax")
    assert [next(iter(f.array.devices())).id for f in dt.fragments] == list(range(8))


def test_allocation_errors():
    layout = Layout.slab((4,), 0, ["cpu"] * 2)
    with pytest.raises(FrameworkError, match="unknown"):
        dlmg.zeros(layout=layout, dtype="float32", framework="nope")
    with pytest.raises(DtypeError):
        dlmg.zeros(layout=layout, dtype="float13")
    with pytest.raises(DeviceError, match="cuda"):
        dlmg.zeros(layout=Layout.slab((4,), 0, ["cuda:0", "cuda:1"]), dtype="float32", framework="numpy")
    with pytest.raises(TypeError, match=r"layout=layout"):  # the array API's shape comes first
        dlmg.zeros(layout)
    with pytest.raises(ValueError, match="differs"):
        dlmg.zeros((5,), layout=layout)
    with pytest.raises(ValueError, match="not both"):
        dlmg.zeros((4,), layout=layout, device="cpu:0")
    if have("jax"):
        with pytest.raises(DtypeError):  # JAX without x64 would narrow silently
            dlmg.zeros(layout=layout, dtype="float64", framework="jax")
        with pytest.raises(LayoutError, match="strides"):
            dlmg.zeros(layout=Layout.slab((4,), 0, ["cpu"] * 2).replace(element_strides=(2,)), dtype="float32", framework="jax")


def test_constructor_is_private():
    with pytest.raises(TypeError, match="from_fragments"):
        DistributedTensor()
    with pytest.raises(TypeError):
        Fragment(Layout.single((2,)).fragment(0), np.zeros(2), "numpy")


# -- from_fragments: bad input ----------------------------------------------------------
def test_from_fragments_errors(torch):
    layout = Layout.slab((6, 4), 0, ["cpu"] * 3)
    good = [np.zeros((2, 4), np.float32) for _ in range(3)]
    with pytest.raises(FragmentError, match="got 2 entries.*3"):
        dlmg.from_fragments(good[:2], layout)
    with pytest.raises(FragmentError, match=r"fragment 1.*shape \(3, 4\).*\(2, 4\)"):
        dlmg.from_fragments([good[0], np.zeros((3, 4), np.float32), good[2]], layout)
    with pytest.raises(FragmentError, match="fragment 2 has dtype float64.*float32"):
        dlmg.from_fragments([good[0], good[1], np.zeros((2, 4))], layout)
    with pytest.raises(FragmentError, match="fragment 1 has dtype int32"):
        dlmg.from_fragments([good[0], torch.zeros(2, 4, dtype=torch.int32), good[2]], layout)
    with pytest.raises(FrameworkError, match="list"):
        dlmg.from_fragments([good[0], [[0] * 4] * 2, good[2]], layout)
    with pytest.raises(FragmentError, match="no array"):
        dlmg.from_fragments([good[0], None, good[2]], layout)
    with pytest.raises(FragmentError, match="fragment index 5"):
        dlmg.from_fragments({5: good[0]}, layout)
    with pytest.raises(TypeError, match="Layout"):
        dlmg.from_fragments(good, "layout")
    with pytest.raises(FragmentError, match=r"cpu:0.*cuda:0"):
        dlmg.from_fragments(good[:2], Layout.slab((4, 4), 0, ["cuda:0", "cuda:1"]))
    strided = Layout.slab((6, 4), 0, ["cpu"] * 3).replace(element_strides=(8, 2))
    with pytest.raises(FragmentError, match="strides"):
        dlmg.from_fragments(good, strided)


def test_from_fragments_jax_device_must_match(jax, jnp):
    layout = Layout.slab((4, 2), 0, ["cpu:0", "cpu:3"])
    on = [jax.device_put(jnp.zeros((2, 2)), jax.devices("cpu")[i]) for i in (0, 3)]
    dlmg.from_fragments(on, layout)
    with pytest.raises(FragmentError, match="cpu:3.*cpu:0"):
        dlmg.from_fragments(on[::-1], layout)
    # NumPy and torch host arrays fit any cpu slot (one host memory)
    dlmg.from_fragments([np.zeros((2, 2), np.float32)] * 2, layout)


def test_ranks():
    layout = Layout.slab((6,), 0, ["cpu"] * 3, ranks=[0, 1, 0])
    a = [np.arange(2.0), np.arange(2.0, 4.0), np.arange(4.0, 6.0)]
    dt = dlmg.from_fragments([a[0], None, a[2]], layout)
    assert [f.rank for f in dt.fragments] == [0, 1, 0]
    assert [f.is_local for f in dt.fragments] == [True, False, True]
    assert dt.local_fragments == (dt.fragments[0], dt.fragments[2])
    with pytest.raises(FragmentError, match="held by process 1"):
        dt.fragments[1].array
    assert dt[5] == 5.0
    remote = dt[2]  # a 0-d tensor held where the element is: by process 1
    assert remote.shape == () and remote.fragments[0].rank == 1 and not remote.fragments[0].is_local
    with pytest.raises(BufferError):
        dt.fragments[1].__dlpack__()
    with pytest.raises(FragmentError, match=r"dlmg.distributed.init"):
        dt.gather()
    # only this process's arrays, in order, or a mapping
    assert dlmg.from_fragments([a[0], a[2]], layout).fragments[2].array is a[2]
    assert dlmg.from_fragments({0: a[0], 2: a[2]}, layout).fragments[0].array is a[0]
    with pytest.raises(FragmentError, match="belongs to process 1"):
        dlmg.from_fragments(a, layout)
    with pytest.raises(FragmentError, match="dtype="):
        dlmg.from_fragments([None] * 3, layout.replace(ranks=[1, 1, 1]))
    remote = dlmg.from_fragments([None] * 3, layout.replace(ranks=[1, 1, 2]), dtype="float64")
    assert remote.dtype == "float64" and remote.frameworks == ()
    zeros = dlmg.zeros(layout=layout, dtype="float32")
    assert [f.is_local for f in zeros.fragments] == [True, False, True]


def test_layout_ranks():
    layout = Layout.slab((6, 4), 0, ["cpu", "cpu"], ranks=[0, 1])
    assert layout.ranks == (0, 1) and layout != Layout.slab((6, 4), 0, ["cpu", "cpu"])
    assert hash(layout) != hash(Layout.slab((6, 4), 0, ["cpu", "cpu"]))
    assert "ranks=(0, 1)" in repr(layout) and "1:cpu:0" in str(layout)
    assert Layout.single((3,), "cpu", ranks=2).ranks == (2,)
    assert Layout.replicated((3,), ["cpu"] * 2, ranks=[1, 0]).ranks == (1, 0)
    assert Layout.block_cyclic((8,), (2,), (2,), ["cpu"] * 2, ranks=[1, 1]).fragments[1].rank == 1
    assert Layout((4,), devices=["cpu"] * 2).ranks == (0, 0)
    assert layout.drop_modes(1).ranks == (0, 1) and layout.drop_modes(0).ranks == (0,)
    assert layout.with_devices(["cpu"] * 4).ranks == (0, 0, 0, 0)
    import pickle

    assert pickle.loads(pickle.dumps(layout)) == layout
    with pytest.raises(dlmg.LayoutError, match="ranks has 1 entries"):
        Layout((4,), devices=["cpu"] * 2, ranks=[0])
    with pytest.raises(dlmg.LayoutError, match=r"ranks\[1\] = -1"):
        Layout((4,), devices=["cpu"] * 2, ranks=[0, -1])
    with pytest.raises(dlmg.LayoutError, match="not an int"):
        Layout((4,), devices=["cpu"] * 2, ranks=[0, "a"])


# -- from_pointers ------------------------------------------------------------------------
class _Owner:
    """Holds the memory; its finalizer counts releases."""

    def __init__(self, buffers):
        self.buffers = buffers


def _counted_owner(buffers):
    owner = _Owner(buffers)
    released = []
    weakref.finalize(owner, released.append, 1)
    return owner, released


def _fill_memory(layout: Layout, x: np.ndarray) -> list[np.ndarray]:
    """Each fragment's memory as the layout's strides place it (padding = -1)."""
    mems = []
    for f in layout.fragments:
        mem = np.full(max(f.span, 1), -1, dtype=x.dtype)
        for glob, loc in f.block_slices():
            offs = np.zeros((), np.int64)
            for m, sl in enumerate(loc):
                k = np.arange(sl.start, sl.stop)
                b = layout.block[m]
                es = layout.element_strides[m] if layout.element_strides else None
                if es is None:
                    along = k * int(np.prod(f.shape[m + 1:], dtype=np.int64))
                else:
                    along = (k // b) * layout.block_strides[m] + (k % b) * es
                offs = np.add.outer(offs, along)
            mem[offs] = x[glob]
        mems.append(mem)
    return mems


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_from_pointers_padded_block_strides(framework):
    need(framework)
    layout = Layout((10, 7), block=(3, 2), grid=(2, 2), devices=["cpu"] * 4,
                    element_strides=(4, 1), block_strides=(16, 6))
    assert not any(f.is_strided for f in layout.fragments)
    x = reference(layout.shape, "float64")
    mems = _fill_memory(layout, x)
    owner, released = _counted_owner(mems)
    dt = dlmg.from_pointers(layout, [m.ctypes.data for m in mems], "float64", owner=owner, framework=framework)
    del owner
    assert all(f.is_padded and f.memory is not None for f in dt.fragments)
    assert _ptr(dt.fragments[1].memory) == mems[1].ctypes.data  # zero-copy
    with pytest.raises(FragmentError, match="block_views"):
        dt.fragments[0].array
    with pytest.raises(BufferError, match="padded"):
        dt.fragments[0].__dlpack__()
    check_fragments(dt, x)  # per-block views
    np.testing.assert_array_equal(to_numpy(dt.gather(framework=framework)), x)
    assert dt[9, 6] == x[9, 6] and dt[4, 3] == x[4, 3]
    # scatter into the padded layout writes the blocks, leaves the padding alone
    sc = dlmg.scatter(x, layout, framework=framework)
    np.testing.assert_array_equal(to_numpy(sc.gather()), x)
    r = dt.redistribute(Layout.slab(layout.shape, 1, ["cpu"] * 3))
    check_fragments(r, x)
    again = r.redistribute(layout)
    check_fragments(again, x)
    same = dt.redistribute(layout)  # unchanged padded fragments are reused
    assert all(a.memory is b.memory for a, b in zip(dt.fragments, same.fragments))
    assert not released
    del dt, same, sc, r, again
    gc.collect()
    assert released == [1]


def test_from_pointers_strided_layout_gives_strided_views():
    layout = Layout.slab((6, 4), 0, ["cpu"] * 2).replace(element_strides=(8, 2))
    assert all(f.is_strided for f in layout.fragments)
    x = reference(layout.shape, "int32")
    mems = _fill_memory(layout, x)
    dt = dlmg.from_pointers(layout, {1: mems[1].ctypes.data, 0: mems[0].ctypes.data}, "int32", owner=mems)
    for f in dt.fragments:
        assert not f.is_padded and f.array.strides == (32, 8)
        np.testing.assert_array_equal(f.array, expected_fragment(x, layout, f.index))
    np.testing.assert_array_equal(dt.gather(), x)


def test_from_pointers_dense_and_owner_lifetime(torch):
    layout = Layout.slab((8, 16), 0, ["cpu"] * 2)
    mems = [torch.arange(64, dtype=torch.float32).reshape(4, 16) + 64 * i for i in range(2)]
    owner, released = _counted_owner(mems)
    dt = dlmg.from_pointers(layout, [m.data_ptr() for m in mems], "float32", owner=owner, framework="torch")
    del owner, mems
    assert [f.framework for f in dt.fragments] == ["torch", "torch"]
    exported = torch.from_dlpack(dt.fragments[1])  # a consumer outliving the tensor
    np.testing.assert_array_equal(dt.gather(), np.arange(128, dtype=np.float32).reshape(8, 16))
    del dt
    gc.collect()
    assert released == []
    assert float(exported[0, 0]) == 64.0
    del exported
    gc.collect()
    assert released == [1]


def test_from_pointers_jax(jax):
    layout = Layout.slab((4, 16), 0, ["cpu:1", "cpu:2"])
    mems = [np.full((2, 16), i, np.float32) for i in range(2)]
    if any(m.ctypes.data % 64 for m in mems):  # JAX takes host memory only 64-byte aligned
        with pytest.raises(CopyRequiredError):
            dlmg.from_pointers(layout, [m.ctypes.data for m in mems], "float32", owner=mems, framework="jax")
        return
    dt = dlmg.from_pointers(layout, [m.ctypes.data for m in mems], "float32", owner=mems, framework="jax")
    assert [next(iter(f.array.devices())).id for f in dt.fragments] == [1, 2]


def test_from_pointers_errors():
    layout = Layout.slab((4,), 0, ["cpu"] * 2)
    mem = np.zeros(4, np.float32)
    p = mem.ctypes.data
    with pytest.raises(FragmentError, match="0 \\(NULL\\)"):
        dlmg.from_pointers(layout, [p, 0], "float32", owner=mem)
    with pytest.raises(FragmentError, match="negative"):
        dlmg.from_pointers(layout, [p, -8], "float32", owner=mem)
    with pytest.raises(FragmentError, match="not an int"):
        dlmg.from_pointers(layout, [p, 1.5], "float32", owner=mem)
    with pytest.raises(FragmentError, match="got 3 entries"):
        dlmg.from_pointers(layout, [p, p + 8, p], "float32", owner=mem)
    with pytest.raises(FragmentError, match="no pointer"):
        dlmg.from_pointers(layout, {0: p}, "float32", owner=mem)
    with pytest.raises(FrameworkError):
        dlmg.from_pointers(layout, [p, p + 8], "float32", framework="nope")
    with pytest.raises(DtypeError):
        dlmg.from_pointers(layout, [p, p + 8], "floaty", owner=mem)
    with pytest.raises(DeviceError):
        dlmg.from_pointers(Layout.slab((4,), 0, ["cuda:0", "cuda:1"]), [p, p + 8], "float32", framework="numpy")
    if have("jax"):
        padded = Layout((4,), block=(1,), grid=(2,), devices=["cpu"] * 2,
                        element_strides=(1,), block_strides=(2,))
        with pytest.raises(LayoutError, match="view"):
            dlmg.from_pointers(padded, [p, p + 8], "float32", owner=mem, framework="jax")


# -- the hook for operators ---------------------------------------------------------------
def test_register_method():
    name = "_test_only_double_size"
    try:
        DistributedTensor.register_method(name, lambda self: 2 * self.size)
        assert dlmg.zeros(layout=Layout.single((3,)), dtype="float32")._test_only_double_size() == 6
    finally:
        delattr(DistributedTensor, name)
    with pytest.raises(AttributeError, match="core"):
        DistributedTensor.register_method("gather", lambda self: None)


def test_from_arrays_trusted_constructor_and_replace():
    layout = Layout.slab((4,), 0, ["cpu"] * 2)
    a, b = np.arange(2.0), np.arange(2.0, 4.0)
    dt = DistributedTensor._from_arrays([a, b], layout)
    assert dt.dtype == "float64" and dt.fragments[1].array is b
    c = np.zeros(2)
    dt._replace_arrays({1: c})
    assert dt.fragments[1].array is c


def test_repr_summarises_the_layout():
    dt = dlmg.zeros(layout=Layout((9, 9), block=(4, 2), grid=(2, 2), devices=["cpu"] * 8), dtype="float32")
    text = repr(dt)
    assert "shape=(9, 9)" in text and "float32" in text and "grid=(2, 2)" in text
    assert "replicas=2" in text and "numpy" in text
