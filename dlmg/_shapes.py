"""Small shape helpers shared by the core modules (no framework imports)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["c_strides"]


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
