"""Small shape helpers shared by the core modules (no framework imports)."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

__all__ = ["c_strides", "shape_argument"]


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
