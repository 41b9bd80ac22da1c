"""One piece of a distributed tensor: :class:`Fragment`, an ordinary array of
some framework in one slot of a layout, and :func:`process_rank`, which tells
this process's fragments from the others'.

Fragments are made by dlmg's constructors (:meth:`Fragment.of_array`,
:meth:`Fragment.of_memory`, :meth:`Fragment.remote` and the ``with_``
methods), never by calling the class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Sequence

from .device import Device
from .adapters.capabilities import exporter_of
from .distributed.state import current as _engine, rank as _rank
from .dlpack.capsule import mark_readonly
from .registry import framework_of, get_adapter
from .errors import DeviceError, DLPackError, FragmentError

if TYPE_CHECKING:  # pragma: no cover
    from .adapters import Adapter
    from .layout import FragmentLayout

__all__ = ["Fragment", "process_rank", "verify_fragments"]


def process_rank() -> int:
    """The rank of this process among those sharing tensors (0 while dlmg runs in one process)."""
    return _rank()


_CREATE = object()  # guards the constructor


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
    :attr:`__dlpack__` is the owning framework's export (for a NumPy array
    of a dtype DLPack carries, the array's own ``__dlpack__``), made to
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
        "_export", "_strides", "__weakref__",
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
        self._set(layout, array, framework, rank, memory, readonly, adapter, dl_device)

    def _set(
        self,
        layout: "FragmentLayout",
        array: Any,
        framework: str | None,
        rank: int | None,
        memory: Any,
        readonly: bool,
        adapter: "Adapter | None",
        dl_device: tuple[int, int] | None,
    ) -> None:
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
        self._export: Any = None  # the adapter's exporter of the array, made on the first export
        # the array's memory signature, strides and data address when first checked (see verify)
        self._strides: tuple[Any, tuple[int, ...], int] | None = None

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
        # positional, past __init__'s keywords: every operation's result makes one per fragment
        self = object.__new__(cls)
        self._set(layout, array, framework, rank, None, readonly, adapter, dl_device)
        return self

    @classmethod
    def of_result(
        cls,
        layout: "FragmentLayout",
        array: Any,
        framework: str,
        adapter: "Adapter",
        readonly: bool = False,
        dl_device: tuple[int, int] | None = None,
        export: Any = None,
    ) -> "Fragment":
        """A fragment held as ``array``, known to fit ``layout`` (an operation's
        output, a hand-over to another framework, an array ``from_fragments``
        checked), on the layout's rank (``readonly``: memory handed on from a
        read-only source; ``dl_device``: its DLPack device where known;
        ``export``: the call its exports make, where already known)."""
        # what _set does, written out and called positionally: every operation and
        # every to() makes one per fragment
        self = object.__new__(cls)
        self._readonly = readonly
        self.index = layout.index
        self.layout = layout
        self.framework = framework
        self.rank = layout.rank
        self._array = array
        self._memory = None
        self._adapter = adapter
        self._dl_device = dl_device
        self._export = export
        self._strides = None
        return self

    @classmethod
    def of_alike(
        cls,
        layouts: "Sequence[FragmentLayout]",
        arrays: "Sequence[Any]",
        adapter: "Adapter",
        dl_devices: "Sequence[tuple[int, int] | None] | tuple[int, int] | None",
        own_export: bool,
    ) -> "list[Fragment] | None":
        """The fragments holding ``arrays`` in ``layouts`` (of this process), for arrays
        of one type and one dtype object, of ``adapter``'s framework, none read-only by
        inheritance: what :func:`dlmg.from_fragments` makes of a list of arrays.

        ``None`` where an array's type or dtype object is not the first array's, or
        its shape not its layout's: the caller then looks at each array itself.
        ``dl_devices``: what the fragments'
        :meth:`__dlpack_device__` reports, one pair for all or a list of one per
        array (``None``: ask the array); ``own_export``: whether the arrays' own
        ``__dlpack__`` is the whole export.

        One Python call for the list, checks and all: a call per fragment was 40%
        of making a fragment (8 fragments: 4.4 against 2.6 us on a 2-core CPU
        machine), and wrapping makes one per array. So the fields :meth:`of_result`
        sets are set here in the loop.
        """
        first = arrays[0]
        kind, raw = type(first), first.dtype
        new, framework = object.__new__, adapter.name
        each = isinstance(dl_devices, list)  # (one pair for all: no third sequence to walk)
        dl_device: Any = None if each else dl_devices
        out: list[Fragment] = []
        keep = out.append
        for layout, array in zip(layouts, arrays):
            if type(array) is not kind or array.dtype is not raw or array.shape != layout.shape:
                return None
            self = new(cls)
            self._readonly = False
            self.index = layout.index
            self.layout = layout
            self.framework = framework
            self.rank = layout.rank
            self._array = array
            self._memory = None
            self._adapter = adapter
            self._dl_device = dl_device
            self._export = array.__dlpack__ if own_export else None
            self._strides = None
            keep(self)
        if each:
            for self, dl_device in zip(out, dl_devices):  # type: ignore[arg-type]
                self._dl_device = dl_device
        return out

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

    def verify(self, strides: bool = True) -> None:
        """Check that the array still fits the layout before its memory is read.

        A framework whose arrays can change in place (torch's ``resize_()`` and
        ``set_()``, assigning NumPy's ``shape``) could otherwise make dlmg read
        past the memory or read it with stale strides. The shape is compared with
        the layout's and, with ``strides`` (for the copy engine, whose plans
        and views remember them), the strides and the data address with those
        the array had when first checked (a ``set_()`` onto other memory of the
        same shape would otherwise be read through views of the old memory);
        operations, which hand the array to its own framework, need the shape
        only. Immutable arrays (JAX) are not asked.

        Raises
        ------
        FragmentError
            Naming the fragment, what it holds now and what its layout says.
        """
        array = self._array
        if array is None:
            return
        adapter = self._adapter or self.adapter
        if not adapter.traits.mutable:
            return
        was = self._strides
        if strides and was is not None:  # every check after the first: one signature compared
            signature = adapter.memory_signature(array)
            if signature == was[0]:
                return
        shape = adapter.shape_of(array)
        if shape == self.layout.shape:
            if not strides:
                return
            now = (adapter.memory_signature(array), adapter.strides_of(array), adapter.data_ptr(array))
            if was is None or now[1:] == was[1:]:
                self._strides = now
                return
            if now[1] != was[1]:
                what = f"strides {now[1]} (were {was[1]})"
            else:  # same shape and strides over other memory (torch's set_() onto another storage)
                what = f"its data at address {now[2]:#x} (it was at {was[2]:#x}: set onto other memory)"
        else:
            what = f"shape {shape}"
        raise FragmentError(
            f"fragment {self.index} ({self.framework}) changed under dlmg: its array has {what}, and the "
            f"layout gives it shape {self.layout.shape}; an array wrapped in a distributed tensor must "
            "keep its shape, strides and memory (make a new tensor after resizing it or setting it anew)"
        )

    # -- DLPack --------------------------------------------------------------
    def _check_local(self, what: str) -> None:
        if not self.is_local:
            raise FragmentError(
                f"{what}: fragment {self.index} is held by process {self.rank}; this process "
                f"(rank {process_rank()}) has no memory of it"
            )

    @property
    def __dlpack__(self) -> Callable[..., Any]:
        """Export the fragment's array: ``fragment.__dlpack__(**keywords)`` as the
        array API's ``__dlpack__``.

        Once the export is known (from wrapping, or made by the first export), the
        attribute is that call itself (for NumPy fragments, the array's own
        ``__dlpack__``), so that a consumer's call goes straight to it: a method
        forwarding the keywords cost 0.2-0.3 us an export, a tenth of
        ``torch.from_dlpack`` of a small NumPy array, on a 2-core CPU machine.
        """
        export = self._export
        return export if export is not None else self._first_export

    def _first_export(self, **kwargs: Any) -> Any:
        """The first export of the fragment's array: makes and keeps the adapter's
        exporter where the export is the array's alone; read-only and padded
        fragments, and those of other processes, take this path every time."""
        if self._array is not None and not self._readonly:
            export = self._export = exporter_of(self._adapter or self.adapter, self._array)
            return export(**kwargs)
        if not self.is_local:
            raise DLPackError(f"fragment {self.index} is held by process {self.rank}; it cannot be exported here")
        if self._array is None:
            raise DLPackError(
                f"fragment {self.index} lies in padded blocks that no single DLPack tensor can describe; "
                "export its block_views() or its memory instead"
            )
        capsule = self.adapter.export(self._array, **kwargs)
        if self._readonly:  # memory from a read-only source: say so to consumers that listen (NumPy)
            mark_readonly(capsule)
        return capsule

    def __getstate__(self) -> tuple[None, dict[str, Any]]:
        """The slots to copy or pickle, without the kept exporter: bound to this
        fragment's array, it would export the original from a copy."""
        state = {name: getattr(self, name) for name in self.__slots__
                 if name not in ("_export", "__weakref__") and hasattr(self, name)}
        state["_export"] = None
        state["_strides"] = None  # (the copy's address is its own)
        return None, state

    def __setstate__(self, state: tuple[None, dict[str, Any]]) -> None:
        """Restore the slots, with the array on the device its layout names (a JAX
        array unpickles on JAX's default device, whatever device it was on).

        Raises
        ------
        DeviceError
            When this process's framework has no such device.
        """
        for name, value in state[1].items():
            object.__setattr__(self, name, value)
        array = self._array
        if array is None:
            return
        device = self.layout.device
        adapter = self._adapter or self.adapter
        try:
            self._array = adapter.to_device(array, device)
        except Exception as exc:
            raise DeviceError(
                f"unpickling fragment {self.index}: its layout places it on device '{device}', which "
                f"{adapter.name} does not have in this process ({type(exc).__name__}: {exc})"
            ) from exc

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack ``(device_type, device_id)`` of the fragment's array.

        A NumPy or torch fragment in host memory reports ``(1, 0)`` whichever host
        slot ``cpu:k`` it fills: DLPack has one CPU device, id 0, so every consumer
        takes it, zero-copy (``jnp.from_dlpack(fragment)`` lands on JAX's first CPU
        device). A JAX fragment on JAX's CPU device ``k`` reports ``(1, k)``, so that
        ``jnp.from_dlpack(fragment)`` lands on that device (which exists).
        """
        pair = self._dl_device
        if pair is not None:
            return pair
        array = self._array
        if array is None or not self.is_local:
            raise DLPackError(f"fragment {self.index} cannot be exported here (remote or padded)")
        device = self.layout.device  # the array's, or for host memory any host slot
        adapter = self._adapter or self.adapter
        pair = adapter.dlpack_device(array)
        if pair[0] == 1 and device.kind == "cpu":  # the framework's own host device, else DLPack's one
            pair = (1, adapter.device_of(array).index)
        self._dl_device = pair
        return pair

    def __repr__(self) -> str:
        where = f"rank {self.rank}" if not self.is_local else self.framework
        kind = " padded" if self.is_padded else ""
        return (
            f"Fragment(index={self.index}, coords={self.coords}, replica={self.replica}, "
            f"device='{self.device}', shape={self.shape}, {where}{kind})"
        )


def verify_fragments(fragments: "tuple[Fragment, ...]", strides: bool = True) -> None:
    """:meth:`Fragment.verify` every local fragment (before dlmg reads them)."""
    me = process_rank()
    for frag in fragments:
        array = frag._array
        if array is None:
            continue
        if frag.rank != me:
            if _engine() is not None:  # (without an engine, readers say to call init)
                _foreign(frag, me)
            continue
        # the common case without a method call: an operation runs this on every operand
        # (``shape`` is the array API's attribute; a torch.Size equals the tuple)
        if not strides:
            if getattr(array, "shape", None) == frag.layout.shape:
                continue
        else:  # a copy reads it: checked before, with the same signature now (set only for mutable arrays)
            was = frag._strides
            if was is not None and frag._adapter is not None and frag._adapter.memory_signature(array) == was[0]:
                continue
        frag.verify(strides)


def _foreign(frag: Fragment, me: int) -> None:
    """Refuse a fragment holding an array that its layout gives to another process: a
    tensor pickled in one process and unpickled in another (only the process holding a
    fragment has its array; read here, its rows would be missing from every collective)."""
    raise FragmentError(
        f"fragment {frag.index} holds an array, but its layout gives it to process {frag.rank} and this "
        f"is process {me}: the tensor was made, or pickled, in process {frag.rank}. A distributed tensor "
        "is unpickled in the process that pickled it; to move data between processes, use its "
        "collectives (gather, redistribute, dlmg.scatter)"
    )
