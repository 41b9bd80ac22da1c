"""Where a fragment's elements sit in the saved array: one index per mode.

Along every mode a fragment holds its blocks' elements in increasing global
order, so the fragment is the outer product of its per-mode global indices
(NumPy's ``x[np.ix_(...)]``, TensorStore's ``oindex``). Where those indices
form one run the index is a slice, which every library reads and writes
fastest.
"""

from __future__ import annotations

from typing import Any

from ..layout import FragmentLayout

__all__ = ["fragment_index"]


def fragment_index(frag: FragmentLayout) -> tuple[Any, ...]:
    """Per mode, a ``slice`` (one run of global indices) or the sorted int64 indices."""
    index: list[Any] = []
    for m, ranges in enumerate(frag.ranges):
        if not ranges:
            index.append(slice(0, 0))
        elif all(ranges[k][0] == ranges[k - 1][1] for k in range(1, len(ranges))):
            index.append(slice(ranges[0][0], ranges[-1][1]))
        else:
            index.append(frag.owned_indices(m))
    return tuple(index)
