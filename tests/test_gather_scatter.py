"""Scatter and gather: round trips over random layouts, every framework pair,
element types (bool, bfloat16, complex...), fragment contents, and gathering
into given (strided) destinations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.errors import DeviceError, DtypeError, FrameworkError, LayoutMismatchError

from _strategies import (
    FRAMEWORKS,
    check_fragments,
    dtypes_for,
    have,
    jax_cpus,
    layouts,
    make,
    need,
    reference,
    to_numpy,
)

AVAILABLE = tuple(f for f in FRAMEWORKS if have(f))


@st.composite
def round_trip_cases(draw):
    src = draw(st.sampled_from(AVAILABLE))
    dst = draw(st.sampled_from(AVAILABLE))
    out = draw(st.sampled_from(AVAILABLE))
    dtype = draw(st.sampled_from(dtypes_for(src, dst, out)))
    layout = draw(layouts())
    return src, dst, out, dtype, layout


@settings(max_examples=70)
@given(round_trip_cases())
def test_scatter_gather_round_trip(case):
    src, dst, out, dtype, layout = case
    x = reference(layout.shape, dtype)
    dt = dlmg.scatter(make(x, src, dtype), layout, framework=dst)
    assert dt.dtype == dtype and dt.shape == layout.shape
    assert dt.frameworks in ((dst,), ())
    for frag in dt.fragments:
        assert frag.framework == dst
        if dst == "jax":  # JAX fragments sit on their slot's JAX device
            assert frag.adapter.device_of(frag.array) == frag.device
    check_fragments(dt, x)
    back = dt.gather(framework=out)
    assert dlmg.framework_of(back) == out
    np.testing.assert_array_equal(to_numpy(back), x)


@settings(max_examples=25)
@given(layouts(jax_devices=True))
def test_scatter_to_jax_devices_defaults_to_source_framework(layout):
    need("jax")
    x = reference(layout.shape, "float32", seed=3)
    dt = dlmg.scatter(make(x, "jax", "float32"), layout)
    assert set(dt.frameworks) <= {"jax"}
    check_fragments(dt, x)
    np.testing.assert_array_equal(to_numpy(dt.gather()), x)


@pytest.mark.parametrize("src", AVAILABLE)
@pytest.mark.parametrize("dst", AVAILABLE)
def test_every_framework_pair_block_cyclic(src, dst):
    layout = Layout((11, 6, 5), block=(2, 4, 1), grid=(3, 2, 2),
                    devices=[f"cpu:{i % max(jax_cpus(), 1)}" for i in range(12)])
    x = reference(layout.shape, "float32", seed=1)
    dt = dlmg.scatter(make(x, src, "float32"), layout, framework=dst)
    check_fragments(dt, x)
    for out in AVAILABLE:
        np.testing.assert_array_equal(to_numpy(dt.gather(framework=out)), x)


@pytest.mark.parametrize("framework", [f for f in ("torch", "jax") if have(f)])
def test_bfloat16_round_trip(framework):
    layout = Layout((9, 4), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4)
    x = reference(layout.shape, "bfloat16")
    dt = dlmg.scatter(make(x, framework, "bfloat16"), layout)
    assert dt.dtype == "bfloat16"
    check_fragments(dt, x)
    for out in ("torch", "jax"):
        if have(out):
            np.testing.assert_array_equal(to_numpy(dt.gather(framework=out)), x)


def test_bfloat16_to_numpy_is_a_clear_error():
    need("torch")
    layout = Layout.slab((4,), 0, ["cpu"] * 2)
    dt = dlmg.scatter(make(reference((4,), "bfloat16"), "torch", "bfloat16"), layout)
    with pytest.raises(DtypeError, match="bfloat16"):
        dt.gather(framework="numpy")


def test_zero_dim_and_empty_tensors():
    x = np.array(5.0, dtype=np.float32)
    dt = dlmg.scatter(x, Layout((), devices=["cpu", "cpu"]))
    assert dt.shape == () and dt[()] == 5.0
    assert to_numpy(dt.gather()) == x
    e = np.zeros((0, 3), np.float32)
    de = dlmg.scatter(e, Layout.slab((0, 3), 0, ["cpu"] * 2))
    assert de.gather().shape == (0, 3)


def test_slab_fragments_are_numpy_slices():
    x = np.arange(30, dtype=np.int64).reshape(10, 3)
    dt = dlmg.scatter(x, Layout.slab((10, 3), 0, ["cpu"] * 4))
    np.testing.assert_array_equal(dt.fragments[0].array, x[0:3])
    np.testing.assert_array_equal(dt.fragments[3].array, x[9:10])
    # fragments are fresh memory, not views of the source
    assert not np.shares_memory(dt.fragments[0].array, x)


def test_scatter_from_strided_sources():
    need("torch")
    import torch

    base = torch.arange(8 * 6, dtype=torch.float32).reshape(8, 6)
    view = base.T  # non-contiguous source
    layout = Layout((6, 8), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4)
    dt = dlmg.scatter(view, layout)
    check_fragments(dt, view.numpy())
    npview = np.arange(100, dtype=np.float64).reshape(10, 10)[::-2, 1::3]
    dn = dlmg.scatter(npview, Layout((5, 3), block=(2, 2), grid=(2, 2), devices=["cpu"] * 4))
    check_fragments(dn, npview)


# -- gather into destinations -----------------------------------------------------
def _tensor(framework="numpy"):
    layout = Layout((7, 5), block=(2, 2), grid=(2, 3), devices=["cpu"] * 6)
    x = reference(layout.shape, "float32", seed=5)
    return dlmg.scatter(make(x, framework, "float32"), layout), x


@pytest.mark.parametrize("src", AVAILABLE)
def test_gather_into_transposed_torch_view(src):
    need("torch")
    import torch

    dt, x = _tensor(src)
    out = torch.empty(5, 7).T  # a transposed (column-major) destination
    got = dt.gather(out=out)
    assert got is out
    np.testing.assert_array_equal(out.numpy(), x)


@pytest.mark.parametrize("src", AVAILABLE)
def test_gather_into_numpy_out(src):
    dt, x = _tensor(src)
    out = np.empty((7, 5), np.float32)
    assert dt.gather(out=out) is out
    np.testing.assert_array_equal(out, x)
    holes = np.zeros((14, 15), np.float32)
    sub = holes[::2, ::3]  # strided slice: the gaps must stay untouched
    dt.gather(out=sub)
    np.testing.assert_array_equal(sub, x)
    assert holes.sum() == x.sum()
    rev = np.empty((7, 5), np.float32)[::-1, ::-1]  # negative strides
    dt.gather(out=rev)
    np.testing.assert_array_equal(rev, x)
    fortran = np.empty((7, 5), np.float32, order="F")
    dt.gather(out=fortran)
    np.testing.assert_array_equal(fortran, x)


def test_gather_out_errors():
    dt, _ = _tensor()
    with pytest.raises(ValueError, match="shape"):
        dt.gather(out=np.empty((5, 7), np.float32))
    with pytest.raises(DtypeError, match="float64"):
        dt.gather(out=np.empty((7, 5), np.float64))
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty((7, 5), np.float32)
        ro.flags.writeable = False
        dt.gather(out=ro)
    with pytest.raises(ValueError, match="zero strides"):
        row = np.empty(5, np.float32)
        dt.gather(out=np.lib.stride_tricks.as_strided(row, shape=(7, 5), strides=(0, 4)))
    with pytest.raises(FrameworkError, match="framework"):
        dt.gather(out=np.empty((7, 5), np.float32), framework="torch")
    if have("jax"):
        import jax.numpy as jnp

        with pytest.raises(FrameworkError, match="immutable"):
            dt.gather(out=jnp.zeros((7, 5), jnp.float32))


def test_gather_device_and_framework_errors():
    dt, _ = _tensor()
    with pytest.raises(FrameworkError):
        dt.gather(framework="no-such-framework")
    with pytest.raises(DeviceError):
        dt.gather(framework="numpy", device="cuda:0")


def test_gather_onto_jax_device():
    need("jax")
    if jax_cpus() < 4:
        pytest.skip("needs 4 JAX CPU devices")
    dt, x = _tensor("torch")
    got = dt.gather(framework="jax", device="cpu:3")
    assert dlmg.get_adapter("jax").device_of(got) == dlmg.Device("cpu", 3)
    np.testing.assert_array_equal(np.asarray(got), x)


@pytest.mark.parametrize("dtype", ["bool", "int8", "float16", "float32", "complex64"])
@pytest.mark.parametrize("shape, block", [((64, 48), (8, 48)), ((10, 3, 4), (3, 3, 4)), ((7,), (2,))],
                         ids=["rows", "uneven-3d", "uneven-1d"])
def test_jax_slabs_on_one_device_are_cut_and_joined_by_jax(shape, block, dtype):
    # JAX cannot view memory: a scatter into slabs on the source's device is one
    # compiled cut, and their gather one compiled concatenation, both by JAX
    need("jax")
    if jax_cpus() < 3:
        pytest.skip("needs 3 JAX CPU devices")
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = (np.arange(np.prod(shape)).reshape(shape) % 7).astype(dtype)
    grid = tuple(-(-n // b) for n, b in zip(shape, block))
    layout = Layout(shape, block=block, grid=grid, devices=["cpu:2"] * int(np.prod(grid)))
    forget_compiled()
    dt = dlmg.scatter(jax.device_put(x, jax.devices("cpu")[2]), layout)
    assert compiled_kinds() == ["split"]
    assert all(f.framework == "jax" and f.array.devices() == {jax.devices("cpu")[2]} for f in dt.fragments)
    check_fragments(dt, x)
    got = dt.gather()
    assert sorted(compiled_kinds()) == ["assemble", "split"]
    assert got.devices() == {jax.devices("cpu")[2]} and got.dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(got), x)
    # elsewhere than the fragments, or into another framework: copies, as before
    np.testing.assert_array_equal(np.asarray(dt.gather(device="cpu:1")), x)
    np.testing.assert_array_equal(dt.gather(framework="numpy"), x)
    assert sorted(compiled_kinds()) == ["assemble", "split"]


def test_jax_layouts_that_are_no_slabs_are_copied():
    need("jax")
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = np.arange(24 * 6, dtype=np.float32).reshape(24, 6)
    source = jax.device_put(x, jax.devices("cpu")[0])
    forget_compiled()
    for layout in (Layout.slab(x.shape, 1, ["cpu:0"] * 3),  # columns: ranges of no one source
                   Layout(x.shape, block=(4, 6), grid=(2, 1), devices=["cpu:0"] * 2)):  # cyclic rows
        dt = dlmg.scatter(source, layout)
        check_fragments(dt, x)
        np.testing.assert_array_equal(np.asarray(dt.gather()), x)
    assert not compiled_kinds()


def test_scatter_errors():
    x = np.zeros((4, 4), np.float32)
    with pytest.raises(LayoutMismatchError, match="shape"):
        dlmg.scatter(x, Layout.slab((4, 5), 0, ["cpu"] * 2))
    with pytest.raises(TypeError, match="Layout"):
        dlmg.scatter(x, (4, 4))
    with pytest.raises(FrameworkError):
        dlmg.scatter([[1, 2], [3, 4]], Layout.slab((2, 2), 0, ["cpu"] * 2))
    with pytest.raises(FrameworkError, match="framework="):  # numpy cannot hold CUDA fragments
        dlmg.scatter(x, Layout.slab((4, 4), 0, ["cuda:0", "cuda:1"]))


def test_gather_plans_are_a_few_strided_copies():
    """Block-cyclic: O(2**ndim) copies per fragment, not O(blocks)."""
    layout = Layout((1000, 999), block=(7, 5), grid=(3, 4), devices=["cpu"] * 12)
    plan = dlmg.plan_redistribution(layout, Layout.single(layout.shape), "float32")
    assert plan.ncopies <= 4 * layout.nfragments
    assert plan.total_bytes == 1000 * 999 * 4
    x = reference(layout.shape, "float32")
    dt = dlmg.scatter(x, layout)
    np.testing.assert_array_equal(dt.gather(), x)
