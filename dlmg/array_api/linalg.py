"""The standard's ``linalg`` extension.

``matmul``, ``tensordot``, ``vecdot`` and ``outer`` are dlmg's contractions
over any layouts, ``trace`` sums ``diagonal`` with the namespace's ``sum``
(:mod:`dlmg.array_api._products`), ``matrix_transpose`` is a view; the others
collect their operands onto one fragment (see :mod:`dlmg.array_api._collect`).
"""

from __future__ import annotations

from ._gathered import COLLECTED, collected
from ._manipulation import matrix_transpose
from ._products import matmul, outer, tensordot, trace, vecdot

__all__ = [*COLLECTED["linalg"], "matmul", "matrix_transpose", "outer", "tensordot", "trace", "vecdot"]

for _name in COLLECTED["linalg"]:
    globals()[_name] = collected(_name, f"linalg.{_name}")
del _name
