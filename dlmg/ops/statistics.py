"""``argmin``, ``var``, ``std`` and ``cumsum``, with the array API's names and arguments.

``var`` subtracts the mean of each reduced group from the fragments that hold
it (two passes, as NumPy does, never the cancelling ``E[x^2] - E[x]^2``);
``cumsum`` runs along a mode that each fragment holds whole, and otherwise
says which ``redistribute`` makes it possible.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from ..distributed.state import current
from ..dtypes import canonical
from ..errors import FragmentError, LayoutError
from . import reductions as _r
from ._pending import guard
from .dispatch import fail, executor, map_fragments, move_array, new_tensor
from ..layout import Layout

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["var", "std", "cumsum"]




def _squared_deviations(x: "DistributedTensor", axes: tuple[int, ...]) -> "DistributedTensor":
    """``|x - mean(x)|**2``, the mean taken over ``axes``."""
    means = _r.mean(x, axis=axes, keepdims=True)
    plan = _r._plan(x.layout, axes, True)
    home = {i: j for j, members in plan.groups for i in members}
    # across processes a group's mean may sit with another process: every process
    # takes all of them (the reduced shape, small) and slices its fragments' rows
    everywhere = None if current() is None else np.asarray(means.gather(framework="numpy"))
    out: list[Any] = [None] * x.layout.nfragments
    for frag in x.fragments:
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        mean_frag = means.fragments[home[frag.index]]
        try:
            if everywhere is not None:
                rows = [np.arange(1) if m in axes else x.layout.owned_indices(frag.index, m) for m in range(x.ndim)]
                m = move_array(np.ascontiguousarray(everywhere[np.ix_(*rows)]), ex)
            else:
                m = mean_frag.array
                if mean_frag.adapter is not ex.adapter or mean_frag.device != frag.device:
                    m = move_array(m, ex, mean_frag.adapter)
            out[frag.index] = ex.run(lambda xp, a, mm: xp.abs(a - mm) ** 2, frag.array, m)
        except FragmentError:
            raise
        except Exception as exc:
            raise fail("dlmg.var", frag.index, ex, exc) from exc
    return new_tensor(out, x.layout.dense)


def var(x: "DistributedTensor", /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False,
        ddof: float | None = None) -> Any:
    """Variance over ``axis`` (array API ``var``): the mean of ``|x - mean(x)|**2``.

    Parameters
    ----------
    x : DistributedTensor
        Real or complex (the variance of a complex tensor is real).
    axis : int or tuple of int, optional
        The reduced modes; all by default.
    correction : float
        Degrees of freedom removed from the count: 0 for the population
        variance, 1 for the sample variance (NumPy's ``ddof``).
    keepdims : bool
    ddof : float, optional
        NumPy's name for ``correction`` (it wins when given).

    Returns
    -------
    DistributedTensor
        As :func:`dlmg.sum` returns for the same ``axis`` (0-d for ``axis=None``).
    """
    _r._tensor(x, "var")
    x = guard(x, "dlmg.var")  # a pending reduction: its value (the squares are not linear)
    if ddof is not None:
        correction = ddof
    if axis is None:  # every mode: a 0-d tensor, as the array API's reductions give
        axis = tuple(range(x.ndim))
    axes = _r._normalize_axes(axis, x.ndim, "dlmg.var")
    assert axes is not None
    count = _prod(x.shape[a] for a in axes)
    denominator = count - correction
    if denominator <= 0 or count == 0:
        warnings.warn(f"dlmg.var: {count} elements and correction={correction} leave no degrees of freedom",
                      RuntimeWarning, stacklevel=2)
    if axes == ():
        return map_fragments(lambda xp, a: xp.abs(a - a) ** 2, (x,), name="dlmg.var")
    squares = _squared_deviations(x, axes)
    total = _r.sum(squares, axis=axis, keepdims=keepdims)
    scale = 1.0 / denominator if denominator > 0 else float("nan")
    return map_fragments(lambda xp, s: s * scale, (total,), name="dlmg.var")


def std(x: "DistributedTensor", /, *, axis: Any = None, correction: float = 0.0, keepdims: bool = False,
        ddof: float | None = None) -> Any:
    """Standard deviation over ``axis`` (array API ``std``): the square root of :func:`var`
    (``ddof`` is NumPy's name for ``correction``)."""
    v = var(x, axis=axis, correction=correction, keepdims=keepdims, ddof=ddof)
    return map_fragments(lambda xp, a: xp.sqrt(a), (v,), name="dlmg.std")


def _prod(values: Any) -> int:
    out = 1
    for v in values:
        out *= int(v)
    return out


def cumsum(x: "DistributedTensor", /, *, axis: int | None = None, dtype: Any = None) -> "DistributedTensor":
    """Cumulative sum along ``axis`` (array API ``cumulative_sum``), a mode each fragment holds whole.

    Parameters
    ----------
    axis : int, optional
        Required for tensors of more than one mode.
    dtype : optional
        The result's element type (the framework's default otherwise).

    Raises
    ------
    LayoutError
        When ``axis`` is split over devices or into blocks: the sums would run
        across fragments. The message names the ``redistribute`` call that
        gives every fragment the whole mode.
    """
    _r._tensor(x, "cumsum")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"dlmg.cumsum: axis is required for a tensor of {x.ndim} modes")
        axis = 0
    if isinstance(axis, bool) or not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"dlmg.cumsum: axis {axis!r} is not a mode of a tensor of {x.ndim} modes")
    axis %= x.ndim
    lay = x.layout
    if lay.grid[axis] != 1 or lay.block[axis] != lay.shape[axis]:
        other = next((m for m in range(x.ndim) if m != axis and x.shape[m] > 1), None)
        devices = list(dict.fromkeys(lay.devices))
        hint = (
            f"x.redistribute({Layout.slab(x.shape, other, devices)!r})" if other is not None
            else f"x.redistribute({Layout.replicated(x.shape, devices[:1])!r})"
        )
        raise LayoutError(
            f"dlmg.cumsum along mode {axis} would run across fragments (grid {lay.grid[axis]}, block "
            f"{lay.block[axis]} of {lay.shape[axis]}); each fragment must hold the whole mode: {hint}"
        )
    name = None if dtype is None else canonical(dtype)

    def per_fragment(xp: Any, a: Any) -> Any:
        fn = getattr(xp, "cumulative_sum", None)
        want = None if name is None else getattr(xp, name)
        if fn is not None:
            return fn(a, axis=axis, dtype=want)
        return xp.cumsum(a, axis=axis, dtype=want)

    out = map_fragments(per_fragment, (x,), name="dlmg.cumsum")
    assert out is not None
    return out
