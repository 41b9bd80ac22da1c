"""Finding fragments by device or by the part of the tensor they hold.

``dt.fragments`` is in dlmg's order: column-major over the device grid, then
replica. Other libraries list their pieces in their own order (a sharded
``jax.Array``'s ``addressable_shards`` follow its mesh's device order), so
pair pieces by what they are -- their device, or the global slices they
cover -- never by position.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .device import as_device

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import DistributedTensor, Fragment

__all__ = ["fragment_on_device", "fragments_on_device", "fragment_holding"]


def fragments_on_device(self: "DistributedTensor", device: Any) -> tuple["Fragment", ...]:
    """The fragments on ``device`` (:meth:`DistributedTensor.fragments_on <dlmg.DistributedTensor.fragments_on>`)."""
    dev = as_device(device)
    return tuple(f for f in self.fragments if f.device == dev)


def fragment_on_device(self: "DistributedTensor", device: Any) -> "Fragment":
    """The one fragment on ``device`` (:meth:`DistributedTensor.fragment_for <dlmg.DistributedTensor.fragment_for>`)."""
    found = fragments_on_device(self, device)
    if len(found) == 1:
        return found[0]
    dev = as_device(device)
    if not found:
        raise LookupError(
            f"no fragment of this tensor sits on {dev}; its devices are "
            f"{', '.join(dict.fromkeys(str(d) for d in self.layout.devices))}"
        )
    raise LookupError(
        f"{len(found)} fragments sit on {dev} (fragments {[f.index for f in found]}); pick one with "
        "dt.fragments_on(device) or by the slices it covers: dt.fragment_at(index)"
    )


def _normalize(index: Any, shape: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    key = index if isinstance(index, tuple) else (index,)
    if len(key) != len(shape):
        raise ValueError(f"index {index!r} has {len(key)} entries; the tensor has {len(shape)} modes")
    out = []
    for m, (k, n) in enumerate(zip(key, shape)):
        if not isinstance(k, slice):
            raise TypeError(f"index {index!r}: entry {m} must be a slice (as a JAX shard's .index is)")
        start, stop, step = k.indices(n)
        if step != 1:
            raise ValueError(f"index {index!r}: entry {m} has step {step}; fragments cover contiguous ranges here")
        out.append((start, max(start, stop)))
    return tuple(out)


def _span(ranges: Any) -> tuple[int, int] | None:
    """The one range that consecutive block ranges make, or None when they leave gaps."""
    if not ranges:
        return None
    start, stop = ranges[0]
    for lo, hi in ranges[1:]:
        if lo != stop:
            return None
        stop = hi
    return (int(start), int(stop))


def fragment_holding(self: "DistributedTensor", index: Any, replica: int = 0) -> "Fragment":
    """The fragment holding the global slices ``index`` (:meth:`DistributedTensor.fragment_at <dlmg.DistributedTensor.fragment_at>`)."""
    want = _normalize(index, self.shape)
    for frag in self.fragments:
        if frag.replica != replica:
            continue
        spans = [_span(mode_ranges) for mode_ranges in frag.layout.ranges]
        if tuple(spans) == want:
            return frag
    raise LookupError(
        f"no fragment of replica {replica} covers exactly {index!r} of shape {self.shape}; "
        "fragments of block-cyclic layouts hold several ranges per mode (see frag.layout.ranges)"
    )
