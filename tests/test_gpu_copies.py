"""Copies on one GPU: the batched copy paths (torch ``_foreach_copy_``, CuPy's
copy engine for contiguous and pitched pieces) and gather, scatter and
redistribution through them, repeated so that cached views are read again.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from dlmg.registry import get_adapter
from _strategies import expected_fragment
from test_gpu_ops import build, host, on_gpu, rand

pytestmark = pytest.mark.gpu


def _pairs(framework: str):
    """Destination views of one buffer and matching sources: contiguous, pitched,
    transposed and 3-D strided pieces."""
    base = np.zeros((64, 96), np.float32)
    big = rand((64, 96), seed=3)
    if framework == "torch":
        import torch

        dst = torch.as_tensor(base, device="cuda:0")
        src = torch.as_tensor(big, device="cuda:0")
    else:
        import cupy

        dst = cupy.asarray(base)
        src = cupy.asarray(big)
    dsts = [dst[:8], dst[8:16, :48], dst[16:32, 48:].T if framework == "cupy" else dst[16:32, 48:].t(),
            dst[32:64].reshape(4, 8, 96)[:, ::2, 1:5]]
    srcs = [src[:8], src[8:16, :48], src[16:32, 48:].T if framework == "cupy" else src[16:32, 48:].t(),
            src[32:64].reshape(4, 8, 96)[:, ::2, 1:5]]
    expected = base.copy()
    expected[:8] = big[:8]
    expected[8:16, :48] = big[8:16, :48]
    expected[16:32, 48:] = big[16:32, 48:]
    view = expected[32:64].reshape(4, 8, 96)
    view[:, ::2, 1:5] = big[32:64].reshape(4, 8, 96)[:, ::2, 1:5]
    return dst, dsts, srcs, expected


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_copy_many_on_cuda_writes_every_piece(framework):
    dst, dsts, srcs, expected = _pairs(framework)
    get_adapter(framework).copy_many(dsts, srcs)
    np.testing.assert_array_equal(host(dst), expected)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("kind", ["slab", "cyclic", "block-cyclic"])
def test_gather_scatter_redistribute_on_cuda_twice(framework, kind):
    n = 96
    x = rand((n, n), seed=5)
    block = {"slab": (n // 8, n), "cyclic": (1, 1), "block-cyclic": (4, 8)}[kind]
    grid = (8, 1) if kind == "slab" else (4, 2)
    layout = Layout((n, n), block=block, grid=grid, devices=["cuda:0"] * 8)
    dt = build(x, layout, framework)
    cols = Layout.slab((n, n), 1, ["cuda:0"] * 8)
    for _ in range(2):  # the second pass reads the cached plans and views
        np.testing.assert_array_equal(host(dt.gather()), x)
        out = dt.gather()
        dt.gather(out=out)
        np.testing.assert_array_equal(host(out), x)
        np.testing.assert_array_equal(host(dt.redistribute(cols)), x)
        np.testing.assert_array_equal(host(dlmg.scatter(out, layout)), x)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_copy_many_on_cuda_writes_large_pieces(framework):
    # pieces of 2 MiB, past the size where torch's pieces are copied one by one
    big = rand((4, 512, 1024), seed=7)
    if framework == "torch":
        import torch

        dst, src = torch.zeros(big.shape, device="cuda:0"), torch.as_tensor(big, device="cuda:0")
    else:
        import cupy

        dst, src = cupy.zeros(big.shape, np.float32), cupy.asarray(big)
    get_adapter(framework).copy_many([dst[i] for i in range(4)], [src[i] for i in range(4)])
    np.testing.assert_array_equal(host(dst), big)



@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_copy_many_on_cuda_joins_consecutive_pieces_and_only_those(framework):
    # runs of pieces that follow one another on both sides become one copy; a gap,
    # an order change or a strided piece ends a run
    big = rand((6, 64, 32), seed=9)
    if framework == "torch":
        import torch

        dst, src = torch.zeros(big.shape, device="cuda:0"), torch.as_tensor(big, device="cuda:0")
        strided_dst, strided_src = dst[5].t(), src[5].t()
    else:
        import cupy

        dst, src = cupy.zeros(big.shape, np.float32), cupy.asarray(big)
        strided_dst, strided_src = dst[5].T, src[5].T
    order = [0, 1, 3, 2, 4]
    get_adapter(framework).copy_many([dst[i] for i in order] + [strided_dst], [src[i] for i in order] + [strided_src])
    np.testing.assert_array_equal(host(dst), big)
    shifted = rand((6, 64, 32), seed=10)
    source = torch.as_tensor(shifted, device="cuda:0") if framework == "torch" else cupy.asarray(shifted)
    # consecutive destinations read from sources one piece apart: no join across the gap
    get_adapter(framework).copy_many([dst[0], dst[1]], [source[0], source[2]])
    expected = big.copy()
    expected[0], expected[1] = shifted[0], shifted[2]
    np.testing.assert_array_equal(host(dst), expected)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_scatter_on_one_gpu_carves_fragments_from_one_allocation(framework):
    # dense fragments of one GPU are aligned views, one after another, of one
    # allocation, which outlives every fragment but the last
    x = rand((100, 33), seed=11)  # fragments of 13 rows (9 in the last): not multiples of 256 bytes
    layout = Layout.slab(x.shape, 0, ["cuda:0"] * 8)
    dt = dlmg.scatter(x, layout, framework=framework)
    adapter = get_adapter(framework)
    pointers = [adapter.data_ptr(f.array) for f in dt.fragments]
    assert all(p % 256 == 0 for p in pointers)
    sizes = [f.array.size if framework == "cupy" else f.array.numel() for f in dt.fragments]
    for k in range(7):
        gap = pointers[k + 1] - pointers[k]
        assert sizes[k] * 4 <= gap < sizes[k] * 4 + 256
    last = dt.fragments[7].array
    del dt
    import gc

    gc.collect()
    kept = host(last)
    np.testing.assert_array_equal(kept, x[x.shape[0] - kept.shape[0]:])


@pytest.mark.parametrize("source", ["torch", "cupy"])
@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("shape", [(128, 64), (100, 33)], ids=["parts-at-256-bytes", "parts-with-gaps"])
def test_row_slab_scatter_on_one_gpu_fills_every_fragment(source, framework, shape):
    # rows of 64 float32 fill carved parts exactly (one copy of the whole
    # source); rows of 33 leave gaps between the parts (a copy per fragment);
    # the same again from a view that starts inside its storage
    x = rand((shape[0] + 3, shape[1]), seed=12)
    big = on_gpu(x, source)[3:]
    layout = Layout.slab(shape, 0, ["cuda:0"] * 8)
    for _ in range(2):
        dt = dlmg.scatter(big, layout, framework=framework)
        assert set(dt.frameworks) == {framework}
        check = [host(f.array) for f in dt.fragments]
        np.testing.assert_array_equal(np.concatenate(check), x[3:])


def test_row_slab_scatter_on_one_gpu_is_one_device_copy():
    import torch
    from torch.profiler import ProfilerActivity, profile

    big = torch.as_tensor(rand((1024, 256), seed=13), device="cuda:0")
    layout = Layout.slab(big.shape, 0, ["cuda:0"] * 8)
    dlmg.scatter(big, layout)  # plans made before profiling
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dt = dlmg.scatter(big, layout)
        torch.cuda.synchronize()
    copies = [e for e in prof.events() if e.device_type.name == "CUDA"]
    assert len(copies) == 1, [e.name for e in copies]
    np.testing.assert_array_equal(host(dt), host(big))


def _cuda_kernels(run):
    import torch
    from torch.profiler import ProfilerActivity, profile

    run()  # plans made before profiling
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = run()
        torch.cuda.synchronize()
    return out, [e.name for e in prof.events() if e.device_type.name == "CUDA"]


@pytest.mark.parametrize("ndim", [2, 3])
def test_torch_row_slabs_to_column_slabs_on_one_gpu_is_one_kernel_per_row_slab(ndim):
    # row slabs of separate allocations: every row slab gives each column slab a
    # band of rows; the column slabs are carved one after another from one
    # allocation, so a row slab's bands are one view of it repeated at the
    # column slabs' step: one strided copy per row slab
    import torch

    shape = (512, 384) if ndim == 2 else (64, 8, 384)
    x = rand(shape, seed=19)
    rows = Layout.slab(shape, 0, ["cuda:0"] * 4)
    cols = Layout.slab(shape, ndim - 1, ["cuda:0"] * 3)
    whole = torch.as_tensor(x, device="cuda:0")
    dt = dlmg.from_fragments([whole[k * shape[0] // 4:(k + 1) * shape[0] // 4].clone() for k in range(4)], rows)
    out, kernels = _cuda_kernels(lambda: dt.redistribute(cols))
    assert len(kernels) == 4 and not any("Cat" in k or "cat" in k for k in kernels), kernels
    np.testing.assert_array_equal(host(out), x)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("pair", ["rows to columns", "4x2 to 2x4", "cyclic to rows", "3-d rows to columns"])
def test_redistribution_between_carved_tensors_on_one_gpu_is_one_copy(framework, pair):
    # fragments dlmg carved out of one allocation on each side (a scatter's, a
    # redistribution's): every piece steps regularly through both allocations,
    # so the whole redistribution is one strided copy, read through the source
    # allocation; done twice (the second reads the remembered copy), and again
    # after the source's fragments were written in place
    n = 256
    shape = (n, n) if pair != "3-d rows to columns" else (64, 8, 96)
    x = rand(shape, seed=23)
    gpu = ["cuda:0"] * 8
    if pair == "4x2 to 2x4":
        src, dst = (Layout(shape, block=(n // 4, n // 2), grid=(4, 2), devices=gpu),
                    Layout(shape, block=(n // 2, n // 4), grid=(2, 4), devices=gpu))
    elif pair == "cyclic to rows":
        src, dst = Layout(shape, block=(1, n), grid=(8, 1), devices=gpu), Layout.slab(shape, 0, gpu)
    else:
        src, dst = Layout.slab(shape, 0, gpu), Layout.slab(shape, len(shape) - 1, gpu)
    dt = dlmg.scatter(on_gpu(x, framework), src)
    assert len({get_adapter(framework).data_ptr(get_adapter(framework).allocation_of(f.array)[0])
                for f in dt.fragments}) == 1  # carved
    from dlmg.movement import destinations, sources

    for _ in range(2):
        out = dt.redistribute(dst)
        np.testing.assert_array_equal(host(out), x)
        plan = dt.plan_redistribution(dst)
        buffers, places = sources.source_places(dt)
        written, carvings = destinations.allocate_all(dst, dst.fragments, get_adapter(framework), "float32", (framework,))
        jobs = destinations.copy_jobs(plan, buffers, dict(enumerate(written)), carvings, places, {})
        assert [len(copies) for copies, _, _ in jobs] == [1] and jobs[0][0][0].src < 0
    for f in dt.fragments:
        f.array[...] = 0
    np.testing.assert_array_equal(host(dt.redistribute(dst)), np.zeros(shape, np.float32))
    if framework == "torch":
        _, kernels = _cuda_kernels(lambda: dt.redistribute(dst))
        assert len(kernels) == 1, kernels


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_uneven_or_separate_sources_on_one_gpu_take_the_copies_apart(framework):
    # pieces of unequal shapes, or sources in separate allocations: no one copy,
    # and every element still lands where it belongs
    x = rand((100, 33), seed=29)
    gpu = ["cuda:0"] * 8
    rows, cols = Layout.slab((100, 33), 0, gpu), Layout.slab((100, 33), 1, gpu[:3])
    from dlmg.movement import sources

    dt = dlmg.scatter(on_gpu(x, framework), rows)  # 13 rows each, 9 in the last
    assert len(sources.source_places(dt)[1]) == 8
    for _ in range(2):
        np.testing.assert_array_equal(host(dt.redistribute(cols)), x)
    separate = build(x, rows, framework)
    assert sources.source_places(separate)[1] == {}
    np.testing.assert_array_equal(host(separate.redistribute(cols)), x)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("kind", ["slab", "cyclic", "block-cyclic", "uneven"])
def test_gather_of_a_carved_tensor_on_one_gpu_is_one_copy(framework, kind):
    # the fragments of a scatter onto one GPU share one allocation: a gather reads
    # them through it, one copy where they step regularly (uneven slabs do not)
    from dlmg.movement import sources

    shape = (100, 33) if kind == "uneven" else (256, 96)
    x = rand(shape, seed=31)
    gpu = ["cuda:0"] * 8
    block = {"slab": (32, 96), "cyclic": (1, 1), "block-cyclic": (4, 8), "uneven": (13, 33)}[kind]
    grid = (8, 1) if kind in ("slab", "uneven") else (4, 2)
    dt = dlmg.scatter(on_gpu(x, framework), Layout(shape, block=block, grid=grid, devices=gpu))
    out = on_gpu(np.zeros(shape, np.float32), framework)
    for _ in range(2):  # the second reads the remembered copy
        np.testing.assert_array_equal(host(dt.gather()), x)
        dt.gather(out=out)
        np.testing.assert_array_equal(host(out), x)
    merged = [found[1] for found in sources.remembered(dt).gathers.values()]
    assert merged and all(m is None if kind == "uneven" else len(m) == 1 for m in merged), merged
    if framework == "torch" and kind != "uneven":
        _, kernels = _cuda_kernels(lambda: dt.gather(out=out))
        assert len(kernels) == 1, kernels


@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_repeated_redistribution_of_pieces_batched_over_destinations_on_one_gpu(framework):
    # destinations whose pieces are neither one copy nor a concatenation: the
    # copies of every destination go to the framework together, and later calls
    # reuse the source views remembered per destination (they must not grow)
    from dlmg.movement import sources

    x = rand((96, 96), seed=37)
    gpu = ["cuda:0"] * 8
    src = Layout((96, 96), block=(4, 8), grid=(4, 2), devices=gpu)
    dst = Layout((96, 96), block=(8, 4), grid=(2, 4), devices=gpu)
    dt = build(x, src, framework)  # separate arrays: no one copy through an allocation
    assert sources.source_places(dt)[1] == {}
    for _ in range(3):
        np.testing.assert_array_equal(host(dt.redistribute(dst)), x)
    # a batch is remembered under (its copies, framework) as the tuple of its pieces
    remembered = [(key[0], pieces) for key, pieces in sources.source_views(dt).items() if isinstance(key[0], tuple)]
    assert remembered and all(len(pieces) == len(copies) for copies, pieces in remembered)


def test_allocation_of_cupy_views_and_arrays():
    import cupy as cp

    a = get_adapter("cupy")
    whole = cp.arange(1000, dtype=cp.float32)
    view = a.as_strided(whole, (10, 10), (20, 1), 37)
    found, offset = a.allocation_of(view)
    assert offset == 37 and found.dtype == cp.float32 and found.data.ptr == whole.data.ptr and found.size >= 1000
    assert float(found[offset + 21]) == float(view[1, 1])
    assert a.allocation_of(whole)[1] == 0
    assert a.allocation_of(whole[:0]) is None
    assert a.allocation_of(whole.view(cp.uint8)[1:9].view(cp.uint16)) is None  # not a whole number of elements in


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "float64", "complex128"])
@pytest.mark.parametrize("start", [0, 1, 3], ids=["aligned", "one-element-in", "three-elements-in"])
def test_cupy_concatenation_is_one_kernel_of_the_widest_words(dtype, start):
    # sizes and offsets that allow 16-byte words, narrower ones, or single bytes;
    # an empty piece; 40 pieces, more than one launch takes; the ends stay untouched
    import cupy

    from dlmg.adapters.cupy._kernels import _concatenation_kernel

    sizes = [7, 0, 64, 1, 33] + [16] * 35
    rng = np.random.default_rng(21)
    pieces = [(rng.integers(1, 200, size=n)).astype(dtype) for n in sizes]
    total = sum(sizes)
    sentinel = np.array(99, dtype=dtype)
    out = cupy.full(total + start + 2, sentinel, dtype=dtype)
    get_adapter("cupy").concatenate_into(out[start:start + total], [cupy.asarray(p) for p in pieces])
    got = cupy.asnumpy(out)
    np.testing.assert_array_equal(got[start:start + total], np.concatenate(pieces))
    assert (got[:start] == sentinel).all() and (got[start + total:] == sentinel).all()
    # compiled, not the one-copy-per-piece fallback
    assert _concatenation_kernel.cache_info().currsize and _concatenation_kernel(cupy, 32, 1) is not None


def test_cupy_slab_gather_on_one_gpu_is_one_kernel():
    import cupy
    from torch.profiler import ProfilerActivity, profile

    x = rand((1024, 256), seed=17)
    layout = Layout.slab(x.shape, 0, ["cuda:0"] * 8)
    dt = build(x, layout, "cupy")  # separate allocations (carved ones are one copy, below)
    out = cupy.empty(x.shape, np.float32)
    dt.gather(out=out)  # plans and the kernel made before profiling
    cupy.cuda.Device(0).synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dt.gather(out=out)
        cupy.cuda.Device(0).synchronize()
    kernels = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    assert kernels == ["dlmg_concatenate"], kernels
    np.testing.assert_array_equal(cupy.asnumpy(out), x)


@pytest.mark.parametrize("block, grid", [((1, 48), (8, 1)), ((4, 8), (2, 3)), ((16, 48), (4, 1)), ((20, 48), (4, 1))],
                         ids=["cyclic-rows", "block-cyclic", "even-slabs", "uneven-slabs"])
def test_jax_grids_on_one_gpu_are_made_by_jax(block, grid):
    # regular grids of JAX fragments on one GPU (even slabs too): the gather is one
    # compiled JAX stack-and-transpose, the scatter its inverse; uneven slabs are a
    # concatenation of ranges and its inverse
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled

    x = rand((64, 48), seed=23)
    layout = Layout(x.shape, block=block, grid=grid, devices=["cuda:0"] * (grid[0] * grid[1]))
    forget_compiled()
    dt = dlmg.scatter(jax.device_put(x, jax.devices("gpu")[0]), layout)
    reference = dlmg.scatter(x, layout.with_devices(["cpu"] * layout.nfragments))
    for frag, want in zip(dt.fragments, reference.fragments):
        assert frag.framework == "jax"
        np.testing.assert_array_equal(host(frag.array), want.array)
    got = dt.gather()
    assert got.devices() == {jax.devices("gpu")[0]}
    np.testing.assert_array_equal(host(got), x)
    made = sorted(compiled_kinds())
    assert made == (["assemble", "split"] if 64 % block[0] else ["compose", "decompose"]), made


def test_jax_row_slabs_to_column_slabs_on_one_gpu_are_made_by_jax():
    # one compiled JAX call making each column slab as a concatenation of slices of
    # the row slabs (one pass), and the way back, not a staging array of another
    # framework; the fragments stay on the GPU
    import jax

    from dlmg.adapters.jax._rearrange import compiled_kinds, forget_compiled, retiler

    x = rand((96, 64), seed=29)
    gpu = jax.devices("gpu")[0]
    dt = dlmg.scatter(jax.device_put(x, gpu), Layout.slab(x.shape, 0, ["cuda:0"] * 4))
    forget_compiled()
    for _ in range(2):
        out = dt.redistribute(Layout.slab(x.shape, 1, ["cuda:0"] * 4))
        for k, frag in enumerate(out.fragments):
            assert frag.framework == "jax" and frag.array.devices() == {gpu}
            np.testing.assert_array_equal(host(frag.array), x[:, 16 * k:16 * (k + 1)])
    assert compiled_kinds() == ["retile"]
    back = out.redistribute(dt.layout)
    for k, frag in enumerate(back.fragments):
        assert frag.framework == "jax" and frag.array.devices() == {gpu}
        np.testing.assert_array_equal(host(frag.array), x[24 * k:24 * (k + 1)])
    assert compiled_kinds() == ["retile"] and retiler.cache_info().currsize == 2  # one call per geometry


def _values(shape: tuple[int, ...], dtype: str, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.startswith("complex"):
        return (rng.uniform(-9, 9, size=shape) + 1j * rng.uniform(-9, 9, size=shape)).astype(dtype)
    return rng.integers(1, 100, size=shape).astype(dtype)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "complex64", "float64", "bool"])
@pytest.mark.parametrize("columns, start", [(512, 0), (512, 1), (509, 0)], ids=["words", "unaligned", "odd-rows"])
def test_large_strided_copies_on_cuda_write_the_view_and_only_it(framework, dtype, columns, start):
    # pieces of 2 MiB: in 8- or 16-byte words where both sides allow them (every
    # other row of a wider buffer, at an aligned start), element by element where
    # a start or a row length does not; the rows between and the columns beside stay
    itemsize = np.dtype(dtype).itemsize
    rows = -(-(2 << 20) // (columns * itemsize))
    sentinel = _values((2 * rows, columns + 8), dtype, 1)
    source, second = _values((rows, columns), dtype, 2), _values((rows, columns), dtype, 3)
    adapter = get_adapter(framework)
    buffer, src, src2 = (on_gpu(a, framework) for a in (sentinel, source, second))
    view = buffer[1::2, start:start + columns]
    adapter.copy_many([view], [src])  # into a strided view
    expected = sentinel.copy()
    expected[1::2, start:start + columns] = source
    np.testing.assert_array_equal(host(buffer), expected)
    back = on_gpu(np.zeros((rows, columns), dtype), framework)
    adapter.copy_into(back, view)  # out of one
    np.testing.assert_array_equal(host(back), source)
    adapter.copy_many([buffer[0::2, start:start + columns]], [src2])
    whole = on_gpu(np.zeros((2 * rows, columns), dtype), framework)
    adapter.concatenate_into(whole, [buffer[1::2, start:start + columns], buffer[0::2, start:start + columns]])
    np.testing.assert_array_equal(host(whole), np.concatenate([source, second]))


@pytest.mark.parametrize("framework, word", [("torch", "long"), ("cupy", "complex128")])
def test_large_strided_float32_copies_on_cuda_run_in_wide_words(framework, word):
    # torch's copy kernel for int64 words (its name shows the element type as
    # "long"), CuPy's assignment of complex128 words
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = rand((2048, 512), seed=23)
    buffer = on_gpu(np.zeros((4096, 512), np.float32), framework)
    src = on_gpu(x, framework)
    adapter = get_adapter(framework)
    adapter.copy_many([buffer[1::2]], [src])
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        adapter.copy_many([buffer[1::2]], [src])
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    assert len(kernels) == 1 and word in kernels[0], kernels
    np.testing.assert_array_equal(host(buffer)[1::2], x)


@pytest.mark.parametrize("framework", ["torch", "cupy"])
@pytest.mark.parametrize("columns", [256, 224], ids=["parts-at-256-bytes", "padded-parts"])
@pytest.mark.parametrize("block, grid", [((1, None), (8, 1)), ((5, 16), (4, 2))], ids=["cyclic", "block-cyclic"])
def test_cyclic_scatter_on_one_gpu_is_one_strided_copy(framework, columns, block, grid):
    # fragment k holds rows k, k + 8, ...: the fragments carved one after another
    # are one view of the source with a leading mode, filled by one kernel (a
    # 4 x 2 grid of 5 x 16 blocks: two leading modes); parts of 125 x 224 or
    # 250 x 112 float32 are carved 256-byte aligned with padding between them,
    # still one copy
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = rand((1000, columns), seed=29)
    big = on_gpu(x, framework)
    layout = Layout((1000, columns), block=(block[0], block[1] or columns), grid=grid, devices=["cuda:0"] * 8)
    dlmg.scatter(big, layout)  # plans made before profiling
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        dt = dlmg.scatter(big, layout)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    assert len(kernels) == 1, kernels
    for k, f in enumerate(dt.fragments):
        np.testing.assert_array_equal(host(f.array), expected_fragment(x, layout, k))
    np.testing.assert_array_equal(host(dt), x)
