"""Framework changes: every local fragment of a tensor handed to another
framework through DLPack (see :meth:`dlmg.DistributedTensor.to`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..adapters.capabilities import QuickImport
from ..errors import CopyRequiredError, FragmentError, LayoutError
from ..registry import get_adapter
from ..fragment import Fragment, process_rank

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..tensor import DistributedTensor

__all__ = ["to_framework"]


def to_framework(dt: "DistributedTensor", framework: str, copy: bool | None = None) -> "DistributedTensor":
    """``dt`` with every local fragment handed to ``framework`` (see :meth:`dlmg.DistributedTensor.to`)."""
    if copy not in (None, True, False):
        raise ValueError(f"copy must be None, True or False, got {copy!r}")
    target = get_adapter(framework)
    name = target.name
    me = process_rank()
    out = []
    take_in = target.from_dlpack
    quick, quick_source = None, None  # the target's importer of the last source framework's arrays
    for frag in dt.fragments:
        # attributes read directly: this loop is the whole cost of to()
        array = frag._array
        if frag.rank != me or (array is None and frag._memory is None) or (
            frag.framework == name and copy is not True
        ):
            out.append(frag)
            continue
        if array is None or copy is not None:
            out.append(_handed_over(frag, target, copy, me))
            continue
        # the common case, a zero-copy hand-over of a plain fragment
        src = frag._adapter or frag.adapter
        device = frag.layout.device
        if src is not quick_source:
            quick_source = src
            quick = target.importer(src, dt.dtype, dt.shape) if isinstance(target, QuickImport) else None
        new = None
        if quick is not None:
            try:
                new = quick(array, device)
            except Exception:  # the full import below copies, or says why it cannot
                new = None
        readonly = frag._readonly or src.is_readonly(array)
        if new is None:  # (the importer's arrays share the memory, or are immutable: see Adapter.importer)
            try:
                new = take_in(src.producer(array), device=device)
            except Exception as exc:
                raise _hand_over_error(frag, target, copy, exc) from exc
            readonly = readonly and not _copied(frag, target, new, src, array)
        out.append(Fragment.of_result(frag.layout, new, name, target, readonly, None))  # frag.rank is me
    return type(dt)._create(dt.layout, out, dt.dtype)


def _copied(frag: Fragment, target: "Adapter", new: Any, src: "Adapter", array: Any) -> bool:
    """Whether the import ``new`` of ``array`` is known to be a copy, so that read-only-ness
    need not pass on to it. Known only where the source's memory sits at one address: a
    producer that hands out a fresh buffer for every export (asked twice, two addresses)
    proves nothing, and its read-only mark stays."""
    if not frag.size:
        return False
    before = src.data_ptr(array)
    return target.data_ptr(new) != before and src.data_ptr(array) == before


def _hand_over_error(frag: Fragment, target: "Adapter", copy: bool | None, exc: Exception) -> Exception:
    if isinstance(exc, CopyRequiredError):
        return exc
    if copy is False:
        return CopyRequiredError(
            f"fragment {frag.index} ({frag.framework} on {frag.device}) cannot be handed to "
            f"{target.name} without a copy: {exc}"
        )
    return FragmentError(
        f"fragment {frag.index} ({frag.framework} on {frag.device}) could not be handed to "
        f"{target.name}: {exc}"
    )


def _handed_over(frag: Fragment, target: "Adapter", copy: bool | None, me: int) -> Fragment:
    """``frag`` handed to ``target`` with ``copy`` asked, or a padded fragment."""
    name = target.name
    padded = frag._array is None
    if padded and not target.traits.can_view:
        raise LayoutError(
            f"fragment {frag.index} lies in padded blocks, which {target.name} cannot view; "
            "redistribute to a dense layout first"
        )
    src = frag.adapter
    base = frag.base
    readonly = frag._readonly or bool(src.is_readonly(base))
    device = frag.layout.device
    try:
        new = target.from_dlpack(src.producer(base), device=device, copy=copy)
    except Exception as exc:
        raise _hand_over_error(frag, target, copy, exc) from exc
    if copy is not None and frag.size and (target.data_ptr(new) == src.data_ptr(base)) != (not copy):
        if copy is False:
            raise CopyRequiredError(
                f"fragment {frag.index}: {target.name} copied the memory although copy=False was asked"
            )
        # copy=True honoured by the framework's own copy (JAX's from_dlpack ignores it on the host)
        new = target.from_dlpack(new, device=frag.device, copy=True)
    # Memory handed on without a copy stays as read-only as its source was.
    readonly = readonly and copy is not True and not _copied(frag, target, new, src, base)
    if padded:
        return Fragment.of_memory(frag.layout, new, name, rank=me, readonly=readonly)
    return Fragment.of_array(frag.layout, new, name, rank=me, readonly=readonly, adapter=target)
