"""Batch-local matmul, Cholesky and FFTs against NumPy on the gathered data:
distributed batch modes, whole operated modes, output layouts, mixed
frameworks, and the errors that point to redistribute."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.errors import DtypeError, LayoutError, LayoutMismatchError
from _ops_support import ASSIGNMENT_PARAMS, EXAMPLES, build, data, fragment_dtypes, gathered, layouts, need


def batch_layouts(shape, jax_devices: bool, nwhole: int):
    """Random layouts of ``shape`` whose last ``nwhole`` modes are whole."""
    return layouts(shape, jax_devices=jax_devices, ndevices=3, whole=tuple(range(-nwhole, 0)))


def spd(batch, n, seed, dtype="float32"):
    """Symmetric positive-definite matrices."""
    a = data(batch + (n, n), dtype, seed=seed, low=-1, high=1)
    return (a @ np.swapaxes(a, -1, -2).conj() + n * np.eye(n, dtype=dtype)).astype(dtype)


# -- matmul ----------------------------------------------------------------------------
@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_matmul_matches_numpy_over_batch_layouts(assignment):
    need(assignment)
    jaxy = assignment in ("jax", "mixed")

    @settings(max_examples=EXAMPLES[assignment])
    @given(st.data())
    def run(data_):
        batch = data_.draw(st.sampled_from([(4,), (3, 2), (5,)] if jaxy else [(4,), (3, 2), (5,), (0,), (2, 1, 3)]))
        m, k, n = data_.draw(st.sampled_from([(3, 4, 2), (2, 2, 5)] if jaxy else [(3, 4, 2), (1, 5, 3), (4, 0, 2)]))
        la = data_.draw(batch_layouts(batch + (m, k), jaxy, 2))
        # b's batch modes split like a's
        lb = Layout(batch + (k, n), block=la.block[:-2] + (max(k, 1), max(n, 1)), grid=la.grid, devices=la.devices)
        xa = data(la.shape, "float32", seed=1)
        xb = data(lb.shape, "float32", seed=2)
        a, b = build(xa, la, assignment), build(xb, lb, "numpy")
        out = a @ b
        assert out.shape == batch + (m, n)
        assert out.layout.grid == la.grid and out.layout.nreplicas == 1  # contractions drop replicas
        assert out.layout.devices == la.devices[: la.ngrid]
        assert [f.framework for f in out.fragments] == [f.framework for f in a.fragments[: la.ngrid]]
        np.testing.assert_allclose(gathered(out), xa @ xb, rtol=1e-5, atol=1e-5)

    run()


def test_matmul_promotes_mixed_dtypes_and_keeps_frameworks():
    need("torch")
    la = Layout((4, 3, 2), block=(2, 3, 2), grid=(2, 1, 1), devices=["cpu", "cpu"])
    lb = Layout((4, 2, 5), block=(2, 2, 5), grid=(2, 1, 1), devices=["cpu", "cpu"])
    xa = data(la.shape, "float32", seed=3)
    xb = data(lb.shape, "float64", seed=4)
    out = dlmg.matmul(build(xa, la, "torch"), build(xb, lb, "numpy"))
    assert out.dtype == "float64" and fragment_dtypes(out) == {"float64"}
    np.testing.assert_allclose(gathered(out), xa @ xb, rtol=1e-6)
    ia = build(data(la.shape, "int32", seed=5), la, "torch")
    ib = build(data(lb.shape, "int32", seed=6), lb, "torch")
    np.testing.assert_array_equal(gathered(ia @ ib), data(la.shape, "int32", seed=5) @ data(lb.shape, "int32", seed=6))


def test_matmul_errors_point_to_redistribute():
    # the batch-local product (dlmg.ops.contract.local.local_matmul) needs whole matrices and refuses
    # others naming redistribute; dlmg.matmul and @ contract them anyway (dlmg.ops.contract)
    local_matmul = dlmg.ops.contract.local.local_matmul
    la = Layout((4, 6, 3), block=(2, 3, 3), grid=(2, 2, 1), devices=["cpu"] * 4)  # rows split
    lb = Layout((4, 3, 2), block=(2, 3, 2), grid=(2, 1, 1), devices=["cpu"] * 2)
    a = build(data(la.shape), la)
    b = build(data(lb.shape), lb)
    with pytest.raises(LayoutError, match="redistribute") as info:
        local_matmul(a, b)
    assert "mode(s) (1,)" in str(info.value)
    np.testing.assert_allclose(gathered(a @ b), gathered(a) @ gathered(b), rtol=1e-5)
    suggested = dlmg.ops._batch.suggest_whole(la, (1, 2))
    assert suggested.grid[1:] == (1, 1)
    fixed = a.redistribute(suggested)
    np.testing.assert_allclose(gathered(fixed @ b), gathered(a) @ gathered(b), rtol=1e-5)
    lc = Layout((4, 3, 2), block=(1, 3, 2), grid=(2, 1, 1), devices=["cpu"] * 2)  # cyclic batch
    with pytest.raises(LayoutMismatchError, match="redistribute"):
        local_matmul(fixed, build(data(lc.shape), lc))
    with pytest.raises(ValueError, match="inner extents"):
        b @ b
    with pytest.raises(DtypeError):
        sq = Layout((4, 2, 2), block=(2, 2, 2), grid=(2, 1, 1), devices=["cpu"] * 2)
        dlmg.matmul(build(data(sq.shape, "bool"), sq), build(data(sq.shape, "bool"), sq))
    single = Layout((6, 3), block=(3, 3), grid=(2, 1), devices=["cpu", "cpu"])
    with pytest.raises(LayoutError) as info:
        local_matmul(build(data(single.shape), single), build(data((3, 3)), Layout.single((3, 3))))
    assert "redistribute" in str(info.value)


# -- cholesky --------------------------------------------------------------------------
@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_cholesky_matches_numpy(assignment):
    need(assignment)
    layout = Layout((6, 4, 4), block=(2, 4, 4), grid=(3, 1, 1), devices=["cpu:0", "cpu:1", "cpu:2"] * 2)  # replicated
    x = spd((6,), 4, seed=7)
    a = build(x, layout, assignment)
    low = dlmg.linalg.cholesky(a)
    assert low.layout == layout
    np.testing.assert_allclose(gathered(low), np.linalg.cholesky(x), rtol=1e-4, atol=1e-5)
    up = dlmg.linalg.cholesky(a, upper=True)
    np.testing.assert_allclose(gathered(up), np.swapaxes(np.linalg.cholesky(x), -1, -2), rtol=1e-4, atol=1e-5)


def test_cholesky_errors():
    layout = Layout((2, 4, 4), block=(2, 2, 4), grid=(1, 2, 1), devices=["cpu", "cpu"])
    with pytest.raises(LayoutError, match="redistribute"):  # split matrices with batch modes
        dlmg.ops.linalg.cholesky(build(spd((2,), 4, seed=8), layout))
    whole = Layout.single((4, 4))
    with pytest.raises(DtypeError, match="floating"):
        dlmg.linalg.cholesky(build(data((4, 4), "int32"), whole))
    with pytest.raises(ValueError, match="square"):
        dlmg.linalg.cholesky(build(data((4, 3)), Layout.single((4, 3))))
    bad = build(-np.eye(4, dtype=np.float32), whole)
    with pytest.raises(dlmg.FragmentError, match="fragment 0"):
        dlmg.linalg.cholesky(bad)


# -- FFT -------------------------------------------------------------------------------
FFTS = {
    "fft": np.fft.fft,
    "ifft": np.fft.ifft,
    "rfft": np.fft.rfft,
    "irfft": np.fft.irfft,
}


@pytest.mark.parametrize("assignment", ASSIGNMENT_PARAMS)
def test_ffts_match_numpy(assignment):
    need(assignment)
    jaxy = assignment in ("jax", "mixed")

    @settings(max_examples=EXAMPLES[assignment])
    @given(st.data())
    def run(data_):
        shape = data_.draw(st.sampled_from([(4, 6), (3, 5, 2)] if jaxy else [(4, 6), (3, 5, 2), (7,), (2, 8)]))
        axis = data_.draw(st.integers(-len(shape), len(shape) - 1))
        layout = data_.draw(layouts(shape, jax_devices=jaxy, ndevices=3, whole=(axis,)))
        n = data_.draw(st.sampled_from([None, 4, 9]))
        norm = data_.draw(st.sampled_from([None, "ortho", "forward"]))
        kind = data_.draw(st.sampled_from(sorted(FFTS)))
        dtype = "complex64" if kind in ("ifft", "irfft") else data_.draw(st.sampled_from(["float32", "complex64"]))
        if kind == "rfft":
            dtype = "float32"
        x = data(shape, dtype, seed=9)
        a = build(x, layout, assignment)
        out = getattr(dlmg.fft, kind)(a, n=n, axis=axis, norm=norm)
        want = FFTS[kind](x, n=n, axis=axis, norm=norm)
        assert out.shape == want.shape
        assert out.layout.grid == layout.grid and out.layout.devices == layout.devices
        assert fragment_dtypes(out) == {out.dtype}
        np.testing.assert_allclose(gathered(out), want, rtol=1e-4, atol=1e-4)

    run()


def test_fft_round_trip_and_errors():
    layout = Layout((6, 8), block=(2, 8), grid=(3, 1), devices=["cpu"] * 3)
    x = data(layout.shape, "float32", seed=10)
    a = build(x, layout)
    back = dlmg.fft.irfft(dlmg.fft.rfft(a), n=8)
    np.testing.assert_allclose(gathered(back), x, rtol=1e-5, atol=1e-5)
    assert dlmg.fft.rfft(a).shape == (6, 5) and dlmg.fft.rfft(a).layout.block == (2, 5)
    # a split transformed mode is made whole by a transpose (tests/test_fft.py has the rest)
    np.testing.assert_allclose(gathered(dlmg.fft.fft(a, axis=0)), np.fft.fft(x, axis=0), rtol=1e-4, atol=1e-4)
    with pytest.raises(DtypeError, match="astype"):
        dlmg.fft.fft(build(data(layout.shape, "int32"), layout))
    with pytest.raises(DtypeError):
        dlmg.fft.rfft(build(data(layout.shape, "complex64"), layout))
    with pytest.raises(ValueError, match="positive"):
        dlmg.fft.fft(a, n=0)
    with pytest.raises(ValueError, match="norm"):
        dlmg.fft.fft(a, norm="bad")
