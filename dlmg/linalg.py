"""``dlmg.linalg``: the Array API namespace's ``linalg`` extension (:mod:`dlmg.array_api.linalg`).

The same functions under a shorter name: distributed where the layouts allow
(TSQR for tall-skinny and short-fat matrices, batch-local work where every
fragment holds whole matrices); docs/linalg-fft.md describes the algorithms.
"""

from __future__ import annotations

from .array_api.linalg import *  # noqa: F403  (one set of functions)
from .array_api.linalg import __all__  # noqa: F401
