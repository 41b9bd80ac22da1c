"""Interoperation with other frameworks' own distributed arrays.

Each submodule converts between one kind of distributed array and
:class:`~dlmg.DistributedTensor` / :class:`~dlmg.Layout`: :mod:`.jax` for
sharded ``jax.Array`` and ``jax.sharding``; :mod:`.dtensor` for PyTorch's
``DTensor``; :mod:`.partitioned` for the ``__partitioned__`` protocol;
:mod:`.dcp` for PyTorch's distributed checkpoints (DCP); :mod:`.cutensor` for cuTENSORMg and cuTENSORMp tensor descriptors.
Framework names are at home here and in ``adapters/``, nowhere else in dlmg. No framework is imported until a
function is called.
"""

from __future__ import annotations

from .cutensor import cutensormg, cutensormp, layout_from_cutensormg
from .dtensor import from_dtensor, to_dtensor
from .dcp import dcp_load, dcp_save, dcp_state_dict
from .jax import (
    from_jax,
    jax_compatible_layout,
    jax_layout_problems,
    layout_from_sharding,
    sharding_from_layout,
    to_jax,
    to_sharding,
)
from .partitioned import from_partitioned, partitioned

__all__ = [
    "from_jax",
    "to_jax",
    "layout_from_sharding",
    "sharding_from_layout",
    "to_sharding",
    "jax_layout_problems",
    "jax_compatible_layout",
    "from_dtensor",
    "to_dtensor",
    "dcp_save",
    "dcp_load",
    "dcp_state_dict",
    "from_partitioned",
    "partitioned",
    "cutensormg",
    "cutensormp",
    "layout_from_cutensormg",
]

