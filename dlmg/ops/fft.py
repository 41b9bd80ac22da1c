"""Batch-local FFTs along one mode: ``fft``, ``ifft``, ``rfft``, ``irfft``.

Each fragment's framework transforms the whole signals the fragment holds
(its array-API ``fft`` extension: ``numpy.fft``, ``torch.fft``,
``jax.numpy.fft``, ``cupy.fft``), on the fragment's device. The transformed
mode must be whole in every fragment (grid 1); every other mode may be
distributed. The result keeps the layout, with the transformed mode's extent
changed where the transform changes it (``n``; ``rfft``: ``n // 2 + 1``;
``irfft``: ``n``, by default ``2 * (m - 1)``). Replicas are kept (each copy
is transformed). Nothing is communicated.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from ._batch import require_whole, with_modes
from ._dtypes import FLOAT, INEXACT, require
from ._pending import guard
from .dispatch import is_distributed, map_fragments

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["fft", "ifft", "rfft", "irfft"]

_NORMS = (None, "backward", "ortho", "forward")


def _transform(kind: str, x: "DistributedTensor", n: int | None, axis: int, norm: str | None) -> "DistributedTensor":
    name = f"dlmg.fft.{kind}"
    if not is_distributed(x):
        raise TypeError(f"{name} takes a DistributedTensor, got {type(x).__name__}")
    x = guard(x, name)  # a pending reduction: its value
    if x.ndim == 0:
        raise ValueError(f"{name} needs a tensor of rank >= 1")
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{name}: axis must be an int, got {axis!r}") from None
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{name}: axis {axis} is out of bounds for a tensor of {x.ndim} modes")
    axis %= x.ndim
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of 'backward', 'ortho', 'forward' or None, got {norm!r}")
    norm = norm or "backward"
    if n is not None:
        n = operator.index(n)
        if n < 1:
            raise ValueError(f"{name}: n must be a positive int, got {n}")
    if kind == "rfft":
        require(name, (x.dtype,), FLOAT, "rfft takes real floating input; cast with astype first, or use fft")
    else:
        require(name, (x.dtype,), INEXACT, "cast to a floating type with astype first")
    require_whole(name, x.layout, (axis,))
    m = x.shape[axis]
    if kind == "irfft":
        length = n if n is not None else 2 * (m - 1)
        extent = length
        if length < 1:
            raise ValueError(f"{name}: the output length {length} (from an input extent of {m}) is not positive; pass n")
    else:
        length = n if n is not None else m
        extent = length // 2 + 1 if kind == "rfft" else length
        if length < 1:
            raise ValueError(f"{name}: cannot transform an empty mode (extent {m}) without n")
    out_layout = with_modes(x.layout, ((axis, extent),), True)

    out_dtype = _out_dtype(kind, x.dtype)

    def per_fragment(xp: Any, a: Any) -> Any:
        if 0 in a.shape:  # nothing to transform (some FFT libraries fail on empty batches)
            import array_api_compat

            shape = list(a.shape)
            shape[axis] = extent
            return xp.zeros(tuple(shape), dtype=getattr(xp, out_dtype), device=array_api_compat.device(a))
        return getattr(xp.fft, kind)(a, n=n, axis=axis, norm=norm)

    out = map_fragments(per_fragment, (x,), name=name, out_layout=out_layout)
    assert out is not None
    return out


_COMPLEX = {"float16": "complex64", "float32": "complex64", "float64": "complex128",
            "complex64": "complex64", "complex128": "complex128"}
_REAL = {v: k for k, v in _COMPLEX.items() if k.startswith("float") and k != "float16"}


def _out_dtype(kind: str, dtype: str) -> str:
    """The result dtype of a transform of ``dtype`` input (for empty fragments)."""
    complex_type = _COMPLEX.get(dtype, "complex64")
    return _REAL[complex_type] if kind == "irfft" else complex_type


def _doc(kind: str, what: str, extent: str, dtypes: str) -> str:
    return f"""{what} along ``axis``, fragment by fragment.

    Parameters
    ----------
    x : DistributedTensor
        {dtypes} The mode ``axis`` must be whole in every fragment (grid 1);
        the other modes may be distributed.
    n : int, optional
        Length of the transform (the input is cropped or zero-padded), as in
        the array API standard.
    axis : int
        The transformed mode (negative values count from the end).
    norm : {{None, "backward", "ortho", "forward"}}
        Normalisation, as in the array API standard (``None`` is "backward").

    Returns
    -------
    DistributedTensor
        ``x``'s layout with the extent of ``axis`` set to {extent}.

    Raises
    ------
    LayoutError
        When ``axis`` is distributed (the message suggests a layout for ``redistribute``).
    DtypeError
        For input types the transform does not take.
    """


def fft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = None) -> "DistributedTensor":
    return _transform("fft", x, n, axis, norm)


def ifft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = None) -> "DistributedTensor":
    return _transform("ifft", x, n, axis, norm)


def rfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = None) -> "DistributedTensor":
    return _transform("rfft", x, n, axis, norm)


def irfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = None) -> "DistributedTensor":
    return _transform("irfft", x, n, axis, norm)


fft.__doc__ = _doc("fft", "One-dimensional discrete Fourier transform", "``n`` (default: unchanged)",
                   "Real or complex floating values (complex results).")
ifft.__doc__ = _doc("ifft", "One-dimensional inverse discrete Fourier transform", "``n`` (default: unchanged)",
                    "Real or complex floating values (complex results).")
rfft.__doc__ = _doc("rfft", "One-dimensional discrete Fourier transform of real input",
                    "``n // 2 + 1`` (``n`` defaults to the input extent)", "Real floating values.")
irfft.__doc__ = _doc("irfft", "Inverse of :func:`rfft` (real output)",
                     "``n`` (default ``2 * (m - 1)`` for an input extent ``m``)",
                     "Complex (or real) floating values, the half spectrum.")
