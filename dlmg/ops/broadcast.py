"""Broadcasting distributed tensors, and layouts that keep some modes whole.

* :func:`result_shape` -- the array API's broadcasting rule on shapes;
* :func:`broadcast_layout` -- the layout a tensor takes when broadcast to a
  larger shape *without moving data*: new leading modes and stretched
  extent-1 modes are not split, every other mode keeps its distribution;
* :func:`broadcast_local` -- the tensor itself, broadcast fragment by fragment
  as views (no copy, no communication), onto a given layout when every
  fragment of that layout finds the elements it needs on its own device;
* :func:`whole_layout` -- the layout of the same shape whose ``modes`` are
  not split (what sorting, cumulative sums, ``flip`` along a mode need).

Nothing here moves data: callers decide whether to redistribute.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..distributed._state import world_size
from ..errors import LayoutMismatchError
from ..fragment import process_rank
from ..layout import Layout
from ..registry import adapter_for
from ._executor import executor, move_array
from ._operands import is_distributed
from ._pending import guard
from .dispatch import new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["result_shape", "broadcast_layout", "broadcast_local", "whole_layout", "align"]


def result_shape(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast shape of ``shapes`` (the array API's rule).

    Raises
    ------
    ValueError
        When two extents of one mode differ and neither is 1.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, n in enumerate(shape):
            m = ndim - len(shape) + i
            if n == out[m] or n == 1:
                continue
            if out[m] != 1:
                raise ValueError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
            out[m] = n
    return tuple(out)


# a few hundred distinct (layout, shape) pairs in a program; the suite's
# broadcasting test builds about 60 (validating a layout costs far more than a hit)
@lru_cache(maxsize=256)
def broadcast_layout(layout: Layout, shape: tuple[int, ...]) -> Layout | None:
    """``layout`` broadcast to ``shape`` with its devices unchanged, or ``None``
    where a stretched extent-1 mode is split over several devices."""
    lead = len(shape) - layout.ndim
    if lead < 0:
        return None
    block = [max(n, 1) for n in shape[:lead]]
    grid = [1] * lead
    for m in range(layout.ndim):
        n = shape[lead + m]
        if layout.shape[m] == n:
            block.append(layout.block[m])
            grid.append(layout.grid[m])
        elif layout.shape[m] == 1 and layout.grid[m] == 1:
            block.append(max(n, 1))
            grid.append(1)
        else:
            return None
    return Layout(shape, block=block, grid=grid, devices=layout.devices, ranks=layout.ranks)


def _source_fragment(x: "DistributedTensor", target: Layout, index: int) -> int | None:
    """The fragment of ``x`` holding what fragment ``index`` of ``target`` needs, on its device."""
    frag = target.fragments[index]
    lead = target.ndim - x.ndim
    coords = []
    for m in range(x.ndim):
        t = lead + m
        if x.shape[m] == target.shape[t]:
            if x.layout.block[m] != target.block[t] or x.layout.grid[m] != target.grid[t]:
                return None
            coords.append(frag.coords[t])
        elif x.shape[m] == 1 and x.layout.grid[m] == 1:
            coords.append(0)
        else:
            return None
    xl = x.layout
    for replica in range(xl.nreplicas):
        j = xl.fragment_index(coords, replica)
        if xl.devices[j] == frag.device and xl.ranks[j] == frag.rank:
            return j
    return None


def broadcast_local(x: "DistributedTensor", target: Layout) -> "DistributedTensor | None":
    """``x`` broadcast to ``target`` (a layout of the broadcast shape) as per-fragment views,
    or ``None`` when some fragment of ``target`` would need elements from another device."""
    if x.shape == target.shape and x.layout.same_distribution(target):
        return x
    if target.ndim < x.ndim:
        return None
    sources = [_source_fragment(x, target, i) for i in range(target.nfragments)]
    if any(s is None for s in sources):
        return None
    arrays: list[Any] = []
    lead = target.ndim - x.ndim
    for i, j in enumerate(sources):
        frag = x.fragments[j]  # type: ignore[index]
        if not frag.is_local:
            arrays.append(None)
            continue
        xp = frag.adapter.namespace()
        a = frag.array
        if lead:
            a = xp.reshape(a, (1,) * lead + tuple(a.shape))
        arrays.append(xp.broadcast_to(a, target.fragments[i].shape))
    return new_tensor(arrays, target, x.dtype)


def whole_layout(layout: Layout, modes: Iterable[int]) -> Layout:
    """The layout of ``layout``'s shape with ``modes`` not split: the fragments at grid
    coordinate 0 along them keep their devices (and replicas), the others go away."""
    modes = sorted({m % layout.ndim for m in modes}) if layout.ndim else []
    if all(layout.grid[m] == 1 for m in modes):
        return layout.dense
    return _whole(layout, tuple(modes))


# one entry per (layout, modes) pair a program sorts or flips along; building and
# validating a layout costs far more than a hit, a dictionary lookup
@lru_cache(maxsize=256)
def _whole(layout: Layout, modes: tuple[int, ...]) -> Layout:
    kept = [f for f in layout.fragments if all(f.coords[m] == 0 for m in modes)]
    block = list(layout.block)
    grid = list(layout.grid)
    for m in modes:
        block[m] = max(layout.shape[m], 1)
        grid[m] = 1
    return Layout(layout.shape, block=block, grid=grid, devices=[f.device for f in kept],
                  ranks=[layout.ranks[f.index] for f in kept])


def _zero_d_operand(t: "DistributedTensor") -> Any:
    """A 0-d tensor as a regular 0-d array (dispatch moves it to every fragment's device); an
    all-gather where some process holds no copy (decided by the layout, the same everywhere)."""
    if set(t.layout.ranks) >= set(range(world_size())):
        return next(frag.array for frag in t.fragments if frag.is_local)
    return t.gather()


def align(operands: Sequence[Any], name: str, communicate: bool) -> list[Any]:
    """``operands`` broadcast to one shape and one layout, for an elementwise call.

    The layout is the first distributed operand's of the result shape (or the
    first one's broadcast to it). Operands reach it as per-fragment views
    where their fragments allow; otherwise, with ``communicate``, by a
    redistribution (same shape) or by gathering and scattering the broadcast
    operand, and without it by a :class:`~dlmg.errors.LayoutMismatchError`.
    0-d tensors next to larger ones become 0-d arrays.
    """
    tensors = [op for op in operands if is_distributed(op)]
    if len(tensors) <= 1:
        return list(operands)
    shape = result_shape(*(t.shape for t in tensors))
    if all(t.shape == shape for t in tensors) and all(
        t.layout.same_distribution(tensors[0].layout) for t in tensors
    ):
        return list(operands)
    if any(t.layout.partial is not None for t in tensors):  # moved addends would meet others: values first
        return align([guard(op, name) for op in operands], name, communicate)
    lead = next((t for t in tensors if t.shape == shape), None)
    if lead is not None:
        target = lead.layout.dense
    else:
        target = next((b for t in tensors if t.ndim and (b := broadcast_layout(t.layout, shape)) is not None), None)
        if target is None:
            target = broadcast_layout(Layout.single(tensors[0].shape, tensors[0].layout.devices[0]), shape)
    out = []
    for op in operands:
        if not is_distributed(op) or op is lead:
            out.append(op)
            continue
        if op.ndim == 0:  # one value: a 0-d array, which every fragment's device receives
            out.append(_zero_d_operand(op))
            continue
        local = broadcast_local(op, target)  # type: ignore[arg-type]
        if local is None:
            if not communicate:
                raise LayoutMismatchError(
                    f"{name}: an operand of shape {op.shape} laid out as {op.layout!r} cannot be broadcast to "
                    f"shape {shape} laid out as {target!r} without moving data; operators never communicate: "
                    "redistribute it first, or use the dlmg.array_api function, which does"
                )
            local = _moved(op, target)  # type: ignore[arg-type]
        out.append(local)
    return out


def _moved(op: "DistributedTensor", target: Layout) -> "DistributedTensor":
    """``op`` brought to ``target`` by communication: a redistribution (same shape), or an
    all-gather of ``op`` from which every process cuts its own fragments of the broadcast."""
    framework = op.frameworks[0] if op.frameworks else None
    if op.shape == target.shape:
        return op.redistribute(target, framework=framework)
    whole = op.gather()  # every process receives it (the tensor being broadcast is the smaller one)
    source = adapter_for(whole)
    lead = target.ndim - whole.ndim
    arrays: list[Any] = []
    for frag, rank in zip(target.fragments, target.ranks):
        if rank != process_rank():
            arrays.append(None)
            continue
        ex = executor(framework or source.name, frag.device)
        arrays.append(ex.run(_cut, move_array(whole, ex, source), frag, lead))
    return new_tensor(arrays, target, op.dtype)


def _cut(xp: Any, whole: Any, frag: Any, lead: int) -> Any:
    """Fragment ``frag``'s elements of ``whole`` broadcast to ``frag``'s layout's shape (a new array)."""
    a = xp.reshape(whole, (1,) * lead + tuple(whole.shape))
    for m in range(frag.layout.ndim):
        if a.shape[m] == 1:
            continue
        index = frag.owned_indices(m)
        a = xp.take(a, xp.asarray(index, device=_device(a)), axis=m)
    return xp.asarray(xp.broadcast_to(a, frag.shape), copy=True)


def _device(a: Any) -> Any:
    from array_api_compat import device  # (dlmg imports without array-api-compat)

    return device(a)
