"""Data movement: what turns a plan into moved bytes, in one process and across processes.

Plans (:mod:`dlmg.plans`) say what to copy, as data over layouts; this package
moves the bytes and makes the tensors. Its parts, from the bottom:

* :mod:`~dlmg.movement.transfer` -- one array handed to another framework or
  device, and waiting for queued work;
* :mod:`~dlmg.movement.copies` -- running a plan's copies (:class:`Buffer`,
  :func:`run_copies`, :func:`run_jobs`) in whichever framework can view the
  memory;
* :mod:`~dlmg.movement.sources` -- a tensor's fragments as copy sources;
* :mod:`~dlmg.movement.destinations` -- allocating destinations, pairing copies
  with them, finishing fragments;
* :mod:`~dlmg.movement.exchange` -- packing, exchanging and unpacking the
  messages of a cross-process move;
* :mod:`~dlmg.movement.rearrange` -- moves a framework without views makes itself;
* :mod:`~dlmg.movement.delegated` -- whole moves handed to the framework owning
  every fragment (:func:`delegation` turns them off);
* :mod:`~dlmg.movement.across` -- gather, scatter and redistribution across
  processes;
* :mod:`~dlmg.movement.gathering`, :mod:`~dlmg.movement.scattering`,
  :mod:`~dlmg.movement.relayout`, :mod:`~dlmg.movement.handover` -- the four
  moves of a tensor (each goes to :mod:`~dlmg.movement.across` when another
  process holds fragments).

The internal API both paths use:

==========================  ====================================================
allocate destinations       :func:`allocate`, :func:`allocate_all`, :func:`destination`
run copies                  :func:`copy_jobs`, :func:`run_jobs`, :func:`run_copies`
run exchanges               :func:`pack`, :func:`deliver`
finish a tensor             :func:`finish_fragment`, :func:`reuse`
read sources                :func:`source_endpoints`, :func:`source_buffers`, :func:`source_places`
==========================  ====================================================
"""

from __future__ import annotations

from .copies import Buffer, copy_framework, run_copies, run_jobs, synchronize
from .delegated import delegation, delegation_enabled
from .destinations import allocate, allocate_all, choose_framework, copy_jobs, destination, finish_fragment, reuse
from .exchange import deliver, pack
from .sources import engine_for, source_buffers, source_endpoints, source_geometry, source_places
from .transfer import move, same_memory, synchronize_arrays
from .across import gather_routes, redistribution_routes, scatter_routes
from .gathering import gather
from .handover import to_framework
from .relayout import redistribute, tensor_plan
from .scattering import scatter

__all__ = [
    "Buffer", "copy_framework", "run_copies", "run_jobs", "synchronize",
    "allocate", "allocate_all", "choose_framework", "copy_jobs", "destination", "finish_fragment", "reuse",
    "deliver", "pack",
    "engine_for", "source_buffers", "source_endpoints", "source_geometry", "source_places",
    "move", "same_memory", "synchronize_arrays",
    "gather_routes", "redistribution_routes", "scatter_routes",
    "gather", "scatter", "redistribute", "tensor_plan", "to_framework",
    "delegation", "delegation_enabled",
]
