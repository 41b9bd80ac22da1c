"""Array habits: ``zeros_like`` and friends, ``isclose``/``allclose``, ``round(x)``, ``x.device``.

The ``*_like`` functions keep each fragment's framework and device (a tensor
of torch and JAX fragments gives one of torch and JAX fragments) and the
layout's distribution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..device import Placement
from ..dtypes import canonical
from .dispatch import is_distributed, map_fragments
from .pointwise import elementwise
from .reductions import all as all_

if TYPE_CHECKING:  # pragma: no cover
    from ..device import Device
    from ..tensor import DistributedTensor

__all__ = ["empty_like", "zeros_like", "ones_like", "full_like", "isclose", "allclose", "round", "device_of"]


def _like(x: "DistributedTensor", name: str, fill: Any, dtype: Any) -> "DistributedTensor":
    if not is_distributed(x):
        raise TypeError(f"dlmg.{name} takes a DistributedTensor, got {type(x).__name__}")
    target = x.dtype if dtype is None else canonical(dtype)

    def per_fragment(xp: Any, a: Any) -> Any:
        kind = getattr(xp, target)
        if fill is None:
            return xp.empty_like(a, dtype=kind)
        return xp.full_like(a, fill, dtype=kind)

    out = map_fragments(per_fragment, (x,), name=f"dlmg.{name}")
    assert out is not None
    return out


def empty_like(x: "DistributedTensor", /, *, dtype: Any = None) -> "DistributedTensor":
    """An uninitialised tensor of ``x``'s layout, frameworks and devices (JAX fragments are zeros)."""
    return _like(x, "empty_like", None, dtype)


def zeros_like(x: "DistributedTensor", /, *, dtype: Any = None) -> "DistributedTensor":
    """Zeros in ``x``'s layout, each fragment in its framework on its device."""
    return _like(x, "zeros_like", 0, dtype)


def ones_like(x: "DistributedTensor", /, *, dtype: Any = None) -> "DistributedTensor":
    """Ones in ``x``'s layout, each fragment in its framework on its device."""
    return _like(x, "ones_like", 1, dtype)


def full_like(x: "DistributedTensor", /, fill_value: Any, *, dtype: Any = None) -> "DistributedTensor":
    """``fill_value`` everywhere in ``x``'s layout, each fragment in its framework on its device."""
    return _like(x, "full_like", fill_value, dtype)


def isclose(
    a: Any, b: Any, /, *, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False
) -> "DistributedTensor":
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (NumPy's ``isclose``; equal infinities are close).

    ``a`` and ``b`` are distributed tensors of one layout, or one of them a
    scalar or 0-d array.
    """

    def per_fragment(xp: Any, x: Any, y: Any) -> Any:
        close = (x == y) | (xp.abs(x - y) <= atol + rtol * xp.abs(y))
        if equal_nan:
            close = close | (xp.isnan(x) & xp.isnan(y))
        return close

    out = map_fragments(per_fragment, (a, b), name="dlmg.isclose")
    assert out is not None
    return out


def allclose(a: Any, b: Any, /, *, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether every element is :func:`isclose` (a Python bool)."""
    return bool(all_(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def round(x: Any, /, decimals: int = 0) -> "DistributedTensor":  # noqa: A001
    """Round half to even, elementwise, to ``decimals`` decimal places (NumPy's
    ``np.round(x, decimals)``; the array API's ``round`` is ``decimals=0``).

    Parameters
    ----------
    x : DistributedTensor
    decimals : int
        Places after the point (negative: before it).

    Returns
    -------
    DistributedTensor
    """
    if not decimals:
        return elementwise("round", x)
    scale = 10.0 ** decimals

    def per_fragment(xp: Any, a: Any) -> Any:
        return xp.round(a * scale) / scale

    out = map_fragments(per_fragment, (x,), name="round")
    assert out is not None
    return out



def device_of(self: "DistributedTensor") -> "Device | Placement":
    """The array API ``device``: the one device every fragment is on, or, for a tensor
    on several devices (or processes), their :class:`~dlmg.device.Placement`.

    Creation functions take either back (``xp.zeros(n, device=x.device)``); see
    ``.devices`` for the device of every fragment.
    """
    layout = self.layout
    pairs = tuple(dict.fromkeys(zip(layout.devices, layout.ranks)))
    if len(pairs) == 1:
        return pairs[0][0]
    ranks = tuple(r for _, r in pairs)
    return Placement(tuple(d for d, _ in pairs), ranks if any(ranks) else ())
