"""Finding the object a dotted name such as ``dlmg.registry.get_adapter`` names.

Shared by the API reference's Sphinx extension (:mod:`public_names`) and the test
that every public name is documented (tests/test_api_reference.py); imports no
Sphinx, so the test runs without the docs' extras.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["MISSING", "lookup"]

#: What :func:`lookup` answers for a name that names nothing.
MISSING: Any = object()


def lookup(dotted: str) -> Any:
    """The object ``dotted`` names (a module, or an attribute path below the longest
    importable module prefix), else :data:`MISSING`."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return MISSING
        return obj
    return MISSING
