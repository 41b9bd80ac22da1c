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

Operators and reductions are not defined here; :mod:`dlmg.ops` attaches
them with :meth:`DistributedTensor.register_method`.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, Callable, Sequence

from .device import Device
from .dtypes import canonical, info
from .errors import DLPackError, FragmentError
from .registry import adapter_for

if TYPE_CHECKING:  # pragma: no cover
    from .adapters import Adapter
    from .layout import FragmentLayout, Layout
    from .plans.plan import RedistributionPlan

__all__ = ["DistributedTensor", "Fragment", "process_rank"]


def process_rank() -> int:
    """The rank of this process among those sharing tensors (0 while dlmg runs in one process)."""
    get = _RANK_OF[0]
    if get is None:  # bound once: asked for every fragment of every call
        from .distributed._state import rank as get

        _RANK_OF[0] = get
    return get()


_RANK_OF: list[Any] = [None]


_CREATE = object()  # guards the constructors


class Fragment:
    """One piece of a distributed tensor: an ordinary array of some framework.

    Attributes
    ----------
    index : int
        The fragment number in the layout (column-major over the grid, then replica).
    layout : FragmentLayout
        The fragment's geometry (coordinates, local shape, owned blocks).
    framework : str or None
        The framework of :attr:`array` (``None`` for a fragment of another process).
    rank : int
        The process holding it.

    Notes
    -----
    ``torch.from_dlpack(fragment)``, ``jnp.from_dlpack(fragment)`` and
    ``np.from_dlpack(fragment)`` take the fragment's array without a copy:
    :meth:`__dlpack__` forwards to the owning framework's export, made to
    work whatever CUDA device is current.

    A fragment wrapped from raw memory whose blocks sit apart (padded
    ``block_strides``) is no single strided array: it keeps its whole memory
    as a flat array (:attr:`memory`) and exposes per-block views
    (:meth:`block_views`); its :attr:`array` raises.

    :attr:`readonly` says whether the memory must not be written: a
    read-only NumPy array, a JAX array, a DLPack tensor marked
    ``READ_ONLY``, or memory handed on from one of them by :meth:`to`
    without a copy (torch and CuPy arrays cannot carry the fact themselves).
    In-place operations refuse such fragments before writing anything.
    """

    __slots__ = (
        "index", "layout", "framework", "rank", "_array", "_memory", "_adapter", "_dl_device", "_readonly",
        "__weakref__",
    )

    def __init__(
        self,
        layout: "FragmentLayout",
        array: Any,
        framework: str | None,
        *,
        rank: int | None = None,
        memory: Any = None,
        readonly: bool = False,
        token: object = None,
        adapter: "Adapter | None" = None,
        dl_device: tuple[int, int] | None = None,
    ) -> None:
        if token is not _CREATE:
            raise TypeError("Fragment objects are made by dlmg's constructors (dlmg.from_fragments, ...)")
        self._readonly = bool(readonly)  # handed on from a read-only source, whatever the array says
        self.index = layout.index
        self.layout = layout
        self.framework = framework
        self.rank = layout.rank if rank is None else rank
        self._array = array
        self._memory = memory
        # what the constructor already knows (the array's adapter, its DLPack device)
        # is kept; anything else is asked once, when first needed
        self._adapter: "Adapter | None" = adapter
        self._dl_device: tuple[int, int] | None = dl_device  # an array never changes device

    # -- constructors (for dlmg's own modules; users get fragments from tensors) ----
    @classmethod
    def of_array(
        cls,
        layout: "FragmentLayout",
        array: Any,
        framework: str,
        *,
        rank: int | None = None,
        readonly: bool = False,
        adapter: "Adapter | None" = None,
        dl_device: tuple[int, int] | None = None,
    ) -> "Fragment":
        """A fragment held as ``array``, an array of ``framework`` of the local shape
        (``readonly``: the memory came, without a copy, from a read-only source;
        ``adapter`` and ``dl_device``: what the caller already knows of the array)."""
        return cls(layout, array, framework, rank=rank, readonly=readonly, adapter=adapter, dl_device=dl_device,
                   token=_CREATE)

    @classmethod
    def of_memory(
        cls, layout: "FragmentLayout", memory: Any, framework: str, *, rank: int | None = None, readonly: bool = False
    ) -> "Fragment":
        """A padded fragment held as ``memory``, a flat array of ``layout.span`` elements."""
        return cls(layout, None, framework, rank=rank, memory=memory, readonly=readonly, token=_CREATE)

    @classmethod
    def remote(cls, layout: "FragmentLayout", rank: int | None = None) -> "Fragment":
        """A fragment held by another process (``rank``; by default the layout's)."""
        return cls(layout, None, None, rank=rank, token=_CREATE)

    def with_array(self, array: Any, framework: str | None = None) -> "Fragment":
        """This fragment's slot held by another array (``framework`` read from it by default)."""
        if framework is None:
            from .registry import framework_of

            framework = framework_of(array)
        return Fragment(self.layout, array, framework, rank=self.rank, token=_CREATE)

    def with_layout(self, layout: "FragmentLayout") -> "Fragment":
        """The same memory as the fragment of another layout that holds the same elements."""
        return Fragment(layout, self._array, self.framework, rank=self.rank, memory=self._memory,
                        readonly=self._readonly, token=_CREATE)

    # -- what it is ----------------------------------------------------------
    @property
    def is_local(self) -> bool:
        """Whether this process holds the fragment's memory."""
        return self.rank == process_rank() and (self._array is not None or self._memory is not None)

    @property
    def readonly(self) -> bool:
        """Whether the fragment's memory must not be written.

        True when the array itself says so (a NumPy array that is not
        writeable, a JAX array, a DLPack producer marked ``READ_ONLY``) or
        when the memory was handed on without a copy from such a source
        (``to("torch")`` of read-only NumPy or JAX fragments).
        """
        if self._readonly:
            return True
        if not self.is_local:
            return False
        return bool(self.adapter.is_readonly(self.base))

    @property
    def inherits_readonly(self) -> bool:
        """Whether the memory came, without a copy, from a read-only source
        (as opposed to the array itself being read-only)."""
        return self._readonly

    @property
    def is_padded(self) -> bool:
        """Whether the memory is no single strided array (padded blocks; see :meth:`block_views`)."""
        return self._array is None and self._memory is not None

    @property
    def array(self) -> Any:
        """The framework's own array of the local shape.

        Raises
        ------
        FragmentError
            For a fragment of another process (the message names its rank), or
            a padded fragment, which no single strided array describes.
        """
        if self._array is None and self._memory is None:
            self._check_local("array")
        if self._array is None and self._memory is not None:
            lay = self.layout.layout
            raise FragmentError(
                f"fragment {self.index} lies in padded blocks (block={lay.block}, "
                f"element_strides={lay.element_strides}, block_strides={lay.block_strides}) that no "
                f"single strided array can describe; use fragment.block_views() or fragment.memory"
            )
        return self._array

    @property
    def memory(self) -> Any:
        """The whole memory of a fragment wrapped from raw memory with explicit
        strides, as a flat 1-D array of ``layout.span`` elements (padding
        included); ``None`` for fragments that are plain arrays."""
        return self._memory

    @property
    def adapter(self) -> "Adapter":
        """The framework adapter of the fragment's array."""
        if self._adapter is None:
            if self.framework is None:
                raise FragmentError(f"fragment {self.index} is held by process {self.rank}, not this one")
            from .registry import get_adapter

            self._adapter = get_adapter(self.framework)
        return self._adapter

    @property
    def device(self) -> Device:
        """The device of the fragment's layout slot."""
        return self.layout.device

    @property
    def coords(self) -> tuple[int, ...]:
        """Grid coordinates."""
        return self.layout.coords

    @property
    def replica(self) -> int:
        """Replica number (0 when the layout is not replicated)."""
        return self.layout.replica

    @property
    def blocks(self) -> tuple[tuple[int, ...], ...]:
        """Per mode, the global block indices held, increasing."""
        return self.layout.blocks

    @property
    def shape(self) -> tuple[int, ...]:
        """Local shape."""
        return self.layout.shape

    @property
    def size(self) -> int:
        """Elements held."""
        return self.layout.size

    # -- memory the copy engine reads and writes ----------------------------
    @property
    def base(self) -> Any:
        """The array holding the fragment's memory: :attr:`memory` for a padded
        fragment, :attr:`array` otherwise (``None`` for a remote one). Plan
        offsets and strides are relative to its first element."""
        return self._memory if self._memory is not None else self._array

    def block_views(self) -> list[tuple[tuple[slice, ...], Any]]:
        """Every owned block as ``(global slices, view of the fragment's memory)``.

        Works for every local fragment; for padded ones this is the way to
        reach the elements in their own framework.
        """
        self._check_local("block_views")
        out = []
        if self._memory is None:
            for glob, loc in self.layout.block_slices():
                out.append((glob, self._array[loc]))
            return out
        lay = self.layout.layout
        es = lay.element_strides
        adapter = self.adapter
        for glob, loc in self.layout.block_slices():
            start = [sl.start for sl in loc]
            offset = self.layout.memory_offset(start) if self.layout.size else 0
            shape = tuple(sl.stop - sl.start for sl in loc)
            out.append((glob, adapter.as_strided(self._memory, shape, es, offset)))
        return out

    # -- DLPack --------------------------------------------------------------
    def _check_local(self, what: str) -> None:
        if not self.is_local:
            raise FragmentError(
                f"{what}: fragment {self.index} is held by process {self.rank}; this process "
                f"(rank {process_rank()}) has no memory of it"
            )

    def __dlpack__(self, **kwargs: Any) -> Any:
        """Export the fragment's array (keywords as the array API's ``__dlpack__``)."""
        adapter = self._adapter
        if adapter is not None and self._array is not None and not self._readonly:  # the common case, kept short
            return adapter.export(self._array, **kwargs)
        if not self.is_local:
            raise DLPackError(f"fragment {self.index} is held by process {self.rank}; it cannot be exported here")
        if self._array is None:
            raise DLPackError(
                f"fragment {self.index} lies in padded blocks that no single DLPack tensor can describe; "
                "export its block_views() or its memory instead"
            )
        capsule = self.adapter.export(self._array, **kwargs)
        if self._readonly:  # memory from a read-only source: say so to consumers that listen (NumPy)
            from .dlpack.capsule import mark_readonly

            mark_readonly(capsule)
        return capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack ``(device_type, device_id)`` of the fragment's array.

        A fragment in host slot ``cpu:k`` reports ``(1, k)`` (JAX itself says
        ``(1, 0)`` for all its CPU devices, NumPy and torch have only one), so
        that ``jnp.from_dlpack(fragment)`` lands on JAX's CPU device ``k``,
        zero-copy; NumPy and torch read any CPU id as the host.
        """
        if self._dl_device is not None:
            return self._dl_device
        if not self.is_local or self._array is None:
            raise DLPackError(f"fragment {self.index} cannot be exported here (remote or padded)")
        pair = self.adapter.dlpack_device(self._array)
        if pair[0] == 1 and self.device.kind == "cpu":
            pair = (1, self.device.index)
        self._dl_device = pair
        return pair

    def __repr__(self) -> str:
        where = f"rank {self.rank}" if not self.is_local else self.framework
        kind = " padded" if self.is_padded else ""
        return (
            f"Fragment(index={self.index}, coords={self.coords}, replica={self.replica}, "
            f"device='{self.device}', shape={self.shape}, {where}{kind})"
        )


class DistributedTensor:
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

    # the names :mod:`dlmg.ops` and friends may not replace through register_method
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

    # -- construction helpers (trusted, unvalidated) -------------------------
    @classmethod
    def _create(cls, layout: "Layout", fragments: Sequence[Fragment], dtype: str) -> "DistributedTensor":
        return cls(layout, fragments, dtype, token=_CREATE)

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
                frags.append(Fragment(frag, None, None, token=_CREATE))
                continue
            if type(array) is not last_type:  # results of one operation share a type
                adapter, last_type = adapter_for(array), type(array)
            frags.append(Fragment(frag, array, adapter.name, token=_CREATE, adapter=adapter))
        if dtype is None:
            local = [f for f in frags if f._array is not None]
            dtype = local[0].adapter.dtype_of(local[0]._array) if local else "float32"
        return cls._create(layout, frags, canonical(dtype))

    def _replace_arrays(self, arrays: Mapping[int, Any]) -> None:
        """Put new arrays (same shape, dtype and device) in place of some fragments (in-place
        updates of immutable JAX fragments)."""
        from .registry import framework_of

        frags = list(self.fragments)
        for index, array in arrays.items():
            old = frags[index]
            frags[index] = Fragment(old.layout, array, framework_of(array), rank=old.rank, token=_CREATE)
        self.fragments = tuple(frags)

    @classmethod
    def register_method(cls, name: str, func: Callable[..., Any] | None = None, *, override: bool = False) -> Any:
        """Attach ``func`` as method ``name`` (usable as a decorator).

        For modules adding operators and reductions (``__add__``, ``sum``...).
        The core attributes (``gather``, ``layout``...) are refused unless
        ``override``.

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

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(
            "a DistributedTensor is not iterable element by element; gather() it, or iterate over .fragments"
        )

    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            "a DistributedTensor is not converted implicitly; call dt.gather(framework='numpy') for one array"
        )

    # -- the DLPack protocol: not for distributed arrays ---------------------
    def __dlpack__(self, **kwargs: Any) -> Any:
        raise DLPackError(
            f"a DistributedTensor ({self.layout.nfragments} fragments) cannot be exported as one DLPack "
            "tensor (the array API leaves distributed arrays out of the protocol); gather() it into one "
            "array, or export single fragments: any framework's from_dlpack(dt.fragments[i])"
        )

    def __dlpack_device__(self) -> tuple[int, int]:
        raise DLPackError(
            "a DistributedTensor has no single DLPack device; gather() it, or ask dt.fragments[i]"
        )

    # -- element access ------------------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        """One element, read from a fragment holding it: ``dt[i, j]``.

        Only tuples of ints (or an int for 1-D tensors) are accepted;
        negative indices count from the end. Returns a Python scalar where the
        framework gives one (``.item()``), else a 0-d array.

        Raises
        ------
        IndexError
            For an index out of bounds or of the wrong length.
        TypeError
            For slices and other keys (gather first).
        """
        from ._element import read_element

        return read_element(self, index)

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
            fragment where ``framework`` can hold arrays there, otherwise the
            host (the framework's :meth:`~dlmg.adapters.Adapter.landing_device`):
            ``framework="numpy"`` of GPU fragments lands in host memory.
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
        from .plans.api import gather

        return gather(self, framework=framework, device=device, out=out, root=root)

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
        from .plans.api import redistribute

        return redistribute(self, layout, framework=framework)

    def plan_redistribution(self, layout: "Layout") -> "RedistributionPlan":
        """The copy plan :meth:`redistribute` would run for ``layout``."""
        from .plans.api import tensor_plan

        return tensor_plan(self, layout)

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
        from .plans.api import to_framework

        return to_framework(self, framework, copy=copy)
