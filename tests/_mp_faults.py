"""Multi-process scenarios of the reliability promises (run by :mod:`tests._mp_worker`).

Each scenario runs on every process of a launch and checks that dlmg either
gives the single-process answer or raises on every rank: layouts naming
processes that do not exist, reductions of every integer and complex type,
variance across processes, work after :func:`dlmg.distributed.finalize`,
arguments that differ between ranks, two threads running collectives at once.
A scenario returns a small JSON-able value or raises.
"""

from __future__ import annotations

import threading

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from dlmg.errors import CollectiveError, CollectiveMismatchError, FragmentError, LayoutError

from tests._mp_scenarios import _global, _np, wrap


def _expect(exc_type, fn, *args, **kwargs):
    """The message of the ``exc_type`` that ``fn`` raises (an AssertionError when it returns)."""
    try:
        got = fn(*args, **kwargs)
    except exc_type as exc:
        msg = f"{type(exc).__name__}: {exc}"
        return msg if len(msg) <= 400 else f"{msg[:200]} ... {msg[-200:]}"
    raise AssertionError(f"{fn} returned {got!r} instead of raising {exc_type.__name__}")


def missing_rank():
    """A layout naming a process the engine does not have is refused on every rank."""
    world = dd.world_size()
    ranks = [*range(world), world + 3]
    layout = Layout((2 * (world + 1), 3), grid=(world + 1, 1), devices=["cpu"] * (world + 1), ranks=ranks)
    seen = [_expect(LayoutError, dlmg.zeros, layout=layout, framework="numpy")]
    full = _global(layout.shape, seed=5)
    seen.append(_expect(LayoutError, wrap, full, layout))
    ok = wrap(full, dd.slab(full.shape, 0))
    seen.append(_expect(LayoutError, ok.redistribute, layout))
    assert all(str(world + 3) in s for s in seen), seen
    return seen[0]


_SMALL = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "complex64")


def small_int_reductions():
    """Reductions of unsigned, small-integer and complex torch fragments across processes
    equal the one-process answer (or fail, as torch fails in one process, on every rank)."""
    import torch

    world = dd.world_size()
    checked = []
    for dtype in _SMALL:
        full = (np.arange(6 * world * 2).reshape(6 * world, 2) % 7 + 1).astype(dtype)
        if dtype == "complex64":
            full = full * (1 + 0.5j)
        layout = dd.slab(full.shape, 0)
        piece = {dd.rank(): torch.from_numpy(np.ascontiguousarray(full[layout.owned_indices(dd.rank(), 0)]))}
        t = dlmg.from_fragments(piece, layout, dtype=dtype)
        ops = ("sum", "prod") if dtype == "complex64" else ("sum", "prod", "max", "min", "argmax")
        for op in ops:
            for axis in (None, 0):
                try:
                    got = getattr(dlmg, op)(t, axis=axis)
                except FragmentError:  # what torch cannot do on the fragment (as in one process)
                    checked.append([dtype, op, axis, "refused"])
                    continue
                got = _whole(got)
                want = getattr(np, op)(full, axis=axis)
                if dtype == "complex64":  # (float products in another order: rounding)
                    np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{dtype} {op} axis={axis}")
                else:  # integers exactly, wrapping as the dtype does
                    np.testing.assert_array_equal(got, want.astype(got.dtype), err_msg=f"{dtype} {op} axis={axis}")
                checked.append([dtype, op, axis, "equal"])
    return checked


def var_std():
    """var and std across processes, over every mode and each one, row and column slabs."""
    world = dd.world_size()
    full = _global((3 * world + 1, 2 * world + 1), seed=7)
    n = 0
    for axis_of_slab in (0, 1):
        for frameworks in (("numpy",), ("torch",)):
            t = wrap(full, dd.slab(full.shape, axis_of_slab), frameworks)
            for axis in (None, 0, 1, (0, 1)):
                for correction in (0, 1):
                    want_v = np.var(full, axis=axis, ddof=correction)
                    got_v = dlmg.var(t, axis=axis, correction=correction)
                    got_s = dlmg.std(t, axis=axis, correction=correction)
                    got_v, got_s = _whole(got_v), _whole(got_s)
                    np.testing.assert_allclose(got_v, want_v, rtol=1e-10)
                    np.testing.assert_allclose(got_s, np.sqrt(want_v), rtol=1e-10)
                    n += 1
    return n


def _whole(result):
    """A reduction's result as NumPy (gathered when it is a distributed tensor)."""
    return _np(result.gather(framework="numpy") if isinstance(result, dlmg.DistributedTensor) else result)


def after_finalize():
    """After finalize, reading a tensor spread over several processes raises FragmentError
    naming init on every rank (never None on one and another error elsewhere).
    Runs last: the engine is gone afterwards."""
    world = dd.world_size()
    full = _global((2 * world, 3), seed=3)
    t = wrap(full, dd.slab(full.shape, 0))
    dd.finalize()
    seen = []
    for op in (dlmg.sum, dlmg.max, dlmg.mean, dlmg.var, lambda x: dlmg.sum(x, axis=0), lambda x: x.gather()):
        msg = _expect(FragmentError, op, t)
        assert "init" in msg, msg
        seen.append(msg)
    return seen[0]


SCENARIOS = {f.__name__: f for f in (missing_rank, small_int_reductions, var_std, after_finalize)}


# -- fault injection ------------------------------------------------------------------
# For each collective and each stage, rank 1 fails; every rank must raise (rank 1 its
# own error, the others CollectiveError), none may return a value, and the next
# collective must still give the right answer on every rank.

class Injected(RuntimeError):
    """The failure the scenarios inject on rank 1."""


def _collectives():
    """name -> function of (tensor, full) running one collective on every rank."""
    def scatter(t, full):
        return dlmg.scatter(full if dd.rank() == 0 else None, t.layout, framework="numpy")

    table = {
        "allgather": lambda t, full: t.gather(),
        "allgather_general": lambda t, full: t.redistribute(dd.slab(full.shape, 1)).gather(),
        "root_gather": lambda t, full: t.gather(root=0),
        "scatter": scatter,
        "redistribute": lambda t, full: t.redistribute(dd.slab(full.shape, 1)),
    }
    for name in ("sum", "prod", "min", "max", "mean", "all", "any", "argmax", "argmin"):
        table[name] = (lambda fn: lambda t, full: fn(t))(getattr(dlmg, name))
        table[f"{name}_axis"] = (lambda fn: lambda t, full: fn(t, axis=0))(getattr(dlmg, name))
    return table


_REDUCTIONS = ("sum", "prod", "min", "max", "mean", "all", "any", "argmax", "argmin")


def _patch(module, name, value, undo):
    undo.append((module, name, getattr(module, name)))
    setattr(module, name, value)


def _inject(stage, collective, undo):
    """Make rank 1 fail at ``stage`` of ``collective`` (patches undone by the caller)."""
    import dlmg.movement.across as across
    import dlmg.movement.exchange as exchange
    import dlmg.ops.reduce_across as reduce_across
    from dlmg.distributed import agree

    if dd.rank() != 1:
        return
    eng = dd.current_engine()
    reduction = collective.split("_axis")[0] in _REDUCTIONS

    def boom(*args, **kwargs):
        raise Injected(f"injected at {stage}")

    if stage == "before":  # while preparing, before the agreement
        def failing(real):
            def wrapped(engine, description, work):
                return real(engine, description, lambda: boom())
            return wrapped

        for module in (across, reduce_across):
            for name in ("prepare", "prepare_vote"):
                if hasattr(module, name):
                    _patch(module, name, failing(getattr(agree, name)), undo)
    elif stage == "after":  # after the agreement, before the data moves (or, for a reduction, after it)
        if reduction:
            _patch(reduce_across, "move_array", boom, undo)
        else:
            _patch(exchange, "ready", boom, undo)
    elif stage == "mid":  # inside the exchange: this rank took part, then fails
        name = "allreduce" if reduction else "settle"
        real = getattr(eng, name)

        def after_real(*args, **kwargs):
            real(*args, **kwargs)
            raise Injected("injected mid-exchange")

        _patch(eng, name, after_real, undo)


def _run_fault(stage):
    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=11)
    outcomes = {}
    for name, run in _collectives().items():
        data = (full > 0) if name.split("_axis")[0] in ("all", "any") else full
        t = wrap(data, dd.slab(data.shape, 0))
        undo = []
        _inject(stage, name, undo)
        try:
            run(t, data)
        except Injected as exc:
            outcomes[name] = f"Injected: {exc}"
        except CollectiveError as exc:
            names = "rank(s) 1" in str(exc) or "rank 1" in str(exc)
            outcomes[name] = f"CollectiveError{' naming rank 1' if names else ''}: {str(exc)[-160:]}"
        else:
            outcomes[name] = "returned a value"
        finally:
            for module, attr, value in reversed(undo):
                setattr(module, attr, value)
        # the group is still usable and in step: the next collective is right everywhere
        np.testing.assert_array_equal(_np(wrap(full, dd.slab(full.shape, 1)).gather(framework="numpy")), full)
    return outcomes


def fault_before():
    return _run_fault("before")


def fault_after():
    return _run_fault("after")


def fault_mid():
    return _run_fault("mid")


def fault_between():
    """Rank 1's arithmetic fails between two all-reduces of a reduction (after the NaN
    flag of min, max, argmax, argmin): it still takes part in the rest, so every rank
    raises at once (no timeout) and the group stays usable."""
    import time

    import dlmg.ops.reduce_across as reduce_across

    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=16)
    real = reduce_across._any_nan
    outcomes = {}
    for name in ("min", "max", "argmax", "argmin"):
        for axis in (None, 0):
            t = wrap(full, dd.slab(full.shape, 0))

            def failing(engine, acc):
                real(engine, acc)
                raise Injected("injected between all-reduces")

            if dd.rank() == 1:
                reduce_across._any_nan = failing
            start = time.monotonic()
            try:
                getattr(dlmg, name)(t, axis=axis)
            except Injected as exc:
                outcome = f"Injected: {exc}"
            except CollectiveError as exc:
                outcome = f"CollectiveError{' naming rank 1' if 'rank(s) 1' in str(exc) else ''}: {str(exc)[-120:]}"
            else:
                outcome = "returned a value"
            finally:
                reduce_across._any_nan = real
            outcomes[f"{name}_{axis}"] = [outcome, time.monotonic() - start]
            np.testing.assert_array_equal(_np(wrap(full, dd.slab(full.shape, 1)).gather(framework="numpy")), full)
    return outcomes


def fault_late():
    """Rank 1 arrives after the timeout: every rank raises CollectiveError, then refuses
    further collectives with a message saying what to do. Breaks the engine: runs last."""
    import time

    eng = dd.current_engine()
    eng.timeout = 2.0
    world = dd.world_size()
    full = _global((2 * world, 3), seed=12)
    t = wrap(full, dd.slab(full.shape, 0))
    if dd.rank() == 1:
        time.sleep(2 * eng.timeout + 1.0)
    first = _expect(CollectiveError, t.gather)
    second = _expect(CollectiveError, t.gather)
    assert eng.broken is not None
    return [first, second]


def fault_dies():
    """Rank 1 dies after the agreement of a redistribution: the others raise CollectiveError
    within the timeout. Ends rank 1's process: runs alone."""
    import os

    import dlmg.movement.exchange as exchange

    dd.current_engine().timeout = 5.0
    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=2)
    t = wrap(full, dd.slab(full.shape, 0))
    if dd.rank() == 1:
        def die(*args, **kwargs):
            os._exit(3)

        exchange.ready = die
    return _expect(CollectiveError, t.redistribute, dd.slab(full.shape, 1))


SCENARIOS.update({f.__name__: f for f in (fault_before, fault_after, fault_mid, fault_between, fault_late,
                                          fault_dies)})


def different_arguments():
    """Ranks asking a reduction for results of different kinds are stopped by the agreement."""
    world = dd.world_size()
    full = _global((2 * world, 3), seed=4, dtype="int64")
    t = wrap(full, dd.slab(full.shape, 0))
    dtype = "float64" if dd.rank() == 0 else "int8"
    msg = _expect(CollectiveMismatchError, dlmg.sum, t, dtype=dtype)
    np.testing.assert_array_equal(_np(dlmg.sum(t, dtype="int64")), full.sum())  # still in step
    # one width against another of the same kind, with and without an axis, torch and NumPy
    width = "float64" if dd.rank() == 0 else "float32"
    floats = wrap(full.astype("float64"), dd.slab(full.shape, 0), ("torch",))
    widths = [_expect(CollectiveMismatchError, dlmg.sum, floats, dtype=width),
              _expect(CollectiveMismatchError, dlmg.mean, t, axis=0, dtype=width),
              _expect(CollectiveMismatchError, dlmg.prod, t, dtype="int32" if dd.rank() else "int64")]
    assert all("result_dtype" in w for w in widths), widths
    return msg


def allocation_fails():
    """Rank 1 cannot allocate its receive buffer: every rank raises, the group stays usable."""
    eng = dd.current_engine()
    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=8)
    t = wrap(full, dd.slab(full.shape, 0))
    real = eng.empty
    if dd.rank() == 1:
        def empty(n, dtype, device):
            raise MemoryError(f"cannot allocate {n} elements")

        eng.empty = empty
    try:
        msg = _expect((MemoryError, CollectiveError), t.redistribute, dd.slab(full.shape, 1))
    finally:
        eng.empty = real
    check = t.redistribute(dd.slab(full.shape, 1)).gather(framework="numpy")
    np.testing.assert_array_equal(_np(check), full)
    return msg


def two_threads():
    """Two threads per process run collectives at once (a redistribution and a gather):
    one at a time per process; each call gives the right value or a clear error, never
    a crash or a wrong value."""
    world = dd.world_size()
    full = _global((4 * world, 4 * world), seed=9)
    t = wrap(full, dd.slab(full.shape, 0))
    outcomes = {"right": 0, "refused": 0}
    wrong = []

    def redistribute():
        for _ in range(10):
            try:
                got = t.redistribute(dd.slab(full.shape, 1))
                for frag in got.local_fragments:
                    want = full[np.ix_(*[got.layout.owned_indices(frag.index, m) for m in range(2)])]
                    if not np.array_equal(_np(frag.array), want):
                        wrong.append("redistribute")
                outcomes["right"] += 1
            except (CollectiveMismatchError, CollectiveError):
                outcomes["refused"] += 1

    def gather():
        for _ in range(10):
            try:
                if not np.array_equal(_np(t.gather(framework="numpy")), full):
                    wrong.append("gather")
                outcomes["right"] += 1
            except (CollectiveMismatchError, CollectiveError):
                outcomes["refused"] += 1

    threads = [threading.Thread(target=redistribute), threading.Thread(target=gather)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not wrong, wrong
    assert outcomes["right"] + outcomes["refused"] == 20
    assert dd.current_engine().broken is None
    return outcomes


def unpickled_elsewhere():
    """A tensor pickled by rank 0 and unpickled by every rank: where it came from, it works;
    elsewhere its collectives raise on every rank (FragmentError naming both processes on
    the others, CollectiveError naming them on rank 0), and the group stays usable."""
    import pickle

    world = dd.world_size()
    full = _global((2 * world, 3), seed=14)
    t = wrap(full, dd.slab(full.shape, 0))
    data = dd.current_engine().allgather_object(pickle.dumps(t))[0]
    back = pickle.loads(data)
    seen = {}
    for name, run in (("gather", lambda x: x.gather(framework="numpy")), ("sum", dlmg.sum),
                      ("sum_axis", lambda x: dlmg.sum(x, axis=0)),
                      ("redistribute", lambda x: x.redistribute(dd.slab(full.shape, 1)))):
        want = FragmentError if dd.rank() != 0 else CollectiveError
        seen[name] = _expect(want, run, back)
    np.testing.assert_array_equal(_np(t.gather(framework="numpy")), full)  # still in step
    if dd.rank() != 0:
        seen["add"] = _expect(FragmentError, lambda: back + 1)  # a local operation refuses too
    return seen


def changed_fragment():
    """Rank 1's torch fragment is resized under dlmg: every collective raises on every rank
    (FragmentError on rank 1, CollectiveError naming it elsewhere), none reads the memory."""
    world = dd.world_size()
    full = _global((2 * world, 3), seed=15)
    t = wrap(full, dd.slab(full.shape, 0), ("torch",))
    if dd.rank() == 1:
        t.local_fragments[0].array.resize_(1, 3)
    seen = {}
    for name, run in (("gather", lambda x: x.gather(framework="numpy")), ("sum", dlmg.sum),
                      ("redistribute", lambda x: x.redistribute(dd.slab(full.shape, 1)))):
        seen[name] = _expect(FragmentError if dd.rank() == 1 else CollectiveError, run, t)
    return seen


SCENARIOS.update({f.__name__: f for f in (different_arguments, allocation_fails, two_threads,
                                          unpickled_elsewhere, changed_fragment)})


def user_group():
    """An engine over a torch group the user made (ranks 0 and 1; in a larger run the
    others stay out): its agreements travel in a side group of their own, made by those
    ranks alone, and a failure after the agreement still raises on both. Torch only."""
    import torch.distributed as dist

    import dlmg.movement.exchange as exchange
    from dlmg.distributed import state as process_state

    group = dist.new_group(ranks=[0, 1], backend="gloo")  # (made by every process, as torch asks)
    if dd.rank() > 1:
        return "outside"
    old, devices = dd.current_engine(), list(dd._devices)
    process_state.set_current(None)
    try:
        eng = dd.init("torch", group=group, timeout=20.0)
        assert eng._objects is not eng.group
        assert dist.get_process_group_ranks(eng._objects) == [0, 1]
        full = _global((4, 4), seed=17)
        t = wrap(full, dd.slab(full.shape, 0))
        np.testing.assert_array_equal(_np(t.gather(framework="numpy")), full)
        real = exchange.ready
        if dd.rank() == 1:
            def boom(*args, **kwargs):
                raise Injected("injected after the agreement")

            exchange.ready = boom
        try:
            seen = _expect((Injected, CollectiveError), t.redistribute, dd.slab(full.shape, 1))
        finally:
            exchange.ready = real
        np.testing.assert_array_equal(_np(t.redistribute(dd.slab(full.shape, 1)).gather(framework="numpy")), full)
        dd.finalize()
    finally:
        process_state.set_current(old)
        dd._devices[:] = devices
    return seen


SCENARIOS["user_group"] = user_group


def mpi_cupy_only():
    """CuPy fragments on the GPU through an MPI that is not CUDA-aware: the engine stages
    them through CuPy, and torch is never imported. Runs alone in its launch."""
    import sys

    import cupy as cp

    world, me = dd.world_size(), dd.rank()
    full = _global((4 * world, 4 * world), seed=13).astype(np.float32)
    layout = Layout.slab(full.shape, 0, ["cuda:0"] * world, ranks=tuple(range(world)))
    piece = np.ascontiguousarray(full[layout.owned_indices(me, 0)])
    t = dlmg.from_fragments({me: cp.asarray(piece)}, layout)
    np.testing.assert_array_equal(cp.asnumpy(t.gather()), full)
    cols = t.redistribute(Layout.slab(full.shape, 1, ["cuda:0"] * world, ranks=tuple(range(world))))
    np.testing.assert_array_equal(cp.asnumpy(cols.gather()), full)
    assert float(dlmg.sum(t)) == float(full.sum(dtype=np.float32))
    assert "torch" not in sys.modules, "the MPI engine imported torch for CuPy memory"
    return dd.current_engine().transport(dlmg.Device("cuda", 0))


SCENARIOS["mpi_cupy_only"] = mpi_cupy_only
