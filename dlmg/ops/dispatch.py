"""Running one function fragment by fragment: dlmg's single execution path.

Every operation of :mod:`dlmg.ops` ends up in :func:`map_fragments`: for each
local fragment it takes the corresponding fragments of the distributed
operands, hands them to the framework of the *first* distributed operand's
fragment (zero-copy through DLPack where they belong to another framework),
and calls the per-fragment function with that framework's array-API
namespace, on that fragment's device:

* the work runs inside the adapter's device context
  (:meth:`~dlmg.adapters.Adapter.device_context`: the CUDA device made
  current for frameworks that queue work on the current device); arrays that
  carry their device and host work need none;
* nothing is synchronised: GPU frameworks queue the work on their current
  stream and JAX dispatches asynchronously. :func:`synchronize` (every
  framework in use) and :func:`synchronize_tensor` (one tensor's fragments)
  are the completion boundaries;
* a failure on one fragment raises :class:`~dlmg.errors.FragmentError`
  naming the operation, the fragment index, its device and its framework,
  chained to the original exception.

What can be computed once is: an :class:`Executor` (adapter, namespace,
device context) per ``(framework, device)`` pair, and the distribution key of
each layout. The per-fragment loop does attribute reads, one dictionary
lookup and the call itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..movement.transfer import synchronize_arrays
from ..dlpack.bounds import ranges_meet
from ..errors import LayoutMismatchError
from ..adapters import in_use, memory_range
from ..base import TensorBase
from ..registry import DEFAULT_FRAMEWORK, adapter_for, adapter_names, get_adapter
from ._dtypes import check_inplace
from ._executor import Executor, fail, executor, move_array
from ._pending import guard, keep_or_settle
from ._placement import Placement as _Placement, check_fragments, inherit as _inherit, local_groups, placement
from ._operands import SCALAR_TYPES, ZeroD, classify_operand, is_distributed
from ._writes import check_writable, partial_note
from ..dtypes import canonical

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = [
    "Executor",
    "executor",
    "map_fragments",
    "collect",
    "is_distributed",
    "check_same_layout",
    "synchronize",
    "synchronize_tensor",
    "move_array",
    "new_tensor",
    "SCALAR_TYPES",
    "classify_operand",
    "placement",
    "local_groups",
]


# --------------------------------------------------------------------------
# tensors: comparing layouts, building results


def check_same_layout(name: str, first: "DistributedTensor", other: "DistributedTensor") -> None:
    """Raise :class:`~dlmg.errors.LayoutMismatchError` unless both layouts match.

    The message names the operation, both layouts and ``redistribute``.
    """
    if first.layout.same_distribution(other.layout):
        return
    raise LayoutMismatchError(
        f"{name}: the operands' layouts differ: {first.layout!r} and {other.layout!r}. "
        "Elementwise work needs identical layouts and never communicates; make them match "
        "explicitly, e.g. other = other.redistribute(first.layout)"
    )


def new_tensor(arrays: Sequence[Any], layout: "Layout", dtype: str | None = None) -> "DistributedTensor":
    """A distributed tensor of ``layout`` whose fragments are ``arrays``.

    ``arrays`` lists one array per fragment of ``layout`` (``None`` for
    fragments held by other processes), built by construction to fit, so the
    tensor class's trusted, unvalidated constructor is used. ``dtype`` is
    the first local array's unless given.
    """
    return TensorBase._from_arrays(arrays, layout, dtype)


def replace_fragment_arrays(tensor: "DistributedTensor", arrays: dict[int, Any]) -> None:
    """Put new arrays in place of some fragments of ``tensor`` (JAX in-place updates)."""
    tensor._replace_arrays(arrays)


# --------------------------------------------------------------------------
# the one per-fragment loop: collect -> run -> store


class _Operands:
    """The operands of one call, sorted by kind and checked (see :func:`collect`)."""

    __slots__ = ("lead", "args", "tensors", "zero_d", "others", "broadcast", "placed", "placements")

    def __init__(self, lead: Any, args: list[Any], tensors: list[tuple[int, Any]], zero_d: list[int],
                 others: list[Any], broadcast: bool, placements: list[_Placement]) -> None:
        self.lead = lead
        self.others = others  # the distributed operands after the lead
        self.args = args  # scalars, None and ZeroD in place; None where a tensor goes
        self.tensors = tensors  # (position in args, fragments)
        self.zero_d = zero_d  # positions of 0-d arrays
        self.broadcast = broadcast  # a distributed operand of another shape than the lead's, or 0-d
        self.placed = placements[0]  # the lead's placement
        self.placements = placements[1:]  # the other distributed operands', in the order of others


def collect(
    operands: Sequence[Any], name: str, *, check: bool = True, pending: bool = False, reflected: bool = False,
    broadcasting: bool = False,
) -> _Operands:
    """The operands of one elementwise call, sorted by kind and checked once.

    Every operation's three checks run here, one pass each, before any
    fragment is read: the pending sums (resolved by :func:`~dlmg.ops._pending.keep_or_settle`
    where the operation does not keep them, unless ``pending`` says the caller's
    function does; ``reflected``: the tensor stands on the right), every distributed operand's fragments against
    its layout (:func:`~dlmg.ops._placement.check_fragments`, with its placement
    found), and the layouts: with ``check``, every distributed operand
    must have the lead's distribution (:class:`~dlmg.errors.LayoutMismatchError`),
    except, with ``broadcasting``, one of another shape, 0-d or another layout, which
    marks the call as ``broadcast`` for the caller to align first (operators align
    as the array API's functions do: :func:`dlmg.ops.broadcast.align`). What follows (list
    operations, :func:`map_fragments` with ``collected=``) reads the result,
    placements included, without checking again.
    """
    if not pending:
        for op in operands:  # the full check only where an operand holds a pending reduction
            if isinstance(op, TensorBase) and op.layout.partial is not None:
                operands = keep_or_settle(name, operands, reflected=reflected)
                break
    lead = None
    args: list[Any] = []
    tensors: list[tuple[int, Any]] = []
    zero_d: list[int] = []
    others: list[Any] = []
    placements: list[_Placement] = []
    broadcast = False
    for position, op in enumerate(operands):
        distributed = isinstance(op, TensorBase)  # the common operand, recognised first
        if not distributed and op is not None and not isinstance(op, (SCALAR_TYPES, ZeroD)):
            op = classify_operand(op)
            distributed = isinstance(op, TensorBase)
        if distributed:
            # its fragments checked against its layout, once per call (placement() written out:
            # this runs for every operand of every operator)
            frags = op.fragments
            placed = op._placement
            if placed is not None and placed.fragments is frags:
                check_fragments(frags, placed)
            else:
                check_fragments(frags, None)
                placed = op._placement = _Placement(op)
            placements.append(placed)
            if lead is None:
                lead = op
            else:
                others.append(op)
                if op.layout.same_distribution(lead.layout):  # (then of one shape too)
                    broadcast = broadcast or (broadcasting and op.layout.ndim == 0)
                elif broadcasting:  # another shape, 0-d or another layout: aligned as the namespace aligns
                    broadcast = True
                elif check:
                    check_same_layout(name, lead, op)
            args.append(None)
            tensors.append((position, frags))
        elif isinstance(op, ZeroD):
            zero_d.append(position)
            args.append(op)
        else:  # None or a Python scalar
            args.append(op)
    if lead is None:
        raise TypeError(f"{name} needs at least one distributed tensor operand")
    return _Operands(lead, args, tensors, zero_d, others, broadcast, placements)


def unaliased(result: Any, call: Sequence[Any], positions: Sequence[int], adapter: Any, xp: Any) -> Any:
    """``result``, or a writable copy of it (through ``xp``, the namespace of
    ``adapter``'s framework) where it shares memory with an operand's fragment
    (torch returns ``self`` from ``+t``, ``t.conj()`` of real tensors; NumPy
    ``real`` of a real array) or is read-only (NumPy's ``imag`` of a real
    array): new tensors never alias their inputs and can be written.

    ``adapter`` is the framework of the operands' fragments; a result of another
    framework (``t.numpy()`` of a torch fragment) is compared by the byte ranges
    each framework reports, and a copy of it is made in the operands' one."""
    owner = adapter
    for position in positions:
        arg = call[position]
        if result is arg:
            return xp.asarray(result, copy=True)
        if type(result) is type(arg):
            shared = adapter.shares_memory(result, arg)
        else:
            owner = adapter_for(result)
            shared = ranges_meet(memory_range(owner, result), memory_range(adapter_for(arg), arg))
        if shared:
            return xp.asarray(result, copy=True)
    if owner.is_readonly(result):
        return xp.asarray(result, copy=True)
    return result


def _run(
    fn: Callable[..., Any],
    ops: _Operands,
    indices: Sequence[int],
    nfragments: int,
    scalar_out: bool,
    name: str,
    fresh: bool = True,
    in_place: bool = False,
    new_arrays: bool = False,
) -> list[Any]:
    """``fn`` on every fragment of ``indices``, each in its lead fragment's executor.

    With ``fresh``, a result sharing memory with an operand is copied (with
    ``new_arrays``, only a result that is an operand itself). With
    ``in_place``, a failure says which fragments ``fn`` had already written."""
    lead_frags = ops.lead.fragments
    placed = ops.placed
    executors = placed.executors
    args, tensors, zero_d = ops.args, ops.tensors, ops.zero_d
    # Fragments of the other operands whose framework differs from the lead's.
    lead_fw = placed.frameworks
    foreign = [
        (position, frags)
        for (position, frags), other in zip(tensors[1:], ops.placements)
        if other.frameworks != lead_fw
        and any(frags[i].framework != lead_fw[i] for i in indices)
    ]
    results: list[Any] = [None] * nfragments
    positions = [position for position, _ in tensors]
    dense = placed.dense and all(other.dense for other in ops.placements)
    active: Executor | None = None  # the executor whose device context is entered
    manager: Any = None
    try:
        for i in indices:
            ex = executors[i]
            if ex is None:  # a fragment asked for explicitly that the placement does not hold
                frag = lead_frags[i]
                ex = executor(frag.framework, frag.device)
            if ex is not active and (ex.context is not None or manager is not None):
                # one context per run of fragments on the same device, not one per fragment
                if manager is not None:
                    manager.__exit__(None, None, None)
                    manager = None
                if ex.context is not None:
                    manager = ex.context()
                    manager.__enter__()
                active = ex
            call = list(args)
            if dense:
                for position, frags in tensors:
                    call[position] = frags[i]._array
            else:  # .array says why a padded fragment has none
                for position, frags in tensors:
                    call[position] = frags[i].array
            for position, frags in foreign:
                other = frags[i]
                if other.framework != ex.framework:
                    try:
                        call[position] = move_array(other.array, ex, other.adapter)
                    except Exception as exc:
                        raise fail(f"{name} (handing fragment {i} of operand {position} from "
                                    f"{other.framework} to {ex.framework})", i, ex, exc) from exc
            for position in zero_d:
                call[position] = args[position].for_executor(ex)
            try:
                results[i] = fn(ex.xp, *call)
            except Exception as exc:
                raise fail(name + (partial_note(indices, i) if in_place else ""), i, ex, exc) from exc
            if scalar_out and not hasattr(results[i], "__dlpack__"):
                results[i] = ex.xp.asarray(results[i])  # NumPy turns 0-d results into scalars
            elif fresh and positions and ex.traits.mutable:
                result = results[i]
                if new_arrays:  # arithmetic: only the operand itself can come back
                    for position in positions:  # a loop: cheaper than any() on a generator here
                        if result is call[position]:
                            results[i] = ex.xp.asarray(result, copy=True)
                            break
                elif hasattr(result, "__dlpack__"):
                    try:
                        results[i] = unaliased(result, call, positions, ex.adapter, ex.xp)
                    except Exception as exc:
                        raise fail(f"{name} (copying a result that shares its input's memory)", i, ex, exc) from exc
    finally:
        if manager is not None:
            manager.__exit__(None, None, None)
    if len({lead_fw[i] for i in indices}) > 1:
        _unify_dtypes(results, indices, lead_frags, name)
    return results


def _store(
    results: list[Any],
    lead: "DistributedTensor",
    indices: Sequence[int],
    layout: "Layout",
    out: "DistributedTensor | None",
    in_place: bool,
    name: str,
) -> "DistributedTensor":
    """The results as a tensor: the lead (in place), ``out``, or a new tensor."""
    if in_place:
        lead_frags = lead.fragments
        if not all(lead_frags[i].adapter.traits.mutable for i in indices):
            replace_fragment_arrays(
                lead,
                {i: results[i] for i in indices if not lead_frags[i].adapter.traits.mutable},
            )
        return lead
    if out is not None:
        _write_into(out, results, indices, name)
        return out
    return new_tensor(results, layout)


def map_fragments(
    fn: Callable[..., Any],
    operands: Sequence[Any],
    *,
    name: str = "apply",
    out_layout: "Layout | None" = None,
    indices: Sequence[int] | None = None,
    out: "DistributedTensor | None" = None,
    in_place: bool = False,
    check: bool = True,
    new_arrays: bool = False,
    pending: bool = False,
    collected: _Operands | None = None,
) -> "DistributedTensor | None":
    """Run ``fn(xp, *fragment_arrays)`` on every local fragment.

    Parameters
    ----------
    fn : callable
        Called as ``fn(xp, *args)`` once per fragment, where ``xp`` is the
        array-API namespace of the fragment's framework and ``args`` are the
        operands with distributed tensors replaced by their fragment arrays
        (in that framework), Python scalars as they are and 0-d arrays
        converted to that framework and device.
    operands : sequence
        Distributed tensors, Python scalars, 0-d arrays and ``None`` (passed
        as it is, for optional arguments such as ``clip``'s bounds). The first
        distributed tensor leads: its fragments' frameworks and devices run
        the work, and every other distributed operand must have its layout.
    name : str
        The operation's name for error messages.
    out_layout : Layout, optional
        The result's layout; fragment ``i`` of the result is ``fn``'s result
        for fragment ``i``. By default the lead's layout (without explicit
        strides: results are fresh arrays).
    indices : sequence of int, optional
        The fragments to run on (default: every local fragment of the lead).
    out : DistributedTensor, optional
        Write the results into this tensor's fragments instead of building a
        new tensor (mutable frameworks: in place, same memory; JAX: the
        fragment arrays are replaced).
    in_place : bool
        ``fn`` already modified the lead's fragment arrays in place (mutable
        frameworks) or returned their replacements (JAX); the lead is the
        result. Implies ``out`` is the lead.
    check : bool
        Check that distributed operands share the lead's layout.
    new_arrays : bool
        ``fn`` computes new arrays (arithmetic) and never returns a view of an
        operand, so results are checked only for being an operand itself
        (``x * 1`` in a framework that returns ``x``), not for sharing its
        memory. By default every result is checked: new tensors never share
        memory with their inputs.
    pending : bool
        The caller checked (:func:`~dlmg.ops._pending.keeps_pending`) that ``fn``
        keeps the pending sums of its operands; otherwise a pending operand
        (``layout.partial``) is resolved first, and a pending ``out`` (or lead,
        ``in_place``) is refused (:func:`~dlmg.ops._pending.guard`).
    collected : _Operands, optional
        ``operands`` as :func:`collect` sorted and checked them already (an
        operator that chose its path first): not checked again.

    Returns
    -------
    DistributedTensor or None
        The result (``out`` or the lead itself when writing in place).

    Raises
    ------
    LayoutMismatchError
        When a distributed operand's layout differs from the lead's.
    FragmentError
        When ``fn`` fails on a fragment (chained to the original error).
    """
    if not pending:  # writes into a pending tensor are refused; reads resolve it (in collect)
        if out is not None:
            guard(out, name, writes=True)
        if in_place:
            guard(operands[0], name, writes=True)
    # (reflected: only what is linear either way passes here)
    ops = collected if collected is not None else collect(operands, name, check=check, pending=pending,
                                                           reflected=True)
    layout = out_layout if out_layout is not None else ops.lead.layout.dense
    placed = ops.placed
    if indices is None:
        indices = placed.indices
    if out is not None:
        check_writable(out, indices, name)
    results = _run(
        fn, ops, indices, layout.nfragments, layout.ndim == 0, name, fresh=not in_place and out is None,
        in_place=in_place, new_arrays=new_arrays,
    )
    if not indices and out is None and not in_place:  # this process holds no fragment
        return new_tensor(results, layout, _probe_dtype(fn, operands))
    result = _store(results, ops.lead, indices, layout, out, in_place, name)
    if out_layout is None and out is None and not in_place and indices is placed.indices:
        _inherit(result, placed)  # same devices, frameworks and local fragments as the lead
    return result


def _probe_dtype(fn: Callable[..., Any], operands: Sequence[Any]) -> str | None:
    """The dtype ``fn`` gives on empty NumPy arrays of the operands' dtypes: what a process
    holding no fragment records as its result's dtype (``None`` when that cannot be told)."""
    import numpy as np

    try:
        numpy = get_adapter(DEFAULT_FRAMEWORK)
        args: list[Any] = []
        for op in operands:
            if is_distributed(op):
                args.append(np.empty((0,) * op.ndim, dtype=op.dtype))
            elif op is None or isinstance(op, SCALAR_TYPES):
                args.append(op)
            else:
                args.append(np.zeros((), dtype=canonical(adapter_for(op).dtype_of(op))))
        return canonical(numpy.dtype_of(np.asarray(fn(numpy.namespace(), *args))))
    except Exception:  # a dtype NumPy lacks, or fn needs real data: the lead's dtype then
        return None


def _unify_dtypes(results: list[Any], indices: Sequence[int], frags: Sequence[Any], name: str) -> None:
    """Cast results of fragments of other frameworks to the first result's dtype.

    Frameworks differ in their promotion rules (``int32 / int32`` is float64 in
    NumPy, float32 in torch); one tensor has one dtype, the first local
    fragment's.
    """
    first = None
    for i in indices:
        r = results[i]
        ex = executor(frags[i].framework, frags[i].device)
        got = ex.adapter.dtype_of(r)
        if first is None:
            first = got
        elif got != first:
            try:
                results[i] = ex.run(lambda xp, a: xp.astype(a, ex.dtype(first)), r)
            except Exception as exc:
                raise fail(f"{name} (casting to {first})", i, ex, exc) from exc


def _write_into(out: "DistributedTensor", results: list[Any], indices: Sequence[int], name: str) -> None:
    """Copy per-fragment results into ``out``'s fragments (JAX ones are replaced).

    The casting rule is that of in-place operators (NumPy's ``same_kind``),
    checked for every fragment before any is written: ``int8`` ``out=`` of a
    float result is refused with :class:`~dlmg.errors.DtypeError`.
    """
    frags = out.fragments
    replaced: dict[int, Any] = {}
    for i in indices:
        r = results[i]
        check_inplace(f"{name} (out=)", out.dtype, [adapter_for(r).dtype_of(r)])
    for i in indices:
        frag = frags[i]
        ex = executor(frag.framework, frag.device)
        r = results[i]
        try:
            if adapter_for(r) is not ex.adapter:
                r = move_array(r, ex)
            dtype = ex.adapter.dtype_of(frag.array)
            if ex.adapter.dtype_of(r) != dtype:
                r = ex.run(lambda xp, a: xp.astype(a, ex.dtype(dtype)), r)
            if ex.traits.mutable:
                if ex.context is None:
                    ex.adapter.copy_into(frag.array, r)
                else:
                    with ex.context():
                        ex.adapter.copy_into(frag.array, r)
            else:
                replaced[i] = r
        except Exception as exc:
            raise fail(f"{name} (writing into out){partial_note(indices, i)}", i, ex, exc) from exc
    if replaced:
        replace_fragment_arrays(out, replaced)


# --------------------------------------------------------------------------
# completion boundaries


def synchronize_tensor(tensor: "DistributedTensor") -> None:
    """Wait until all queued work producing ``tensor``'s local fragments is done."""
    synchronize_arrays((f.adapter, f.base, f.device) for f in tensor.fragments if f.is_local)


def synchronize() -> None:
    """Wait until the work queued on every device of every framework in use is done.

    A framework is in use when its module has been imported; nothing is
    imported here.
    """
    for name in adapter_names():
        try:
            adapter = get_adapter(name)
        except Exception:  # a broken adapter cannot have queued work
            continue
        if in_use(adapter):
            adapter.synchronize(None)
