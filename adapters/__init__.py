"""Framework adapters of dlmg (installed as ``dlmg.adapters``).

One small module (or package) per framework, each holding a single
:class:`Adapter` subclass that names the capabilities it offers
(:mod:`dlmg.adapters.capabilities`). Importing this package imports no
framework module: the registry loads a framework's adapter when that
framework is first used, and the adapter imports its framework only when one
of its methods first needs it.
"""

from ._base import (
    PROTOCOL_QUESTIONS,
    Adapter,
    AdapterCore,
    ArrayInfo,
    ProtocolHook,
    Traits,
    available,
    carries,
    holds_dtype,
    in_use,
    loose_traits,
    memory_range,
)
from . import builtin, capabilities

__all__ = [
    "PROTOCOL_QUESTIONS", "Adapter", "AdapterCore", "ArrayInfo", "ProtocolHook", "Traits", "available", "builtin",
    "capabilities", "carries", "holds_dtype", "in_use", "loose_traits", "memory_range",
]
