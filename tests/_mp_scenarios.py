"""Scenarios every process of a multi-process launch runs (see :mod:`tests._mp_worker`).

Each scenario builds the same global data on every process (seeded), wraps
this process's fragments only, runs dlmg's collectives and compares what this
process holds with the single-process answer (NumPy on the global array). A
scenario returns a small JSON-able value or raises.
"""

from __future__ import annotations

import math
import os

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from dlmg.errors import CollectiveError, CollectiveMismatchError
from tests._memory import measured

FRAMEWORKS = ("numpy", "torch")


def _global(shape, seed=0, dtype="float64"):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-50, 50, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _piece(full, layout, i):
    if layout.ndim == 0:
        return full.copy()
    return np.ascontiguousarray(full[np.ix_(*[layout.owned_indices(i, m) for m in range(layout.ndim)])])


def _convert(array, framework):
    if framework == "numpy":
        return array
    if framework == "torch":
        import torch

        return torch.from_numpy(array.copy())
    if framework == "jax":
        import jax.numpy as jnp

        return jnp.asarray(array)
    raise ValueError(framework)


def wrap(full, layout, frameworks=("numpy",)):
    """This process's fragments of ``full`` in ``layout`` (framework chosen per fragment)."""
    me = dd.rank()
    arrays = {}
    for i in layout.fragments_of(me):
        arrays[i] = _convert(_piece(full, layout, i), frameworks[i % len(frameworks)])
    return dlmg.from_fragments(arrays, layout, dtype=str(full.dtype))


def _np(array):
    if array is None:
        return None
    if isinstance(array, dlmg.DistributedTensor):  # a reduction over every mode: 0-d, gathered
        array = array.gather(framework="numpy")
    if type(array).__module__.startswith("torch"):
        return array.detach().cpu().numpy()
    return np.asarray(array)


def check_local(dt, full, what=""):
    """Every local fragment of ``dt`` holds its part of ``full``."""
    n = 0
    for frag in dt.fragments:
        if frag.rank != dd.rank():
            assert not frag.is_local
            continue
        got = _np(frag.array)
        want = _piece(full, dt.layout, frag.index)
        assert got.shape == want.shape, (what, frag.index, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, err_msg=f"{what} fragment {frag.index}")
        n += 1
    return n


def _cpu(n):
    return ["cpu"] * n


def random_layout(rng, shape, world):
    """A random block-cyclic layout of ``shape`` with replicas and random ranks."""
    ndim = len(shape)
    block = [int(rng.integers(1, max(n, 1) + 1)) for n in shape]
    grid = [int(rng.integers(1, 4)) for _ in shape]
    if math.prod(grid) > 6:
        grid = [1] * ndim
        grid[0] = 3
    reps = int(rng.integers(1, 3))
    nfrag = math.prod(grid) * reps
    ranks = [int(r) for r in rng.integers(0, world, size=nfrag)]
    return Layout(shape, block=block, grid=grid, devices=_cpu(nfrag), ranks=ranks)


# -- scenarios ------------------------------------------------------------------------
def allgather():
    world = dd.world_size()
    out = []
    for rows, fw in ((4 * world, "numpy"), (4 * world, "torch"), (2 * world + 1, "numpy"), (5, "torch")):
        full = _global((rows, 6), seed=rows)
        layout = dd.slab(full.shape, axis=0)
        dt = wrap(full, layout, (fw,))
        got = _np(dt.gather())
        np.testing.assert_array_equal(got, full)
        assert type(dt.gather(framework="torch")).__module__.startswith("torch")
        out.append(got.shape)
    # columns, and replicated fragments, and every process with several
    full = _global((7, 9), seed=3)
    layout = Layout((7, 9), block=(2, 3), grid=(2, 2), devices=_cpu(8), ranks=[r % world for r in range(8)])
    np.testing.assert_array_equal(_np(wrap(full, layout, FRAMEWORKS).gather()), full)
    return out


def gather_out():
    world = dd.world_size()
    full = _global((3 * world, 5), seed=11)
    dt = wrap(full, dd.slab(full.shape, axis=0))
    out = np.empty((5, 3 * world)).T  # a transposed destination
    assert dt.gather(out=out) is out
    np.testing.assert_array_equal(out, full)
    import torch

    tout = torch.empty(full.shape, dtype=torch.float64)
    assert dt.gather(out=tout) is tout
    np.testing.assert_array_equal(tout.numpy(), full)
    return True


def root_gather():
    world = dd.world_size()
    full = _global((world + 3, 4), seed=5)
    layout = Layout((world + 3, 4), block=(2, 2), grid=(2, 2), devices=_cpu(4), ranks=[r % world for r in range(4)])
    dt = wrap(full, layout, FRAMEWORKS)
    for root in range(world):
        got = dt.gather(root=root)
        if dd.rank() == root:
            np.testing.assert_array_equal(_np(got), full)
        else:
            assert got is None
        out = np.zeros(full.shape) if dd.rank() == root else None
        res = dt.gather(root=root, out=out)
        if dd.rank() == root:
            assert res is out
            np.testing.assert_array_equal(out, full)
    return True


def scatter():
    world = dd.world_size()
    rng = np.random.default_rng(7)
    n = 0
    for k in range(6):
        full = _global((6, 5), seed=k)
        layout = random_layout(rng, (6, 5), world)
        root = k % world
        for fw in (None, "torch"):
            dt = dlmg.scatter(full if dd.rank() == root else None, layout, fw, root=root)
            n += check_local(dt, full, f"scatter {k}")
    return n


def redistribute_pairs():
    world = dd.world_size()
    rng = np.random.default_rng(1234)
    checked = 0
    messages = 0
    for k in range(56):
        ndim = int(rng.integers(1, 4))
        shape = tuple(int(rng.integers(0 if k % 17 == 0 else 1, 7)) for _ in range(ndim))
        src = random_layout(rng, shape, world)
        dst = random_layout(rng, shape, world)
        full = _global(shape, seed=k)
        dt = wrap(full, src, FRAMEWORKS)
        moved = dt.redistribute(dst)
        check_local(moved, full, f"pair {k}: {src!r} -> {dst!r}")
        back = _np(moved.gather())
        np.testing.assert_array_equal(back, full)
        routes = dlmg.movement.redistribution_routes(src, dst, 8, dd.current_engine())
        assert all(len({(a, b)}) == 1 for (a, b) in routes.bytes_by_ranks)
        messages += routes.nmessages
        checked += 1
    # slab rows -> columns: one message per pair of processes, bytes as expected
    full = _global((4 * world, 4 * world), seed=99)
    rows, cols = dd.slab(full.shape, 0), dd.slab(full.shape, 1)
    routes = wrap(full, rows).plan_redistribution(cols)
    assert routes.nmessages == world * (world - 1) and routes.transport in ("gloo", "mpi")
    assert f"rank 0 -> rank 1: {16 * 8} bytes" in str(routes)
    assert all(n == 16 * 8 for n in routes.bytes_by_ranks.values()), routes.bytes_by_ranks
    check_local(wrap(full, rows).redistribute(cols), full, "rows -> cols")
    # fragments that stay are reused
    dt = wrap(full, rows, ("torch",))
    same = dt.redistribute(rows)
    assert all(a.array is b.array for a, b in zip(dt.local_fragments, same.local_fragments))
    return {"pairs": checked, "messages": messages}


def redistribute_many_blocks():
    """Blocks of 256 dealt out cyclically, two fragments per process, into slabs and back:
    exact, and each call's new memory (planning included, first call too) within
    1.5 x (share + result share) plus one block, as the plan describes blocks, not elements."""
    world, me = dd.world_size(), dd.rank()
    per, block = 1 << 16, 256
    n = per * world
    cyclic = Layout((n,), block=(block,), grid=(2 * world,), devices=["cpu"] * (2 * world),
                    ranks=[i % world for i in range(2 * world)])
    slab = Layout.slab((n,), 0, ["cpu"] * world, ranks=list(range(world)))
    full = np.arange(n, dtype=np.float64)
    x = dlmg.from_fragments({i: _piece(full, cyclic, i) for i in cyclic.fragments_of(me)}, cyclic)
    share = per * 8

    def moved_and_peak(source, target):
        moved, peak = measured(lambda: source.redistribute(target))
        check_local(moved, full, f"many blocks -> {target!r}")
        return moved, peak

    first, p1 = moved_and_peak(x, slab)
    _, p2 = moved_and_peak(x, slab)
    _, p3 = moved_and_peak(first, cyclic)
    peaks = [p1, p2, p3]
    bound = 1.5 * (share + share) + block * 8
    assert max(peaks) <= bound, f"rank {me}: peaks {peaks} over the bound {bound}"
    return [round(p / share, 2) for p in peaks]


def reductions():
    world = dd.world_size()
    rng = np.random.default_rng(55)
    n = 0
    for k in range(8):
        shape = (5, 4) if k % 2 else (3, 4, 2)
        layout = random_layout(rng, shape, world)
        for dtype in ("float64", "int64", "bool"):
            full = _global(shape, seed=k, dtype=dtype)
            dt = wrap(full, layout, FRAMEWORKS)
            for name in ("sum", "prod", "min", "max", "mean", "all", "any", "argmax", "argmin"):
                if dtype == "bool" and name in ("prod", "mean"):
                    continue
                for axis in (None, 0, 1):
                    for keepdims in (False, True):
                        if name in ("argmax", "argmin") and axis is None and keepdims:
                            continue
                        got = getattr(dlmg, name)(dt, axis=axis, keepdims=keepdims)
                        want = getattr(np, name)(full, axis=axis, keepdims=keepdims)
                        if dtype == "int64" and name == "prod":
                            want = np.prod(full.astype(np.int64), axis=axis, keepdims=keepdims)
                        if axis is None:
                            np.testing.assert_allclose(_np(got), want, rtol=1e-9, err_msg=f"{name} {dtype}")
                            assert _np(got).shape == np.shape(want), (name, _np(got).shape)
                        else:
                            check_local(got, np.asarray(want), f"{name} axis={axis} {dtype}")
                        n += 1
    return n


def nan_reductions():
    """NaN propagates through min and max and is argmax's and argmin's answer, across processes."""
    world = dd.world_size()
    rng = np.random.default_rng(77)
    n = 0
    for k in range(6):
        full = _global((5, 4), seed=k)
        full[rng.integers(0, 5), rng.integers(0, 4)] = np.nan
        if k % 2:
            full[rng.integers(0, 5), rng.integers(0, 4)] = np.nan
        dt = wrap(full, random_layout(rng, (5, 4), world), FRAMEWORKS)
        for axis in (None, 0, 1):
            for name in ("min", "max", "argmax", "argmin"):
                got = getattr(dlmg, name)(dt, axis=axis)
                want = getattr(np, name)(full, axis=axis)
                if axis is None:
                    np.testing.assert_array_equal(_np(got), want, err_msg=f"{name} {k}")
                else:
                    check_local(got, np.asarray(want), f"{name} axis={axis} {k}")
                n += 1
    return n


def pointwise():
    world = dd.world_size()
    rng = np.random.default_rng(3)
    layout = random_layout(rng, (6, 5), world)
    a, b = _global((6, 5), 1), _global((6, 5), 2)
    x, y = wrap(a, layout, FRAMEWORKS), wrap(b, layout, FRAMEWORKS)
    check_local(x + y * 2, a + b * 2, "x + 2y")
    check_local(dlmg.sin(x), np.sin(a), "sin")
    check_local(x > y, a > b, "x > y")
    # everything on rank 0: the others hold nothing, still know the result's dtype, and receive it
    only = Layout((6, 5), block=(3, 5), grid=(2, 1), devices=_cpu(2), ranks=[0, 0])
    z = wrap(a.astype(np.int32), only, FRAMEWORKS)
    w = (z * 2.5 + 1) // 2
    assert w.dtype == "float64", w.dtype
    np.testing.assert_array_equal(_np(w.gather()), (a.astype(np.int32) * 2.5 + 1) // 2)
    np.testing.assert_allclose(_np(dlmg.mean(z, axis=0).gather()), a.astype(np.int32).mean(axis=0))
    return True


def mixed_frameworks():
    world = dd.world_size()
    fw = ("numpy", "torch", "jax")[dd.rank() % 3]
    full = _global((3 * world, 4), seed=21, dtype="float32")
    layout = dd.slab(full.shape, axis=0)
    dt = wrap(full, layout, (fw,))
    assert dt.frameworks == (fw,)
    np.testing.assert_array_equal(_np(dt.gather(framework="numpy")), full)
    cols = dd.slab(full.shape, axis=1)
    check_local(dt.redistribute(cols), full, "mixed rows -> cols")
    np.testing.assert_allclose(_np(dlmg.sum(dt)), full.sum(), rtol=1e-5)
    return fw


def mismatch():
    world = dd.world_size()
    full = _global((4 * world, 3), seed=1)
    axis = 0 if dd.rank() == 0 else 1
    dt = wrap(full, dd.slab(full.shape, axis=axis))
    try:
        dt.gather()
    except CollectiveMismatchError as exc:
        text = str(exc)
        assert "rank 0" in text and "rank " in text and "gather" in text, text
    else:
        raise AssertionError("no CollectiveMismatchError")
    # the group is still usable
    same = wrap(full, dd.slab(full.shape, axis=0))
    np.testing.assert_array_equal(_np(same.gather()), full)
    return True


def raising():
    world = dd.world_size()
    full = _global((2 * world, 3), seed=1)
    dt = wrap(full, dd.slab(full.shape, axis=0))
    bad = np.empty((1, 1)) if dd.rank() == 1 else None
    try:
        dt.gather(out=bad)
    except CollectiveError as exc:
        assert dd.rank() != 1 and "rank(s) 1" in str(exc), str(exc)
    except ValueError as exc:
        assert dd.rank() == 1 and "out has shape" in str(exc), str(exc)
    else:
        raise AssertionError("no error")
    np.testing.assert_array_equal(_np(dt.gather()), full)
    return True


def remote_fragment():
    world = dd.world_size()
    full = _global((2 * world, 3), seed=1)
    dt = wrap(full, dd.slab(full.shape, axis=0))
    other = dt.fragments[(dd.rank() + 1) % world]
    try:
        other.array
    except dlmg.FragmentError as exc:
        assert f"process {other.rank}" in str(exc)
    else:
        raise AssertionError("remote fragment readable")
    return True


def timeout():
    """Rank 1 skips a collective: the others raise CollectiveError within the timeout."""
    dd.current_engine().timeout = 3.0
    full = _global((2 * dd.world_size(), 3), seed=1)
    dt = wrap(full, dd.slab(full.shape, axis=0))
    if dd.rank() == 1:
        import time

        time.sleep(8.0)  # alive, but never joins: the others must give up on their own
        return "skipped"
    try:
        dt.gather()
    except CollectiveError as exc:
        return str(exc)[:200]
    raise AssertionError("no CollectiveError")


SCENARIOS = {
    f.__name__: f for f in (
        allgather, gather_out, root_gather, scatter, redistribute_pairs, redistribute_many_blocks, reductions,
        nan_reductions, pointwise,
        mixed_frameworks, mismatch, raising, remote_fragment, timeout,
    )
}


def engine():
    """The engine's own collectives on raw buffers."""
    eng = dd.current_engine()
    me, world = eng.rank, eng.world_size
    assert eng.allgather_object({"r": me}) == [{"r": r} for r in range(world)]
    send, _ = eng.empty(3, "float32", dd.local_device())
    send[:] = me
    recv, _ = eng.empty(3 * world, "float32", dd.local_device())
    eng.all_gather(send, recv)
    np.testing.assert_array_equal(_np(recv), np.repeat(np.arange(world), 3))
    counts = [r + 1 for r in range(world)]  # rank r gets r + 1 elements from everyone
    send, _ = eng.empty(sum(counts), "int64", dd.local_device())
    send[:] = me
    recv, _ = eng.empty(world * (me + 1), "int64", dd.local_device())
    eng.alltoallv(send, counts, recv, [me + 1] * world)
    np.testing.assert_array_equal(_np(recv), np.repeat(np.arange(world), me + 1))
    for op, want in (("sum", sum(range(world))), ("max", world - 1), ("min", 0), ("prod", 0 if world > 1 else 0)):
        buf = np.full(2, float(me))
        eng.allreduce(buf, op)
        assert buf[0] == want, (op, buf)
    buf = np.full(4, me, dtype=np.int32)
    eng.broadcast(buf, world - 1)
    assert (buf == world - 1).all()
    eng.barrier()
    return {"name": eng.name, "devices": [str(d) for d in dd.devices()], "backend": dd.backend()}


SCENARIOS["engine"] = engine


def jax_multicontroller():
    """A global jax.Array -> per-process torch tensors -> jax.Array keeps every buffer."""
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    world, me = dd.world_size(), dd.rank()
    assert jax.process_count() == world and jax.process_index() == me
    full = np.arange(world * 2 * 3 * 4, dtype=np.float32).reshape(world * 2 * 3, 4)
    mesh = Mesh(np.array(jax.devices()), ("x",))
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, PartitionSpec("x")), lambda i: full[i])
    dt = dlmg.from_jax(x)
    assert dt.layout.ranks == tuple(d.process_index for d in mesh.devices.flat)
    shard_ptr = {str(s.device.id): s.data.unsafe_buffer_pointer() for s in x.addressable_shards}
    local = dt.local_fragments
    assert len(local) == len(jax.local_devices())
    jax_ptrs = sorted(f.array.unsafe_buffer_pointer() for f in local)
    assert jax_ptrs == sorted(shard_ptr.values())
    t = dt.to("torch")
    assert sorted(f.array.data_ptr() for f in t.local_fragments) == jax_ptrs  # no copy
    back = dlmg.to_jax(t)
    assert back.sharding.is_equivalent_to(x.sharding, x.ndim)
    assert sorted(s.data.unsafe_buffer_pointer() for s in back.addressable_shards) == jax_ptrs
    np.testing.assert_array_equal(_np(dt.gather(framework="numpy")), full)
    check_local(dt.redistribute(dd.slab(full.shape, axis=1)), full, "jax rows -> cols")
    np.testing.assert_allclose(_np(dlmg.sum(t)), full.sum())
    # replicated over each process's two devices
    mesh2 = Mesh(np.array(jax.devices()).reshape(world, 2), ("x", "y"))
    y = jax.make_array_from_callback(full.shape, NamedSharding(mesh2, PartitionSpec("x")), lambda i: full[i])
    dy = dlmg.from_jax(y)
    assert dy.layout.nreplicas == 2
    np.testing.assert_array_equal(_np(dy.gather(framework="numpy")), full)
    np.testing.assert_allclose(_np(dlmg.sum(dy)), full.sum())
    return {"ranks": list(dt.layout.ranks), "devices": [str(d) for d in dt.layout.devices]}


SCENARIOS["jax_multicontroller"] = jax_multicontroller

from tests._mp_interop import SCENARIOS as _INTEROP  # noqa: E402  (the interop bridges' scenarios)

SCENARIOS.update(_INTEROP)
from tests._mp_contract import SCENARIOS as _CONTRACT  # noqa: E402  (contractions' scenarios)

SCENARIOS.update(_CONTRACT)
from tests._mp_checkpoint import SCENARIOS as _CHECKPOINT  # noqa: E402  (save and load across process counts)
SCENARIOS.update(_CHECKPOINT)
from tests._mp_fft import SCENARIOS as _FFT  # noqa: E402  (FFTs over split modes)
SCENARIOS.update(_FFT)
from tests._mp_linalg import SCENARIOS as _LINALG  # noqa: E402  (distributed linear algebra)
SCENARIOS.update(_LINALG)
from tests._mp_sklearn import SCENARIOS as _SKLEARN  # noqa: E402  (scikit-learn's fits on row-split data)
SCENARIOS.update(_SKLEARN)


#: Where device_collectives puts its fragments: the host in CI, cuda:0 on a GPU machine.
_GPU = os.environ.get("DLMG_TEST_DEVICE", "cpu")


def _on_gpu(array, framework):
    """``array`` (NumPy) as a ``framework`` array on :data:`_GPU` (CuPy becomes NumPy on the host)."""
    if framework == "torch":
        import torch

        return torch.from_numpy(array.copy()).to(_GPU)
    if framework == "cupy":
        if _GPU == "cpu":
            return array.copy()
        import cupy

        with cupy.cuda.Device(0):
            return cupy.asarray(array)
    import jax

    return jax.device_put(array, jax.devices("gpu" if _GPU != "cpu" else "cpu")[0])


def device_collectives():
    """The collectives on fragments of torch, CuPy and JAX on one device per process
    (CUDA: NCCL, or MPI staging through host memory; the host: CuPy's share goes to NumPy)."""
    world, me = dd.world_size(), dd.rank()
    frameworks = ("torch", "cupy", "jax")
    full = _global((8 * world, 6), seed=4, dtype="float32")
    rng = np.random.default_rng(8)
    n = 0
    for k in range(4):
        nfrag = 4 * (1 + k % 2)
        layout = Layout(full.shape, block=(2, 3), grid=(2, 2), devices=[_GPU] * nfrag,
                        ranks=[int(r) for r in rng.integers(0, world, size=nfrag)])
        arrays = {i: _on_gpu(_piece(full, layout, i), frameworks[(i + k) % 3]) for i in layout.fragments_of(me)}
        dt = dlmg.from_fragments(arrays, layout, dtype="float32")
        np.testing.assert_array_equal(_np(dt.gather(framework="numpy", device="cpu")), full)
        got = dt.gather(framework="torch", device=_GPU)
        assert str(got.device) == _GPU
        np.testing.assert_array_equal(got.cpu().numpy(), full)
        cols = Layout(full.shape, block=(8 * world, 3), grid=(1, 2), devices=[_GPU] * 2,
                      ranks=[0, world - 1])
        moved = dt.redistribute(cols)
        for frag in moved.local_fragments:
            np.testing.assert_array_equal(_host(frag.array), _piece(full, cols, frag.index))
        np.testing.assert_allclose(_host(dlmg.sum(dt)), full.sum(), rtol=1e-4)
        assert int(_host(dlmg.argmax(dt))) == int(np.argmax(full))
        scattered = dlmg.scatter(_on_gpu(full, "cupy") if me == 0 else None, layout, root=0)
        for frag in scattered.local_fragments:
            np.testing.assert_array_equal(_host(frag.array), _piece(full, layout, frag.index))
        n += 1
    # one slab per process: the all-gather runs on the engine's own collective
    slab = Layout.slab(full.shape, 0, [_GPU] * world, ranks=range(world))
    dt = dlmg.from_fragments({me: _on_gpu(_piece(full, slab, me), "torch")}, slab)
    np.testing.assert_array_equal(dt.gather().cpu().numpy(), full)
    engine = dd.current_engine()
    return {"layouts": n, "transport": engine.transport(dlmg.as_device(_GPU))}


def _host(array):
    """Any framework's array (CUDA included) or a distributed tensor (gathered) as NumPy."""
    if isinstance(array, dlmg.DistributedTensor):
        array = array.gather(framework="numpy")
    module = type(array).__module__.partition(".")[0]
    if module == "torch":
        return array.detach().cpu().numpy()
    if module == "cupy":
        return array.get()
    return np.asarray(array)


SCENARIOS["device_collectives"] = device_collectives


def dies():
    """Rank 1 dies in the middle of a redistribution: the others raise CollectiveError."""
    import os

    dd.current_engine().timeout = 10.0
    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=2)
    dt = wrap(full, dd.slab(full.shape, 0))
    if dd.rank() == 1:
        from dlmg.movement import exchange

        def die(*args, **kwargs):
            os._exit(3)  # after the agreement, before the all-to-all

        exchange.deliver = die
        import dlmg.movement.across as collectives

        collectives.deliver = die
    try:
        dt.redistribute(dd.slab(full.shape, 1))
    except CollectiveError as exc:
        return str(exc)[:300]
    raise AssertionError("no CollectiveError")


SCENARIOS["dies"] = dies

from tests._mp_faults import SCENARIOS as _FAULTS  # noqa: E402  (the reliability scenarios)

SCENARIOS.update(_FAULTS)

from tests._mp_array_api import SCENARIOS as _ARRAY_API  # noqa: E402  (the Array API namespace's scenarios)

SCENARIOS.update(_ARRAY_API)

from tests._mp_manipulation import SCENARIOS as _MANIPULATION  # noqa: E402  (shapes, joining, reordering)

SCENARIOS.update(_MANIPULATION)
from tests._mp_agree import SCENARIOS as _AGREE  # noqa: E402  (the agreement's rounds)

SCENARIOS.update(_AGREE)

from tests._mp_pending import SCENARIOS as _PENDING  # noqa: E402  (pending tensors' reads and writes)

SCENARIOS.update(_PENDING)
from tests._mp_indexing import SCENARIOS as _INDEXING  # noqa: E402  (owner-routed indexing's scenarios)

SCENARIOS.update(_INDEXING)
from tests._mp_sorting import SCENARIOS as _SORTING  # noqa: E402  (scans, sorting, unique values)

SCENARIOS.update(_SORTING)
