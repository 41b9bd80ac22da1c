"""A whole contraction as one ``jax.jit`` of ``jnp.einsum`` over sharded arrays
(:class:`~dlmg.adapters.capabilities.ShardedEinsum` for the JAX adapter).

The fragments of each operand are joined, without a copy, into one
``jax.Array`` under the ``NamedSharding`` its layout names
(:meth:`dlmg.Layout.to_sharding`), the einsum runs as one XLA program over
every device with the result's sharding as ``out_shardings``, and the
result's shards are the fragments of the result's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache, partial
from typing import Any

from dlmg.errors import DeviceError, LayoutError
from dlmg.layout import Layout

from ..capabilities import ShardedEinsum
from ._devices import native_device

__all__ = ["JaxShardedEinsum"]

CALL = "jax.jit(jnp.einsum) over NamedShardings"


# A sharding per layout: building the mesh and checking it takes milliseconds (about 5 ms for
# 8 CPU devices), as long as a 1024 x 1024 float32 product of row slabs on 8 CPU devices; a
# program's operands and result are a handful of layouts, so 64 covers many programs.
@lru_cache(maxsize=64)
def _sharding(layout: Layout) -> Any:
    try:
        return layout.to_sharding()
    except (LayoutError, DeviceError):
        return None


# One jitted function per equation and result sharding (jax.jit then keeps one executable per
# operand shapes and shardings); 64 equations in use at once are plenty.
@lru_cache(maxsize=64)
def _program(subscripts: str, out: Any) -> Any:
    import jax
    import jax.numpy as jnp

    return jax.jit(partial(jnp.einsum, subscripts), out_shardings=out)


class JaxShardedEinsum(ShardedEinsum):
    """The JAX adapter's :class:`ShardedEinsum`: one process, layouts JAX expresses as
    ``NamedSharding`` s over one set of devices, no pending sums."""

    def sharded_einsum_call(self, layouts: tuple[Layout, ...], out: Layout) -> str | None:
        """:data:`CALL` when every layout is a sharding over the same devices, else ``None``."""
        every = (*layouts, out)
        if any(lay.partial is not None or lay.nprocesses > 1 for lay in every):
            return None
        if len({frozenset(lay.devices) for lay in every}) != 1:
            return None  # one program runs on one set of devices
        return CALL if all(_sharding(lay) is not None for lay in every) else None

    def sharded_einsum(self, subscripts: str, operands: Sequence[tuple[Layout, Sequence[Any]]],
                       out: Layout) -> list[Any] | None:
        """Join, run one program, hand back the result's shards in ``out``'s order."""
        import jax

        if self.sharded_einsum_call(tuple(lay for lay, _ in operands), out) is None:
            return None
        arrays = [jax.make_array_from_single_device_arrays(lay.shape, _sharding(lay), list(frags))
                  for lay, frags in operands]
        result = _program(subscripts, _sharding(out))(*arrays)
        by_device = {shard.device: shard.data for shard in result.addressable_shards}
        return [by_device[native_device(d)] for d in out.devices]
