"""What a movement reads: a tensor's fragments as copy sources.

The endpoints (index sets and memory geometry) of a tensor's fragments, the
buffers holding them, and whether dlmg must go to the communication engine
because other processes hold some of them. Used by the one-process moves
(:mod:`~dlmg.movement.relayout`, :mod:`~dlmg.movement.gathering`) and the
cross-process ones (:mod:`~dlmg.movement.across`) alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from ..adapters.capabilities import BulkCopies
from ..distributed.state import current
from ..errors import FragmentError
from ..fragment import verify_fragments
from ..plans.endpoints import Endpoint, array_endpoint, layout_endpoints
from ..fragment import process_rank
from .copies import Buffer

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor, Fragment

__all__ = [
    "PLAN_CACHE_SIZE", "KEPT", "Remembered", "remembered", "engine_for", "all_local", "source_geometry",
    "source_endpoints",
    "source_views", "source_buffers", "source_places",
]

#: Plans kept per kind (redistribute, gather, scatter), least recently used dropped.
PLAN_CACHE_SIZE = 128


def engine_for(dt: "DistributedTensor", what: str) -> Any:
    """The active communication engine, or ``None`` when dlmg runs in one process.

    Raises
    ------
    FragmentError
        When ``dt`` has fragments of other processes but no engine was set up.
    """
    engine = current()
    if engine is None and not all_local(dt):
        remote = [f.index for f in dt.fragments if not f.is_local]
        if remote:
            raise FragmentError(
                f"{what}: fragments {remote} are held by other processes (ranks "
                f"{sorted({dt.fragments[i].rank for i in remote})}); call dlmg.distributed.init() "
                "in every process first"
            )
    return engine


def all_local(dt: "DistributedTensor") -> bool:
    """Whether this process holds every fragment of ``dt`` (asked once per fragments tuple)."""
    memory = remembered(dt)
    local = memory.all_local
    if local is None:
        local = memory.all_local = all(f.is_local for f in dt.fragments)
    return local


def source_geometry(frag: "Fragment") -> Any:
    if not frag.is_local:
        return None
    if frag.is_padded:
        return "padded"
    return frag.adapter.strides_of(frag.array)


def source_endpoints(layout: "Layout", geometry: Sequence[Any]) -> list[Endpoint]:
    """Endpoints of a tensor's fragments: ``geometry`` has, per fragment, its
    strides, ``"padded"`` or ``None`` (held by another process)."""
    base = layout_endpoints(layout)
    out = []
    for frag, ep, geo in zip(layout.fragments, base, geometry):
        rank = -1 if geo is None else process_rank()
        if geo is None or geo == "padded":
            out.append(Endpoint(ep.index, ep.device, ep.modes, ep.scales, ep.group, ep.fixed_memory, rank))
        else:
            out.append(array_endpoint(frag, geo, rank=rank))
    return out


#: Moves, gathers and assemblies a tensor remembers of each kind; more start afresh
#: (which costs only speed).
KEPT = 32


class Remembered:
    """What dlmg worked out about one tensor's current fragments.

    Kept in the tensor's one declared slot (``DistributedTensor._remembered``)
    while its fragments tuple stays the same object: fragments never change
    geometry, framework or device, and a new tuple (in-place updates of JAX
    fragments) starts afresh. A repeated redistribution or gather of a tensor
    then finds its plan, source buffers and source views with one lookup
    instead of describing every fragment again.

    Attributes
    ----------
    fragments : tuple of Fragment
        The fragments this describes.
    all_local : bool or None
        Whether this process holds every fragment (``None``: not asked yet).
    sources, places
        :func:`source_buffers` and :func:`source_places` (``None``: not asked yet).
    views : dict
        The source views of the tensor's copies (see :func:`~dlmg.movement.copies.run_copies`).
    moves : dict
        (target layout, framework) -> what :mod:`~dlmg.movement.relayout` worked out.
    gathers : dict
        (destination strides, device) -> what :mod:`~dlmg.movement.gathering` worked out.
    assemblies : dict
        (framework, device) -> what :func:`~dlmg.movement.rearrange.assembled` worked out.
    """

    __slots__ = ("fragments", "all_local", "sources", "places", "views", "moves", "gathers", "assemblies")

    def __init__(self, fragments: tuple[Any, ...]) -> None:
        self.fragments = fragments
        self.all_local: bool | None = None
        self.sources: dict[int, Buffer] | None = None
        self.places: tuple[dict[int, Buffer], dict[int, tuple[int, int]]] | None = None
        self.views: dict[Any, Any] = {}
        self.moves: dict[Any, Any] = {}
        self.gathers: dict[Any, Any] = {}
        self.assemblies: dict[Any, Any] = {}


def remembered(dt: "DistributedTensor") -> Remembered:
    """What dlmg remembers about ``dt``'s current fragments (see :class:`Remembered`)."""
    memory = dt._remembered
    if memory is None or memory.fragments is not dt.fragments:
        memory = dt._remembered = Remembered(dt.fragments)
    return memory  # type: ignore[no-any-return]


def source_views(dt: "DistributedTensor") -> dict[Any, Any]:
    """The source views of ``dt``'s copies, kept across calls (see :func:`run_copies`)."""
    memory = remembered(dt)
    if len(memory.views) > 4096:
        memory.views = {}
    return memory.views


def source_buffers(dt: "DistributedTensor") -> dict[int, Buffer]:
    """``dt``'s local fragments as buffers to copy from (checked against the layout first:
    :func:`~dlmg.fragment.verify_fragments`)."""
    verify_fragments(dt.fragments)
    memory = remembered(dt)
    out = memory.sources
    if out is None:
        out = {}
        for frag in dt.fragments:
            if frag.is_local:
                base = frag.base
                out[frag.index] = Buffer(base, frag.adapter, frag.adapter.device_of(base))
        memory.sources = out
    return out


def source_places(dt: "DistributedTensor") -> tuple[dict[int, Buffer], dict[int, tuple[int, int]]]:
    """``dt``'s source buffers, with the allocations that several of them view
    added under keys -1, -2, ... (fragments dlmg carved out of one allocation
    on a GPU, see :func:`allocate_all`), and where each such fragment lies:
    fragment -> ``(key, element offset)``. A copy plan can then read all of
    them as one array (:func:`~dlmg.plans.plan.one_copy`)."""
    memory = remembered(dt)
    found = memory.places
    if found is None:
        sources = source_buffers(dt)
        shared: dict[Any, tuple[Buffer, list[tuple[int, int]]]] = {}  # allocation -> (buffer, fragments)
        for index, buf in sources.items():
            if buf.device.is_host:
                continue
            adapter = buf.adapter
            found_whole = adapter.allocation_of(buf.base) if isinstance(adapter, BulkCopies) else None
            if found_whole is not None:
                whole, offset = found_whole
                key = (adapter.name, buf.device, adapter.data_ptr(whole), adapter.shape_of(whole))
                shared.setdefault(key, (Buffer(whole, adapter, buf.device), []))[1].append((index, offset))
        extended: dict[int, Buffer] = dict(sources)
        places: dict[int, tuple[int, int]] = {}
        for buf, members in shared.values():
            if len(members) > 1:
                number = -1 - len(extended) + len(sources)
                extended[number] = buf
                places.update((index, (number, offset)) for index, offset in members)
        found = memory.places = (extended, places) if places else (sources, places)
    return found
