"""Operations on distributed tensors, fragment by fragment in each owner's framework.

* :mod:`.dispatch` -- the one execution path, framework hand-over and
  :func:`synchronize`;
* :mod:`.blockwise` -- :func:`map_fragments`: a user's function on each
  fragment (``apply`` is its deprecated name);
* :mod:`.pointwise` -- the Python operators and the kernel of the array
  API's elementwise functions;
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
from .contract import EinsumPlan, dot, einsum, einsum_plan, inner, outer
from .like import allclose, isclose
from .shape import transpose
from .statistics import cumsum

# The namespace's functions (``sum``, ``add``, ``matmul``...) are :mod:`dlmg.array_api`'s;
# what this package exports beside them are dlmg's own operations.
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
    "einsum",
    "einsum_plan",
    "EinsumPlan",
    "dot",
    "inner",
    "outer",
    "cholesky",
    "cumsum",
    "transpose",
    "isclose",
    "allclose",
]

