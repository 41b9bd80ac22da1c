"""Reductions across processes: reduce locally, then one all-reduce.

Every process reduces its fragments of replica 0 over the requested modes in
their own frameworks (so replicas count once), and combines the partials into
a dense host array of the reduced shape that starts as the operation's
identity. One all-reduce of that array (sum, prod, min, max; ``all``/``any``
as min/max of 0/1) gives every process the whole result; each keeps the
output fragments it holds and hands them to the framework and device of the
fragment they come from. ``argmax`` and ``argmin`` run two all-reduces: the
best value (the maximum or the minimum; NaN wins both), then the smallest
global index holding it.

The array exchanged has the reduced shape (one element for ``axis=None``), so
the traffic is that of the result, never that of the input.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..distributed.state import check_ranks, current
from ..distributed.agree import conclude, describe, exclusive, prepare_vote
from ..dtypes import info
from ..errors import CollectiveError
from ..fragment import verify_fragments
from ._executor import fail
from .dispatch import executor, move_array, new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["reduce"]

_HOST = Device("cpu", 0)
_ENGINE_OP = {"sum": "sum", "prod": "prod", "min": "min", "max": "max", "all": "min", "any": "max"}
_NARROW = ("float16", "bfloat16")
# the index reductions and the value reduction that picks their best value
_ARG = {"argmax": "max", "argmin": "min"}
_NO_NARROW = ("argmax", "argmin", "all", "any")  # results never in the input's (narrow) float type


def _np_dtype(name: str) -> Any:
    return np.dtype("float32") if name in _NARROW else np.dtype(name)


def _identity(name: str, dtype: np.dtype) -> Any:
    if name == "sum":
        return 0
    if name == "prod":
        return 1
    if name in ("all",):
        return 1
    if name == "any":
        return 0
    big = np.inf if dtype.kind in "fc" else np.iinfo(dtype).max
    small = -np.inf if dtype.kind in "fc" else np.iinfo(dtype).min
    return big if name == "min" else small


def _host(part: Any, ex: Any) -> np.ndarray:
    """A partial as a NumPy array (narrow floats widened first, in their own framework)."""

    name = str(getattr(part, "dtype", ""))
    if any(n in name for n in _NARROW):
        part = ex.xp.astype(part, ex.xp.float32)
    return np.asarray(move_array(part, executor("numpy", _HOST), ex.adapter))


def _combine(name: str, acc: np.ndarray, key: Any, value: np.ndarray) -> None:
    if name == "sum":
        acc[key] += value
    elif name == "prod":
        acc[key] *= value
    elif name in ("min", "all"):
        acc[key] = np.minimum(acc[key], value)
    else:
        acc[key] = np.maximum(acc[key], value)


def _fold_arg(name: str, acc: np.ndarray, idx: np.ndarray, key: Any, part: Any, ex: Any) -> None:
    """Fold one fragment's local ``name`` (argmax or argmin) ``part`` (values, global
    indices) into ``acc``/``idx`` at ``key``."""
    value, where = (_host(p, ex) for p in part)
    value = value.reshape(acc[key].shape).astype(acc.dtype)
    where = where.reshape(acc[key].shape).astype(np.int64)
    cur_v, cur_i = acc[key], idx[key]
    better = _beats(_ARG[name], value, where, cur_v, cur_i)
    acc[key] = np.where(better, value, cur_v)
    idx[key] = np.where(better, where, cur_i)


def reduce(x: "DistributedTensor", name: str, axes: tuple[int, ...] | None, keepdims: bool,
           dtype: str | None, reducer: Any, plan: Any, ctx: Any, asked: str | None) -> Any:
    """Run reduction ``name`` of ``x`` across processes (arguments as in :mod:`dlmg.ops.reductions`;
    ``asked`` is the result dtype before this process's frameworks narrowed it, the one
    every process must agree on)."""
    engine = current()
    assert engine is not None
    with exclusive(engine, f"dlmg.{name}"):
        return _reduce(engine, x, name, axes, keepdims, dtype, reducer, plan, ctx, asked)


def _reduce(engine: Any, x: "DistributedTensor", name: str, axes: tuple[int, ...] | None, keepdims: bool,
            dtype: str | None, reducer: Any, plan: Any, ctx: Any, asked: str | None) -> Any:
    layout = x.layout
    reduced = tuple(range(x.ndim)) if axes is None else axes
    kept = [m for m in range(x.ndim) if m not in reduced]
    rshape = tuple(layout.shape[m] for m in kept)
    # every argument that changes the result, the asked result dtype too (float32 on one
    # process and float64 on another is a mismatch; a width JAX narrows is settled below)
    description = describe(f"reduce {name}", layout=layout, dtype=x.dtype, axes=axes, keepdims=keepdims,
                           result_dtype=asked)

    def work() -> tuple[tuple[np.ndarray, np.ndarray | None], str | None]:
        check_ranks(layout, f"dlmg.{name}")
        verify_fragments(x.fragments, strides=False)  # here, so a refusal reaches every process
        # only argmax and argmin track indices: ``idx`` is set exactly for them
        idx: np.ndarray | None = None
        if name in _ARG:
            vdtype = np.dtype("uint8") if x.dtype == "bool" else _np_dtype(x.dtype)
            acc = np.full(rshape, _identity(_ARG[name], vdtype), dtype=vdtype)
            idx = np.full(rshape, np.iinfo(np.int64).max, dtype=np.int64)
        else:
            bools = name in ("all", "any") or (name in ("min", "max") and x.dtype == "bool")
            adt = np.dtype("uint8") if bools else _np_dtype(dtype or x.dtype)
            acc = np.full(rshape, _identity(name, adt), dtype=adt)
        local_axes = None if axes is None else reduced
        for frag in x.fragments:
            if not frag.is_local or frag.replica != 0 or frag.size == 0:
                continue
            ex = executor(frag.framework, frag.device)
            ctx.fragment = frag.index
            ctx.adapter = ex.adapter  # (its accumulation dtype: torch sums unsigned types in int64)
            try:
                part = ex.run(reducer.local, frag.array, local_axes, ctx)
            except Exception as exc:  # as in one process: the fragment, its device and framework
                raise fail(f"dlmg.{name}", frag.index, ex, exc) from exc
            key = np.ix_(*[frag.layout.layout.owned_indices(frag.index, m) for m in kept]) if kept else ()
            if idx is not None:
                _fold_arg(name, acc, idx, key, part, ex)
            else:
                value = _host(part, ex).reshape(acc[key].shape)
                if value.dtype != acc.dtype:  # bools as 0/1; unsigned sums torch ran in int64 (wrapping alike)
                    value = value.astype(acc.dtype)
                _combine(name, acc, key, value)
        return (acc, idx), dtype

    # The accumulation dtype depends on this process's frameworks (JAX without x64
    # narrows to 32 bits): every process takes the narrowest one any process needs.
    (acc, idx), votes = prepare_vote(engine, description, work)
    dtype = _narrowest(votes)
    return conclude(engine, description, lambda: _complete(engine, x, name, reduced, keepdims, dtype, plan, acc, idx))


class _InStep:
    """The engine's all-reduce for the steps of one reduction: a local failure in one of
    them is kept and raised after the last, so this process takes part in every
    all-reduce its peers run (a failure of the transport itself is raised at once).
    A failure of the arithmetic between them is kept too: :meth:`finish` runs the
    steps left with stand-in buffers."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.error: Exception | None = None
        self.done = 0

    def finish(self, steps: list[tuple[np.dtype, str]], size: int, error: Exception) -> None:
        """After ``error`` in this process's arithmetic: take part in the all-reduces of
        ``steps`` not run yet (their values are never used: the completion agreement
        then makes every process raise)."""
        if self.error is None:
            self.error = error
        for dtype, op in steps[self.done:]:
            self.allreduce(np.zeros(size, dtype=dtype), op)

    def allreduce(self, buf: Any, op: str) -> None:
        self.done += 1
        try:
            self.engine.allreduce(buf, op)
        except CollectiveError:
            raise
        except Exception as exc:
            if self.error is None:
                self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise self.error


def _complete(engine: Any, x: "DistributedTensor", name: str, reduced: tuple[int, ...], keepdims: bool,
              dtype: str | None, plan: Any, acc: np.ndarray, idx: np.ndarray | None) -> Any:
    """The all-reduce of the partials and the result in this process's frameworks."""
    steps = _InStep(engine)
    try:
        result = _exchange(steps, name, dtype, acc, idx, x.dtype)
    except CollectiveError:
        raise
    except Exception as exc:  # local arithmetic between the steps: run the ones it skipped
        steps.finish(_steps(name, dtype, acc), acc.size, exc)
        raise steps.error or exc from None
    steps.check()
    return _result(x, name, reduced, keepdims, dtype, plan, result)


def _steps(name: str, dtype: str | None, acc: np.ndarray) -> list[tuple[np.dtype, str]]:
    """The all-reduces :func:`_exchange` runs for reduction ``name``, in order, as
    ``(dtype, op)``: a NaN flag for floats where NaN must win, then the value (and,
    for argmax and argmin, the index)."""
    if name in _ARG:
        value = acc.dtype
        ops = [(value, _ARG[name]), (np.dtype(np.int64), "min")]
    else:
        value = acc.dtype if dtype is None or acc.dtype == np.uint8 else np.dtype(_np_dtype(dtype))
        ops = [(value, _ENGINE_OP[name])]
    flag = name in ("min", "max", *_ARG) and value.kind in "fc"
    return [(np.dtype(np.uint8), "max")] * flag + ops


def _exchange(engine: Any, name: str, dtype: str | None, acc: np.ndarray, idx: np.ndarray | None,
              xdtype: str) -> np.ndarray:
    """The reduction's all-reduces of every process's partials: the whole result."""
    if name not in _ARG and dtype is not None and acc.dtype != np.uint8 and acc.dtype != _np_dtype(dtype):
        acc = acc.astype(_np_dtype(dtype))
    if idx is not None:
        result = _arg_across(engine, _ARG[name], acc, idx).astype(dtype or "int64")
    else:
        nan = _any_nan(engine, acc) if name in ("min", "max") else None
        engine.allreduce(acc.reshape(-1), _ENGINE_OP[name])
        if nan is not None:  # NaN propagates whatever order the engine combines in
            acc[nan] = np.nan
        final = "bool" if name in ("all", "any") else (dtype or xdtype)
        result = acc.astype(np.dtype("float32") if final in _NARROW else final)
    return result


def _result(x: "DistributedTensor", name: str, reduced: tuple[int, ...], keepdims: bool, dtype: str | None,
            plan: Any, result: np.ndarray) -> Any:
    """The whole result as this process's part of the output, in its fragments' frameworks."""
    if keepdims:
        result = np.expand_dims(result, reduced)
    if plan.out_layout is None:
        home = next((f for f in x.fragments if f.is_local), None)
        target = executor("numpy" if home is None else home.framework, _HOST if home is None else home.device)
        out = move_array(np.array(result, copy=True), target)  # (ascontiguousarray makes 0-d 1-d)
        return _narrow(out, target, dtype or x.dtype) if name not in _NO_NARROW else out
    out_layout = plan.out_layout
    arrays: list[Any] = [None] * out_layout.nfragments
    for j, source in enumerate(plan.sources):  # every replica: the result is whole everywhere
        frag = out_layout.fragments[j]
        home = x.fragments[source]
        if not home.is_local:
            continue
        key = np.ix_(*[out_layout.owned_indices(j, m) for m in range(out_layout.ndim)]) if out_layout.ndim else ()
        target = executor(home.framework, home.device)
        piece = move_array(np.ascontiguousarray(result[key]).reshape(frag.shape), target)
        if name not in _NO_NARROW:
            piece = _narrow(piece, target, dtype or x.dtype)
        arrays[j] = piece
    final = (dtype or "int64") if name in _ARG else "bool" if name in ("all", "any") else (dtype or x.dtype)
    return new_tensor(arrays, out_layout, final)


def _narrow(array: Any, target: Any, dtype: str) -> Any:
    """Back to a narrow float type the exchange widened."""
    if dtype in _NARROW:
        return target.xp.astype(array, getattr(target.xp, dtype))
    return array


def _narrowest(dtypes: list[str | None]) -> str | None:
    """The dtype of fewest bytes among ``dtypes`` (``None`` entries ignored)."""

    named = [d for d in dtypes if d is not None]
    return min(named, key=lambda d: info(d).itemsize) if named else None


def _beats(best: str, value: np.ndarray, where: np.ndarray, cur_v: np.ndarray, cur_i: np.ndarray) -> np.ndarray:
    """Where ``(value, where)`` wins over ``(cur_v, cur_i)`` when the ``best`` value
    ("max" or "min") wins: larger (smaller), NaN beyond everything, the smaller
    index on ties."""
    ahead = value > cur_v if best == "max" else value < cur_v
    if value.dtype.kind not in "fc":
        return ahead | ((value == cur_v) & (where < cur_i))
    vn, cn = np.isnan(value), np.isnan(cur_v)
    tie = (value == cur_v) | (vn & cn)
    return (vn & ~cn) | (ahead & ~cn) | (tie & (where < cur_i))


def _any_nan(engine: Any, acc: np.ndarray) -> np.ndarray | None:
    """Where any process holds NaN (float partials only; one small all-reduce)."""
    if acc.dtype.kind not in "fc":
        return None
    flag = np.array(np.isnan(acc), dtype=np.uint8)  # an array even for 0-d (ufuncs give scalars)
    engine.allreduce(flag.reshape(-1), "max")
    return flag.astype(bool)


def _arg_across(engine: Any, best_op: str, acc: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The global argmax (``best_op`` "max") or argmin ("min") from every process's
    ``(best value, its index)``: the best value (NaN first), then the smallest index
    holding it."""
    big = np.iinfo(np.int64).max
    nan = _any_nan(engine, acc)
    best = acc.copy()
    if nan is not None:  # NaN places are settled by ``nan``; keep them out of the value race
        best[np.isnan(best)] = -np.inf if best_op == "max" else np.inf
    mine = best.copy()
    engine.allreduce(best.reshape(-1), best_op)
    wins = mine == best
    if nan is not None:
        wins = np.where(nan, np.isnan(acc), wins & ~nan)
    candidates = np.where(wins, idx, big)
    engine.allreduce(candidates.reshape(-1), "min")
    return candidates
