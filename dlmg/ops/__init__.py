"""Operations on distributed tensors, fragment by fragment in each owner's framework.

* :mod:`.dispatch` -- the one execution path, framework hand-over and
  :func:`synchronize`;
* :mod:`.blockwise` -- :func:`map_fragments`: a user's function on each
  fragment (``apply`` is its deprecated name);
* :mod:`.pointwise` -- Python operators and the array API's elementwise
  functions;
* :mod:`.fused` -- :func:`fuse`: a user's elementwise function compiled per
  fragment by the owner's compiler (``jax.jit``, ``cupy.fuse``,
  ``torch.compile``);
* :mod:`.reductions` -- ``sum``, ``prod``, ``min``, ``max``, ``mean``,
  ``all``, ``any``, ``argmax``;
* :mod:`.linalg` -- TSQR, blocked Cholesky and LU on grids, batch-local
  factorizations;
* :mod:`.fft` -- FFTs over any layouts: slab and pencil transposes, four-step
  transforms of a split 1-D signal, distributed shifts;
* :mod:`.contract` -- ``einsum``, ``matmul``, ``tensordot`` over any layouts,
  and pending sums.

The methods and operators of :class:`~dlmg.DistributedTensor` call the
functions of these modules by name; this package imports no framework.
"""

from __future__ import annotations

from . import blockwise, dispatch, fft, like, shape, statistics, fused, linalg, pointwise, reductions, selection
from .blockwise import apply, map_fragments
from .broadcast import Alignment, Move, explain, strict, strict_enabled
from ._operands import classify_operand
from .dispatch import is_distributed, synchronize
from .fused import FusedFunction, fuse
from .linalg import cholesky
from .contract import EinsumPlan, dot, einsum, einsum_plan, inner, matmul, outer, tensordot, vecdot
from .pointwise import *  # noqa: F403  (the elementwise functions)
from .pointwise import __all__ as _pointwise_all
from .selection import clip, where
from .reductions import all, any, argmax, max, mean, min, prod, sum  # noqa: A004
from .like import allclose, around, empty_like, full_like, isclose, ones_like, round, zeros_like  # noqa: A004
from .shape import permute_dims, reshape, transpose
from .statistics import argmin, cumsum, std, var

__all__ = [
    "map_fragments",
    "strict",
    "strict_enabled",
    "explain",
    "Alignment",
    "Move",
    "apply",
    "fuse",
    "FusedFunction",
    "synchronize",
    "matmul",
    "einsum",
    "einsum_plan",
    "EinsumPlan",
    "tensordot",
    "vecdot",
    "dot",
    "inner",
    "outer",
    "cholesky",
    "sum",
    "prod",
    "min",
    "max",
    "mean",
    "all",
    "any",
    "argmax",
    "argmin",
    "var",
    "std",
    "cumsum",
    "permute_dims",
    "transpose",
    "reshape",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "isclose",
    "allclose",
    "around",
] + ["where", "clip"] + list(_pointwise_all)

