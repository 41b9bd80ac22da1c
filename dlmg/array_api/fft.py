"""The standard's ``fft`` extension on distributed tensors, also ``dlmg.fft``.

The transforms are those of :mod:`dlmg.ops.fft`: along whole modes each fragment's
framework transforms what it holds (nothing moves); split modes are made whole by
all-to-all transposes (slab and pencil decompositions, the four-step decomposition for a
1-D tensor), and nothing is collected. Each transform takes one keyword beyond the
standard's, ``transposed_out`` (default ``False``: the result is laid out like the
input). ``fftfreq`` and ``rfftfreq`` are created in a layout: the default layout policy's,
the one ``device=`` asks for, or the :class:`~dlmg.Layout` given as ``device``, each
fragment computing its own elements.
"""

from __future__ import annotations

from typing import Any

from ..layout import Layout
from ..ops import fft as _impl
from ..ops.fft import (
    fft, fftn, fftshift, hfft, ifft, ifftn, ifftshift, ihfft, irfft, irfftn, rfft, rfftn,
)
from ..dtypes import canonical
from ._creation import default_float, layout_of
from ._policy import get_default_layout

__all__ = [
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
    "fftfreq", "rfftfreq", "fftshift", "ifftshift",
]


def _frequencies(n: int, d: float, dtype: Any, device: Any, real: bool) -> Any:
    n = int(n)
    if n < 1:
        raise ValueError(f"{'rfftfreq' if real else 'fftfreq'}: n must be a positive int, got {n}")
    extent = n // 2 + 1 if real else n
    layout = device if isinstance(device, Layout) else layout_of((extent,), device)
    name = str(canonical(dtype)) if dtype is not None else default_float()
    return _impl.fftfreq(n, d=d, dtype=name, layout=layout, framework=get_default_layout().framework, real=real)


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of an ``n``-point transform: ``[0, 1, ..., -1] / (d * n)``.

    Parameters
    ----------
    n : int
        The transform length.
    d : float
        The sample spacing.
    dtype : dtype, optional
        A real floating dtype (the default float by default).
    device : Device, str, Placement or Layout, optional
        Where the tensor lives: as the standard's creation functions, or a 1-D
        :class:`~dlmg.Layout` of extent ``n``. Each fragment computes its own elements.
    """
    return _frequencies(n, d, dtype, device, False)


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: Any = None) -> Any:
    """The sample frequencies of :func:`rfft`: ``[0, 1, ..., n // 2] / (d * n)``.

    Parameters are those of :func:`fftfreq`; a ``Layout`` given as ``device`` has extent
    ``n // 2 + 1``.
    """
    return _frequencies(n, d, dtype, device, True)
