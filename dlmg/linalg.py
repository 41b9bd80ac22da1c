"""Batch-local linear algebra on distributed tensors (``dlmg.linalg.cholesky``, ``dlmg.linalg.matmul``).

``cholesky`` (see :mod:`dlmg.ops.linalg`) needs the matrix modes whole in
every fragment; ``matmul``, ``tensordot`` and ``vecdot`` take any layouts
(see :mod:`dlmg.ops.contract`).
"""

from __future__ import annotations

from .ops.contract import matmul, tensordot, vecdot
from .ops.linalg import cholesky

__all__ = ["cholesky", "matmul", "tensordot", "vecdot"]
