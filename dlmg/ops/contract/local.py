"""The batch-local matrix product: each fragment's framework multiplies the whole matrices it holds.

The contractions' *local* strategy at its simplest (:func:`dlmg.matmul` takes it when both
operands hold whole matrices in every fragment and split their batch modes alike): each
fragment's framework multiplies its matrices on its device through its array-API namespace,
and nothing is communicated. A matrix product is a contraction, and (as in cuTENSORMg) a
replicated tensor is never the output of one: :func:`local_matmul` computes on replica 0 of
its operands and returns an unreplicated tensor on replica 0's devices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import DtypeError, LayoutMismatchError
from .._batch import batch_key, require_whole, with_modes
from .._dtypes import require
from .._pending import guard
from ..dispatch import is_distributed, map_fragments

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["local_matmul"]

_NUMERIC_NOT_BOOL = frozenset("iufc")


def _result_dtype(a: str, b: str) -> str:
    """The promoted dtype of a product of ``a`` and ``b`` operands (NumPy's rule)."""
    if a == b:
        return a
    try:
        import numpy as np

        return str(np.result_type(np.dtype(a), np.dtype(b)))
    except TypeError as exc:
        raise DtypeError(f"matmul of {a} and {b} operands: no common type; cast one with astype first") from exc


def local_matmul(x1: "DistributedTensor", x2: "DistributedTensor", /) -> "DistributedTensor":
    """Batched matrix product ``(..., m, k) @ (..., k, n) -> (..., m, n)``, fragment by fragment.

    Parameters
    ----------
    x1, x2 : DistributedTensor
        Tensors of the same rank (at least 2) and batch shape. Their last two
        modes must be whole in every fragment (grid 1); their batch modes
        must be distributed identically (same blocks, grid and replica-0
        devices). Fragment ``i`` of ``x1`` leads: its framework computes,
        and ``x2``'s fragment is handed to it zero-copy if it belongs to
        another framework.

    Returns
    -------
    DistributedTensor
        Shape ``(..., m, n)``, the batch distribution of ``x1``, its last two
        modes whole, no replicas (the devices of ``x1``'s replica 0). The
        dtype is the operands' promoted type.

    Raises
    ------
    LayoutError
        When a matrix mode is distributed (the message suggests a layout).
    LayoutMismatchError
        When the batch distributions differ.
    ValueError
        For ranks below 2, different ranks or batch shapes, or inner extents
        that differ.
    DtypeError
        For bool operands.
    """
    for name, x in (("x1", x1), ("x2", x2)):
        if not is_distributed(x):
            raise TypeError(f"dlmg.matmul: {name} must be a DistributedTensor, got {type(x).__name__}")
        if x.ndim < 2:
            raise ValueError(f"dlmg.matmul: {name} has rank {x.ndim}; batch-local matmul needs rank >= 2")
    x1, x2 = guard(x1, "dlmg.matmul"), guard(x2, "dlmg.matmul")  # pending reductions: their values
    if x1.ndim != x2.ndim or x1.shape[:-2] != x2.shape[:-2]:
        raise ValueError(
            f"dlmg.matmul: batch shapes differ: {x1.shape} and {x2.shape} (no broadcasting of batch modes)"
        )
    m, k = x1.shape[-2:]
    k2, n = x2.shape[-2:]
    if k != k2:
        raise ValueError(f"dlmg.matmul: inner extents differ: {x1.shape} @ {x2.shape}")
    require("dlmg.matmul", (x1.dtype, x2.dtype), _NUMERIC_NOT_BOOL, "cast with astype first")
    nd = x1.ndim
    require_whole("dlmg.matmul", x1.layout, (nd - 2, nd - 1), "x1")
    require_whole("dlmg.matmul", x2.layout, (nd - 2, nd - 1), "x2")
    nbatch = nd - 2
    if batch_key(x1.layout, nbatch) != batch_key(x2.layout, nbatch):
        raise LayoutMismatchError(
            f"dlmg.matmul: the batch distributions of the operands differ: {x1.layout!r} and "
            f"{x2.layout!r}. Batch modes must be split alike (same blocks, grid and devices); "
            "redistribute one operand, e.g. x2 = x2.redistribute(<x2's shape with x1's batch blocks, grid "
            "and devices>)"
        )
    dtype = _result_dtype(x1.dtype, x2.dtype)
    out_layout = with_modes(x1.layout, ((nd - 1, n),), False)
    if out_layout.shape[nd - 2] != m:  # pragma: no cover - kept by construction
        raise AssertionError
    cast1 = x1.dtype != dtype
    cast2 = x2.dtype != dtype

    def per_fragment(xp: Any, a: Any, b: Any) -> Any:
        if cast1:
            a = xp.astype(a, getattr(xp, dtype))
        if cast2:
            b = xp.astype(b, getattr(xp, dtype))
        return xp.matmul(a, b)

    ngrid = x1.layout.ngrid
    indices = [f.index for f in x1.fragments[:ngrid] if f.is_local]
    out = map_fragments(per_fragment, (x1, x2), name="dlmg.matmul", out_layout=out_layout, indices=indices, check=False)
    assert out is not None
    return out
