"""Reductions: sum, prod, min, max, mean, all, any and argmax.

How a reduction runs:

1. every fragment that takes part is reduced over the requested modes in its
   own framework, on its own device (a *partial*, with the reduced modes
   kept as extent 1);
2. the partials of fragments that differ only along reduced *distributed*
   modes (and share a replica) are handed to the framework and device of the
   one with grid coordinate 0 along those modes, stacked and reduced again.

So reducing only modes that are not distributed (grid 1) is purely local and
keeps the grid; reducing a distributed mode gives the layout of
:meth:`~dlmg.Layout.drop_modes`: the kept fragments' devices, replicas
staying replicas (each replica reduces its own copy; no element is counted
twice). ``axis=None`` reduces every mode, as the array API says: the result
is a 0-d *distributed* tensor (on the input's devices where the groups allow,
so it combines with the input without a move; ``argmax``'s flat index: one copy
on each of the input's devices). These functions are the public ``dlmg.sum``...
(:mod:`dlmg.array_api` re-exports them).

Nothing is synchronised; the result is ready after :func:`dlmg.synchronize`
as any other.
"""

from __future__ import annotations

import builtins
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from .._shapes import normalize_axes
from ..dtypes import canonical
from ..errors import DtypeError, FragmentError
from ..fragment import verify_fragments
from ._dtypes import float_dtype, index_dtype, kind_of, narrow_for, sum_dtype
from .contract.pending import reduce_pending, resolve
from .dispatch import Executor, fail, executor, is_distributed, map_fragments, move_array, new_tensor
from ..device import Device
from ..layout import Layout
from ..adapters import holds_dtype, in_use
from ..registry import adapter_for, adapter_names, get_adapter
from ..distributed.state import current
from .reduce_across import reduce as across

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["sum", "prod", "min", "max", "mean", "all", "any", "argmax", "argmin"]

Axis = "int | Sequence[int] | None"


# --------------------------------------------------------------------------
# plans: which fragments combine into which output fragment


@dataclass(frozen=True)
class _Plan:
    """How the fragments of one layout reduce over some modes.

    Attributes
    ----------
    axes : tuple of int
        The reduced modes, increasing.
    out_layout : Layout or None
        The result's layout (``None`` for ``axis=None``: a regular array).
    groups : tuple of (int, tuple of int)
        Per output fragment: its index and the input fragments combining
        into it, the first being the one the result lives with.
    count : int
        Elements reduced into each output element (``mean``).
    copies : tuple of (int, int)
        Per further replica of a result the reduction spreads: its output fragment and
        the output fragment (a group's home) whose value it copies.
    sources : tuple of int
        Per output fragment: the input fragment it lives with (device, process and
        framework).
    """

    axes: tuple[int, ...]
    out_layout: "Layout | None"
    groups: tuple[tuple[int, tuple[int, ...]], ...]
    count: int
    copies: tuple[tuple[int, int], ...] = ()
    sources: tuple[int, ...] = ()


def _normalize_axes(axis: Any, ndim: int, name: str) -> tuple[int, ...] | None:
    if axis is None:
        return None
    return normalize_axes(axis, ndim, name, sort=True)


@lru_cache(maxsize=256)
def _plan(layout: "Layout", axes: tuple[int, ...] | None, keepdims: bool) -> _Plan:
    ndim = layout.ndim
    if axes is None:  # everything, replica 0 only, into a regular array
        members = tuple(range(layout.ngrid))
        return _Plan(tuple(range(ndim)), None, ((0, members),), layout.size)
    removed = set(axes)
    dropped = layout.drop_modes(axes) if axes else layout
    dropped = dropped.replace(element_strides=None, block_strides=None) if dropped.element_strides else dropped
    if keepdims and axes:
        shape = list(dropped.shape)
        block = list(dropped.block)
        grid = list(dropped.grid)
        for a in axes:  # insert unit modes; the grid order of the devices is unchanged
            shape.insert(a, 1)
            block.insert(a, 1)
            grid.insert(a, 1)
        out_layout = Layout(shape, block=block, grid=grid, devices=dropped.devices, ranks=dropped.ranks)
    else:
        out_layout = dropped
    kept = [m for m in range(ndim) if m not in removed]
    groups: dict[int, list[int]] = {}
    for frag in layout.fragments:
        coords = tuple(frag.coords[m] for m in kept)
        if keepdims:
            full = [0] * ndim
            for m, c in zip(kept, coords):
                full[m] = c
            coords = tuple(full)
        j = out_layout.fragment_index(coords, frag.replica)
        groups.setdefault(j, []).append(frag.index)
    count = math.prod(layout.shape[a] for a in axes)
    return _spread(layout, _Plan(axes, out_layout, tuple((j, tuple(groups[j])) for j in sorted(groups)), count))


def _spread(layout: "Layout", plan: _Plan) -> _Plan:
    """``plan`` with each result replicated over the devices its group's fragments sit on.

    A reduction over a split mode is an all-reduce (MPI's ``MPI_Allreduce``; DTensor's
    ``Partial -> Replicate``): every device that held a part of the reduced modes keeps
    the result, so the result is on the input's devices (the array API's device rule)
    and broadcasts back against the input without moving anything
    (``x - xp.mean(x, axis=0)``). Where the groups sit on different numbers of devices
    (or each on one) the results stay with their homes.
    """
    out = plan.out_layout
    assert out is not None
    homes: list[list[int]] = []  # per group: its first fragment on each distinct (device, rank)
    for _, members in plan.groups:
        seen: dict[tuple[Any, int], int] = {}
        for i in members:
            seen.setdefault((layout.devices[i], layout.ranks[i]), i)
        homes.append(list(seen.values()))
    width = len(homes[0]) if homes else 1
    if width == 1 or builtins.any(len(h) != width for h in homes):
        return _Plan(plan.axes, out, plan.groups, plan.count, (), tuple(m[0] for _, m in plan.groups))
    ngrid = out.ngrid
    total = ngrid * out.nreplicas * width
    sources = [0] * total
    groups, copies = [], []
    for (j, members), on in zip(plan.groups, homes):
        g, r = j % ngrid, j // ngrid
        home = g + ngrid * r * width
        groups.append((home, members))
        for k, i in enumerate(on):
            sources[g + ngrid * (r * width + k)] = i
            if k:
                copies.append((g + ngrid * (r * width + k), home))
    spread = Layout(out.shape, block=out.block, grid=out.grid, devices=[layout.devices[i] for i in sources],
                    ranks=[layout.ranks[i] for i in sources])
    return _Plan(plan.axes, spread, tuple(groups), plan.count, tuple(copies), tuple(sources))


# --------------------------------------------------------------------------
# the reduction engine


@dataclass(frozen=True)
class _Reducer:
    """One reduction: how a fragment reduces locally and how partials combine.

    ``local(xp, array, axes, ctx)`` returns the partial (reduced modes kept
    as extent 1; for ``axes=None``-style full reductions a 0-d array);
    ``combine(xp, partials, ctx)`` reduces a list of partials of the same
    shape along a new leading mode.
    """

    name: str
    local: Callable[..., Any]
    combine: Callable[..., Any]
    needs_elements: bool = False  # min, max, argmax: no identity element


def _stack(xp: Any, parts: Sequence[Any]) -> Any:
    return xp.stack(list(parts), axis=0)


def _simple(name: str, fn_name: str, with_dtype: bool, needs_elements: bool = False) -> _Reducer:
    def local(xp: Any, a: Any, axes: tuple[int, ...] | None, ctx: "_Context") -> Any:
        fn = getattr(xp, fn_name)
        if with_dtype:
            return fn(a, axis=axes, keepdims=axes is not None, dtype=ctx.accumulate_for(xp))
        return fn(a, axis=axes, keepdims=axes is not None)

    def combine(xp: Any, parts: Sequence[Any], ctx: "_Context") -> Any:
        fn = getattr(xp, fn_name)
        if with_dtype:
            acc = ctx.accumulate_for(xp)
            stacked = _stack(xp, [p if p.dtype == acc else xp.astype(p, acc) for p in parts])
            return fn(stacked, axis=0, dtype=acc)
        return fn(_stack(xp, parts), axis=0)

    return _Reducer(name, local, combine, needs_elements)


class _Context:
    """Per-call values the reducers need (accumulation dtype, argmax geometry)."""

    __slots__ = ("dtype", "_by_xp", "_acc_by_xp", "layout", "fragment", "big", "input_dtype", "op", "adapter")

    def __init__(self, dtype: str | None, layout: "Layout", input_dtype: str, op: str = "") -> None:
        self.dtype = dtype
        self.layout = layout
        self.input_dtype = input_dtype
        self.op = op
        self.adapter: Any = None  # the adapter of the executor running now
        # (namespace, dtype object) pairs, found by identity; a call meets one or two namespaces
        self._by_xp: list[tuple[Any, Any]] = []
        self._acc_by_xp: list[tuple[Any, Any]] = []
        self.fragment = 0
        self.big = builtins.max(layout.size, 1)

    def dtype_for(self, xp: Any) -> Any:
        """The result dtype as ``xp``'s dtype object (None: the framework's default)."""
        if self.dtype is None:
            return None
        for seen, got in self._by_xp:
            if seen is xp:
                return got
        got = self._native(xp, self.dtype)
        self._by_xp.append((xp, got))
        return got

    def _native(self, xp: Any, name: str) -> Any:
        """``xp``'s dtype object of ``name``; NumPy's bfloat16 and float8 come from its adapter."""
        found = getattr(xp, name, None)
        if found is None and self.adapter is not None:
            found = self.adapter.native_dtype(name)
        return found

    def accumulate_for(self, xp: Any) -> Any:
        """The dtype ``xp``'s framework accumulates in (its adapter's
        ``accumulate_dtype`` of the result dtype)."""
        if self.dtype is None:
            return None
        for seen, got in self._acc_by_xp:
            if seen is xp:
                return got
        name = self.dtype if self.adapter is None else self.adapter.accumulate_dtype(self.dtype, self.op)
        got = self._native(xp, name)
        self._acc_by_xp.append((xp, got))
        return got


def _global_index(xp: Any, local: Any, frag_layout: Any, mode: int, dtype: Any) -> Any:
    """Global indices along ``mode`` of the local indices ``local`` of a fragment."""
    lay = frag_layout.layout
    b, g, c = lay.block[mode], lay.grid[mode], frag_layout.coords[mode]
    local = xp.astype(local, dtype)
    if g == 1:
        return local
    if len(frag_layout.blocks[mode]) <= 1:  # one block: a shift
        return local + c * b
    return (c + (local // b) * g) * b + local % b


def _argmax_local(xp: Any, a: Any, axes: tuple[int, ...] | None, ctx: _Context) -> Any:
    """(max value, global index) of one fragment, along one mode or over all of it."""
    frag_layout = ctx.layout.fragments[ctx.fragment]
    idx_dtype = ctx.dtype_for(xp)
    if "bool" in str(a.dtype):
        a = xp.astype(a, xp.uint8)
    arg, best = (xp.argmin, xp.min) if ctx.op == "argmin" else (xp.argmax, xp.max)
    if axes is None or len(axes) != 1 or a.ndim == 0:  # flat over the whole fragment
        flat = xp.reshape(a, (-1,))
        li = arg(flat)
        value = best(flat)
        shape = frag_layout.shape
        gshape = ctx.layout.shape
        rest = xp.astype(li, idx_dtype)
        total = None
        stride = 1
        for m in reversed(range(len(shape))):
            coord = rest % shape[m] if m else rest
            rest = rest // shape[m]
            g = _global_index(xp, coord, frag_layout, m, idx_dtype)
            total = g * stride if total is None else total + g * stride
            stride *= gshape[m]
        if total is None:  # a 0-d tensor
            total = xp.astype(li, idx_dtype)
        return value, total
    (mode,) = axes
    li = arg(a, axis=mode, keepdims=True)
    value = best(a, axis=mode, keepdims=True)
    return value, _global_index(xp, li, frag_layout, mode, idx_dtype)


def _argmax_combine(xp: Any, parts: Sequence[Any], ctx: _Context) -> Any:
    values = _stack(xp, [p[0] for p in parts])
    indices = _stack(xp, [p[1] for p in parts])
    best = (xp.min if ctx.op == "argmin" else xp.max)(values, axis=0, keepdims=True)
    hit = values == best
    if kind_of(ctx.input_dtype) in "fc":
        hit = hit | (xp.isnan(values) & xp.isnan(best))
    candidates = xp.where(hit, indices, xp.full_like(indices, ctx.big))
    return xp.min(candidates, axis=0)


_REDUCERS = {
    "sum": _simple("sum", "sum", True),
    "prod": _simple("prod", "prod", True),
    "min": _simple("min", "min", False, True),
    "max": _simple("max", "max", False, True),
    "all": _simple("all", "all", False),
    "any": _simple("any", "any", False),
    "argmax": _Reducer("argmax", _argmax_local, _argmax_combine, True),
    "argmin": _Reducer("argmin", _argmax_local, _argmax_combine, True),
}


def _reduce(
    x: "DistributedTensor",
    name: str,
    axis: Any,
    keepdims: bool,
    dtype: str | None,
    reducer: _Reducer | None = None,
    asked: str | None = None,
) -> Any:
    """Run one reduction (see the module docstring). ``asked`` is the result dtype
    before a framework narrowed it (``dtype`` when nothing did): every process asks
    for the same one, whichever frameworks its own fragments belong to."""
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    reducer = reducer or _REDUCERS[name]
    axes = _normalize_axes(axis, x.ndim, f"dlmg.{name}")
    if x.layout.partial is not None:  # a pending sum: kept by a sum over modes, resolved for a whole value
        kept = reduce_pending(x, name, axes, keepdims, dtype)
        if kept is not None:
            return kept
        x = resolve(x)
    layout = x.layout
    if reducer.needs_elements:
        reduced = range(x.ndim) if axes is None else axes
        if builtins.any(layout.shape[a] == 0 for a in reduced):
            raise ValueError(
                f"dlmg.{name}: the reduced modes of shape {layout.shape} hold no element, and "
                f"{name} has no identity"
            )
    if axes == ():  # no mode reduced: an elementwise conversion
        return _no_axes(x, name, dtype)
    plan = _plan(layout, axes, bool(keepdims))
    ctx = _Context(dtype, layout, x.dtype, reducer.name)
    if current() is not None:  # across processes: local partials, then the engine's all-reduce
        return across(x, name, axes, bool(keepdims), dtype, reducer, plan, ctx,
                      dtype if asked is None else asked)  # (checks inside its agreement)
    verify_fragments(x.fragments, strides=False)
    remote = [f.index for f in x.fragments if not f.is_local]
    if remote:  # (as gather says: a reduction in one process of a tensor spread over several)
        raise FragmentError(
            f"dlmg.{name}: fragments {remote} are held by other processes (ranks "
            f"{sorted({x.fragments[i].rank for i in remote})}); call dlmg.distributed.init() in every "
            "process first"
        )
    local_axes = None if axes is None else plan.axes
    frags = x.fragments
    out_layout = plan.out_layout
    results: list[Any] = [None] * (1 if out_layout is None else out_layout.nfragments)
    for j, members in plan.groups:
        home = frags[members[0]]
        if not home.is_local:
            continue
        target = executor(home.framework, home.device)
        parts = []
        for i in members:
            frag = frags[i]
            if reducer.needs_elements and axes is not None and builtins.any(frag.shape[a] == 0 for a in axes):
                continue  # contributes nothing; the home fragment always holds elements
            if reducer.needs_elements and axes is None and frag.size == 0:
                continue
            ex = executor(frag.framework, frag.device)
            ctx.fragment = i
            ctx.adapter = ex.adapter
            try:
                part = ex.run(reducer.local, frag.array, local_axes, ctx)
                part = tuple(_array(ex.xp, p) for p in part) if isinstance(part, tuple) else _array(ex.xp, part)
                if ex is not target:
                    part = _move(part, target, ex)
            except FragmentError:
                raise
            except Exception as exc:
                raise fail(f"dlmg.{name}", i, ex, exc) from exc
            parts.append(part)
        ctx.adapter = target.adapter
        try:
            results[j] = target.run(_finish, reducer, parts, ctx, out_layout, j, keepdims, axes)
        except Exception as exc:
            raise fail(f"dlmg.{name} (combining partials)", members[0], target, exc) from exc
    if out_layout is None:
        return results[0]
    for copy_at, origin in plan.copies:  # the all-reduce's other replicas: copies of the origin's result
        held = frags[plan.sources[copy_at]]
        if held.is_local and results[origin] is not None:
            source = frags[plan.sources[origin]]
            results[copy_at] = _replica(results[origin], executor(held.framework, held.device),
                                        executor(source.framework, source.device))
    return new_tensor(results, out_layout)


def _replica(value: Any, target: Executor, source: Executor) -> Any:
    """``value`` as a new array on ``target``'s device and framework (never the same buffer:
    replicas are written independently)."""
    moved = move_array(value, target, source.adapter)
    if moved is value or (source.device == target.device and source.adapter is target.adapter):
        moved = target.run(lambda xp, a: xp.asarray(a, copy=True), moved)
    return moved


def _move(part: Any, target: Executor, source: Executor) -> Any:
    if isinstance(part, tuple):
        return tuple(move_array(p, target, source.adapter) for p in part)
    return move_array(part, target, source.adapter)


def _finish(
    xp: Any,
    reducer: _Reducer,
    parts: list[Any],
    ctx: _Context,
    out_layout: "Layout | None",
    j: int,
    keepdims: bool,
    axes: tuple[int, ...] | None,
) -> Any:
    if len(parts) == 1:
        result = parts[0][1] if reducer.name in ("argmax", "argmin") else parts[0]
    else:
        result = reducer.combine(xp, parts, ctx)
    if out_layout is None:
        shape = (1,) * ctx.layout.ndim if keepdims else ()
    else:
        shape = out_layout.fragments[j].shape
    result = _array(xp, xp.reshape(result, shape))
    want = ctx.dtype_for(xp)
    if want is not None and reducer.name not in ("argmax", "argmin") and result.dtype != want:
        result = xp.astype(result, want)  # back from the framework's accumulation type
    return result


def _array(xp: Any, value: Any) -> Any:
    """``value`` as an array (NumPy hands back 0-d results as scalars)."""
    return value if hasattr(value, "__dlpack__") else xp.asarray(value)


def _no_axes(x: "DistributedTensor", name: str, dtype: str | None) -> "DistributedTensor":
    """A reduction over no mode: every element is its own result."""
    if name in ("argmax", "argmin"):
        raise ValueError(f"dlmg.{name}: axis=() reduces nothing")

    def per_fragment(xp: Any, a: Any) -> Any:
        if name in ("all", "any"):
            return xp.astype(a, xp.bool)
        if dtype is not None:
            return xp.astype(a, getattr(xp, dtype))
        return xp.asarray(a, copy=True)

    out = map_fragments(per_fragment, (x,), name=f"dlmg.{name}")
    assert out is not None
    return out


# --------------------------------------------------------------------------
# the public functions


def _frameworks(x: "DistributedTensor") -> tuple[str, ...]:
    return x.frameworks


def sum(x: "DistributedTensor", /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Sum of the elements over ``axis``.

    Parameters
    ----------
    x : DistributedTensor
    axis : int or tuple of int, optional
        Modes to reduce (negative values count from the end); ``None``
        reduces every mode.
    dtype : str or dtype, optional
        Accumulation and result type. By default NumPy's: bool and signed
        integers sum in int64, unsigned ones in uint64 (32-bit types where a
        JAX fragment takes part without ``jax_enable_x64``), floating and
        complex types in their own type.
    keepdims : bool
        Keep the reduced modes with extent 1.

    Returns
    -------
    DistributedTensor
        A distributed tensor whose layout is ``x.layout.drop_modes(axis)``
        (reduced modes of extent 1 kept with ``keepdims``), spread over the
        devices that held the reduced modes (an all-reduce); for ``axis=None``
        a 0-d tensor (the array API's result; ``float(s)`` or ``s.item()``
        reads it).

    Notes
    -----
    Float sums combine per-fragment partial sums, so they differ from
    NumPy's pairwise summation by rounding only (relative error about
    ``n * eps`` of the sum of absolute values).
    """
    axis = _every_mode(x, axis, "sum")
    return _reduce(x, "sum", axis, keepdims, _accum(x, dtype), asked=_wide_accum(x, dtype))


def prod(x: "DistributedTensor", /, *, axis: Any = None, dtype: Any = None, keepdims: bool = False) -> Any:
    """Product of the elements over ``axis`` (dtype rules and result as :func:`sum`)."""
    axis = _every_mode(x, axis, "prod")
    return _reduce(x, "prod", axis, keepdims, _accum(x, dtype), asked=_wide_accum(x, dtype))


def min(x: "DistributedTensor", /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Smallest element over ``axis`` (NaN propagates).

    Raises
    ------
    ValueError
        When a reduced mode has extent 0 (no identity element).
    DtypeError
        For complex tensors.
    """
    _real(x, "min")
    return _reduce(x, "min", _every_mode(x, axis, "min"), keepdims, None)


def max(x: "DistributedTensor", /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Largest element over ``axis`` (NaN propagates; rules as :func:`min`)."""
    _real(x, "max")
    return _reduce(x, "max", _every_mode(x, axis, "max"), keepdims, None)


def mean(x: "DistributedTensor", /, *, axis: Any = None, keepdims: bool = False, dtype: Any = None) -> Any:
    """Arithmetic mean over ``axis``: the :func:`sum` divided by the count.

    Floating and complex tensors average in their own type; bool and integer
    tensors in float64 (float32 where a JAX fragment takes part without
    ``jax_enable_x64``), as NumPy does. ``dtype`` (NumPy's argument) chooses
    the accumulation and result type instead.
    """
    _tensor(x, "mean")
    axis = _every_mode(x, axis, "mean")
    target = narrow_for(float_dtype(x.dtype), _frameworks(x)) if dtype is None else canonical(dtype)
    axes = _normalize_axes(axis, x.ndim, "dlmg.mean")
    assert axes is not None
    count = math.prod(x.shape[a] for a in axes)
    if count == 0 and axes:
        warnings.warn(f"dlmg.mean: mean of an empty selection (shape {x.shape}, axis={axis!r}) is NaN",
                      RuntimeWarning, stacklevel=2)
    total = _reduce(x, "sum", axis, keepdims, target,
                    asked=float_dtype(x.dtype) if dtype is None else canonical(dtype))
    if axes == ():
        return total
    return map_fragments(lambda xp, s: s / count if count else s * float("nan"), (total,), name="dlmg.mean")


def all(x: "DistributedTensor", /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether every element over ``axis`` is true (nonzero); a bool tensor (0-d for ``axis=None``)."""
    return _reduce(x, "all", _every_mode(x, axis, "all"), keepdims, None)


def any(x: "DistributedTensor", /, *, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Whether some element over ``axis`` is true (nonzero); a bool tensor (0-d for ``axis=None``)."""
    return _reduce(x, "any", _every_mode(x, axis, "any"), keepdims, None)


def argmax(x: "DistributedTensor", /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """Global index of the largest element (the first one on ties; NaN counts as largest).

    Parameters
    ----------
    x : DistributedTensor
    axis : int, optional
        One mode: the result holds global indices along it. ``None``: the
        index into the flattened (row-major) tensor, a 0-d tensor replicated on
        ``x``'s devices.
    keepdims : bool

    Returns
    -------
    DistributedTensor
        int64 indices (int32 where a JAX fragment takes part without x64).
    """
    return _arg_reduce(x, "argmax", axis, keepdims)


def argmin(x: "DistributedTensor", /, *, axis: int | None = None, keepdims: bool = False) -> Any:
    """Global index of the smallest element (the first one on ties; NaN counts as smallest):
    :func:`argmax`'s parameters and result."""
    return _arg_reduce(x, "argmin", axis, keepdims)


def _arg_reduce(x: "DistributedTensor", name: str, axis: int | None, keepdims: bool) -> Any:
    """``argmax`` or ``argmin`` (``name``): check the arguments, then reduce to global indices."""
    if axis is not None and not isinstance(axis, int):
        raise TypeError(f"dlmg.{name}: axis must be an int or None, got {axis!r}")
    _real(x, name)
    dtype = narrow_for(index_dtype(), _frameworks(x))
    out = _reduce(x, name, axis, keepdims, dtype, asked=index_dtype())
    return out if axis is not None else _on_devices(x, out, dtype)


def _on_devices(x: "DistributedTensor", value: Any, dtype: str) -> "DistributedTensor":
    """A whole result (a regular array, the same on every process) as a tensor replicated on
    ``x``'s devices and processes (the array API's device rule), each copy in the framework of
    ``x``'s first fragment on that device.

    ``dtype`` is the element type this process's frameworks allow; across processes every
    process must tag the tensor alike, so there it is the unnarrowed index type, and a copy
    whose framework cannot hold it (JAX without x64) is held by another framework on the
    same device (:func:`_holder`).
    """
    first: dict[tuple[Any, int], int] = {}
    for i, place in enumerate(zip(x.layout.devices, x.layout.ranks)):
        first.setdefault(place, i)
    places = list(first)
    layout = Layout.replicated(tuple(value.shape), [d for d, _ in places], ranks=[r for _, r in places])
    across_processes = current() is not None
    if across_processes:  # the same element type on every process, from a host copy
        dtype = index_dtype()
        host = move_array(value, executor("numpy", Device("cpu", 0)), adapter_for(value))
        value = np.asarray(host).astype(dtype)
    source = adapter_for(value)
    arrays: list[Any] = []
    for place in places:
        frag = x.fragments[first[place]]
        if not frag.is_local:
            arrays.append(None)
            continue
        framework = frag.framework
        if across_processes and not holds_dtype(get_adapter(framework), dtype):
            framework = _holder(x, frag.device, dtype)
        arrays.append(move_array(value, executor(framework, frag.device), source))
    return new_tensor(arrays, layout, dtype)


def _holder(x: "DistributedTensor", device: Device, dtype: str) -> str:
    """A framework that holds ``dtype`` on ``device``: that of another of ``x``'s local
    fragments there, NumPy on a host device, or an imported framework that supports it."""
    local = [(frag.device, str(frag.framework)) for frag in x.local_fragments]
    for there, framework in local:
        if there == device and holds_dtype(get_adapter(framework), dtype):
            return framework
    candidates = ["numpy"] if device.is_host else []
    candidates += [name for name in adapter_names() if in_use(get_adapter(name))]
    for name in candidates:
        adapter = get_adapter(name)
        if adapter.supports(device) and holds_dtype(adapter, dtype):
            return name
    raise DtypeError(
        f"no framework in use holds the {dtype} result on {device}: the fragments' frameworks there "
        f"narrow it ({', '.join(sorted({fw for there, fw in local if there == device}))}); "
        "enable 64-bit types in them (JAX: jax.config.update('jax_enable_x64', True))"
    )


def _wide_accum(x: "DistributedTensor", dtype: Any) -> str:
    """The accumulation dtype before any framework narrows it (see :func:`_accum`)."""
    return canonical(dtype) if dtype is not None else sum_dtype(x.dtype)


def _accum(x: "DistributedTensor", dtype: Any) -> str:
    _tensor(x, "sum")
    if dtype is not None:
        return canonical(dtype)
    return narrow_for(sum_dtype(x.dtype), _frameworks(x))


def _every_mode(x: Any, axis: Any, name: str) -> Any:
    """``axis``, with ``None`` (the array API's "every mode") as the tuple of every mode."""
    _tensor(x, name)
    return tuple(range(x.ndim)) if axis is None else axis


def _tensor(x: Any, name: str) -> None:
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")


def _real(x: Any, name: str) -> None:
    _tensor(x, name)
    if kind_of(x.dtype) == "c":
        raise DtypeError(f"dlmg.{name} is not defined for complex tensors ({x.dtype}); reduce .real or abs() of it")
