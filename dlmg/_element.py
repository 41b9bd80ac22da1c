"""Reading one element of a distributed tensor: ``dt[i, j]``."""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

from .errors import FragmentError

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import DistributedTensor

__all__ = ["read_element"]


def read_element(dt: "DistributedTensor", index: Any) -> Any:
    """One element, read from a fragment of this process holding it (see ``DistributedTensor.__getitem__``)."""
    key = index if isinstance(index, tuple) else (index,)
    if any(k is Ellipsis or k is None or isinstance(k, slice) or getattr(k, "ndim", 0) for k in key):
        raise TypeError(
            f"index {index!r}: DistributedTensor reads single elements with ints only; "
            "gather() it for slicing"
        )
    if len(key) != dt.ndim:
        raise IndexError(f"index {index!r} has {len(key)} entries; the tensor has {dt.ndim} modes")
    idx = []
    for m, (k, n) in enumerate(zip(key, dt.shape)):
        if isinstance(k, bool):
            raise TypeError(f"index {index!r}: entry {m} is a bool, not an int")
        try:
            i = operator.index(k)
        except TypeError:
            raise TypeError(
                f"index {index!r}: DistributedTensor reads single elements with ints only; "
                "gather() it for slicing"
            ) from None
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for mode {m} of extent {n}")
        idx.append(i % n)
    pairs = dt.layout.global_to_local(tuple(idx))
    local = [(f, li) for f, li in pairs if dt.fragments[f].is_local]
    if not local:
        raise FragmentError(
            f"element {tuple(idx)} lies in fragments {[f for f, _ in pairs]}, none held by this process"
        )
    f, li = local[0]
    frag = dt.fragments[f]
    if frag.is_padded:
        offset = frag.layout.memory_offset(li)
        value = frag.adapter.as_strided(frag.memory, (), (), offset)
    else:
        value = frag.array[li]
    item = getattr(value, "item", None)
    return item() if callable(item) else value
