"""Selection elementwise: ``where`` and ``clip``, fragment by fragment.

Both run through :func:`dlmg.ops.dispatch.map_fragments` like every
elementwise function in :mod:`dlmg.ops.pointwise`, whose operand checks they
share.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._dtypes import REAL
from .dispatch import map_fragments
from .pointwise import check_operands, classify_all

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["where", "clip"]


def _where_fragment(xp: Any, cond: Any, x1: Any, x2: Any) -> Any:
    return xp.where(cond, x1, x2)


def where(condition: Any, x1: Any, x2: Any, /) -> "DistributedTensor":
    """``x1`` where ``condition`` is true, else ``x2``, elementwise.

    Parameters
    ----------
    condition : DistributedTensor, bool or 0-d array
    x1, x2 : DistributedTensor, scalar or 0-d array
        At least one of the three operands is distributed; all distributed
        ones share one layout. The first distributed operand decides each
        fragment's framework.

    Returns
    -------
    DistributedTensor
    """
    ops = classify_all((condition, x1, x2))
    out = map_fragments(_where_fragment, ops, name="where")
    assert out is not None
    return out


def _clip_fragment(xp: Any, x: Any, lo: Any, hi: Any) -> Any:
    return xp.clip(x, min=lo, max=hi)


def clip(x: Any, /, min: Any = None, max: Any = None) -> "DistributedTensor":  # noqa: A002
    """``x`` limited to ``[min, max]`` elementwise.

    Parameters
    ----------
    x : DistributedTensor
    min, max : scalar, 0-d array, DistributedTensor or None
        Bounds (``None``: unbounded on that side); distributed bounds share
        ``x``'s layout.

    Returns
    -------
    DistributedTensor
    """
    ops = classify_all((x, min, max))
    check_operands("clip", ops, REAL)
    out = map_fragments(_clip_fragment, ops, name="clip")
    assert out is not None
    return out
