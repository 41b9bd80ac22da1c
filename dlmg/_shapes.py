"""Small shape helpers shared by the core modules (no framework imports)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from .errors import AxisError

__all__ = ["c_strides", "normalize_axis", "normalize_axes", "shape_argument"]


def c_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major (C-contiguous) strides of ``shape``, in elements.

    Zero extents count as one, so the strides stay distinct and positive.

    Examples
    --------
    >>> c_strides((2, 3, 4))
    (12, 4, 1)
    """
    out, step = [], 1
    for extent in reversed(shape):
        out.append(step)
        step *= max(int(extent), 1)
    return tuple(reversed(out))


def normalize_axis(axis: Any, ndim: int, name: str) -> int:
    """``axis`` as a mode in ``range(ndim)`` (negative values count from the end).

    Parameters
    ----------
    axis : int
        Any integer (``operator.index``); not a ``bool`` or a float.
    ndim : int
        The number of modes of the tensor.
    name : str
        The function, for the message (``"dlmg.tensordot"``).

    Raises
    ------
    TypeError
        When ``axis`` is no integer.
    AxisError
        When it is out of ``[-ndim, ndim)``.
    """
    if isinstance(axis, bool):
        raise TypeError(f"{name}: axis must be an integer, got {axis!r}")
    try:
        a = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an integer, got {axis!r}") from None
    if not -ndim <= a < ndim:
        raise AxisError(f"{name}: axis {a} is out of bounds for a tensor of {ndim} modes")
    return a % ndim if ndim else a


def normalize_axes(axes: Any, ndim: int, name: str, *, sort: bool = False) -> tuple[int, ...]:
    """Each entry of ``axes`` (an integer or a sequence of them) as a mode in ``range(ndim)``.

    Parameters
    ----------
    axes : int or sequence of int
        The modes; negative values count from the end.
    ndim : int
        The number of modes.
    name : str
        The function, for the message.
    sort : bool
        Return the modes in increasing order (as a reduction reads them) instead of as given.

    Raises
    ------
    TypeError
        When an entry is no integer.
    AxisError
        When an entry is out of range, or two entries name the same mode.
    """
    if isinstance(axes, int) or hasattr(axes, "__index__"):
        raw: tuple[Any, ...] = (axes,)
    else:
        try:
            raw = tuple(axes)
        except TypeError:
            raise TypeError(f"{name}: axis must be an integer or a tuple of integers, got {axes!r}") from None
    out: list[int] = []
    for a in raw:
        m = normalize_axis(a, ndim, name)
        if m in out:
            raise AxisError(f"{name}: repeated axis {m} in axes {axes!r}")
        out.append(m)
    return tuple(sorted(out)) if sort else tuple(out)
def shape_argument(shape: Any, what: str) -> tuple[int, ...]:
    """A shape argument as a tuple of ints, refusing floats and other non-integers as
    NumPy does (``TypeError``), instead of truncating ``2.0`` or ``2.5`` to ``2``.

    Examples
    --------
    >>> shape_argument((2, 3), "reshape")
    (2, 3)
    """
    items = (shape,) if not isinstance(shape, (tuple, list)) and not hasattr(shape, "__len__") else tuple(shape)
    out = []
    for n in items:
        if isinstance(n, bool):
            raise TypeError(f"{what}: shape entries must be integers, got {n!r} in {shape!r}")
        try:
            out.append(operator.index(n))
        except TypeError:
            raise TypeError(f"{what}: shape entries must be integers, got {n!r} ({type(n).__name__}) in "
                            f"{shape!r}") from None
    return tuple(out)
