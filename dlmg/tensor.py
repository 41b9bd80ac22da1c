"""The distributed tensor and its fragments.

A :class:`DistributedTensor` is one logical array of one element type whose
elements are spread over fragments as its :class:`~dlmg.layout.Layout` says.
Each :class:`Fragment` wraps an ordinary array of some framework (NumPy,
PyTorch, JAX, CuPy...) holding, along every mode, the elements of the blocks
it owns in increasing global order. Fragments of one tensor may belong to
different frameworks; their shapes follow the layout, their strides may be
anything the framework allows.

Tensors are made by the functions of :mod:`dlmg.construct`
(:func:`~dlmg.from_fragments`, :func:`~dlmg.from_pointers`,
:func:`~dlmg.empty`, :func:`~dlmg.zeros`, :func:`~dlmg.ones`,
:func:`~dlmg.full`, :func:`~dlmg.scatter`) and by :meth:`DistributedTensor.redistribute`
and :meth:`DistributedTensor.to`, never by calling the class.

Processes: the layout names the process (``rank``) holding every fragment;
only this process's fragments carry arrays (:attr:`Fragment.is_local`).
Without :func:`dlmg.distributed.init` dlmg runs in one process (rank 0).

Every method and property is visible from the class: defined here, or in the
mixins of :mod:`dlmg._surface` it names, whose operators, reductions,
conversions and ``repr`` run the functions that :mod:`dlmg.ops`,
:mod:`dlmg.interop` and :mod:`dlmg._printing` provide.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ._hooks import Hook
from ._lookup import fragment_at, fragment_for, fragments_on
from ._surface import (
    ArrayApiMethods, ConversionMethods, ElementMethods, Operators, PrintingMethods, ReductionMethods, ShapeMethods,
)
from .device import Device
from .distributed._state import check_ranks, current
from .dtypes import canonical, info
from .errors import CopyRequiredError, NotLocalError
from .fragment import Fragment, process_rank, verify_fragments
from ._protocols import FrameworkProtocols
from .registry import adapter_for

if TYPE_CHECKING:  # pragma: no cover
    from .layout import Layout
    from .plans.plan import RedistributionPlan

__all__ = ["DistributedTensor", "Fragment", "process_rank"]


_CREATE = object()  # guards the constructor


#: The moves of a tensor (gather, redistribute, to...): :mod:`dlmg.movement`, which
#: lies above the tensor, provides itself here when it is imported.
moves: Hook = Hook("moving a tensor's data", "dlmg.movement")

#: Resolving a pending sum (``layout.partial``) into a layout (``None``: its own split), as
#: ``(tensor, layout, framework) -> tensor``: :mod:`dlmg.ops.contract` provides it.
resolve_pending: Hook = Hook("resolving a pending sum", "dlmg.ops.contract")


class DistributedTensor(FrameworkProtocols, Operators, ElementMethods, ReductionMethods, ShapeMethods,
                        ConversionMethods, PrintingMethods, ArrayApiMethods):
    """One logical array spread over fragments on several devices.

    Made by :func:`dlmg.from_fragments`, :func:`dlmg.from_pointers`,
    :func:`dlmg.empty`/:func:`~dlmg.zeros`/:func:`~dlmg.ones`/:func:`~dlmg.full`,
    :func:`dlmg.scatter`, :meth:`redistribute` and :meth:`to`.

    Attributes
    ----------
    layout : Layout
        How the elements are spread.
    dtype : str
        The dlmg element type name (``"float32"``, ``"bfloat16"``...).
    fragments : tuple of Fragment
        One per layout fragment, in layout order.

    Notes
    -----
    Distributed tensors do not implement ``__dlpack__``: the array API
    leaves distributed arrays out of the protocol. Export single fragments
    (``torch.from_dlpack(dt.fragments[i])``) or :meth:`gather` the tensor
    into one array first.
    """

    # What movement worked out about this tensor's current fragments (plans, source
    # buffers and views): a dlmg.movement.sources.Remembered, made on the first move.
    _remembered: Any = None
    # Where operations run this tensor's fragments (executors, frameworks, device groups):
    # a dlmg.ops._placement.Placement, made on the first operation and handed to results.
    # Worth keeping: making it costs a noticeable part of an operator's time, finding
    # it almost nothing.
    _placement: Any = None
    # Whether the tensor is a fresh operator result whose memory a following operator
    # may reuse when nothing else holds it (``a * b`` in ``a * b + c``; dlmg.ops.pointwise).
    _fresh: bool = False

    # finding fragments by device or by the part of the tensor they hold (dlmg._lookup)
    fragment_for = fragment_for
    fragments_on = fragments_on
    fragment_at = fragment_at

    # the names register_method may not replace
    _CORE = frozenset(
        {"layout", "dtype", "fragments", "shape", "ndim", "size", "nbytes", "gather", "redistribute",
         "to", "fragment", "frameworks", "__getitem__", "__dlpack__", "__dlpack_device__", "__repr__"}
    )

    def __init__(self, *args: Any, token: object = None, **kwargs: Any) -> None:
        if token is not _CREATE:
            raise TypeError(
                "DistributedTensor objects are made by dlmg.from_fragments, dlmg.from_pointers, "
                "dlmg.empty/zeros/ones/full, dlmg.scatter, redistribute() and to()"
            )
        layout, fragments, dtype = args
        self.layout: "Layout" = layout
        self.dtype: str = dtype
        self.fragments: tuple[Fragment, ...] = tuple(fragments)

    def __getstate__(self) -> dict[str, Any]:
        """What pickling and copying keep: the layout, the dtype and the fragments
        (what operations remember about the tensor is found again on use)."""
        return {"layout": self.layout, "dtype": self.dtype, "fragments": self.fragments}

    # -- construction helpers (trusted, unvalidated) -------------------------
    @classmethod
    def _create(cls, layout: "Layout", fragments: Sequence[Fragment], dtype: str) -> "DistributedTensor":
        check_ranks(layout, "a distributed tensor")  # (a rank no process holds would read as missing rows)
        # __init__'s work without its call, which checks a token and unpacks arguments
        # (a large part of making a tensor; every wrap and operation makes one)
        self = object.__new__(cls)
        self.layout, self.dtype, self.fragments = layout, dtype, tuple(fragments)
        return self

    @classmethod
    def _from_arrays(
        cls, arrays: Sequence[Any], layout: "Layout", dtype: str | None = None
    ) -> "DistributedTensor":
        """A tensor whose fragment ``i`` is ``arrays[i]`` (``None`` for remote ones), unchecked.

        For dlmg's own modules, which build arrays that fit by construction.
        """
        frags = []
        last_type: type | None = None
        adapter: Any = None
        for frag, array in zip(layout.fragments, arrays):
            if array is None:
                frags.append(Fragment.remote(frag))
                continue
            if type(array) is not last_type:  # results of one operation share a type
                adapter, last_type = adapter_for(array), type(array)
            frags.append(Fragment.of_result(frag, array, adapter.name, adapter))
        if dtype is None:
            first = next((f for f in frags if f._array is not None), None)
            dtype = first.adapter.dtype_of(first._array) if first is not None else "float32"
        return cls._create(layout, frags, canonical(dtype))

    def _replace_arrays(self, arrays: Mapping[int, Any]) -> None:
        """Put new arrays (same shape, dtype and device) in place of some fragments (in-place
        updates of immutable JAX fragments)."""
        frags = list(self.fragments)
        for index, array in arrays.items():
            frags[index] = frags[index].with_array(array)
        self.fragments = tuple(frags)

    @classmethod
    def register_method(cls, name: str, func: Callable[..., Any] | None = None, *, override: bool = False) -> Any:
        """Attach ``func`` as method ``name`` (usable as a decorator).

        For packages outside dlmg adding methods of their own; dlmg's methods are
        all declared in the class. The core attributes (``gather``,
        ``layout``...) are refused unless ``override``.

        Examples
        --------
        >>> @DistributedTensor.register_method("__neg__")   # doctest: +SKIP
        ... def _neg(self): ...
        """
        def attach(f: Callable[..., Any]) -> Callable[..., Any]:
            if name in cls._CORE and not override:
                raise AttributeError(f"DistributedTensor.{name} is part of the core class; pass override=True")
            setattr(cls, name, f)
            return f

        return attach if func is None else attach(func)

    # -- descriptive attributes ----------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self.layout.shape

    @property
    def ndim(self) -> int:
        """The number of modes."""
        return self.layout.ndim

    @property
    def size(self) -> int:
        """The number of elements of the logical tensor."""
        return self.layout.size

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return info(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the logical tensor (``size * itemsize``; replicas and padding not counted,
        see ``layout.nbytes(dtype)`` for each fragment's memory)."""
        return self.size * self.itemsize

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks of the local fragments, each once, in fragment order."""
        return tuple(dict.fromkeys(f.framework for f in self.fragments if f.framework is not None))

    @property
    def devices(self) -> tuple[Device, ...]:
        """The layout's devices, one per fragment."""
        return self.layout.devices

    def fragment(self, index: int) -> Fragment:
        """Fragment ``index`` (negative values count from the end)."""
        n = len(self.fragments)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"fragment {i} out of range for a tensor of {n} fragments")
        return self.fragments[i]

    @property
    def local_fragments(self) -> tuple[Fragment, ...]:
        """The fragments this process holds."""
        return tuple(f for f in self.fragments if f.is_local)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d distributed tensor")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        """A host copy of the whole tensor as one NumPy array (``np.asarray(dt)``).

        In one process every fragment is here, so this is ``gather(framework="numpy")``
        (a pending sum is resolved first), converted to ``dtype`` if given. The result is
        always a copy: ``copy=False`` raises :class:`~dlmg.errors.CopyRequiredError`.
        Across processes the values lie partly elsewhere and making them whole is a
        collective every process must call: :class:`~dlmg.errors.NotLocalError` names
        :meth:`gather`, which is that collective.
        """
        if copy is False:
            raise CopyRequiredError(
                "np.asarray(dt, copy=False): a DistributedTensor's values lie in its fragments, so one NumPy "
                "array of them is always a copy; pass copy=None (or True), or export single fragments "
                "without a copy: np.from_dlpack(dt.fragments[i])"
            )
        if not all(f.is_local for f in self.fragments):
            ranks = sorted({f.rank for f in self.fragments if not f.is_local})
            raise NotLocalError(
                f"np.asarray(dt): fragments of this tensor lie in other processes (ranks {ranks}); making it "
                "whole is a collective every process calls: dt.gather(framework='numpy') (all-gather) or "
                "dt.gather(framework='numpy', root=0)"
            )
        host = self.gather(framework="numpy")
        return host if dtype is None else host.astype(dtype, copy=False)

    # __iter__, __getitem__, __setitem__, __dlpack__ and __dlpack_device__ come from
    # ArrayApiMethods (dlmg.array_api): the array API's indexing and its DLPack rule

    # -- moving data ---------------------------------------------------------
    def gather(self, framework: str | None = None, device: Any = None, out: Any = None, *,
               root: int | None = None) -> Any:
        """The whole tensor as one regular array, in row-major order.

        Parameters
        ----------
        framework : str, optional
            ``"numpy"``, ``"torch"``, ``"jax"``, ``"cupy"``... By default the
            framework of the first local fragment (or of ``out``).
        device : Device or str, optional
            Where the result lives. By default the device of the first
            fragment where ``framework`` can hold arrays there, otherwise where
            it can (the framework's :meth:`~dlmg.adapters.Adapter.landing_device`):
            ``framework="numpy"`` of GPU fragments lands in host memory,
            ``framework="cupy"`` of host fragments on ``cuda:0``.
            With ``out``, ``out``'s device.
        out : array, optional
            A writable array of the tensor's shape and dtype, of any mutable
            framework and any strides (a transposed view, a slice), filled in
            place and returned.
        root : int, optional
            Across processes: the only rank receiving the array.

        Returns
        -------
        array
            An array of ``framework`` (or ``out``).

        Notes
        -----
        Copies run as a few strided assignments per fragment, never element by
        element. Across processes (after :func:`dlmg.distributed.init`) this
        is an all-gather: every process receives the whole tensor, unless
        ``root`` names the one process that does (the others get ``None``).
        """
        if current() is None:  # (across processes the collective checks, inside its agreement)
            verify_fragments(self.fragments)
        if self.layout.partial is not None:  # a pending sum: its value first
            return resolve_pending(self, None, None).gather(framework, device, out, root=root)
        return moves.get().gather(self, framework=framework, device=device, out=out, root=root)

    def redistribute(self, layout: "Layout", framework: str | None = None) -> "DistributedTensor":
        """The tensor in another layout of the same shape.

        Fragments that stay as they are (same device, same elements, same
        framework) are reused, not copied; everything else moves by strided
        copies. See :func:`dlmg.plan_redistribution` for the plan.

        Parameters
        ----------
        layout : Layout
            The target layout (any blocks, grid, replicas, devices, strides).
        framework : str, optional
            The frameworks of the new fragments; by default a fragment keeps the
            framework of a source fragment on its device, else the tensor's.
        """
        if current() is None:  # (across processes the collective checks, inside its agreement)
            verify_fragments(self.fragments)
        if self.layout.partial is not None:  # resolving a pending sum is a redistribution
            return resolve_pending(self, layout, framework)
        return moves.get().redistribute(self, layout, framework=framework)

    def plan_redistribution(self, layout: "Layout") -> "RedistributionPlan":
        """The copy plan :meth:`redistribute` would run for ``layout``.

        Across processes (after :func:`dlmg.distributed.init`) the plan of
        messages instead: :class:`~dlmg.plans.routes.Routes`, with the
        bytes per pair of processes (``bytes_by_ranks``) and the transport.
        """
        return moves.get().tensor_plan(self, layout)

    def to(self, framework: str, copy: bool | None = None) -> "DistributedTensor":
        """The same tensor with every fragment handed to ``framework`` through DLPack.

        Parameters
        ----------
        framework : str
            The target framework.
        copy : bool, optional
            ``None``: zero-copy where possible, a copy otherwise; ``True``:
            always copy; ``False``: never copy, raising
            :class:`~dlmg.errors.CopyRequiredError` where the target would
            need one (JAX and unaligned host buffers, 64-bit types without x64...).
        """
        return moves.get().to_framework(self, framework, copy=copy)
