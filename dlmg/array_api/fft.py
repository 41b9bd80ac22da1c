"""The standard's ``fft`` extension: each transform collects its operand onto one fragment
(see :mod:`dlmg.array_api._collect`); ``fftfreq`` and ``rfftfreq`` are laid out by the
default layout policy."""

from __future__ import annotations

from typing import Any

from ._creation import default_float, from_host
from ._gathered import COLLECTED, collected

__all__ = list(COLLECTED["fft"]) + ["fftfreq", "rfftfreq"]

for _name in COLLECTED["fft"]:
    globals()[_name] = collected(_name, f"fft.{_name}")
del _name


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of an ``n``-point transform."""
    import numpy as np

    return from_host(np.fft.fftfreq(n, d).astype(dtype or default_float()), device)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of an ``n``-point real transform."""
    import numpy as np

    return from_host(np.fft.rfftfreq(n, d).astype(dtype or default_float()), device)
