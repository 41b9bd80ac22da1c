"""Framework adapters of dlmg (installed as ``dlmg.adapters``).

One small module per framework, each holding a single :class:`Adapter`
subclass. A module here imports its framework only when one of its methods
first needs it, never at import time.
"""

from ._base import Adapter

__all__ = ["Adapter"]
