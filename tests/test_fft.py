"""Distributed FFTs against ``numpy.fft`` on the gathered operands: every transform of the
``fft`` extension over random layouts (slabs, 2-D block grids with uneven last blocks,
several fragments per device, replicas, mixed frameworks), split transformed modes
included, with ``n``/``s``/``norm``/``transposed_out``; shifts as distributed rolls; the
sample frequencies created in a layout; and the memory a transform takes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.errors import DtypeError, LayoutError
from dlmg.ops.fft import result_layout, transposed_layout
from _memory import peak_of
from _ops_support import ASSIGNMENT_PARAMS, EXAMPLES, build, data, fragment_dtypes, gathered, layouts, need

ONE = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft")
MANY = ("fftn", "ifftn", "rfftn", "irfftn")
REAL_INPUT = ("rfft", "ihfft", "rfftn")


def _dtypes(assignment: str) -> tuple[str, str, float]:
    """Real and complex dtypes and a tolerance: float64 where every fragment's framework keeps
    it, float32 where JAX fragments are (JAX without 64-bit types downcasts them)."""
    if assignment in ("jax", "mixed"):
        return "float32", "complex64", 2e-3
    return "float64", "complex128", 1e-9


def _input(kind: str, shape, assignment: str, seed: int) -> np.ndarray:
    real, cplx, _ = _dtypes(assignment)
    x = data(shape, real, seed=seed)
    if kind not in REAL_INPUT:
        x = (x + 1j * data(shape, real, seed=seed + 1)).astype(cplx)
    return x


def _check_layout(out, layout: Layout, transposed_out: bool) -> None:
    if transposed_out:
        assert out.layout.nfragments <= layout.nfragments
        assert set(out.layout.devices) <= set(layout.devices)
    else:
        assert out.layout.same_distribution(result_layout(layout.dense, dict(enumerate(out.shape))))


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_one_mode_transforms_match_numpy(assignment):
    need(assignment)
    jaxy = assignment in ("jax", "mixed")
    tol = _dtypes(assignment)[2]

    @settings(max_examples=3 * EXAMPLES[assignment], deadline=None)
    @given(st.data())
    def run(data_):
        kind = data_.draw(st.sampled_from(ONE))
        one_d = data_.draw(st.booleans())
        if one_d:
            shape = (data_.draw(st.sampled_from([9, 13, 16, 24, 7] if not jaxy else [16])),)
        else:
            shape = data_.draw(st.sampled_from([(4, 6), (3, 5, 2), (6, 7)] if not jaxy else [(4, 6)]))
        axis = data_.draw(st.integers(-len(shape), len(shape) - 1))
        layout = data_.draw(layouts(shape, jax_devices=jaxy, ndevices=3))
        n = data_.draw(st.sampled_from([None, 4, 9, 16]))
        norm = data_.draw(st.sampled_from([None, "backward", "ortho", "forward"]))
        transposed_out = data_.draw(st.booleans())
        x = _input(kind, shape, assignment, seed=9)
        a = build(x, layout, assignment)
        want = getattr(np.fft, kind)(x, n=n, axis=axis, norm=norm)
        out = getattr(dlmg.fft, kind)(a, n=n, axis=axis, norm=norm, transposed_out=transposed_out)
        assert out.shape == want.shape
        _check_layout(out, layout, transposed_out)
        assert fragment_dtypes(out) == {out.dtype} and out.dtype == str(want.dtype)  # float32 -> complex64
        np.testing.assert_allclose(gathered(out), want, rtol=tol, atol=tol * 10)

    run()


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_multi_mode_transforms_match_numpy(assignment):
    need(assignment)
    jaxy = assignment in ("jax", "mixed")
    tol = _dtypes(assignment)[2]

    @settings(max_examples=3 * EXAMPLES[assignment], deadline=None)
    @given(st.data())
    def run(data_):
        kind = data_.draw(st.sampled_from(MANY))
        shape = data_.draw(st.sampled_from([(4, 6), (6, 5, 4), (5, 8), (2, 3, 4, 5)] if not jaxy else [(4, 6)]))
        layout = data_.draw(layouts(shape, jax_devices=jaxy, ndevices=3))
        axes = data_.draw(st.one_of(st.none(), st.permutations(range(len(shape))).flatmap(
            lambda p: st.integers(1, len(p)).map(lambda k: tuple(p[:k])))))
        ndone = len(shape) if axes is None else len(axes)
        s = data_.draw(st.one_of(st.none(), st.lists(st.sampled_from([-1, 3, 4, 8]), min_size=ndone,
                                                      max_size=ndone).map(tuple)))
        if s is not None and axes is None:
            axes = tuple(range(len(shape)))
        norm = data_.draw(st.sampled_from([None, "ortho", "forward"]))
        transposed_out = data_.draw(st.booleans())
        x = _input(kind, shape, assignment, seed=4)
        a = build(x, layout, assignment)
        want_s = None if s is None else [x.shape[m] if n == -1 else n for m, n in zip(axes, s)]
        if kind == "irfftn" and s is not None and s[-1] == -1:  # the standard's default length there
            want_s[-1] = 2 * (x.shape[axes[-1]] - 1)
        want = getattr(np.fft, kind)(x, s=want_s, axes=axes, norm=norm)
        out = getattr(dlmg.fft, kind)(a, s=s, axes=axes, norm=norm, transposed_out=transposed_out)
        assert out.shape == want.shape
        _check_layout(out, layout, transposed_out)
        np.testing.assert_allclose(gathered(out), want, rtol=tol, atol=tol * 10)

    run()


def test_slab_fftn_moves_once_each_way_and_transposed_out_saves_one():
    """A slab split along mode 0: the modes 1 and 2 are transformed where they lie, one
    transpose makes mode 0 whole; with transposed_out the result stays split along mode 1,
    and the inverse takes it as it is."""
    layout = Layout.slab((8, 6, 4), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = data(layout.shape, "float64", seed=1)
    a = build(x, layout)
    out = dlmg.fft.fftn(a, transposed_out=True)
    assert out.layout == transposed_layout(layout, 0, 1)
    assert out.layout.grid == (1, 4, 1)
    np.testing.assert_allclose(gathered(out), np.fft.fftn(x), atol=1e-12)
    back = dlmg.fft.ifftn(out)  # split along mode 1 now: the inverse transposes it back
    assert back.layout == out.layout.dense
    np.testing.assert_allclose(gathered(back), x, atol=1e-12)
    again = dlmg.fft.fftn(a)
    assert again.layout == layout
    np.testing.assert_allclose(gathered(again), np.fft.fftn(x), atol=1e-12)


def test_pencil_rfftn_halves_the_split_last_mode_blocks():
    """A 2-D grid over modes 1 and 2 (pencils), the last mode block-cyclic with an uneven
    last block: the half spectrum keeps the grid, and the halved mode's block."""
    layout = Layout((4, 6, 10), block=(4, 2, 3), grid=(1, 2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = data(layout.shape, "float64", seed=2)
    out = dlmg.fft.rfftn(build(x, layout))
    assert out.layout.shape == (4, 6, 6) and out.layout.grid == (1, 2, 2) and out.layout.block == (4, 2, 3)
    np.testing.assert_allclose(gathered(out), np.fft.rfftn(x), atol=1e-12)
    back = dlmg.fft.irfftn(out, s=(4, 6, 10))
    assert back.layout == result_layout(out.layout, {2: 10})  # two blocks of 3 on a grid of 2: a slab now
    assert back.layout.block == (4, 2, 5)
    np.testing.assert_allclose(gathered(back), x, atol=1e-12)
    slab = Layout.slab((6, 10), 1, ["cpu:0", "cpu:1"])
    half = dlmg.fft.rfft(build(x[0], slab))
    assert half.layout.block == (6, 3) and half.layout.grid == (1, 2)  # a slab stays a slab


def test_whole_modes_move_nothing_and_keep_each_fragments_framework():
    need("torch")
    layout = Layout((6, 8), block=(2, 8), grid=(3, 1), devices=["cpu:0", "cpu:0", "cpu:1"])
    x = data(layout.shape, "float64", seed=3)
    a = build(x, layout, "torch")
    out = dlmg.fft.rfft(a, axis=1)
    assert out.layout.grid == (3, 1) and [f.framework for f in out.fragments] == ["torch"] * 3
    assert out.dtype == "complex128"
    np.testing.assert_allclose(gathered(out), np.fft.rfft(x, axis=1), atol=1e-12)
    assert dlmg.fft.fft(build(data((6, 8), "float32"), layout)).dtype == "complex64"  # the standard keeps float32


def test_one_dimensional_four_step():
    """A 1-D tensor split along its mode: four-step transforms, the spectrum left block-cyclic
    with transposed_out, and laid out like the input otherwise; inverse and real transforms;
    extents without a square factor by the chirp-z transform."""
    devices = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    layout = Layout.slab((64,), 0, devices)
    x = _input("fft", (64,), "numpy", seed=5)
    a = build(x, layout)
    spectrum = dlmg.fft.fft(a, transposed_out=True)
    assert spectrum.layout.grid == (4,) and spectrum.layout.block == (2,)  # n2 / p, cyclic-block
    np.testing.assert_allclose(gathered(spectrum), np.fft.fft(x), atol=1e-11)
    back = dlmg.fft.ifft(spectrum)
    np.testing.assert_allclose(gathered(back), x, atol=1e-12)
    assert dlmg.fft.fft(a).layout == layout
    real = data((64,), "float64", seed=6)
    r = dlmg.fft.rfft(build(real, layout))
    assert r.layout == result_layout(layout, {0: 33})
    np.testing.assert_allclose(gathered(r), np.fft.rfft(real), atol=1e-11)
    np.testing.assert_allclose(gathered(dlmg.fft.irfft(r)), real, atol=1e-12)
    # 62 = 2 * 31 has no square factor: Bluestein's chirp-z transform, by three four-step FFTs
    odd = dlmg.fft.fft(build(x[:62], Layout.slab((62,), 0, devices)), norm="ortho")
    assert odd.layout == Layout.slab((62,), 0, devices)
    np.testing.assert_allclose(gathered(odd), np.fft.fft(x[:62], norm="ortho"), atol=1e-11)
    prime = build(real[:13], Layout.slab((13,), 0, devices[:3]))
    np.testing.assert_allclose(gathered(dlmg.fft.rfft(prime)), np.fft.rfft(real[:13]), atol=1e-11)
    np.testing.assert_allclose(gathered(dlmg.fft.ihfft(prime)), np.fft.ihfft(real[:13]), atol=1e-12)


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_shifts_match_numpy(assignment):
    need(assignment)
    jaxy = assignment in ("jax", "mixed")

    @settings(max_examples=3 * EXAMPLES[assignment], deadline=None)
    @given(st.data())
    def run(data_):
        shape = data_.draw(st.sampled_from([(7,), (8,), (4, 6), (3, 5, 2), (9, 4)] if not jaxy else [(8,), (4, 6)]))
        layout = data_.draw(layouts(shape, jax_devices=jaxy, ndevices=3))
        axes = data_.draw(st.one_of(st.none(), st.integers(0, len(shape) - 1),
                                    st.permutations(range(len(shape))).map(lambda p: tuple(p[:-1] or p))))
        inverse = data_.draw(st.booleans())
        x = data(shape, "float32", seed=8)
        a = build(x, layout, assignment)
        name = "ifftshift" if inverse else "fftshift"
        out = getattr(dlmg.fft, name)(a, axes=axes)
        assert out.layout == layout.dense
        np.testing.assert_array_equal(gathered(out), getattr(np.fft, name)(x, axes=axes))

    run()


def test_a_shift_along_a_split_mode_renumbers_fragments():
    """An even slab: fftshift along the split mode hands every piece to the device half the
    grid away (a renumbering plus one redistribution), no fragment-local transpose."""
    devices = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    layout = Layout.slab((8, 3), 0, devices)
    x = data(layout.shape, "float64", seed=11)
    out = dlmg.fft.fftshift(build(x, layout), axes=0)
    assert out.layout == layout
    np.testing.assert_array_equal(gathered(out), np.fft.fftshift(x, axes=0))
    cyclic = Layout((10,), block=(1,), grid=(3,), devices=devices[:3])  # 3 does not divide 10
    y = data((10,), "float64", seed=12)
    np.testing.assert_array_equal(gathered(dlmg.fft.ifftshift(build(y, cyclic))), np.fft.ifftshift(y))


def test_frequencies_created_in_a_layout():
    devices = ["cpu:0", "cpu:1", "cpu:2"]
    f = dlmg.array_api.fft.fftfreq(10, d=0.25, device=Layout((10,), block=(2,), grid=(3,), devices=devices))
    assert f.layout.grid == (3,) and f.dtype == "float64"
    np.testing.assert_allclose(gathered(f), np.fft.fftfreq(10, d=0.25))
    r = dlmg.fft.rfftfreq(9, device=Layout.slab((5,), 0, devices[:2]), dtype=dlmg.float32)
    assert r.dtype == "float32"
    np.testing.assert_allclose(gathered(r), np.fft.rfftfreq(9), rtol=1e-6)
    np.testing.assert_allclose(gathered(dlmg.fft.fftfreq(7)), np.fft.fftfreq(7))
    with pytest.raises(LayoutError, match="shape"):
        dlmg.fft.fftfreq(8, device=Layout.slab((9,), 0, devices))


def test_one_namespace():
    assert dlmg.fft is dlmg.array_api.fft
    for name in dlmg.fft.__all__:
        assert getattr(dlmg.array_api.fft, name) is getattr(dlmg.fft, name)
    assert not hasattr(dlmg.array_api.fft, "collected")


def test_errors_name_the_argument():
    layout = Layout((6, 8), block=(2, 8), grid=(3, 1), devices=["cpu"] * 3)
    a = build(data(layout.shape, "float32", seed=10), layout)
    with pytest.raises(DtypeError, match="astype"):
        dlmg.fft.fft(build(data(layout.shape, "int32"), layout))
    with pytest.raises(DtypeError):
        dlmg.fft.rfft(build(data(layout.shape, "complex64"), layout))
    with pytest.raises(ValueError, match="positive"):
        dlmg.fft.fft(a, n=0)
    with pytest.raises(ValueError, match="norm"):
        dlmg.fft.fft(a, norm="bad")
    with pytest.raises(ValueError, match="repeat"):
        dlmg.fft.fftn(a, axes=(0, 0))
    with pytest.raises(ValueError, match="entries"):
        dlmg.fft.fftn(a, s=(4,), axes=(0, 1))
    with pytest.raises(ValueError, match="out of bounds"):
        dlmg.fft.fft(a, axis=2)
    with pytest.raises(TypeError, match="DistributedTensor"):
        dlmg.fft.fft(np.zeros(4))


def test_a_pending_sum_is_resolved_first():
    """A tensor holding a pending sum (a k-split product) is transformed by its value."""
    devices = ["cpu:0", "cpu:1"]
    xa = data((6, 4), "float64", seed=13)
    xb = data((4, 6), "float64", seed=14)
    a = build(xa, Layout.slab((6, 4), 1, devices))
    b = build(xb, Layout.slab((4, 6), 0, devices))
    product = dlmg.matmul(a, b, pending=True)
    assert product.layout.partial == "sum"  # each device holds an addend
    out = dlmg.fft.fft(product, axis=0)
    assert out.layout.partial is None
    np.testing.assert_allclose(gathered(out), np.fft.fft(xa @ xb, axis=0), atol=1e-10)


@pytest.mark.parametrize("case", ["fftn slab", "fftn real slab", "fft split", "fft 1-D", "rfftn pencil"])
def test_memory_stays_within_the_bound(case):
    """New memory during a transform, NumPy fragments (tracemalloc sees their buffers): within
    1.5 x (operand + result) + one block, though every transformed mode starts split."""
    devices = [f"cpu:{i}" for i in range(4)]
    if case in ("fftn slab", "fftn real slab"):
        layout, call = Layout.slab((32, 32, 32), 0, devices), lambda a: dlmg.fft.fftn(a)
    elif case == "fft split":
        layout, call = Layout.slab((64, 64), 0, devices), lambda a: dlmg.fft.fft(a, axis=0)
    elif case == "fft 1-D":
        layout, call = Layout.slab((4096,), 0, devices), lambda a: dlmg.fft.fft(a)
    else:
        layout = Layout((16, 32, 32), block=(16, 16, 16), grid=(1, 2, 2), devices=devices)
        call = lambda a: dlmg.fft.rfftn(a)  # noqa: E731
    x = data(layout.shape, "float64", seed=15)
    a = build(x if case in ("rfftn pencil", "fftn real slab") else x.astype(np.complex128), layout)
    out = call(a)
    operand, result = a.nbytes, out.nbytes
    block = max(math.prod(f.shape) for f in out.layout.fragments) * out.itemsize
    del out
    peak = peak_of(lambda: call(a))
    assert peak <= 1.5 * (operand + result) + block, (peak, operand, result, block)


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy", "jax"])
def test_split_mode_transforms_on_cuda(framework):
    """Four fragments of one framework on cuda:0: the transposes move them on the GPU and
    each fragment's transforms run there (cuFFT through the framework)."""
    pytest.importorskip(framework)
    devices = ["cuda:0"] * 4
    x = _input("fftn", (8, 6, 4), "jax", seed=16)  # complex64: every framework keeps it
    layout = Layout((8, 6, 4), block=(4, 3, 4), grid=(2, 2, 1), devices=devices)
    a = dlmg.scatter(x, layout, framework=framework)
    out = dlmg.fft.fftn(a)
    assert out.layout == layout and {f.framework for f in out.fragments} == {framework}
    assert all(f.device.kind == "cuda" for f in out.fragments)
    np.testing.assert_allclose(out.gather(framework="numpy"), np.fft.fftn(x), rtol=1e-4, atol=1e-3)
    v = _input("fft", (64,), "jax", seed=17)
    line = dlmg.scatter(v, Layout.slab((64,), 0, devices), framework=framework)
    np.testing.assert_allclose(dlmg.fft.fft(line).gather(framework="numpy"), np.fft.fft(v), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(dlmg.fft.fftshift(line).gather(framework="numpy"), np.fft.fftshift(v))
