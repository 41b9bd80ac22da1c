"""The standard's ``linalg`` extension: each function collects its operands onto one fragment
(see :mod:`dlmg.array_api._collect`), except ``matmul`` and ``matrix_transpose``, which run
fragment by fragment where the layouts allow."""

from __future__ import annotations

from ._gathered import COLLECTED, collected
from ._manipulation import matmul, matrix_transpose

__all__ = list(COLLECTED["linalg"])
_ = (matmul, matrix_transpose)  # re-exported

for _name in COLLECTED["linalg"]:
    if _name not in ("matmul", "matrix_transpose"):
        globals()[_name] = collected(_name, f"linalg.{_name}")
del _name
