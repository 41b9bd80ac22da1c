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

* :func:`align` -- the operands of an elementwise call brought to one layout,
  the array API's functions and the operators alike; :func:`explain` shows
  what it would move, and :func:`strict` refuses every implicit move.

Nothing here moves data except :func:`align`, and it only where the operands'
layouts leave no other way and :func:`strict` is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ..distributed.state import world_size
from ..errors import LayoutMismatchError
from ..fragment import process_rank
from ..layout import Layout
from ..registry import adapter_for
from ._executor import array_device, executor, move_array
from ._operands import is_distributed
from ._pending import guard
from .dispatch import new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["result_shape", "broadcast_layout", "broadcast_local", "whole_layout", "align", "strict",
           "strict_enabled", "explain", "Alignment", "Move", "align_to"]

#: Whether implicit moves are refused, in this context (thread, task): see :func:`strict`.
_STRICT: ContextVar[bool] = ContextVar("dlmg_strict", default=False)


@contextmanager
def strict(enabled: bool = True) -> Iterator[None]:
    """Refuse every implicit move between devices inside a ``with`` block (MatX's rule).

    Operators and the namespace's elementwise functions (``dlmg.add``, ``dlmg.where``...)
    align operands of different layouts (see :func:`explain`); inside ``strict()`` they
    align only where no element changes device (views of each fragment, slices of a local
    replica) and raise :class:`~dlmg.errors.LayoutMismatchError` where a move would be
    needed, naming the explicit call (``redistribute``) that makes it; ``reshape`` gives a
    view or raises :class:`~dlmg.errors.LayoutError`.

    Examples
    --------
    >>> import dlmg
    >>> with dlmg.strict():
    ...     dlmg.strict_enabled()
    True
    """
    token = _STRICT.set(bool(enabled))
    try:
        yield
    finally:
        _STRICT.reset(token)


def strict_enabled() -> bool:
    """Whether implicit moves are refused here (see :func:`strict`)."""
    return _STRICT.get()


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
            if x.layout.grid[m] == 1:  # whole in every fragment of x: the target's part is a slice of it
                coords.append(0)
                continue
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
        for m in range(x.ndim):  # whole modes of x that the target splits: this fragment's part
            if x.layout.grid[m] == 1 and target.grid[lead + m] > 1 and x.shape[m] == target.shape[lead + m]:
                a = _part(xp, a, target.fragments[i].owned_indices(lead + m), m)
        if lead:
            a = xp.reshape(a, (1,) * lead + tuple(a.shape))
        arrays.append(xp.broadcast_to(a, target.fragments[i].shape))
    return new_tensor(arrays, target, x.dtype)


def _part(xp: Any, a: Any, index: Any, mode: int) -> Any:
    """``a``'s elements ``index`` along ``mode``: a view where they are one run (slabs)."""
    if len(index) and int(index[-1]) - int(index[0]) + 1 == len(index):
        key = (slice(None),) * mode + (slice(int(index[0]), int(index[-1]) + 1),)
        return a[key]
    if not len(index):
        return a[(slice(None),) * mode + (slice(0, 0),)]
    return xp.take(a, xp.asarray(index, device=array_device(a)), axis=mode)


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


def _target(tensors: Sequence[Any]) -> tuple[tuple[int, ...], Any, Any]:
    """The result shape, the operand the others align to (or ``None``) and its layout.

    The lead is the first operand of the result shape that is not replicated, else the
    first of the result shape: a replica is read where it lies (a slice of it per
    fragment), so replicated results of reductions combine with split tensors without
    a move, and a result is replicated only where every operand is (cuTENSORMg's rule).
    """
    shape = result_shape(*(t.shape for t in tensors))
    full = [t for t in tensors if t.shape == shape]
    lead = next((t for t in full if not t.layout.is_replicated), full[0] if full else None)
    if lead is not None:
        return shape, lead, lead.layout.dense
    target = next((b for t in tensors if t.ndim and (b := broadcast_layout(t.layout, shape)) is not None), None)
    if target is None:
        target = broadcast_layout(Layout.single(tensors[0].shape, tensors[0].layout.devices[0]), shape)
    return shape, None, target


@dataclass(frozen=True)
class Move:
    """How one operand of an elementwise call reaches the call's layout.

    Attributes
    ----------
    position : int
        The operand's position in the call.
    how : str
        ``"as is"``, ``"view"`` (per-fragment views or slices of a local replica: no
        element changes device), ``"value"`` (a 0-d tensor handed to every fragment as
        one value), ``"redistribute"`` (same shape, another layout: the plan moves
        elements) or ``"all-gather"`` (a smaller operand made whole and cut per fragment).
    source : Layout
        The operand's layout.
    plan : object or None
        For ``"redistribute"``: the :class:`~dlmg.RedistributionPlan` (or, across
        processes, the :class:`~dlmg.plans.routes.Routes`) it would run.
    """

    position: int
    how: str
    source: Layout
    plan: Any = None

    @property
    def moves(self) -> bool:
        """Whether elements change device."""
        return self.how in ("redistribute", "all-gather")


@dataclass(frozen=True)
class Alignment:
    """What :func:`align` does to the operands of one elementwise call (:func:`explain`).

    Attributes
    ----------
    shape : tuple of int
        The broadcast result shape.
    layout : Layout
        The layout every operand is brought to: the result's.
    moves : tuple of Move
        One per distributed operand.
    """

    shape: tuple[int, ...]
    layout: Layout
    moves: tuple[Move, ...]

    @property
    def moves_data(self) -> bool:
        """Whether any operand's elements change device (what :func:`strict` refuses)."""
        return any(m.moves for m in self.moves)

    def __str__(self) -> str:
        lines = [f"result shape {self.shape} in {self.layout!r}"]
        lines += [f"  operand {m.position}: {m.how} (from {m.source!r})" for m in self.moves]
        return "\n".join(lines)


def explain(*operands: Any) -> Alignment:
    """What an elementwise call on ``operands`` (``x + y``, ``xp.add(x, y)``,
    ``xp.where(c, x, y)``) moves before it runs, without running it.

    Examples
    --------
    >>> import numpy as np, dlmg
    >>> x = dlmg.scatter(np.ones((4, 3)), dlmg.Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"]))
    >>> dlmg.explain(x, dlmg.sum(x, axis=0)).moves_data  # a replicated sum: read where it lies
    False
    """
    tensors = [(i, op) for i, op in enumerate(operands) if is_distributed(op)]
    if not tensors:
        raise TypeError("explain needs at least one DistributedTensor operand")
    shape, lead, target = _target([t for _, t in tensors])
    moves = []
    for i, op in tensors:
        if op is lead or (op.shape == shape and op.layout.same_distribution(target)):
            moves.append(Move(i, "as is", op.layout))
        elif op.ndim == 0:
            moves.append(Move(i, "value", op.layout))
        elif _local_sources(op, target):
            moves.append(Move(i, "view", op.layout))
        elif op.shape == target.shape:
            moves.append(Move(i, "redistribute", op.layout, op.plan_redistribution(target)))
        else:
            moves.append(Move(i, "all-gather", op.layout))
    return Alignment(shape, target, tuple(moves))


def _local_sources(x: "DistributedTensor", target: Layout) -> bool:
    """Whether every fragment of ``target`` finds what it needs of ``x`` on its own device."""
    if x.shape == target.shape and x.layout.same_distribution(target):
        return True
    return target.ndim >= x.ndim and all(_source_fragment(x, target, i) is not None
                                         for i in range(target.nfragments))


def align(operands: Sequence[Any], name: str, communicate: bool) -> list[Any]:
    """``operands`` broadcast to one shape and one layout, for an elementwise call.

    The layout is that of the first operand of the result shape that is not
    replicated (else the first of the result shape, else the first one's broadcast
    to it). Operands reach it as per-fragment views where their fragments allow
    (a replicated operand is sliced where each replica lies); otherwise, with
    ``communicate`` and outside :func:`strict`, by a redistribution (same shape) or
    by gathering and cutting the broadcast operand, and else by a
    :class:`~dlmg.errors.LayoutMismatchError`. :func:`explain` says which.
    0-d tensors next to larger ones become 0-d arrays.
    """
    tensors = [op for op in operands if is_distributed(op)]
    if len(tensors) <= 1:
        return list(operands)
    if all(t.shape == tensors[0].shape for t in tensors) and all(
        t.layout.same_distribution(tensors[0].layout) for t in tensors
    ):
        return list(operands)
    if any(t.layout.partial is not None for t in tensors):  # moved addends would meet others: values first
        return align([guard(op, name) for op in operands], name, communicate)
    shape, lead, target = _target(tensors)
    communicate = communicate and not _STRICT.get()
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
                why = ("inside dlmg.strict() nothing moves implicitly" if _STRICT.get()
                       else "this call never moves data")
                raise LayoutMismatchError(
                    f"{name}: an operand of shape {op.shape} laid out as {op.layout!r} cannot be brought to "
                    f"shape {shape} laid out as {target!r} without moving elements between devices, and "
                    f"{why}: move it explicitly first, operand.redistribute(layout) (dlmg.explain(...) shows "
                    "the move)"
                )
            local = _moved(op, target)  # type: ignore[arg-type]
        out.append(local)
    return out


def align_to(op: "DistributedTensor", target: Layout, name: str) -> "DistributedTensor":
    """``op`` brought to ``target`` (a layout of ``op``'s broadcast shape) for an in-place
    call into a tensor of that layout: views where they do, else a move (refused
    inside :func:`strict`)."""
    local = broadcast_local(op, target)
    if local is not None:
        return local
    if _STRICT.get():
        raise LayoutMismatchError(
            f"{name}: an operand laid out as {op.layout!r} needs elements moved between devices to meet "
            f"{target!r}, and inside dlmg.strict() nothing moves implicitly: move it explicitly first, "
            "operand.redistribute(layout)"
        )
    return _moved(op, target)


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
    """Fragment ``frag``'s elements of ``whole`` broadcast to ``frag``'s layout's shape: a broadcast
    view of the elements it needs (the operand is only read, so its size-1 modes are not copied out
    to the other operand's size, which would cost a share of the result per operand)."""
    a = xp.reshape(whole, (1,) * lead + tuple(whole.shape))
    for m in range(frag.layout.ndim):
        if a.shape[m] == 1:
            continue
        index = frag.owned_indices(m)
        a = xp.take(a, xp.asarray(index, device=array_device(a)), axis=m)
    return xp.broadcast_to(a, frag.shape)

