"""The built-in adapters: the one table that names the frameworks dlmg ships adapters for.

:mod:`dlmg.registry` reads this table (beside the entry-point group
``dlmg.adapters`` and adapters registered at run time); the adapters read it
only to recognise another built-in framework's arrays (a producer handed to
``from_dlpack`` is then described by its own adapter instead of being
exported once to be read). Imports run one way: the registry imports the
adapters, no adapter imports the registry, and nothing here imports a
framework or an adapter module before one is asked for.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import Any

from ._base import Adapter

__all__ = ["BUILTIN_ADAPTERS", "BUILTIN_MODULES", "builtin_adapter", "known_adapter"]

#: The built-in adapters: framework name -> ``"module:Class"``.
BUILTIN_ADAPTERS: dict[str, str] = {
    "numpy": "dlmg.adapters.numpy:NumpyAdapter",
    "torch": "dlmg.adapters.torch:TorchAdapter",
    "jax": "dlmg.adapters.jax:JaxAdapter",
    "cupy": "dlmg.adapters.cupy:CupyAdapter",
    "dlpack": "dlmg.adapters.generic:GenericAdapter",
}
#: The top-level modules whose array types each built-in adapter owns (its ``modules``):
#: finding an array's adapter loads no built-in adapter that cannot own it.
BUILTIN_MODULES: dict[str, tuple[str, ...]] = {
    "numpy": ("numpy",),
    "torch": ("torch",),
    "jax": ("jaxlib", "jax"),
    "cupy": ("cupy", "cupy_backends"),
}


@lru_cache(maxsize=None)
def builtin_adapter(name: str) -> Adapter:
    """The one instance of the built-in adapter ``name`` (a key of :data:`BUILTIN_ADAPTERS`),
    its module loaded now.

    Raises
    ------
    KeyError
        For a name that is no built-in adapter's.
    """
    module_name, _, attr = BUILTIN_ADAPTERS[name].partition(":")
    adapter: Adapter = getattr(importlib.import_module(module_name), attr)()
    return adapter


def known_adapter(obj: Any) -> Adapter | None:
    """The built-in adapter that owns ``obj`` as one of its framework's arrays, or
    ``None`` (an object of another framework, or no array: such producers are read
    through DLPack). Loads only the adapter whose type modules name ``obj``'s."""
    adapter = _builtin_for_type(type(obj))  # type: ignore[arg-type]  # classes are hashable
    return adapter if adapter is not None and adapter.owns(obj) else None


@lru_cache(maxsize=256)
def _builtin_for_type(cls: type) -> Adapter | None:
    """The built-in adapter whose type modules include ``cls``'s top-level module."""
    top = cls.__module__.partition(".")[0]
    for name, modules in BUILTIN_MODULES.items():
        if top in modules:
            return builtin_adapter(name)
    return None
