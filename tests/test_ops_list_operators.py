"""Arithmetic operators on torch, CuPy and NumPy fragments run as one list
operation per device (``Adapter.list_operator``: torch's ``_foreach_*``, or for
large CUDA fragments the operator on two alternating streams; a CuPy raw
kernel; NumPy's operator pair by pair, without dlmg's dispatch per fragment).
Results, dtypes and errors equal the framework's operators applied fragment by
fragment; what the lists cannot cover (gradients, padded fragments, other
frameworks, 0-d arrays) keeps the per-fragment path."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import dlmg
from dlmg.ops import pointwise
from dlmg.ops._lists import on_lists as _on_collected
from dlmg.ops.dispatch import collect

from _ops_support import compare_operator, outcome, per_fragment, same_outcome

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)]
DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64"]
OPERATORS = ["add", "sub", "mul", "truediv", "pow"]


def on_lists(name, lead, other, in_place, label):
    """The list path for ``lead <op> other``, the operands collected (checked) as an operator does first."""
    return _on_collected(name, collect((lead, other), label), in_place, label)


def fragments(dtype: str, device: str, seed: int, n: int = 4) -> list:
    rng = np.random.default_rng(seed)
    values = torch.from_numpy(rng.integers(1, 5, size=(n * 3, 5)))
    return [p.to(getattr(torch, dtype)).to(device) for p in values.split(3)]


def wrap(frags: list, device: str):
    layout = dlmg.Layout.slab((3 * len(frags), 5), axis=0, devices=[device] * len(frags))
    return dlmg.from_fragments(frags, layout)


def same(got, want) -> None:
    def arrays(g, w):
        assert g.dtype == w.dtype and g.device == w.device
        assert torch.equal(g.cpu(), w.cpu()), (g, w)

    same_outcome(got, want, arrays)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operators_equal_torch_fragment_by_fragment(device, name, dtype):
    op = getattr(operator, name)
    a, b = wrap(fragments(dtype, device, 1), device), wrap(fragments(dtype, device, 2), device)
    c = wrap(fragments("float32", device, 3), device)
    compare_operator(op, a, b, c, same)


@pytest.mark.parametrize("device", DEVICES)
def test_list_operations_run_and_results_are_new_memory(device):
    fa, fb = fragments("float32", device, 1), fragments("float32", device, 2)
    a, b = wrap(fa, device), wrap(fb, device)
    out = on_lists("multiply", a, b, False, "operator *")
    assert out is not None
    pointers = {x.data_ptr() for x in fa + fb}
    assert all(f.array.data_ptr() not in pointers for f in out.fragments)
    assert on_lists("add", a, 2.0, False, "operator +") is not None
    assert all(torch.equal(x, y) for x, y in zip(fa, fragments("float32", device, 1)))  # operands unchanged


@pytest.mark.parametrize("device", DEVICES)
def test_temporaries_are_written_in_place_through_the_lists(device):
    fa, fb, fc = (fragments("float32", device, s) for s in (1, 2, 3))
    a, b, c = (wrap(f, device) for f in (fa, fb, fc))
    before = pointwise.ELIDED[0]
    y = a * b + c - 1.5  # the temporary a * b takes + c and - 1.5 in its memory
    assert pointwise.ELIDED[0] == before + 2
    for got, x, w, z in zip(y.fragments, fa, fb, fc):
        assert torch.equal(got.array, x * w + z - 1.5)


def test_what_the_lists_do_not_cover_keeps_the_per_fragment_path():
    fa, fb = fragments("float32", "cpu", 1), fragments("float32", "cpu", 2)
    a, b = wrap(fa, "cpu"), wrap(fb, "cpu")
    assert on_lists("add", a, np.float32(2), False, "operator +") is None  # not a Python scalar
    assert on_lists("floor_divide", a, b, False, "operator //") is None  # no such list operation
    grad = wrap([x.clone().requires_grad_() for x in fa], "cpu")
    assert on_lists("add", grad, b, False, "operator +") is None
    summed = grad + b  # autograd records the per-fragment operators
    assert all(f.array.grad_fn is not None for f in summed.fragments)
    mixed = dlmg.from_fragments([fa[0].numpy(), fa[1], fa[2], fa[3]], a.layout)
    assert on_lists("add", mixed, 1, False, "operator +") is None
    np.testing.assert_array_equal((mixed + 1).gather(framework="numpy"), torch.cat(fa).numpy() + 1)
    numpy_b = dlmg.from_fragments([x.numpy() for x in fb], a.layout)
    assert on_lists("add", a, numpy_b, False, "operator +") is None  # operands of two frameworks
    np.testing.assert_array_equal((a + numpy_b).gather(framework="numpy"), (torch.cat(fa) + torch.cat(fb)).numpy())


def test_padded_fragments_keep_the_per_fragment_path():
    # blocks apart in memory: the fragments are padded memory, not arrays
    layout = dlmg.Layout((10, 7), block=(3, 2), grid=(2, 2), devices=["cpu"] * 4,
                         element_strides=(4, 1), block_strides=(16, 6))
    x = np.arange(70, dtype=np.float32).reshape(10, 7)
    t = dlmg.scatter(torch.from_numpy(x), layout)
    assert all(f.is_padded for f in t.fragments)
    assert on_lists("add", t, 1, False, "operator +") is None
    with pytest.raises(dlmg.FragmentError, match="padded blocks"):  # the per-fragment path says why
        t + 1


def test_an_in_place_refusal_names_a_fragment():
    # in place there is nothing to fall back on: the refusal is raised, naming the fragment
    a = wrap(fragments("int32", "cpu", 1), "cpu")
    b = wrap(fragments("float32", "cpu", 2), "cpu")
    before = [f.array.clone() for f in a.fragments]
    with pytest.raises(dlmg.FragmentError, match="operator \\+.*fragment 0"):
        on_lists("add", a, b, True, "operator +")  # float results cannot be written into int32
    assert all(torch.equal(f.array, x) for f, x in zip(a.fragments, before))


def test_a_temporary_meeting_another_layout_is_refused():
    # fragments of the same shapes in another distribution: the layouts differ,
    # whether the left operand is a temporary (written in place) or not
    a = dlmg.from_fragments([torch.full((3, 5), float(k)) for k in range(4)], dlmg.Layout.slab((12, 5), 0, ["cpu"] * 4))
    cyclic = dlmg.Layout((12, 5), block=(1, 5), grid=(4, 1), devices=["cpu"] * 4)
    b = dlmg.scatter(torch.arange(60.0).reshape(12, 5), cyclic)
    with pytest.raises(dlmg.LayoutMismatchError):  # refused when the operands are collected, before the lists
        on_lists("add", a, b, True, "operator +")
    with dlmg.strict():  # operators align as the namespace does, unless implicit moves are refused
        with pytest.raises(dlmg.LayoutMismatchError):
            (a * 1.0) + b
        with pytest.raises(dlmg.LayoutMismatchError):
            a + b
    want = np.repeat(np.arange(4.0), 3)[:, None] + np.arange(60.0).reshape(12, 5)
    np.testing.assert_array_equal(((a * 1.0) + b).gather(framework="numpy"), want)
    np.testing.assert_array_equal((a + b).gather(framework="numpy"), want)


# -- CuPy (one raw kernel per operator for many arrays) and NumPy (its operator pair by pair)
ARRAY_DTYPES = ["bool", "uint8", "int32", "int64", "float16", "float32", "float64", "complex64"]


def cupy_fragments(dtype: str, seed: int, n: int = 4, shape: tuple = (3, 5), floats: bool = False) -> list:
    import cupy

    rng = np.random.default_rng(seed)
    values = rng.standard_normal((n, *shape)) * 1e3 if floats else rng.integers(1, 5, size=(n, *shape))
    return [cupy.asarray(v.astype(dtype)) for v in values]


def slab_wrap(frags: list, device: str):
    rows = frags[0].shape[0] if frags[0].ndim else 1
    layout = dlmg.Layout.slab((rows * len(frags), *frags[0].shape[1:]), axis=0, devices=[device] * len(frags))
    return dlmg.from_fragments(frags, layout)


def cupy_wrap(frags: list):
    return slab_wrap(frags, "cuda:0")


def cupy_same(got, want) -> None:
    def arrays(g, w):
        assert g.dtype == w.dtype and g.device == w.device and g.shape == w.shape
        # bit for bit: the kernel makes the same IEEE operation as CuPy's own
        assert cupy_bytes(g) == cupy_bytes(w), (g, w)

    same_outcome(got, want, arrays)


def cuda_kernels(fn) -> list:
    """The CUDA kernels one call of ``fn`` queues (torch's profiler sees every
    framework's), after a first call that compiles."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()  # the whole device: CuPy's streams too
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type.name == "CUDA"]


def cupy_kernels(fn) -> list[str]:
    """The names of the CUDA kernels ``fn`` queues."""
    return [e.name for e in cuda_kernels(fn)]


def numpy_fragments(dtype: str, seed: int, n: int = 4) -> list:
    rng = np.random.default_rng(seed)
    return [v.astype(dtype) for v in rng.integers(1, 5, size=(n, 3, 5))]


def numpy_same(got, want) -> None:
    def arrays(g, w):
        assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)

    same_outcome(got, want, arrays)


#: framework -> (its fragments, the comparison of outcomes, the device)
ARRAY_FRAMEWORKS = {"numpy": (numpy_fragments, numpy_same, "cpu"), "cupy": (cupy_fragments, cupy_same, "cuda:0")}


@pytest.mark.parametrize("framework", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("name", OPERATORS + ["floordiv", "mod"])
@pytest.mark.parametrize("dtype", ARRAY_DTYPES)
def test_numpy_and_cupy_operators_equal_the_framework_fragment_by_fragment(framework, name, dtype):
    make, same_as, device = ARRAY_FRAMEWORKS[framework]
    op = getattr(operator, name)
    a, b = slab_wrap(make(dtype, 1), device), slab_wrap(make(dtype, 2), device)
    c = slab_wrap(make("float32", 3), device)
    with np.errstate(all="ignore"):  # NumPy warns of overflow and division by zero the same either way
        compare_operator(op, a, b, c, same_as)


def test_numpy_fragments_take_the_lists_and_their_temporaries_are_reused():
    fa, fb, fc = (numpy_fragments("float32", s) for s in (1, 2, 3))
    a, b, c = (slab_wrap(f, "cpu") for f in (fa, fb, fc))
    out = on_lists("multiply", a, b, False, "operator *")
    assert out is not None and all(not np.shares_memory(f.array, x) for f, x in zip(out.fragments, fa + fb))
    before = pointwise.ELIDED[0]
    y = a * b + c - 1.5
    assert pointwise.ELIDED[0] == before + 2
    for got, x, w, z in zip(y.fragments, fa, fb, fc):
        np.testing.assert_array_equal(got.array, x * w + z - 1.5)
    assert all(np.array_equal(x, w) for x, w in zip(fa, numpy_fragments("float32", 1)))  # operands unchanged
    ia, ib, ic = (slab_wrap(numpy_fragments("int32", s), "cpu") for s in (1, 2, 3))
    before = pointwise.ELIDED[0]
    z = (ia * ib) // ic % 3  # floor division and remainder in the temporary's memory too
    assert pointwise.ELIDED[0] == before + 2
    for got, x, w, v in zip(z.fragments, ia.fragments, ib.fragments, ic.fragments):
        assert got.array.dtype == np.int32
        np.testing.assert_array_equal(got.array, (x.array * w.array) // v.array % 3)


@pytest.mark.parametrize("name", OPERATORS + ["floordiv", "mod"])
@pytest.mark.parametrize("dtypes", [("float32", "float32"), ("int32", "int32"), ("bool", "bool"),
                                    ("int16", "float64"), ("complex64", "float32")])
def test_large_numpy_results_are_carved_from_one_allocation_and_equal_the_operator(name, dtypes):
    # 4 fragments of 2 MiB (float32): results of 4 MiB and more come from one allocation
    op = getattr(operator, name)
    rng = np.random.default_rng(7)
    left, right = ([v.astype(d) for v in rng.integers(1, 5, size=(4, 512, 1024))] for d in dtypes)
    a, b = slab_wrap(left, "cpu"), slab_wrap(right, "cpu")
    for other in (b, 3, 2.5, True):
        with np.errstate(all="ignore"):
            got, want = outcome(lambda: op(a, other)), outcome(lambda: per_fragment(op, a, other))
        numpy_same(got, want)
        if isinstance(got, type):
            continue
        # from 4 MiB of results (bool + bool: 2 MiB, one allocation each); x ** 0.5 is sqrt
        # for the operator, not the power ufunc: pair by pair
        carves = name != "pow" and sum(f.array.nbytes for f in got.fragments) >= 1 << 22
        bases = [f.array.base for f in got.fragments]
        assert all(base is not None and base is bases[0] for base in bases) == carves
        for g, w in zip(got.fragments, want.fragments):
            assert g.array.strides == w.array.strides and g.array.flags.writeable
            assert not np.shares_memory(g.array, w.array)


def test_numpy_results_are_carved_only_from_plain_contiguous_arrays():
    rng = np.random.default_rng(8)
    plain = [rng.random((512, 1024), dtype=np.float32) for _ in range(4)]
    fortran = [np.asfortranarray(x) for x in plain]
    for frags, carved in ((plain, True), (fortran, False), ([x[:, ::1] for x in plain], True)):
        t = slab_wrap(frags, "cpu")
        got = t * 2.0
        assert (got.fragments[0].array.base is not None) == carved
        for g, x in zip(got.fragments, frags):
            want = x * 2.0
            np.testing.assert_array_equal(g.array, want)
            assert g.array.strides == want.strides  # NumPy keeps a Fortran operand's order
    small = slab_wrap([x[:8] for x in plain], "cpu") * 2.0  # far below 4 MiB: one allocation each
    assert all(f.array.base is None for f in small.fragments)


def test_numpy_zero_d_results_are_arrays():
    t = dlmg.from_fragments([np.array(3.0, dtype=np.float32)], dlmg.Layout.replicated((), ["cpu"]))
    for result in (t * 2, 2 - t, t ** t, t / t):
        (frag,) = result.fragments
        assert type(frag.array) is np.ndarray and frag.array.shape == () and frag.array.dtype == np.float32


def test_an_in_place_failure_on_the_lists_names_the_fragment_that_failed():
    # the temporary a * b takes ** c in its memory; only fragment 2 of c has a negative
    # exponent, which NumPy refuses for integers when it reaches that pair
    frags = numpy_fragments("int64", 1)
    exponents = [np.full((3, 5), -1 if k == 2 else 2, dtype=np.int64) for k in range(4)]
    a, c = slab_wrap(frags, "cpu"), slab_wrap(exponents, "cpu")
    with pytest.raises(dlmg.FragmentError, match=r"fragments \[0, 1\] were already written.*fragment 2") as info:
        (a * 1) ** c
    assert info.value.fragment == 2 and isinstance(info.value.__cause__, ValueError)


def test_fragments_of_two_frameworks_keep_one_dtype():
    # NumPy's int32 / int32 is float64, torch's float32: the per-fragment path gives one dtype
    layout = dlmg.Layout.slab((8,), axis=0, devices=["cpu"] * 2)
    t = dlmg.from_fragments([np.arange(1, 5, dtype=np.int32), torch.arange(1, 5, dtype=torch.int32)], layout)
    assert on_lists("divide", t, t, False, "operator /") is None
    q = t / t
    assert {f.adapter.dtype_of(f.array) for f in q.fragments} == {q.dtype}


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ["add", "sub", "mul", "truediv"])
@pytest.mark.parametrize("scalar", [2.5, -3, True, 0.1, 1e300, float("nan"), 2 ** 40])
def test_cupy_list_kernels_are_bit_for_bit_cupy(dtype, name, scalar):
    # random values, 40 fragments (two launches) and an empty one; scalars the dtype
    # holds exactly take the kernel, the others (0.1 in float32, 1e300, 2**40) CuPy's operator
    op = getattr(operator, name)
    frags = cupy_fragments(dtype, 4, n=40, shape=(2, 33), floats=True)
    others = cupy_fragments(dtype, 5, n=40, shape=(2, 33), floats=True)
    a, b = cupy_wrap(frags), cupy_wrap(others)
    cupy_same(outcome(lambda: op(a, b)), outcome(lambda: per_fragment(op, a, b)))
    cupy_same(outcome(lambda: op(a, scalar)), outcome(lambda: per_fragment(op, a, scalar)))
    empty = cupy_wrap(cupy_fragments(dtype, 6, n=3, shape=(0, 4), floats=True))
    cupy_same(outcome(lambda: op(empty, empty)), outcome(lambda: per_fragment(op, empty, empty)))
    want = [outcome(lambda x=x: op(x * 1.0, scalar)) for x in frags]  # CuPy pair by pair
    got = outcome(lambda: op(a * 1.0, scalar))  # a temporary, written in place
    if isinstance(got, type):
        assert all(w is got for w in want), (got, want)
        return
    for g, w in zip(got.fragments, want):
        assert g.array.dtype == w.dtype and cupy_bytes(g.array) == cupy_bytes(w)


def cupy_bytes(x) -> bytes:
    import cupy

    return cupy.asnumpy(x).tobytes()


@pytest.mark.gpu
def test_cupy_operators_on_many_fragments_are_one_kernel_each():
    import cupy

    a, b, c = (cupy_wrap(cupy_fragments("float32", s, n=8, shape=(16,), floats=True)) for s in (1, 2, 3))
    assert cupy_kernels(lambda: a * b) == ["dlmg_list_operation"]
    assert cupy_kernels(lambda: a * b + c) == ["dlmg_list_operation"] * 2  # the temporary takes + c in place
    got = a * b + c
    for g, x, y, z in zip(got.fragments, *(t.fragments for t in (a, b, c))):
        assert cupy.array_equal(g.array, x.array * y.array + z.array)
    strided = cupy_wrap([cupy.asarray(np.arange(32, dtype=np.float32))[::2] for _ in range(8)])
    assert "dlmg_list_operation" not in cupy_kernels(lambda: strided * 2.0)  # not contiguous: CuPy's operator
    out = strided * 2.0
    assert all(cupy.array_equal(f.array, cupy.arange(0, 32, 2, dtype=cupy.float32) * 2) for f in out.fragments)


@pytest.mark.gpu
def test_torch_large_cuda_fragments_alternate_between_two_streams():
    # one list kernel for many small arrays; from 32 MiB on one kernel per array, on two streams
    for rows, launches, streams in ((3, 1, 1), (1 << 20, 1, 1), (1 << 21, 4, 2)):  # 60 bytes, 20 MiB, 40 MiB
        fa, fb, fc = ([torch.rand(rows, 5, device="cuda:0") for _ in range(4)] for _ in range(3))
        layout = dlmg.Layout.slab((4 * rows, 5), axis=0, devices=["cuda:0"] * 4)
        a, b, c = (dlmg.from_fragments(f, layout) for f in (fa, fb, fc))
        product = cuda_kernels(lambda: a * b)
        assert len(product) == launches
        assert len({e.device_resource_id for e in product}) == streams
        assert len(cuda_kernels(lambda: a * b + c)) == 2 * launches  # + c written into the temporary a * b
        for got, x, y, z in zip((a * b + c - 0.5).fragments, fa, fb, fc):
            assert torch.equal(got.array, x * y + z - 0.5)


def _large_cuda(dtype, seed: int, count: int = 4, per: int = 0):
    """``count`` fragments of ``per`` elements (by default a little over 32 MiB) each on
    ``cuda:0`` (values 1 to 8), and their tensor."""
    per = per or (32 << 20) // torch.empty((), dtype=dtype).element_size() + 3
    gen = torch.Generator(device="cuda:0").manual_seed(seed)
    frags = [(torch.rand(per, device="cuda:0", generator=gen) * 7 + 1).to(dtype) for _ in range(count)]
    return frags, dlmg.from_fragments(frags, dlmg.Layout.slab((count * per,), axis=0, devices=["cuda:0"] * count))


LARGE_CASES = [
    ("mul", torch.float32, "same"), ("add", torch.float32, "float64"), ("truediv", torch.int32, "same"),
    ("sub", torch.float16, 2.5), ("truediv", torch.int32, 3), ("mul", torch.uint8, True),
    ("add", torch.bfloat16, "float16"), ("sub", torch.int64, 2),
]


@pytest.mark.gpu
@pytest.mark.parametrize(("name", "dtype", "other"), LARGE_CASES)
def test_torch_large_cuda_fragments_equal_the_operator(name, dtype, other):
    op = getattr(operator, name)
    xs, a = _large_cuda(dtype, 1)
    if isinstance(other, str):
        ys, b = _large_cuda(dtype if other == "same" else getattr(torch, other), 2, per=xs[0].numel())
    else:
        ys, b = [other] * len(xs), other
    got = op(a, b)
    for g, x, y in zip(got.fragments, xs, ys):
        want = op(x, y)
        assert g.array.dtype == want.dtype and g.array.is_contiguous()
        assert torch.equal(g.array, want)
        assert g.array.data_ptr() not in (x.data_ptr(), getattr(y, "data_ptr", lambda: None)())


@pytest.mark.gpu
def test_torch_large_cuda_fragments_in_place_and_on_the_users_stream():
    xs, a = _large_cuda(torch.float32, 3)
    ys, b = _large_cuda(torch.float32, 4)
    before = [x.clone() for x in xs]
    pointers = [x.data_ptr() for x in xs]
    user = torch.cuda.Stream(device="cuda:0")
    with torch.cuda.stream(user):
        a *= b
        c = a + 0.25
        assert torch.cuda.current_stream() == user  # the second stream was left again
    user.synchronize()
    assert [f.array.data_ptr() for f in a.fragments] == pointers
    for got, new, x, y in zip(a.fragments, c.fragments, before, ys):
        assert torch.equal(got.array, x * y) and torch.equal(new.array, x * y + 0.25)
    bools, t = _large_cuda(torch.bool, 6)
    with pytest.raises(dlmg.FragmentError, match="fragment 0.*bool"):
        t - t  # the operator's own refusal, from the per-fragment path
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
