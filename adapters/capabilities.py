"""The optional fast paths of an adapter, each a named capability it may declare.

:class:`~dlmg.adapters.Adapter` holds what every framework must answer. What a
framework may do better than the general path -- copies issued together, one
call over a list of arrays, compiled elementwise work, whole-array
rearrangements for frameworks without views, quicker DLPack imports and
exports, a whole operation handed to the framework that owns every fragment --
is a small class here, which an adapter names among its bases::

    class TorchAdapter(BaseAdapter, BulkCopies, ListOperators):
        ...

dlmg's core asks for a capability (``isinstance(adapter, BulkCopies)``) and
takes the general path where an adapter does not declare it; it never probes an adapter with ``getattr``. The functions at
the end of this module (:func:`copy_pairs`, :func:`concatenate`,
:func:`exporter_of`, :func:`compiled`) are those questions with their general
answers. :func:`dlmg.testing.check_adapter` checks every capability an adapter
declares.

What the calls exchange are typed records (:class:`Span`, :class:`Cut`,
:class:`Slice`, :class:`Concat`, :class:`Retiling`), hashable where they
describe a geometry, so that a framework can compile one call per geometry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Any, NamedTuple, Union

if TYPE_CHECKING:  # pragma: no cover
    from dlmg.device import Device
    from dlmg.layout import Layout

    from ._base import Adapter

__all__ = [
    "CAPABILITIES",
    "LIST_OPERATORS",
    "BulkCopies",
    "CompiledElementwise",
    "Concat",
    "Cut",
    "Delegating",
    "Delegation",
    "ListOperators",
    "QuickExport",
    "QuickImport",
    "Rearranging",
    "Retiling",
    "Slice",
    "Span",
    "Tiling",
    "compiled",
    "concatenate",
    "concatenate_by_views",
    "copy_pairs",
    "exporter_of",
    "exports_itself",
]


# -- the records ------------------------------------------------------------------------
class Span(NamedTuple):
    """Elements ``start`` to ``start + size`` of a C-ordered ``array`` (:meth:`Rearranging.assemble`)."""

    array: Any
    start: int
    size: int


class Cut(NamedTuple):
    """Elements ``start`` to ``start + size`` of a C-ordered array, as an array of
    ``shape`` (:meth:`Rearranging.split`)."""

    start: int
    size: int
    shape: tuple[int, ...]


class Slice(NamedTuple):
    """A basic slice of one source array (:meth:`Rearranging.retile`).

    ``sources[source]``'s elements in C order reshaped to ``dims``, then
    ``starts[k]:starts[k] + extents[k]`` along each axis ``k``, reshaped to ``box``.
    """

    source: int
    dims: tuple[int, ...]
    starts: tuple[int, ...]
    extents: tuple[int, ...]
    box: tuple[int, ...]


class Concat(NamedTuple):
    """The arrays the ``children`` tilings make, concatenated along ``axis``."""

    axis: int
    children: tuple["Tiling", ...]


#: How a new array is made from slices of source arrays.
Tiling = Union[Slice, Concat]


class Retiling(NamedTuple):
    """One new array of :meth:`Rearranging.retile`: the whole ``tiling``, of ``shape``."""

    shape: tuple[int, ...]
    tiling: Tiling


class Delegation(NamedTuple):
    """A whole operation a framework runs itself (:class:`Delegating`).

    ``call`` names what runs, as plans show it (``"jax.device_put"``);
    ``run(arrays)`` takes the source fragments' arrays in fragment order and
    returns the result's fragments' arrays in the target layout's fragment
    order, or ``None`` where it cannot take these arrays as they are (then
    dlmg's own plan runs).
    """

    call: str
    run: Callable[[Sequence[Any]], Sequence[Any] | None]


#: The arithmetic operators :meth:`ListOperators.list_operator` may be asked for.
LIST_OPERATORS = ("add", "subtract", "multiply", "divide", "pow", "floor_divide", "remainder")


# -- the capabilities -------------------------------------------------------------------
class BulkCopies:
    """Many copies among one framework's arrays issued together, and views carved out
    of one allocation recognised as such (so that one copy reads several of them).

    The copying calls queue their copies in order on the framework's current stream,
    with no host-side wait.
    """

    def copy_many(self, dsts: Sequence[Any], srcs: Sequence[Any]) -> None:
        """Write each ``srcs[i]`` into the view ``dsts[i]`` (pairs as for
        :meth:`~dlmg.adapters.Adapter.copy_into`; the destinations do not overlap),
        as few launches as the framework allows (one batched launch, or its copy
        engine directly)."""
        raise NotImplementedError

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """Write the arrays ``srcs`` one after another along their first axis into
        ``dst``, a C-contiguous view of exactly their stacked shape: every piece
        has ``dst``'s trailing extents, and any strides. A gather of slabs is one
        (1-D pieces), and so are the bands of rows that row slabs give a column
        slab (2-D strided pieces). :func:`concatenate_by_views` is the general way."""
        raise NotImplementedError

    def allocation_of(self, array: Any) -> tuple[Any, int] | None:
        """The one-dimensional C-contiguous array whose memory ``array`` views, and
        how many elements into it ``array``'s first element lies; ``None`` where
        ``array`` is no such view.

        dlmg carves the dense fragments of one GPU out of one allocation; reading
        several such fragments through the allocation lets one copy move a whole
        redistribution. Answer only where the framework's own record of the view
        says so (``None`` costs a copy per fragment, a wrong answer reads the wrong
        memory).
        """
        raise NotImplementedError


class QuickImport:
    """A quicker :meth:`~dlmg.adapters.Adapter.from_dlpack` for many arrays known alike."""

    def importer(self, source: "Adapter", dtype: str,
                 shape: tuple[int, ...]) -> Callable[[Any, "Device"], Any] | None:
        """``take_in(array, device)`` importing an array of ``source``, of ``dtype``,
        no larger than ``shape`` along any axis and already on ``device`` (the
        fragments of one tensor), as ``from_dlpack(array, device=device)`` would,
        sharing the array's memory (a framework whose arrays cannot be written may
        copy where its own import does, as JAX does with unaligned host buffers);
        ``None`` where there is none for these arrays.

        What holds for all of them (the dtype, the size) is checked here, once.
        Where ``take_in`` cannot take an array as it is, it returns ``None`` or
        raises, and the caller asks ``from_dlpack``, which copies or says why not.
        """
        raise NotImplementedError


class QuickExport:
    """An export kept by a fragment that costs less than :meth:`~dlmg.adapters.Adapter.export`."""

    def exporter(self, array: Any) -> Callable[..., Any]:
        """The call exporting ``array`` (keywords as ``__dlpack__``), kept by a
        fragment for its later exports (the array's own ``__dlpack__`` where
        ``export`` adds nothing for it). Checks that do not change over the
        array's life (its dtype) may run here once; what may change (the current
        device) must stay in the call."""
        raise NotImplementedError

    def exports_itself(self, dtype: Any) -> bool:
        """Whether arrays whose native dtype object is ``dtype`` are exported by
        their own ``__dlpack__`` with nothing added (every keyword of the protocol
        taken, no check of dlmg's needed). A fragment wrapped by
        :func:`dlmg.from_fragments` then keeps ``array.__dlpack__`` from the start,
        its dtype having been asked once per run of fragments instead of once per
        first export. ``False`` unless an adapter says otherwise."""
        return False


class ListOperators:
    """One call applying an arithmetic operator to lists of arrays at once."""

    def list_operator(self, name: str, in_place: bool = False) -> Callable[..., Any] | None:
        """The list form of operator ``name`` (one of :data:`LIST_OPERATORS`), or
        ``None`` where the framework has none for it.

        ``call(xs, ys)`` with two lists of arrays of equal shapes pair by pair, or
        ``call(xs, scalar)`` with a Python scalar: the list of ``xs[i] <op> ys[i]``
        (``in_place``: each result written into ``xs[i]``, the ``x += y`` form; what
        the call returns is then not used). The results, their dtypes and the errors raised must be those of the
        operator applied pair by pair; what it saves is the host work of one call
        per array (torch's ``_foreach_*`` launch one kernel for many arrays on a
        GPU). Callers fall back to the pair-by-pair operator for arrays that
        record gradients, and use list operations only where every fragment is of
        one framework. In place, a failure may carry the position of the pair that
        failed as the exception's ``list_position`` (the arrays before it are
        written), which the error then names; without it, the first.
        """
        raise NotImplementedError


class CompiledElementwise:
    """A compiler for elementwise functions (``jax.jit``, ``torch.compile``, ``cupy.fuse``).

    How far the core leans on it are facts of the framework, stated in the
    adapter's traits: whether the compiler traces lists of arrays
    (:attr:`~dlmg.adapters.Traits.batches_elementwise`) and whether single
    operators are worth a compiled call
    (:attr:`~dlmg.adapters.Traits.batches_operators`).
    """

    def compile_elementwise(self, fn: Callable[..., Any], device: "Device") -> tuple[Callable[..., Any], str]:
        """A compiled form of ``fn(xp, *args)`` (the work on one fragment, given an
        array-API namespace ``xp`` and the fragment's arrays and Python scalars)
        for this framework's arrays on ``device``.

        Returns ``(kernel, compiler)``: ``kernel(*args)`` returns what
        ``fn(xp, *args)`` returns (a compiler may trace ``fn`` once and specialise
        on the arguments' shapes and dtypes; callers keep one kernel per function,
        dtype, shape and device), ``compiler`` says what compiles it
        (``"jax.jit"``, or ``"eager (why)"`` where it cannot here).
        """
        raise NotImplementedError


class Rearranging:
    """Whole-array rearrangements made by the framework itself, for a framework
    without views (JAX): where dlmg would otherwise copy through a staging buffer
    of a framework with views and hand the result over.

    Every call returns ``None`` where the framework does not make that result
    itself (the caller then takes the general path).
    """

    def assemble(self, pieces: Sequence[Span], shape: tuple[int, ...], device: "Device") -> Any:
        """A new array of ``shape`` on ``device`` whose elements, in C order, are the
        spans of ``pieces`` one after another (all arrays this framework's, on
        ``device``): a gather of slabs."""
        raise NotImplementedError

    def split(self, array: Any, pieces: Sequence[Cut]) -> list[Any] | None:
        """New arrays, one per cut of ``pieces``, on ``array``'s device: a scatter into slabs."""
        raise NotImplementedError

    def compose(self, arrays: Sequence[Any], stacked: tuple[int, ...], axes: tuple[int, ...],
                shape: tuple[int, ...], device: "Device") -> Any:
        """A new array of ``shape`` on ``device``: ``arrays`` (of one shape) stacked,
        reshaped to ``stacked``, their axes permuted by ``axes`` (as ``transpose``)
        and reshaped to ``shape``: a gather of a regular block-cyclic grid."""
        raise NotImplementedError

    def decompose(self, array: Any, shape: tuple[int, ...], axes: tuple[int, ...], count: int,
                  part: tuple[int, ...]) -> list[Any] | None:
        """New arrays, the inverse of :meth:`compose`: ``array`` reshaped to ``shape``,
        its axes permuted by ``axes``, reshaped to ``(count, *part)`` and cut along
        the first axis."""
        raise NotImplementedError

    def retile(self, arrays: Sequence[Any], targets: Sequence[Retiling], device: "Device") -> list[Any] | None:
        """New arrays on ``device``, one per :class:`Retiling` of ``targets``, made from
        ``arrays`` (C-ordered, all on ``device``): a redistribution between layouts
        on one device in one pass over the bytes, where a gather followed by a
        scatter makes two."""
        raise NotImplementedError


class Delegating:
    """Whole operations handed to the framework that owns every fragment.

    Where each fragment of a tensor is an array of one framework that can do
    the whole operation itself (JAX's ``device_put`` of a sharded array), dlmg
    hands it the operation instead of running its own copy plan: the
    framework's own path, with no copies of dlmg's.
    """

    def delegated_redistribution(self, source: "Layout", target: "Layout", dtype: str) -> Delegation | None:
        """How this framework moves a tensor of ``dtype`` from ``source`` to ``target``
        in one operation of its own, or ``None`` where it cannot express the move
        (then dlmg's plan runs).

        Asked only where every fragment of ``source`` is this process's, unpadded,
        and one array of this framework on its fragment's device, of the
        fragment's shape; the arrays :meth:`Delegation.run` returns become the
        new fragments as they are, so they must be the framework's arrays of
        ``target``'s fragment shapes, on its fragments' devices. The answer
        depends on the layouts and the dtype only: keep it per triple.
        """
        raise NotImplementedError

    def delegated_einsum(self, subscripts: str, operands: tuple["Layout", ...], out: "Layout",
                         dtype: str) -> Delegation | None:
        """How this framework runs ``einsum(subscripts, ...)`` over operands laid out
        as ``operands`` (all of ``dtype``) into ``out`` as one operation of its own
        (``jax.jit`` of ``jnp.einsum`` with in and out shardings), or ``None`` where
        it cannot express a layout (then dlmg's contraction plan runs).

        Asked only where every fragment of every operand is this process's and
        one array of this framework, and nothing is a pending sum. ``run`` takes
        the operands' fragments' arrays, operand after operand, each in fragment
        order, and returns ``out``'s fragments' arrays in fragment order. The
        answer depends on the arguments only: keep it per value.
        """
        raise NotImplementedError


#: Every capability an adapter may declare.
CAPABILITIES: tuple[type, ...] = (
    BulkCopies, QuickImport, QuickExport, ListOperators, CompiledElementwise, Rearranging, Delegating,
)


# -- asking, with the general answers ------------------------------------------------------
def copy_pairs(adapter: "Adapter", dsts: Sequence[Any], srcs: Sequence[Any]) -> None:
    """Write each ``srcs[i]`` into ``dsts[i]``: :meth:`BulkCopies.copy_many` where the
    adapter declares it, else :meth:`~dlmg.adapters.Adapter.copy_into` pair by pair."""
    if isinstance(adapter, BulkCopies):
        adapter.copy_many(dsts, srcs)
        return
    for dst, src in zip(dsts, srcs):
        adapter.copy_into(dst, src)


def concatenate_by_views(adapter: "Adapter", dst: Any, srcs: Sequence[Any]) -> None:
    """:meth:`BulkCopies.concatenate_into` the general way: each piece into its view of ``dst``."""
    views, offset = [], 0
    strides = adapter.strides_of(dst)
    for src in srcs:
        shape = adapter.shape_of(src)
        views.append(adapter.as_strided(dst, shape, strides, offset))
        size = 1
        for n in shape:
            size *= n
        offset += size
    copy_pairs(adapter, views, srcs)


def concatenate(adapter: "Adapter", dst: Any, srcs: Sequence[Any]) -> None:
    """:meth:`BulkCopies.concatenate_into` where the adapter declares it, else
    :func:`concatenate_by_views`."""
    if isinstance(adapter, BulkCopies):
        adapter.concatenate_into(dst, srcs)
    else:
        concatenate_by_views(adapter, dst, srcs)


def exporter_of(adapter: "Adapter", array: Any) -> Callable[..., Any]:
    """The export a fragment keeps for ``array``: :meth:`QuickExport.exporter` where the
    adapter declares it, else :meth:`~dlmg.adapters.Adapter.export` bound to ``array``."""
    if isinstance(adapter, QuickExport):
        return adapter.exporter(array)
    return partial(adapter.export, array)


def exports_itself(adapter: "Adapter", dtype: Any) -> bool:
    """:meth:`QuickExport.exports_itself` where the adapter declares it, else ``False``."""
    try:
        return _exports_itself(adapter, dtype)
    except TypeError:  # an unhashable dtype object
        return isinstance(adapter, QuickExport) and adapter.exports_itself(dtype)


# Cache: the answer per (adapter, dtype object), values both; asked once per wrapped
# tensor, and finding the answer is cheaper than asking the adapter again. A few
# frameworks with a few dozen dtypes each: 256 entries hold them all.
@lru_cache(maxsize=256)
def _exports_itself(adapter: "Adapter", dtype: Any) -> bool:
    return isinstance(adapter, QuickExport) and adapter.exports_itself(dtype)


def compiled(adapter: "Adapter", fn: Callable[..., Any], device: "Device") -> tuple[Callable[..., Any], str]:
    """:meth:`CompiledElementwise.compile_elementwise` where the adapter declares it,
    else ``fn`` run as it is with the adapter's namespace (``"eager"``)."""
    if isinstance(adapter, CompiledElementwise):
        return adapter.compile_elementwise(fn, device)
    xp = adapter.namespace()

    def eager(*args: Any) -> Any:
        return fn(xp, *args)

    return eager, "eager"
