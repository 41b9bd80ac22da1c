"""A whole contraction as one ``jax.jit`` of ``jnp.einsum`` over sharded arrays
(the einsum side of :class:`~dlmg.adapters.capabilities.Delegating` for JAX).

The fragments of each operand are joined, without a copy, into one
``jax.Array`` under the ``NamedSharding`` its layout names
(:meth:`dlmg.Layout.to_sharding`), the einsum runs as one XLA program over
every device with the result's sharding as ``out_shardings``, and the
result's shards are the result's fragments.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

from dlmg.errors import DeviceError, LayoutError

from ..capabilities import Delegation
from ._devices import device_of_native

if TYPE_CHECKING:  # pragma: no cover
    from dlmg.layout import Layout

__all__ = ["CALL", "einsum_program"]

#: What the plan says runs.
CALL = "jax.jit(jnp.einsum) over NamedShardings"


class _Program(NamedTuple):
    function: Any  # the jitted einsum
    shardings: tuple[Any, ...]  # one per operand
    shapes: tuple[tuple[int, ...], ...]
    counts: tuple[int, ...]  # fragments per operand
    order: tuple[Any, ...]  # the JAX device of each result fragment


def _run(program: _Program, arrays: Sequence[Any]) -> list[Any]:
    import jax

    joined, start = [], 0
    for sharding, shape, count in zip(program.shardings, program.shapes, program.counts):
        joined.append(jax.make_array_from_single_device_arrays(shape, sharding, list(arrays[start:start + count])))
        start += count
    result = program.function(*joined)
    shards = {s.device: s.data for s in result.addressable_shards}
    return [shards[d] for d in program.order]


# Kept per equation and layouts: building a sharding makes a mesh and checks it, which can
# take as long as a moderate product itself; the jitted function then keeps one executable
# per operand shapes. A program meets few such triples.
@lru_cache(maxsize=64)
def einsum_program(subscripts: str, operands: tuple["Layout", ...], out: "Layout") -> Delegation | None:
    """How JAX runs the contraction as one program, or ``None`` where a layout is no sharding."""
    import jax
    import jax.numpy as jnp

    every = (*operands, out)
    for layout in every:
        if any(layout.ranks) or layout.partial is not None:
            return None  # another process's devices, or a pending sum dlmg keeps
        if layout.element_strides is not None or layout.block_strides is not None:
            return None
    if len({frozenset(layout.devices) for layout in every}) != 1:
        return None  # one program runs on one set of devices
    try:
        shardings = tuple(layout.to_sharding() for layout in every)
    except (LayoutError, DeviceError):
        return None
    by_device = {device_of_native(d): d for d in shardings[-1].device_set}
    program = _Program(jax.jit(partial(jnp.einsum, subscripts), out_shardings=shardings[-1]), shardings[:-1],
                       tuple(tuple(lay.shape) for lay in operands), tuple(lay.nfragments for lay in operands),
                       tuple(by_device[d] for d in out.devices))
    return Delegation(CALL, partial(_run, program))
