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
        return f"{type(exc).__name__}: {exc}"[:300]
    raise AssertionError(f"{fn} returned {got!r} instead of raising {exc_type.__name__}")


def missing_rank():
    """A layout naming a process the engine does not have is refused on every rank."""
    world = dd.world_size()
    ranks = [*range(world), world + 3]
    layout = Layout((2 * (world + 1), 3), grid=(world + 1, 1), devices=["cpu"] * (world + 1), ranks=ranks)
    seen = [_expect(LayoutError, dlmg.zeros, layout, framework="numpy")]
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
