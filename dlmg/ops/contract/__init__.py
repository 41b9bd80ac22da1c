"""Contractions over distributed operands: ``einsum``, ``matmul``, ``tensordot``... and pending sums.

* :mod:`.equation` -- reading the equation, the pairwise order (opt_einsum);
* :mod:`.layouts` -- which fragments meet, the aligned layout of a move;
* :mod:`.cost` -- bytes, messages and flops; the model that chooses;
* :mod:`.phases` -- a pending sum's resolution as layouts;
* :mod:`.plan` -- the plan, printable before anything runs;
* :mod:`.summa` -- the 2-D block-cyclic matrix product;
* :mod:`.run` and :mod:`.pending` -- running a plan, resolving a pending sum;
* :mod:`.local` -- the batch-local product (whole matrices in every fragment);
* :mod:`.api` -- the public functions.
"""

from __future__ import annotations

from .api import dot, einsum, einsum_plan, inner, matmul, matmul_operator, outer, tensordot, vecdot
from .pending import resolve, settled
from .plan import EinsumPlan

__all__ = ["einsum", "einsum_plan", "EinsumPlan", "matmul", "matmul_operator", "tensordot", "vecdot", "dot", "inner", "outer",
           "resolve", "settled"]
