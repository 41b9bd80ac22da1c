"""Batch-local linear algebra on distributed tensors (``dlmg.linalg.cholesky``, ``dlmg.linalg.matmul``).

See :mod:`dlmg.ops.linalg` for the rules: the matrix modes must be whole in
every fragment, batch modes may be distributed, each fragment's framework
does its own matrices.
"""

from __future__ import annotations

from .ops.linalg import cholesky, matmul

__all__ = ["cholesky", "matmul"]
