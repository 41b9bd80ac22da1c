"""Whole redistributions handed to JAX: one ``jax.device_put`` of the sharded array.

The :class:`~dlmg.adapters.capabilities.Delegating` side of the JAX adapter.
Where every fragment of a tensor is a JAX array and both layouts are ones a
``NamedSharding`` expresses (every split mode cut evenly into one contiguous
piece per device, each device holding one piece), the fragments are one
sharded ``jax.Array`` already: ``jax.make_array_from_single_device_arrays``
assembles it over their buffers without a copy, and ``jax.device_put`` to the
target sharding is JAX's own reshard, whose shards become the new fragments as
they are. Other layouts (block-cyclic, uneven, two fragments on one device)
keep dlmg's plan.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from dlmg.errors import DeviceError, LayoutError

from .._common import is_c_contiguous
from ..capabilities import Delegating, Delegation
from ._devices import device_of_native
from ._einsum import einsum_program

if TYPE_CHECKING:  # pragma: no cover
    from dlmg.layout import Layout

__all__ = ["JaxDelegation", "Reshard", "reshard"]

#: What the plan says runs.
DEVICE_PUT = "jax.device_put"


class Reshard(NamedTuple):
    """A redistribution JAX makes itself: the source and target shardings, the
    JAX device of each target fragment, and the global shape."""

    source: Any
    target: Any
    order: tuple[Any, ...]
    shape: tuple[int, ...]


class JaxDelegation(Delegating):
    """:class:`Delegating` for JAX: redistributions between layouts that shardings express."""

    def delegated_redistribution(self, source: "Layout", target: "Layout", dtype: str) -> Delegation | None:
        """One ``jax.device_put`` of the fragments assembled as one sharded array
        (no copy), where both layouts are ``NamedSharding``s of this process's JAX
        devices; ``None`` elsewhere. ``run`` declines (``None``) arrays whose
        buffers are not C-ordered (transposed imports)."""
        found = reshard(source, target)
        return None if found is None else Delegation(DEVICE_PUT, partial(self._reshard, found))

    def delegated_einsum(self, subscripts: str, operands: tuple["Layout", ...], out: "Layout",
                         dtype: str) -> Delegation | None:
        """One ``jax.jit`` of ``jnp.einsum`` over the operands assembled as sharded
        arrays (no copy), with ``out``'s sharding as ``out_shardings``, where every
        layout is a ``NamedSharding`` over one set of this process's JAX devices."""
        return einsum_program(subscripts, operands, out)

    def _reshard(self, how: Reshard, arrays: Sequence[Any]) -> list[Any] | None:
        import jax

        for a in arrays:  # an imported transposed view keeps its layout: no shard of a sharded array
            if not is_c_contiguous(a.shape, self.strides_of(a)):  # type: ignore[attr-defined]
                return None
        whole = jax.make_array_from_single_device_arrays(how.shape, how.source, list(arrays))
        moved = jax.device_put(whole, how.target)
        shards = {s.device: s.data for s in moved.addressable_shards}
        return [shards[d] for d in how.order]


# Kept per pair of layouts: finding the shardings builds a mesh and checks every
# device's piece, a sizeable part of the device_put it prepares; a program meets
# few pairs.
@lru_cache(maxsize=128)
def reshard(source: "Layout", target: "Layout") -> Reshard | None:
    """How JAX moves arrays of ``source`` to ``target`` in one ``device_put``, or ``None``."""
    for layout in (source, target):
        if any(layout.ranks) or layout.element_strides is not None or layout.block_strides is not None:
            return None  # another process's devices, or strides JAX arrays cannot have
        if layout.partial is not None:
            return None  # a pending sum is resolved by dlmg, not moved
    try:
        src, dst = source.to_sharding(), target.to_sharding()
    except (LayoutError, DeviceError):  # no sharding expresses it, or no JAX device is there
        return None
    by_device = {device_of_native(d): d for d in dst.device_set}
    return Reshard(src, dst, tuple(by_device[d] for d in target.devices), tuple(source.shape))
