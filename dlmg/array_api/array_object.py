"""The array object's side of the standard, and NumPy's habits: what the methods of
:class:`~dlmg.DistributedTensor` run.

``__array_namespace__``, indexing and assignment, ``to_device``, ``mT``,
conversions of one-element tensors (``int()``, ``float()``, ``item()``),
``tolist``, ``copy``/``flatten``/``ravel``, ``copy.copy``/``copy.deepcopy``, and
``__dlpack__`` where one buffer holds the whole tensor.

Each method that reads or writes values passes :func:`~dlmg.ops._pending.guard` first:
a tensor holding a pending reduction is read as its value, and assignment into one
is refused.
"""

from __future__ import annotations

import sys
from typing import Any

from ..distributed import state as process_state
from ..errors import DLPackError
from ..ops._pending import guard
from ..ops.pointwise import astype as _astype
from ._indexing import getitem as index_read, setitem as index_write
from ._creation import layout_of
from ._manipulation import reshape

__all__ = [
    "namespace", "to_device", "item", "as_int", "as_float", "as_complex", "as_index", "tolist", "copy", "getitem",
    "setitem", "flatten", "ravel", "rows", "dlpack", "dlpack_device",
]


def namespace(self: Any, /, *, api_version: str | None = None) -> Any:
    """The array API namespace of distributed tensors, :mod:`dlmg.array_api`."""
    if api_version is not None and api_version not in ("2021.12", "2022.12", "2023.12", "2024.12"):
        raise ValueError(f"api_version {api_version!r} is not one dlmg.array_api implements (2024.12 and earlier)")
    return sys.modules["dlmg.array_api"]


def to_device(self: Any, device: Any, /, *, stream: Any = None) -> Any:
    """The tensor laid out on ``device`` (one fragment there, or a placement's slab)."""
    self = guard(self, "to_device")
    layout = layout_of(self.shape, device)
    return self if layout.same_distribution(self.layout) else self.redistribute(layout)


def _one(self: Any, what: str) -> Any:
    if self.size != 1:
        raise TypeError(f"only a tensor of one element converts to {what}; this one has shape {self.shape}")
    self = guard(self, what)
    holders = {rank for frag, rank in zip(self.layout.fragments, self.layout.ranks) if frag.size}
    if holders >= set(range(process_state.world_size())):  # (decided from the layout: the same on every process)
        for frag in self.fragments:
            if frag.is_local and frag.size == 1:
                return frag.array.reshape(()) if frag.array.ndim else frag.array
    return self.gather().reshape(())  # across processes: every process takes part


def item(self: Any) -> Any:
    """The one element as a Python scalar (``int``, ``float``, ``complex`` or ``bool``)."""
    value = _one(self, "a Python scalar")
    got = value.item() if hasattr(value, "item") else value
    return got


def as_int(self: Any) -> int:
    return int(item(self))


def as_float(self: Any) -> float:
    return float(item(self))


def as_complex(self: Any) -> complex:
    return complex(item(self))


def as_index(self: Any) -> int:
    if self.dtype.kind not in "iu":
        raise TypeError(f"only integer tensors convert to an index; this one is {self.dtype}")
    return int(item(self))


def tolist(self: Any) -> Any:
    """The elements as nested Python lists (gathered; across processes every process gets them)."""
    return self.gather(framework="numpy").tolist()


def copy(self: Any) -> Any:
    """A copy: same layout, frameworks and devices, new memory (of the value, for a pending
    reduction: its layout without the pending replicas)."""
    value = guard(self, "copy")
    return _astype(value, value.dtype, copy=True)


def getitem(self: Any, key: Any, /) -> Any:
    """``x[key]``: the standard's indexing; basic keys of a pending reduction keep it (each
    addend indexed alike), index arrays and masks read its value."""
    return index_read(self, key)


def setitem(self: Any, key: Any, value: Any, /) -> None:
    """``x[key] = value``: the standard's assignment; refused into a pending reduction."""
    guard(self, "assignment x[key] = value", writes=True)
    index_write(self, key, guard(value, "assignment x[key] = value"))


def flatten(self: Any) -> Any:
    """The elements as a new 1-D tensor in row-major order (always a copy, as NumPy's)."""
    flat = reshape(self, (self.size,))
    return copy(flat) if _shares(flat, self) else flat


def _shares(a: Any, b: Any) -> bool:
    for fa, fb in zip(a.fragments, b.fragments):
        if fa.is_local and fb.is_local and fa.size and fa.adapter.traits.mutable:
            if fa.adapter.data_ptr(fa.array) == fb.adapter.data_ptr(fb.array):
                return True
    return False


def ravel(self: Any) -> Any:
    """The elements as a 1-D tensor in row-major order (a view where the layout allows)."""
    return reshape(self, (self.size,))


def rows(self: Any) -> Any:
    """The sub-tensors along mode 0, ``x[0]``, ``x[1]``... (views where the layout allows), as NumPy iterates."""
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d distributed tensor")
    return _rows(guard(self, "iteration"))  # (resolved once, on entry, by every process alike)


def _rows(x: Any) -> Any:
    for i in range(x.shape[0]):
        yield x[i]


def dlpack(self: Any, /, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
               copy: bool | None = None) -> Any:
    """The one buffer of a tensor held by one fragment; refused (``BufferError``) otherwise."""
    frag = _single(self)
    kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device),
                                ("copy", copy)) if v is not None}
    return frag.__dlpack__(**kwargs)


def dlpack_device(self: Any) -> tuple[int, int]:
    return _single(self).__dlpack_device__()


def _single(self: Any) -> Any:
    if self.layout.nfragments == 1 and self.fragments[0].is_local and not self.fragments[0].is_padded:
        return self.fragments[0]
    raise DLPackError(
        f"a DistributedTensor of {self.layout.nfragments} fragments cannot be exported as one DLPack tensor "
        "(no single buffer holds it; the array API leaves distributed arrays out of the protocol); gather() "
        "it into one array, or export single fragments: any framework's from_dlpack(dt.fragments[i])"
    )
