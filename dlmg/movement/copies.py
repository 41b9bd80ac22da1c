"""Running copy plans on arrays of any framework.

Every copy of a :class:`~dlmg.plans.plan.RedistributionPlan` is one strided
assignment ``dst_view[...] = src_view`` made by a *copy framework* that can
view memory (an adapter with ``can_view``): the destination's own framework,
or, for one that cannot (an immutable one), a staging array of a framework
that can, on the same device, handed over through DLPack at the end.

Sources on the same memory as the destination are taken into the copy
framework through DLPack (zero-copy) and viewed there. Sources elsewhere are
viewed in a framework on their own device, packed into a compact piece there
when the view has gaps, and moved to the destination device
(:func:`dlmg.movement.transfer.move`), where the piece is assigned.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from .transfer import move, same_memory, synchronize_arrays
from ..adapters.capabilities import concatenate, copy_pairs
from ..adapters import available, carries
from ..device import Device
from ..errors import CopyRequiredError, DLPackError, DtypeError, FragmentError, FrameworkError
from ..registry import adapter_names, get_adapter
from .._shapes import c_strides
from ..plans.plan import concatenation, stacking

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..plans.plan import Copy

__all__ = ["GIVEN_VIEWS_MAX_BYTES", "Buffer", "copy_framework", "import_zero_copy", "run_copies", "run_jobs", "stream_ordered", "synchronize"]


@dataclass
class Buffer:
    """Memory taking part in copies: a base array, its adapter and where it lives.

    Plan offsets and strides are relative to the first element of ``base``.
    """

    base: Any
    adapter: "Adapter"
    device: Device
    #: ``base`` is the caller's own array, likely given again (a gather's ``out=``):
    #: the views of its copies may be kept for the next call (:func:`_target_views`).
    given: bool = False


def copy_framework(device: Device, dtype: str, prefer: Iterable[str] = ()) -> "Adapter":
    """A framework that can view and write memory on ``device`` for ``dtype``.

    ``prefer`` names frameworks to try first; then every registered one, in
    registry order.

    Raises
    ------
    FrameworkError
        When no installed framework can (the message says what to install).
    """
    tried: list[str] = []
    for name in (*prefer, *adapter_names()):
        if name in tried:
            continue
        tried.append(name)
        try:
            a = get_adapter(name)
        except FrameworkError:
            continue
        # capabilities first: they import nothing
        if a.traits.can_view and carries(a, dtype) and available(a) and a.supports(device):
            return a
    raise FrameworkError(
        f"no installed framework can hold and write {dtype} memory on {device} "
        f"(tried {', '.join(tried)}); install one that can view memory there"
    )


def import_zero_copy(buf: Buffer, into: "Adapter") -> Any:
    """``buf.base`` as an array of ``into`` over the same memory (no copy).

    Raises
    ------
    CopyRequiredError, DLPackError, DtypeError
        When ``into`` cannot take the memory in as it is.
    """
    if buf.adapter.name == into.name:
        return buf.base
    return into.from_dlpack(buf.adapter.producer(buf.base), copy=False)


def _piece(buf: Buffer, copy: "Copy", dtype: str, dst: "Adapter", device: Device) -> Any:
    """The source elements of ``copy`` as a compact array of ``dst`` on ``device``."""
    viewer = buf.adapter if buf.adapter.traits.can_view else copy_framework(buf.device, dtype, (buf.adapter.name,))
    try:
        base = import_zero_copy(buf, viewer)
    except (CopyRequiredError, DLPackError, DtypeError):
        viewer = copy_framework(buf.device, dtype)
        base = import_zero_copy(buf, viewer)
    view = viewer.as_strided(base, copy.shape, copy.src_strides, copy.src_offset)
    view = viewer.ascontiguous(view)
    return move(view, viewer, dst, device)


def _imported(imported: dict[tuple[int, str], Any], index: int, buf: Buffer, viewer: "Adapter") -> Any:
    """Source ``index`` taken into ``viewer`` zero-copy (``None`` where it cannot be),
    remembered in ``imported`` so each source is taken in once per framework."""
    key = (index, viewer.name)
    if key not in imported:
        try:
            imported[key] = import_zero_copy(buf, viewer)
        except (CopyRequiredError, DLPackError, DtypeError):
            imported[key] = None
    return imported[key]


def run_copies(
    copies: Sequence["Copy"],
    sources: dict[int, Buffer],
    dst: Buffer,
    dtype: str,
    imported: dict[tuple[int, str], Any] | None = None,
    views: dict[tuple[Any, str], Any] | None = None,
) -> None:
    """Run ``copies`` (all into ``dst``) reading ``sources`` by fragment number.

    ``dst.adapter`` must be a viewable framework (see :func:`copy_framework`).
    ``imported`` caches sources taken into the copy framework, shared by the
    calls of one redistribution. ``views`` caches the source views of copies
    on the destination's memory across calls (for a tensor whose sources stay
    the same: its plans' copies read the same views every time).

    The views are made first and the copies then issued together through the
    copy framework's bulk copies (:func:`~dlmg.adapters.capabilities.copy_pairs`, one call: on a GPU the copies are queued
    back to back on the current stream, with no host work between them).
    """
    if copies:
        targets, pieces = _pairs(copies, sources, dst, dtype, {} if imported is None else imported, views)
        copy_pairs(dst.adapter, targets, pieces)


def _pairs(
    copies: Sequence["Copy"],
    sources: dict[int, Buffer],
    dst: Buffer,
    dtype: str,
    imported: dict[tuple[int, str], Any],
    views: dict[tuple[Any, str], Any] | None,
) -> tuple[Sequence[Any], Sequence[Any]]:
    """The destination views and source pieces of ``copies``, in the copy framework
    ``dst.adapter`` (see :func:`run_copies`)."""
    b = dst.adapter
    base = dst.base
    if dst.given and isinstance(copies, tuple):
        targets: Sequence[Any] = _target_views(copies, _Given(dst))
    else:
        targets = [b.as_strided(base, c.shape, c.dst_strides, c.dst_offset) for c in copies]
    if views is None:
        return targets, [_source_view(c, sources, dst, dtype, imported, views) for c in copies]
    if not isinstance(copies, tuple):
        return targets, [_source_view(c, sources, dst, dtype, imported, views) for c in copies]
    key = (copies, b.name)  # a plan hands out the same copies tuple for a destination every time
    found = views.get(key)
    if found is not None:
        return targets, found
    pieces = [_source_view(c, sources, dst, dtype, imported, views) for c in copies]
    if all((c, b.name) in views for c in copies):  # views, not copies
        views[key] = tuple(pieces)  # a tuple: the callers' batches cannot grow it
    return targets, pieces


class _Given:
    """A destination given by the caller, as a cache key: equal to another only for
    the same array object with the same adapter and memory signature (shape,
    strides and data address read now), so that views kept of it show where it
    is now; the views keep it alive, so its address cannot go to another array
    while they are kept."""

    __slots__ = ("base", "adapter", "signature", "_hash")

    def __init__(self, buf: Buffer) -> None:
        self.base = buf.base
        self.adapter = buf.adapter
        self.signature = (buf.adapter.name, buf.adapter.memory_signature(buf.base))
        self._hash = hash(self.signature)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, _Given) and other.base is self.base and other.adapter is self.adapter
                and other.signature == self.signature)


# Kept: gathering many fragments into the same out= array made one view of it per
# fragment every call, against one look-up here. Kept views hold their array: few
# entries, and only for arrays of at most GIVEN_VIEWS_MAX_BYTES (see
# :func:`~dlmg.movement.destinations.check_out`), so that at most a few MiB of the
# caller's arrays outlive their use.
@lru_cache(maxsize=4)
def _target_views(copies: tuple["Copy", ...], given: _Given) -> tuple[Any, ...]:
    """The views of ``given``'s array that ``copies`` write (see :class:`_Given`)."""
    b, base = given.adapter, given.base
    return tuple(b.as_strided(base, c.shape, c.dst_strides, c.dst_offset) for c in copies)


#: A gather's out= array up to this size has the views of its copies kept (:func:`_target_views`).
GIVEN_VIEWS_MAX_BYTES = 1 << 20


def _source_view(
    c: "Copy",
    sources: dict[int, Buffer],
    dst: Buffer,
    dtype: str,
    imported: dict[tuple[int, str], Any],
    views: dict[tuple[Any, str], Any] | None,
) -> Any:
    """The source elements of ``c`` as an array of the copy framework ``dst.adapter``:
    a view where the source lies in the same memory (remembered in ``views``),
    otherwise a compact copy moved to the destination's device."""
    buf = sources.get(c.src)
    if buf is None:
        raise FragmentError(f"source fragment {c.src} is not held by this process")
    b = dst.adapter
    if same_memory(buf.device, dst.device):
        key = (c, b.name)
        found = views.get(key) if views is not None else None
        if found is not None:
            return found
        base = _imported(imported, c.src, buf, b)
        if base is not None:
            try:
                view = b.as_strided(base, c.shape, c.src_strides, c.src_offset)
            except (ValueError, NotImplementedError):
                view = None
            if view is not None:
                if views is not None:
                    views[key] = view
                return view
    return _piece(buf, c, dtype, b, dst.device)


# Kept: working out that a gather's copies are one concatenation costs time growing
# with the copies on every call, a look-up a small part of it; keyed on the copies
# themselves (a Copy keeps its hash), and as many as plans are kept.
@lru_cache(maxsize=256)
def _joined(copies: tuple["Copy", ...]) -> tuple[int, tuple[int, ...], tuple["Copy", ...]] | None:
    run = concatenation(copies)
    if run is not None:  # flat pieces first: a framework may copy those faster still (CuPy's kernel)
        return run[0], (sum(c.size for c in run[1]),), run[1]
    return stacking(copies)


def _concatenated(copies: Sequence["Copy"]) -> tuple[int, tuple[int, ...], tuple["Copy", ...]] | None:
    """``copies`` as one concatenation into a C-contiguous block of the destination,
    where they are one: ``(offset, shape, copies in order)``, remembered per copies
    tuple. Flat pieces (:func:`~dlmg.plans.plan.concatenation`, a gather of slabs)
    first, then pieces stacked along their first axis
    (:func:`~dlmg.plans.plan.stacking`, row slabs to column slabs)."""
    if len(copies) < 2:  # (a joined scatter's one copy comes in a new tuple every call)
        return None
    return _joined(copies) if isinstance(copies, tuple) else _joined.__wrapped__(tuple(copies))


def _run_on_devices(
    jobs: Sequence[tuple[Sequence["Copy"], dict[int, Buffer], Buffer]],
    dtype: str,
    imported: dict[tuple[int, str], Any],
    views: dict[tuple[Any, str], Any] | None,
) -> None:
    """Device copies: every view made first, then one ``copy_many`` per copy
    framework and device, so a framework sees all of a device's copies at once
    (a scatter's pieces of one source become one kernel, not one per destination).
    A destination whose copies are a concatenation (a gather of slabs, or bands
    of rows of a column slab) is one ``concatenate_into`` of the source pieces
    into one view instead.
    The destinations are disjoint, so the order between them does not matter."""
    batches: dict[tuple[str, Device], tuple["Adapter", list[Any], list[Any]]] = {}
    joined: list[tuple["Adapter", Any, list[Any]]] = []
    for copies, sources, dst in jobs:
        if not copies:
            continue
        run = _concatenated(copies)
        if run is not None:
            offset, shape, ordered = run
            ordered_pieces = [_source_view(c, sources, dst, dtype, imported, views) for c in ordered]
            joined.append((dst.adapter, dst.adapter.as_strided(dst.base, shape, c_strides(shape), offset),
                           ordered_pieces))
            continue
        targets, pieces = _pairs(copies, sources, dst, dtype, imported, views)
        key = (dst.adapter.name, dst.device)
        batch = batches.get(key)
        if batch is None:
            batches[key] = (dst.adapter, list(targets), list(pieces))  # (either may be a remembered tuple)
        else:
            batch[1].extend(targets)
            batch[2].extend(pieces)
    for adapter, target, pieces in joined:
        concatenate(adapter, target, pieces)
    for adapter, targets, pieces in batches.values():
        copy_pairs(adapter, targets, pieces)


#: Host copies of at least this many bytes in all are spread over threads.
PARALLEL_MIN_BYTES = 4 << 20
#: ... and only when a task copies this many bytes on average.
PARALLEL_MIN_TASK_BYTES = 1 << 20
#: State (not a cache): the copy threads, made on first use.
_POOL: list[ThreadPoolExecutor] = []
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor | None:
    """The copy threads, made on first use; ``None`` on one core."""
    if _POOL:
        return _POOL[0]
    workers = min(os.cpu_count() or 1, 8)  # asked once: os.cpu_count() asks the operating system
    if workers < 2:
        return None
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dlmg-copy"))
    return _POOL[0]


def run_jobs(
    jobs: Sequence[tuple[Sequence["Copy"], dict[int, Buffer], Buffer]],
    dtype: str,
    views: dict[tuple[Any, str], Any] | None = None,
    threads: bool = True,
) -> None:
    """Run several destinations' copies: ``jobs`` lists ``(copies, sources, dst)``.

    Host copies (NumPy and torch release the GIL while they copy) large
    enough to pay for it run on a thread pool, one task per destination and
    source fragment: the tasks write disjoint parts of the destinations. Device
    copies are queued in order on the caller's thread (they are asynchronous
    already, and CUDA's current device is per thread).

    Sources are waited for before and destinations after, unless every buffer
    belongs to one framework that orders its own work on its streams (torch,
    CuPy): then the copies stay asynchronous, like that framework's own.
    ``threads=False`` keeps host copies on the calling thread (processes that
    already share the cores between them).
    """
    tables = {id(srcs): srcs for _, srcs, _ in jobs}  # jobs usually share one table of sources
    sources = {id(b): b for srcs in tables.values() for b in srcs.values()}
    targets = [dst for _, _, dst in jobs]
    ordered = stream_ordered([*sources.values(), *targets])
    if not ordered:
        synchronize(sources.values())
    _run_tasks(jobs, dtype, views, threads)
    if not ordered:
        synchronize(targets)


def _by_source(copies: Sequence["Copy"]) -> tuple[list[list["Copy"]], int]:
    """``copies`` grouped by source fragment, and their bytes (not remembered: 1.5 us
    for 8 copies, 15 us for 64, against whole host copies of megabytes; asked only
    where the copies may go to threads)."""
    by_source: dict[int, list["Copy"]] = {}
    size = 0
    for c in copies:
        by_source.setdefault(c.src, []).append(c)
        size += c.nbytes
    return list(by_source.values()), size


# Kept: a redistribution between two fine grids asks this of every destination's
# copies on every call, and looking it up costs a fraction of working it out (a Copy
# keeps its hash); keyed on the copies tuple a
# plan hands out for a destination, as many as eight such plans' destinations.
@lru_cache(maxsize=4096)
def _source_figures(copies: tuple["Copy", ...]) -> tuple[int, int]:
    """How many source fragments ``copies`` read, and their bytes."""
    return len({c.src for c in copies}), sum(c.nbytes for c in copies)


def _run_tasks(
    jobs: Sequence[tuple[Sequence["Copy"], dict[int, Buffer], Buffer]],
    dtype: str,
    views: dict[tuple[Any, str], Any] | None = None,
    threads: bool = True,
) -> None:
    imported: dict[tuple[int, str], Any] = {}
    if not all(dst.device.is_host for _, _, dst in jobs):
        _run_on_devices(jobs, dtype, imported, views)  # device copies: no thread pool, no tasks
        return
    on_host: dict[int, bool] = {}  # per table of sources: whether every source is in host memory
    for _, sources, _ in jobs:  # every destination is in host memory: are the sources?
        found = on_host.get(id(sources))
        if found is None:
            found = on_host[id(sources)] = all(buf.device.is_host for buf in sources.values())
        if not found:
            _run_on_devices(jobs, dtype, imported, views)
            return
    pool = _pool() if threads and len(jobs) > 1 else None
    nbytes = ntasks = 0
    if pool is not None:  # the figures deciding whether threads pay
        for copies, _, _ in jobs:
            groups, size = _source_figures(copies) if isinstance(copies, tuple) else \
                _source_figures.__wrapped__(tuple(copies))
            nbytes += size
            ntasks += groups
    # Threads pay only when each task (a destination's copies from one source)
    # copies enough to outweigh the Python work around it (views, imports),
    # which holds the GIL; pieces too small to be tasks of their own (a
    # redistribution between two fine grids) make one task per destination.
    # One destination (a gather) stays on one thread: first-touch page faults of
    # a fresh buffer from several threads contend in the kernel, which outweighs
    # the parallel copy.
    by_source = nbytes >= PARALLEL_MIN_BYTES and nbytes >= ntasks * PARALLEL_MIN_TASK_BYTES
    big = by_source or (nbytes >= PARALLEL_MIN_BYTES and nbytes >= len(jobs) * PARALLEL_MIN_TASK_BYTES)
    if pool is None or not big:  # one call per destination: its copies go to the framework together
        for copies, sources, dst in jobs:
            run_copies(copies, sources, dst, dtype, imported, views)
        return
    if by_source:
        tasks = [(group, sources, dst) for copies, sources, dst in jobs for group in _by_source(copies)[0]]
    else:
        tasks = [(list(copies), sources, dst) for copies, sources, dst in jobs]
    for copies, sources, dst in tasks:  # take each source in once, here, so the threads only read
        for src in {c.src for c in copies}:
            buf = sources.get(src)
            if buf is not None and same_memory(buf.device, dst.device):
                _imported(imported, src, buf, dst.adapter)
    futures = [pool.submit(run_copies, copies, sources, dst, dtype, imported, views)
               for copies, sources, dst in tasks]
    errors = [f.exception() for f in futures]  # wait for every task before raising
    for error in errors:
        if error is not None:
            raise error


def stream_ordered(buffers: Iterable[Buffer]) -> bool:
    """Whether the copies among ``buffers`` need no host-side wait: all belong
    to one framework that orders its own work on its streams
    (:attr:`~dlmg.adapters.Traits.stream_ordered`), on one device unless it
    also orders copies across devices."""
    buffers = list(buffers)
    if not buffers:
        return False
    adapter = buffers[0].adapter
    if not adapter.traits.stream_ordered or any(buf.adapter.name != adapter.name for buf in buffers):
        return False
    return adapter.traits.orders_across_devices or len({buf.device for buf in buffers}) == 1


def synchronize(buffers: Iterable[Buffer]) -> None:
    """Wait for pending work on every buffer's array (CUDA streams, JAX dispatch)."""
    synchronize_arrays((buf.adapter, buf.base, buf.device) for buf in buffers)
