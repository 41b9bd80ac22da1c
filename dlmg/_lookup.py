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

__all__ = ["fragment_for", "fragments_on", "fragment_at"]


def fragments_on(self: "DistributedTensor", device: Any) -> tuple["Fragment", ...]:
    """The fragments whose layout slot is ``device``, in fragment order.

    Parameters
    ----------
    device : Device, str, int or a framework's device object
        ``"cpu:3"``, ``dlmg.Device("cuda", 1)``, a ``jax.Device``, a
        ``torch.device``...

    Returns
    -------
    tuple of Fragment
        Empty when no fragment sits on ``device``.
    """
    dev = as_device(device)
    return tuple(f for f in self.fragments if f.device == dev)


def fragment_for(self: "DistributedTensor", device: Any) -> "Fragment":
    """The one fragment on ``device``: ``dt.fragment_for(shard.device)``.

    Raises
    ------
    LookupError
        When no fragment, or more than one, sits on ``device`` (the message
        lists them; use :meth:`fragments_on` or :meth:`fragment_at` then).
    """
    found = fragments_on(self, device)
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


def fragment_at(self: "DistributedTensor", index: Any, replica: int = 0) -> "Fragment":
    """The fragment holding exactly the global slices ``index``.

    ``index`` is a tuple of slices, one per mode, such as a JAX shard's
    ``shard.index``: ``dt.fragment_at(shard.index)``. Only fragments holding
    one contiguous range per mode (slabs, grids of single blocks) can match.

    Parameters
    ----------
    index : tuple of slice
        The global ranges, ``slice(None)`` for a whole mode.
    replica : int
        Which copy of a replicated layout (0 by default).

    Raises
    ------
    LookupError
        When no fragment of that replica covers exactly those ranges.
    """
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
