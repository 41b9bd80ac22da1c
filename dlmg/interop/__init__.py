"""Interoperation with other frameworks' own distributed arrays.

Each submodule converts between one framework's sharded array and
:class:`~dlmg.DistributedTensor` / :class:`~dlmg.Layout`: :mod:`.jax` for
sharded ``jax.Array`` and ``jax.sharding``. Framework names are at home here
and in ``adapters/``, nowhere else in dlmg. No framework is imported until a
function is called.
"""

from __future__ import annotations

from .jax import (
    from_jax,
    jax_compatible_layout,
    jax_layout_problems,
    layout_from_sharding,
    sharding_from_layout,
    to_jax,
    to_sharding,
)

__all__ = [
    "from_jax",
    "to_jax",
    "layout_from_sharding",
    "sharding_from_layout",
    "to_sharding",
    "jax_layout_problems",
    "jax_compatible_layout",
]


def _register_methods() -> None:
    """``DistributedTensor.to_jax``, through the tensor's extension point."""
    from ..tensor import DistributedTensor

    if not hasattr(DistributedTensor, "to_jax"):
        DistributedTensor.register_method("to_jax", to_jax)


_register_methods()
