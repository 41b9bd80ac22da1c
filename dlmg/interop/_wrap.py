"""Wrapping arrays of layouts spread over processes: fragments with their ranks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..layout import Layout
from ..construct import from_fragments

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["wrap_fragments"]


def wrap_fragments(
    arrays: Mapping[int, Any], layout: Layout, ranks: Sequence[int], dtype: Any = None
) -> "DistributedTensor":
    """:func:`dlmg.from_fragments` of this process's ``arrays`` in ``layout``, whose
    fragment ``i`` belongs to process ``ranks[i]``."""
    return from_fragments(arrays, layout.replace(ranks=tuple(ranks)), dtype=dtype)
