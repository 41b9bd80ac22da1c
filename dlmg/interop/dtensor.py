"""PyTorch ``DTensor`` in and out of dlmg, without copies.

:func:`from_dtensor` wraps the local shard of every process as that process's
fragment; the layout follows the DeviceMesh and the placements (see
:mod:`._dtensor_layout` for the rules). :func:`to_dtensor` hands this
process's fragment to ``DTensor.from_local`` with the global shape and
strides given, so nothing is checked or moved by collectives and no element
is copied.

Across processes this is SPMD, as DTensor is: every process calls the same
function; dlmg's process rank must be torch.distributed's (initialise dlmg's
process group with the torch engine). In one process, a world-size-1 process
group (``gloo``) is enough.

PyTorch is imported only inside the functions here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._shapes import c_strides
from ..device import Device
from ..errors import FragmentError, FrameworkError, LayoutError
from ._dtensor_layout import (
    expressibility_problems,
    layout_from_placements,
    nearest_expressible,
    placements_for_layout,
)
from ._wrap import wrap_fragments
from ..fragment import process_rank
from ..device import as_device
from ..registry import get_adapter

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["from_dtensor", "to_dtensor", "is_dtensor"]


def is_dtensor(obj: Any) -> bool:
    """Whether ``obj`` is a torch ``DTensor`` (checked without importing torch)."""
    for cls in type(obj).__mro__:
        if cls.__name__ == "DTensor" and cls.__module__.startswith("torch.distributed"):
            return True
    return False


def torch_distributed() -> Any:
    get_adapter("torch").module()  # FrameworkNotInstalledError, saying what to install, without torch
    try:
        import torch.distributed as dist
    except ImportError as exc:  # pragma: no cover - torch without distributed
        raise FrameworkError(f"DTensor needs torch.distributed: {exc}") from None
    return dist


def _check_processes(dist: Any) -> int:
    """torch.distributed's rank of this process, checked against dlmg's."""
    if not dist.is_available() or not dist.is_initialized():
        raise FrameworkError(
            "DTensor needs an initialised torch.distributed process group; in one process: "
            "torch.distributed.init_process_group('gloo', rank=0, world_size=1, init_method='tcp://127.0.0.1:<port>')"
        )
    rank = dist.get_rank()
    if dist.get_world_size() > 1 and process_rank() != rank:
        raise FragmentError(
            f"this process is rank {rank} of torch.distributed but rank {process_rank()} for dlmg; "
            "initialise dlmg's processes on the same group (dlmg.distributed.init with the torch engine)"
        )
    return rank


#: DTensor ``Partial`` reductions a pending layout holds as they are.
_PENDING = ("sum", "max", "min")


def _placement(p: Any, i: int) -> tuple:
    from torch.distributed.tensor import Partial, Replicate, Shard

    if type(p) is Shard:
        return ("shard", p.dim)
    if isinstance(p, Replicate):
        return ("replicate",)
    if isinstance(p, Partial):
        return ("partial", p.reduce_op)
    raise LayoutError(
        f"placements[{i}] = {p!r} has no dlmg layout (dlmg reads Shard, Replicate and Partial); "
        f"redistribute the DTensor to Shard/Replicate placements first"
    )


def _mesh_device(mesh: Any, rank: int, me: int, local: Any) -> Device:
    if rank == me:
        return as_device(local.device)
    if mesh.device_type == "cpu":
        return Device("cpu", 0)
    import torch

    # DeviceMesh's own rule for the device of a rank on its host
    count = torch.cuda.device_count() if mesh.device_type == "cuda" else 1
    return Device(mesh.device_type, rank % max(count, 1))


def from_dtensor(x: Any, *, reduce: bool = False, devices: Any = None) -> "DistributedTensor":
    """A :class:`~dlmg.DistributedTensor` whose fragment here is ``x``'s local shard.

    Parameters
    ----------
    x : torch.distributed.tensor.DTensor
    reduce : bool, default False
        ``Partial`` placements hold unreduced values. By default they become a
        pending layout (``partial="sum"``, ``"max"``, ``"min"``: the replicas
        are the parts, nothing is reduced or copied; ``redistribute`` resolves
        it). ``True`` reduces them first (``x.redistribute`` to ``Replicate``
        on those mesh dimensions: an all-reduce through torch.distributed, a
        new local tensor); it is needed for other reductions (``avg``...) and
        for ``Partial`` beside ``Replicate`` on another mesh dimension.

    Returns
    -------
    DistributedTensor
        One fragment per process of the mesh: this process's is the very
        local tensor of ``x`` (same data pointer), the others are remote.
        ``Shard(d)`` on mesh dimensions of sizes ``k1, k2...`` gives mode
        ``d`` a grid of ``k1 * k2 * ...`` with one ``torch.chunk`` piece per
        grid coordinate; ``Replicate`` gives replicas.

    Raises
    ------
    LayoutError
        For ``Partial`` that no pending layout holds without ``reduce=True``, strided shards (an internal
        FSDP placement) and nested uneven shards that leave unequal pieces
        inside a dimension.
    FrameworkError
        Without an initialised torch.distributed process group.
    """
    if not is_dtensor(x):
        raise TypeError(f"from_dtensor needs a torch DTensor, got {type(x).__module__}.{type(x).__name__}")
    dist = torch_distributed()
    me = _check_processes(dist)
    placements = [_placement(p, i) for i, p in enumerate(x.placements)]
    partial = [i for i, p in enumerate(placements) if p[0] == "partial"]
    pending = None  # the pending reduction the layout keeps (no reduction now)
    if partial:
        ops = sorted({placements[i][1] for i in partial})
        mixed = [i for i, p in enumerate(placements) if p[0] == "replicate"]
        if not reduce and len(ops) == 1 and ops[0] in _PENDING and not mixed:
            pending = ops[0]
        elif not reduce:
            why = (f"Replicate on mesh dimensions {mixed} beside them" if mixed
                   else f"dlmg's pending layouts hold only {', '.join(_PENDING)}")
            raise LayoutError(
                f"placements {tuple(x.placements)} are Partial ({', '.join(ops)}) on mesh dimensions {partial}, "
                f"with {why}: the local shards hold unreduced values; from_dtensor(x, reduce=True) reduces them first"
            )
        else:
            from torch.distributed.tensor import Replicate

            x = x.redistribute(x.device_mesh,
                               [Replicate() if i in partial else p for i, p in enumerate(x.placements)])
            placements = [_placement(p, i) for i, p in enumerate(x.placements)]
    mesh = x.device_mesh
    local = x.to_local()
    ranks_flat = [int(r) for r in mesh.mesh.flatten().tolist()]
    layout, ranks = layout_from_placements(
        tuple(x.shape), ranks_flat, tuple(mesh.mesh.shape), placements,
        lambda r: _mesh_device(mesh, r, me, local),
    )
    if pending is not None:
        layout = layout.replace(partial=pending)
    if devices is not None:
        devices = list(devices)
        if len(devices) != layout.nfragments:
            raise LayoutError(
                f"devices has {len(devices)} entries but the DTensor has {layout.nfragments} shards "
                f"(mesh {tuple(mesh.mesh.shape)}, placements {tuple(x.placements)})"
            )
        layout = layout.with_devices(devices)
    given = {f: local for f, r in enumerate(ranks) if r == me}
    return wrap_fragments(given, layout, ranks, dtype=get_adapter("torch").dtype_of(local))


def _local_torch(tensor: "DistributedTensor", me: int) -> tuple[Any, Any]:
    """This process's fragment as a torch tensor (the same memory) and its fragment."""
    frag = next((f for f in tensor.fragments if f.rank == me and f.is_local), None)
    if frag is None:
        raise FragmentError(f"to_dtensor: this process (rank {me}) holds no fragment of the tensor")
    if frag.framework == "torch":
        return frag.array, frag
    import torch

    if frag.is_padded:
        raise LayoutError(f"to_dtensor: fragment {frag.index} lies in padded blocks; no local tensor describes it")
    return torch.from_dlpack(frag), frag


def to_dtensor(tensor: "DistributedTensor", mesh: Any = None) -> Any:
    """A torch ``DTensor`` over the fragments of ``tensor``, without a copy
    (except of fragments whose producer marked them read-only, a read-only NumPy
    array for one: torch tensors cannot be marked read-only, so those are copied
    rather than handed over writable).

    Also available as ``tensor.to_dtensor(mesh=None)``.

    Parameters
    ----------
    tensor : DistributedTensor
        One fragment per process. Every mode is either not split or split
        into ``torch.chunk`` pieces, one per grid coordinate.
    mesh : torch.distributed.device_mesh.DeviceMesh, optional
        The mesh to use; by default one is made with a dimension per split
        mode (in mode order) and one for the replicas. A given mesh must hold
        the fragments' ranks so that some placements describe the layout.

    Returns
    -------
    DTensor
        ``DTensor.from_local(local, mesh, placements, shape=, stride=)``; its
        local tensor shares this process's fragment memory (torch fragments
        are used as they are, others go through DLPack).

    Raises
    ------
    LayoutError
        For a layout DTensor cannot express (block-cyclic, blocks other than
        ``torch.chunk``'s, two fragments in one process); the message names
        the nearest layout that it can and the ``redistribute`` call to reach
        it.
    """
    torch_distributed()  # (without torch: FrameworkNotInstalledError)
    import torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import DTensor, Replicate, Shard

    dist = torch_distributed()
    me = _check_processes(dist)
    layout = tensor.layout
    problems = expressibility_problems(layout)
    if problems:
        nearest = nearest_expressible(layout)
        raise LayoutError(
            f"DTensor placements cannot express {layout!r}: {'; '.join(problems)}. The nearest layout "
            f"they can is {nearest!r}: tensor.redistribute(dlmg.{nearest!r}) reaches it"
        )
    ranks = [f.rank for f in tensor.fragments]
    seen: dict[int, int] = {}
    for f, r in enumerate(ranks):
        if r in seen:
            raise LayoutError(
                f"DTensor holds one shard per process, but fragments {seen[r]} and {f} of {layout!r} "
                f"are both on rank {r}; redistribute to a layout with one fragment per process "
                f"(a grid and replicas whose product is the number of processes)"
            )
        seen[r] = f
    world = dist.get_world_size()
    if mesh is None and sorted(ranks) != list(range(world)):
        # a new mesh is made by every process of the group together: all must take part
        raise LayoutError(
            f"to_dtensor without a mesh needs one fragment on every process of the group "
            f"(ranks 0..{world - 1}), but the fragments are on ranks {sorted(ranks)}; pass mesh= "
            f"(a DeviceMesh of those ranks) or redistribute over every process"
        )
    local, frag = _local_torch(tensor, me)
    if frag.readonly and frag.adapter.traits.mutable:
        # memory its producer marked read-only (a read-only NumPy array, a READ_ONLY DLPack
        # tensor): torch cannot mark it, so it gets a copy, never a writable view. (JAX
        # buffers, immutable by their framework's model, are handed over as they are.)
        local = local.clone()
    from torch.distributed.tensor import Partial

    # a pending layout's replicas are the parts of a Partial placement (no reduction either way)
    replica = (lambda p: Partial(layout.partial)) if layout.partial is not None else (lambda p: Replicate())
    to_torch = {"shard": lambda p: Shard(p[1]), "replicate": replica}
    if mesh is None:
        flat, shape, placements = placements_for_layout(layout, ranks)
        kind = "cpu" if layout.on_host else local.device.type
        mesh = DeviceMesh(kind, torch.tensor(flat, dtype=torch.int64).reshape(shape))
    else:
        placements = _placements_on(layout, ranks, mesh)
    return DTensor.from_local(
        local, mesh, [to_torch[p[0]](p) for p in placements],
        run_check=False, shape=torch.Size(layout.shape), stride=c_strides(layout.shape),
    )


def _placements_on(layout: Any, ranks: list[int], mesh: Any) -> list[tuple]:
    """Placements on a given mesh under which every rank holds its fragment's elements."""
    import itertools

    mesh_shape = tuple(mesh.mesh.shape)
    flat = [int(r) for r in mesh.mesh.flatten().tolist()]
    if sorted(flat) != sorted(ranks):
        raise LayoutError(
            f"the mesh holds ranks {sorted(flat)} but the fragments belong to ranks {sorted(ranks)}"
        )
    want = {r: layout.fragments[f].ranges for f, r in enumerate(ranks)}
    options = [("replicate",)] + [("shard", m) for m in range(layout.ndim)]
    for placements in itertools.product(options, repeat=len(mesh_shape)):
        try:
            cand, cand_ranks = layout_from_placements(
                layout.shape, flat, mesh_shape, placements, lambda r: Device("cpu", 0)
            )
        except LayoutError:
            continue
        got = {r: cand.fragments[f].ranges for f, r in enumerate(cand_ranks)}
        if got == want and cand.nreplicas == layout.nreplicas:
            return list(placements)
    raise LayoutError(
        f"no placements on the mesh of shape {mesh_shape} (ranks {flat}) put every fragment of "
        f"{layout!r} on its process; leave mesh=None for a mesh that fits"
    )
