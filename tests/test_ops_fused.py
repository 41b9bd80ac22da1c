"""dlmg.fuse: a user's elementwise function compiled per fragment by the owner's
compiler (jax.jit, torch.compile, eager NumPy), cached per signature, with
the same results, ``out=`` handling and errors as dlmg.map_fragments."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from dlmg.errors import FragmentError, LayoutMismatchError
from _ops_support import build, data, data_ptrs, gathered, jax_cpus, need

LAYOUT = Layout((12, 6), block=(3, 6), grid=(4, 1), devices=["cpu"] * 4)


def jax_layout() -> Layout:
    need("jax")
    if jax_cpus() < 4:
        pytest.skip("needs 4 JAX CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    return Layout((12, 6), block=(3, 6), grid=(4, 1), devices=[f"cpu:{i}" for i in range(4)])


def operands(layout: Layout, framework: str):
    xs = [data(layout.shape, seed=s) for s in range(3)]
    return xs, [build(x, layout, framework) for x in xs]


def test_numpy_runs_eagerly_with_the_same_result():
    (a, b, c), (da, db, dc) = operands(LAYOUT, "numpy")
    f = dlmg.fuse(lambda x, y, z: x * y + z)
    got = f(da, db, dc)
    np.testing.assert_allclose(gathered(got), a * b + c, rtol=1e-6)
    assert set(f.compilers.values()) == {"eager"}
    assert isinstance(got, dlmg.DistributedTensor) and got.layout.shape == LAYOUT.shape


def test_jax_is_traced_once_and_jitted_on_every_device():
    layout = jax_layout()
    (a, b, c), (da, db, dc) = operands(layout, "jax")
    traces = []

    @dlmg.fuse
    def axpy(x, y, z):
        traces.append(1)
        return x * y + z

    first = axpy(da, db, dc)
    second = axpy(db, dc, da)
    np.testing.assert_allclose(gathered(first), a * b + c, rtol=1e-6)
    np.testing.assert_allclose(gathered(second), b * c + a, rtol=1e-6)
    assert len(traces) == 1  # one trace serves every fragment and both calls
    assert axpy.cache_size == 4  # one kernel per device (same shape and dtype)
    assert set(axpy.compilers.values()) == {"jax.jit"}
    assert {str(d) for _, d in axpy.compilers} == {f"cpu:{i}" for i in range(4)}
    assert [str(f.device) for f in first.fragments] == [f"cpu:{i}" for i in range(4)]


def test_namespace_scalars_and_decorator_with_arguments():
    layout = jax_layout()
    x = data(layout.shape, seed=5)
    for framework, lay in (("numpy", LAYOUT), ("jax", layout)):
        @dlmg.fuse(namespace=True)
        def soft(xp, v, scale):
            return xp.tanh(v) * scale + 1

        got = soft(build(x, lay, framework), 2.0)
        np.testing.assert_allclose(gathered(got), np.tanh(x) * 2 + 1, rtol=1e-5)


def test_out_writes_in_place_for_numpy_and_replaces_jax_fragments():
    (a, b, c), (da, db, dc) = operands(LAYOUT, "numpy")
    out = build(np.zeros(LAYOUT.shape, np.float32), LAYOUT, "numpy")
    before = data_ptrs(out)
    f = dlmg.fuse(lambda x, y, z: x * y + z)
    assert f(da, db, dc, out=out) is out
    assert data_ptrs(out) == before
    np.testing.assert_allclose(gathered(out), a * b + c, rtol=1e-6)
    layout = jax_layout()
    (a, b, c), (ja, jb, jc) = operands(layout, "jax")
    jout = build(np.zeros(layout.shape, np.float32), layout, "jax")
    f(ja, jb, jc, out=jout)
    np.testing.assert_allclose(gathered(jout), a * b + c, rtol=1e-6)


def test_mixed_frameworks_follow_the_lead_fragment():
    layout = jax_layout()
    x = data(layout.shape, seed=1)
    dj = build(x, layout, "jax")
    dn = build(x, layout, "numpy")
    f = dlmg.fuse(lambda p, q: p - q * 2)
    with pytest.raises(LayoutMismatchError):
        f(dj, build(x, LAYOUT, "numpy"))
    got = f(dj, dj)
    assert got.frameworks == ("jax",)
    np.testing.assert_allclose(gathered(got), -x, rtol=1e-6)
    np.testing.assert_allclose(gathered(f(dn, dn)), -x, rtol=1e-6)


def test_a_function_the_compiler_rejects_runs_eagerly_and_says_so():
    layout = jax_layout()
    x = data(layout.shape, seed=2)

    def branchy(v):
        if float(v.reshape(-1)[0]) > 100:  # a Python branch on a value: jit cannot trace it
            return v
        return v + 1

    f = dlmg.fuse(branchy)
    got = f(build(x, layout, "jax"))
    np.testing.assert_allclose(gathered(got), x + 1, rtol=1e-6)
    (compiler,) = set(f.compilers.values())
    assert compiler.startswith("eager (jax.jit failed:"), compiler


def test_errors_name_the_fragment_and_non_elementwise_results_are_refused():
    _, (da, _, _) = operands(LAYOUT, "numpy")

    def broken(v):
        raise ValueError("no such thing")

    with pytest.raises(FragmentError, match=r"fuse\(broken\) failed on fragment 0.*no such thing"):
        dlmg.fuse(broken)(da)
    with pytest.raises(FragmentError, match="elementwise"):
        dlmg.fuse(lambda v: v.sum(axis=0))(da)
    with pytest.raises(TypeError, match="callable"):
        dlmg.fuse(3)


def test_the_adapter_contract_defaults_to_eager():
    from dlmg.adapters import Adapter
    from dlmg.adapters.capabilities import compiled
    from dlmg.device import Device

    class Plain(Adapter):  # declares no compiler
        name = "plain"

        def namespace(self):
            return np

    kernel, compiler = compiled(Plain(), lambda xp, v: xp.negative(v), Device("cpu", 0))
    assert compiler == "eager"
    np.testing.assert_array_equal(kernel(np.arange(3)), [0, -1, -2])


def test_torch_without_compiling_and_compile_false():
    need("torch")
    (a, b, c), (da, db, dc) = operands(LAYOUT, "torch")
    f = dlmg.fuse(lambda x, y, z: x * y + z, compile=False)
    np.testing.assert_allclose(gathered(f(da, db, dc)), a * b + c, rtol=1e-6)
    assert set(f.compilers.values()) == {"eager (compile=False)"}


@pytest.mark.slow
def test_torch_compile_builds_one_kernel_for_the_host():
    need("torch")
    from dlmg.registry import get_adapter

    _, why = get_adapter("torch").compile_elementwise(lambda xp, v: v, dlmg.Device("cpu", 0))
    (a, b, c), (da, db, dc) = operands(LAYOUT, "torch")
    f = dlmg.fuse(lambda x, y, z: x * y + z)
    np.testing.assert_allclose(gathered(f(da, db, dc)), a * b + c, rtol=1e-6)
    np.testing.assert_allclose(gathered(f(db, dc, da)), b * c + a, rtol=1e-6)
    (compiler,) = set(f.compilers.values())
    assert compiler == why  # "torch.compile", or "eager (...)" naming what is missing
    assert f.cache_size == 1


def test_a_call_without_a_distributed_tensor_says_so():
    f = dlmg.fuse(lambda x, y: x + y)
    with pytest.raises(TypeError, match=r"fuse\(<lambda>\) needs at least one distributed tensor operand"):
        f(1, 2.0)
    with pytest.raises(TypeError, match="needs at least one distributed tensor"):
        dlmg.fuse(lambda x: x, compile=False)(3)


def test_torch_cuda_kernels_retry_a_failed_combo_build_without_it_once():
    # CUDA kernels are built with inductor's (experimental) combo kernels first; a
    # build that fails with them is made again without, and that one is kept
    need("torch")
    from dlmg.adapters.torch._compile import _CombinedFirst

    builds = []

    def combined(*args):
        raise RuntimeError("combo kernel codegen failed")

    def plain_build():
        builds.append(1)
        return lambda x, y: x * y

    kernel = _CombinedFirst(combined, plain_build)
    assert kernel(3, 4) == 12 and kernel(5, 6) == 30
    assert builds == [1] and kernel.plain is None

    def wrong(x, y):
        raise ValueError("the user's own error")

    failing = _CombinedFirst(wrong, lambda: wrong)
    with pytest.raises(ValueError, match="user's own"):
        failing(1, 2)  # the plain build raises it too: it reaches the caller
    with pytest.raises(ValueError, match="user's own"):
        failing(1, 2)  # and is not retried again


def test_fragments_of_one_device_run_as_one_compiled_call():
    # three fragments on one host device, of two shapes: one batched jax.jit call
    # (one kernel); per fragment it would be two kernels, one per shape
    layout = dlmg.Layout.slab((10, 4), axis=0, devices=["cpu"] * 3)
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    a = dlmg.scatter(x, layout, framework="jax")
    f = dlmg.fuse(lambda p, q, s: p * q + s)
    got = f(a, a, 2.0)
    np.testing.assert_allclose(got.gather(framework="numpy"), x * x + 2.0)
    assert f.cache_size == 1
    assert set(f.compilers.values()) == {"jax.jit"}
    # a 0-d array operand is handed over per fragment: the same answer, one kernel per shape
    g = dlmg.fuse(lambda p, s: p - s)
    np.testing.assert_allclose(g(a, np.float32(1.0)).gather(framework="numpy"), x - 1.0)
    assert g.cache_size == 2


@pytest.mark.parametrize("compile", [True, False])
def test_results_run_as_one_call_are_new_arrays_of_the_fragment_shape(compile):
    # a function returning its operand (or a view of it) still gives new memory,
    # on the first call and every later one
    need("torch")
    (a, _, _), (da, _, _) = operands(LAYOUT, "torch")
    for fn in (lambda v, s: v, lambda v, s: v.view(v.shape), lambda v, s: v[...]):
        f = dlmg.fuse(fn, compile=compile)
        for _ in range(2):
            got = f(da, 0.5)
            assert not set(data_ptrs(got)) & set(data_ptrs(da))
            np.testing.assert_array_equal(gathered(got), a)
    scaled = dlmg.fuse(lambda s, v: v * s, compile=compile)
    np.testing.assert_allclose(gathered(scaled(0.5, da)), a * 0.5)
    with pytest.raises(FragmentError, match=r"shape \(1, 6\) for fragment 0, whose shape is \(3, 6\)"):
        dlmg.fuse(lambda v: v[:1], compile=compile)(da)


def test_results_of_another_framework_keep_their_own_placement():
    # a function jax.jit refuses (it converts to NumPy) runs eagerly over the list of
    # a device's fragments and returns NumPy arrays: later operations run in NumPy
    layout = dlmg.Layout.slab((12, 6), axis=0, devices=["cpu"] * 4)
    x = data(layout.shape, seed=6)
    f = dlmg.fuse(lambda v: np.asarray(v) + 1)
    for _ in range(2):
        got = f(build(x, layout, "jax"))
        assert got.frameworks == ("numpy",)
        assert set(f.compilers.values()) == {next(iter(f.compilers.values()))}
        assert next(iter(f.compilers.values())).startswith("eager (jax.jit failed")
        later = got * 3
        assert later.frameworks == ("numpy",)
        np.testing.assert_allclose(gathered(later), (x + 1) * 3, rtol=1e-6)


@pytest.mark.slow
def test_torch_compiled_results_of_numpy_are_checked_and_kept_as_numpy():
    # torch.compile traces NumPy code and hands NumPy arrays back; a view of the
    # fragment's memory is copied, new NumPy results stay NumPy with their own placement
    need("torch")
    (a, _, _), (da, _, _) = operands(LAYOUT, "torch")
    view = dlmg.fuse(lambda v: v.numpy())
    doubled = dlmg.fuse(lambda v: v.numpy() * 2)
    for _ in range(2):
        got = view(da)
        assert not set(data_ptrs(got)) & set(data_ptrs(da))
        np.testing.assert_array_equal(gathered(got), a)
        twice = doubled(da)
        assert twice.frameworks == ("numpy",)
        later = twice + 1
        assert later.frameworks == ("numpy",)
        np.testing.assert_allclose(gathered(later), a * 2 + 1, rtol=1e-6)
        same = dlmg.map_fragments(lambda v: v[...], twice)  # a view: copied by NumPy's rules
        assert not set(data_ptrs(same)) & set(data_ptrs(twice))


def test_padded_fragments_are_refused_by_name_on_every_path():
    # blocks apart in memory are no array a compiler can take: the per-fragment
    # path says so, whether or not the framework batches a device's fragments
    need("torch")
    import torch

    lay = Layout((12,), block=(2,), grid=(2,), devices=["cpu"] * 2, element_strides=(1,), block_strides=(3,))
    memory = [torch.arange(20.0, dtype=torch.float64) for _ in range(2)]
    dt = dlmg.from_pointers(lay, [m.data_ptr() for m in memory], "float64", owner=memory).to("torch")
    with pytest.raises(FragmentError, match="fragment 0 lies in padded blocks"):
        dlmg.fuse(lambda x: x * 2)(dt)


@pytest.mark.parametrize("compile", [True, False])
def test_results_run_fragment_by_fragment_are_new_arrays_of_the_fragment_shape(compile):
    # one fragment per device runs one kernel per fragment: a compiled kernel is
    # checked on its first call and, where it returned its operand, copies on every
    # later call; a wrong shape is refused on every call
    need("torch")
    one = Layout((3, 6), block=(3, 6), grid=(1, 1), devices=["cpu"])
    (a, _, _), (da, _, _) = operands(one, "torch")
    for fn in (lambda v, s: v, lambda v, s: v[...]):
        f = dlmg.fuse(fn, compile=compile)
        for _ in range(3):
            got = f(da, 0.5)
            assert not set(data_ptrs(got)) & set(data_ptrs(da))
            np.testing.assert_array_equal(gathered(got), a)
    wrong = dlmg.fuse(lambda v: v[:1], compile=compile)
    for _ in range(2):
        with pytest.raises(FragmentError, match=r"shape \(1, 6\) for fragment 0, whose shape is \(3, 6\)"):
            wrong(da)


def test_jax_fragments_on_their_own_devices_are_checked_per_signature():
    # JAX fragments each on their own CPU device run jax.jit per fragment
    layout = jax_layout()
    (a, b, _), (da, db, _) = operands(layout, "jax")
    f = dlmg.fuse(lambda x, y: x * y)
    for _ in range(2):
        np.testing.assert_allclose(gathered(f(da, db)), a * b, rtol=1e-6)
    assert set(f.compilers.values()) == {"jax.jit"}
    wrong = dlmg.fuse(lambda v: v[:1])
    for _ in range(2):
        with pytest.raises(FragmentError, match=r"shape \(1, 6\) for fragment 0, whose shape is \(3, 6\)"):
            wrong(da)


def test_an_eager_function_is_checked_on_every_call():
    # plain Python may return its operand on one call and not on another: NumPy's
    # eager kernel is checked every time, so the result never shares the operand's memory
    (a, _, _), (da, _, _) = operands(LAYOUT, "numpy")
    f = dlmg.fuse(lambda v, s: v[...] if s > 0 else v + 1)  # a view of v, or new memory
    first = f(da, -1.0)
    np.testing.assert_allclose(gathered(first), a + 1)
    again = f(da, 1.0)  # same signature: the kernel that made new arrays now returns a view
    assert not set(data_ptrs(again)) & set(data_ptrs(da))
    np.testing.assert_array_equal(gathered(again), a)
