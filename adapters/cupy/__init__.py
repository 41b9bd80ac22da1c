"""The CuPy adapter: CUDA arrays.

Quirks handled here:

* CuPy cannot take in host memory through DLPack (it raises ``TypeError``
  deep inside); dlmg raises :class:`~dlmg.errors.DeviceError` naming the fix
  (move the data to the GPU first, e.g. ``get_adapter("cupy").to_device``),
  or copies it to the GPU when ``copy=True`` was asked for;
* CuPy does not honour DLPack's READ_ONLY flag (imports come in writable);
* strided views take byte strides; an offset view is built from the
  array's ``MemoryPointer`` plus the offset.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Sequence

from dlmg.device import Device
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError

from .._base import Traits
from .._common import (
    BaseAdapter,
    DLPackShim,
    source_of,
    check_copy,
    describe_producer,
    direct_exporter,
    element_strides,
    import_producer,
    runs_backwards_by_byte_strides,
    other_known_framework,
)
from ..builtin import builtin_adapter
from ..capabilities import (
    BulkCopies, CompiledElementwise, ListOperators, QuickExport, QuickImport, concatenate_by_views,
)
from . import _kernels
from ._copies import DEVICE_TO_DEVICE, WORDS_FROM, copy_engine, current, in_words

__all__ = ["CupyAdapter"]


@lru_cache(maxsize=64)
def _cuda_device(index: int) -> Device:
    """dlmg's device of CUDA ordinal ``index``, asked per fragment per copy: built anew 2.5 us, remembered 0.06 us (measured on the 2-core CPU: a dlmg Device, no GPU involved)."""
    return Device("cuda", int(index))


class CupyAdapter(BaseAdapter, BulkCopies, QuickImport, QuickExport, ListOperators,
                  CompiledElementwise):
    """Adapter for :class:`cupy.ndarray` (CUDA device memory)."""

    name = "cupy"
    modules = ("cupy", "cupy_backends")
    package = "cupy"
    install_hint = "pip install cupy-cuda12x (or cupy-cuda13x, matching your CUDA)"
    traits = Traits(
        can_view=True,
        stream_ordered=True,  # on one device; copies between devices are not ordered
        synchronizes_device=True,
    )

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a ``cupy.ndarray`` (type module ``cupy._core.core``)."""
        return type(array).__module__.partition(".")[0] in self.modules and hasattr(array, "data") and hasattr(array, "device")

    def namespace(self) -> Any:
        """``array_api_compat.cupy``."""
        return self._import("array_api_compat.cupy")

    # -- conversions ----------------------------------------------------------
    def native_dtype(self, dtype: Any) -> Any:
        """The dtype CuPy uses for a dlmg dtype (NumPy's, bfloat16 through ml_dtypes)."""
        return builtin_adapter("numpy").native_dtype(dtype)

    def device_from_native(self, obj: Any) -> Device | None:
        """The dlmg device of a ``cupy.cuda.Device``; ``None`` for other objects."""
        if not type(obj).__module__.startswith(self.modules) or not hasattr(obj, "id"):
            return None
        return Device("cuda", int(obj.id))

    def device_context(self, device: Device) -> Any:
        """``cupy.cuda.Device(index)`` for CUDA devices (CuPy queues work on the current
        one); nothing to enter when that device is current already."""
        if device.kind != "cuda":
            return None
        return partial(current, self.module(), device.index)

    def _check_device(self, device: Device) -> int:
        if device.kind != "cuda":
            raise DeviceError(
                f"CuPy arrays live on CUDA devices; {device} is not one (use NumPy or torch for the host)"
            )
        return device.index

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """``cuda:i`` with ``i`` the device of the array's memory."""
        index = array.data.device_id  # the id itself: no cupy.cuda.Device made to ask it
        return _cuda_device(index)

    runs_backwards = runs_backwards_by_byte_strides

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """Strides in elements (CuPy's are in bytes).

        Raises
        ------
        DLPackError
            When a byte stride is not a multiple of the item size.
        """
        return element_strides(array.strides, array.itemsize, "CuPy")

    def data_ptr(self, array: Any) -> int:
        """``array.data.ptr``."""
        return int(array.data.ptr)

    def shares_memory(self, a: Any, b: Any) -> bool:
        """``cupy.may_share_memory``: the bounds check in CuPy's compiled code,
        conservative as the default's. Asked for every fragment and operand of a
        result: a fused ``a * b + c`` over 8 fragments of 32 MiB took 490-530 us
        of host time on an H200 host with the default's Python reading of
        shapes, strides and pointers, 310-390 us with this (the 8 ``cupy.fuse``
        calls alone 130-160 us), and its device work 370 us."""
        return a is b or bool(self.module().may_share_memory(a, b))

    def supports(self, device: Device) -> bool:
        """``cuda:i`` for the GPUs CuPy sees."""
        if device.kind != "cuda":
            return False
        try:
            return device.index < self.module().cuda.runtime.getDeviceCount()
        except Exception:  # no driver, no GPU
            return False

    def landing_device(self, device: Device) -> Device:
        """GPU fragments' own device; host fragments land on ``cuda:0`` (CuPy holds no host memory)."""
        return device if device.kind == "cuda" else Device("cuda", 0)

    # -- making and moving ----------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """``cupy.empty`` on ``device``."""
        cp = self.module()
        with cp.cuda.Device(self._check_device(device)):
            return cp.empty(tuple(shape), dtype=self.native_dtype(dtype))

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """``cupy.full`` on ``device``."""
        cp = self.module()
        with cp.cuda.Device(self._check_device(device)):
            return cp.full(tuple(shape), fill_value, dtype=self.native_dtype(dtype))

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """``cupy.from_dlpack`` with dlmg's checks.

        Zero-copy for a producer on a CUDA device (the import lands on the
        producer's device). Host memory is refused (CuPy cannot import it)
        unless ``copy=True``, which copies it to ``device`` (default: the
        current CUDA device).

        Raises
        ------
        DeviceError
            For host memory without ``copy=True``; the message says how to move it.
        CopyRequiredError
            ``copy=False`` with a producer on another GPU than ``device``.
        """
        cp = self.module()
        copy = check_copy(copy)
        if device is not None:
            self._check_device(device)
        if self.owns(obj):
            current = self.device_of(obj)
            if device is None or device == current:
                return obj.copy() if copy else obj
            if copy is False:
                raise self._copy_required(f"cannot move an array from {current} to {device} without a copy")
            return self.to_device(obj, device)
        known, inner = source_of(obj)
        # only the device is needed to import; the full description is made for messages
        src = describe_producer(obj) if known is None else None
        here = src.device if src is not None else known.device_of(inner)  # type: ignore[union-attr]
        if here.kind != "cuda":
            if copy is True and here.is_host:
                host = builtin_adapter("numpy").from_dlpack(obj)
                idx = device.index if device is not None else cp.cuda.runtime.getDevice()
                with cp.cuda.Device(idx):
                    return cp.array(host, copy=True)
            raise DeviceError(
                f"CuPy cannot import memory on {here} through DLPack (it takes CUDA device "
                f"memory only); move it to the GPU first, e.g. get_adapter('cupy').to_device(x, "
                f"Device('cuda', 0)) or the producer's own adapter's to_device, or pass copy=True"
            )
        target = here if device is None else device
        producer = import_producer(obj, known, inner)
        if target != here:
            if copy is False:
                raise self._copy_required(f"cannot take in memory on {here} as an array on {target}")
            with cp.cuda.Device(here.index):
                out = cp.from_dlpack(producer)
            return self.to_device(out, target)
        try:
            with cp.cuda.Device(here.index):
                if copy is None:
                    return cp.from_dlpack(producer)
                return cp.from_dlpack(producer, copy=copy)
        except (TypeError, BufferError, ValueError, RuntimeError) as exc:
            if isinstance(exc, CopyRequiredError):
                raise
            src = src or known.describe(inner)  # type: ignore[union-attr]
            raise DLPackError(f"CuPy could not import a {src.dtype} tensor of shape {src.shape} on {src.device}: {exc}") from exc

    def importer(self, source: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """CUDA arrays of another known framework, imported by ``cupy.from_dlpack``
        of the source's producer with their device current, without
        :meth:`from_dlpack`'s checks of each (see :meth:`Adapter.importer`).
        ``None`` for producers of no known framework."""
        if not other_known_framework(self, source):
            return None
        cp = self.module()
        take, producer = cp.from_dlpack, source.producer

        def take_in(array: Any, device: Device) -> Any:
            if device.kind != "cuda":
                return None  # host memory: from_dlpack says how to move it
            with current(cp, device.index):
                return take(producer(array))

        return take_in

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` on ``cuda:i`` (a peer copy unless it is there already).

        Host NumPy arrays are accepted too (copied to the GPU), so that
        ``to_device`` is the fix for CuPy's refusal of host memory.

        Raises
        ------
        DeviceError
            For a non-CUDA target: CuPy cannot hold host arrays (use ``array.get()``).
        """
        cp = self.module()
        idx = self._check_device(device)
        if self.owns(array) and int(array.device.id) == idx:
            return array
        with cp.cuda.Device(idx):
            return cp.array(array, copy=True)

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A view with element ``strides`` starting ``offset`` elements from ``array``'s first one."""
        cp = self.module()
        itemsize = array.itemsize
        byte_strides = tuple(int(s) * itemsize for s in strides)
        memptr = array.data + int(offset) * itemsize if offset else array.data
        # the constructor, not cupy.lib.stride_tricks.as_strided: that one is Python
        # around the same constructor
        return cp.ndarray(tuple(shape), dtype=array.dtype, memptr=memptr, strides=byte_strides)

    def allocation_of(self, array: Any) -> tuple[Any, int] | None:
        """The whole of the memory ``array.data.mem`` (the allocation its
        pointer holds, shared by every view into it: CuPy's views made from a
        pointer record no ``base``) as a one-dimensional array of its dtype,
        and how many elements into it ``array`` starts."""
        if not array.size:
            return None
        memory, itemsize = array.data.mem, array.itemsize
        offset, rest = divmod(array.data.ptr - memory.ptr, itemsize)
        if rest or offset < 0 or memory.size < itemsize:
            return None
        cp = self.module()
        whole = cp.ndarray((memory.size // itemsize,), dtype=array.dtype, memptr=cp.cuda.MemoryPointer(memory, 0))
        return whole, offset

    def ascontiguous(self, array: Any) -> Any:
        """``cupy.ascontiguousarray`` (on the array's device)."""
        cp = self.module()
        with cp.cuda.Device(int(array.device.id)):
            return cp.ascontiguousarray(array)

    def copy_into(self, dst: Any, src: Any) -> None:
        """``dst[...] = src`` on ``dst``'s device (see :meth:`copy_many`)."""
        self.copy_many([dst], [src])

    def copy_many(self, dsts: Any, srcs: Any) -> None:
        """Each ``dsts[i][...] = srcs[i]``, queued on the current stream of the
        destinations' device, entered once.

        A copy whose two sides are C-contiguous, on one device and of one
        dtype, goes to the copy engine (``cudaMemcpyAsync``); contiguous pairs
        that follow one another on both sides (destinations carved one after
        another from one buffer, read from consecutive parts of a source) are
        one memcpy. A large strided copy whose rows allow it is CuPy's
        assignment in 16- or 8-byte words (see :data:`~dlmg.adapters.cupy._copies._COPY_WORD`: 0.79 of a
        memcpy's rate); other rows of contiguous elements at a pitch (2-D)
        take ``cudaMemcpy2DAsync`` (0.45 of it, above CuPy's assignment of
        4-byte elements). Anything else is CuPy's assignment.
        """
        if not dsts:
            return
        cp = self.module()
        memcpy = cp.cuda.runtime.memcpyAsync
        with cp.cuda.Device(int(dsts[0].device.id)):
            stream = cp.cuda.get_current_stream().ptr
            run: list[int] | None = None  # [dst, src, bytes]: contiguous pairs that follow one another
            for dst, src in zip(dsts, srcs):
                if (dst.size and dst.flags.c_contiguous and src.flags.c_contiguous and dst.dtype == src.dtype
                        and dst.shape == src.shape and dst.device.id == src.device.id):
                    d, s, n = dst.data.ptr, src.data.ptr, dst.nbytes
                    if run is not None and run[0] + run[2] == d and run[1] + run[2] == s:
                        run[2] += n  # one memcpy for consecutive pieces (a slab scatter or gather)
                        continue
                    if run is not None:
                        memcpy(run[0], run[1], run[2], DEVICE_TO_DEVICE, stream)
                    run = [d, s, n]
                    continue
                if run is not None:
                    memcpy(run[0], run[1], run[2], DEVICE_TO_DEVICE, stream)
                    run = None
                if dst.nbytes >= WORDS_FROM and dst.dtype == src.dtype and dst.shape == src.shape and (
                        dst.device.id == src.device.id) and in_words(dst, src):
                    continue
                if not copy_engine(cp, dst, src, stream):
                    dst[...] = src
            if run is not None:
                memcpy(run[0], run[1], run[2], DEVICE_TO_DEVICE, stream)

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """The pieces one after another in ``dst``, in one kernel where they are
        contiguous and of ``dst``'s dtype and device; the default otherwise.

        The kernel (:func:`~dlmg.adapters.cupy._kernels._concatenation_kernel`) copies every piece in one
        launch, with the widest loads and stores (up to 16 bytes) that every
        address and size allows: one ``cudaMemcpyAsync`` per piece leaves a gap
        of a few microseconds between pieces (8 pieces of 32 MiB reach 0.83 of
        the copy bandwidth), and CuPy's ``concatenate`` reaches 0.37. Without a
        CUDA compiler the pieces go one ``cudaMemcpyAsync`` each.
        """
        if not dst.flags.c_contiguous or not all(
            s.flags.c_contiguous and s.dtype == dst.dtype and s.device.id == dst.device.id for s in srcs
        ):
            concatenate_by_views(self, dst, srcs)
            return
        cp = self.module()
        with cp.cuda.Device(int(dst.device.id)):
            stream = cp.cuda.get_current_stream()
            address = dst.data.ptr
            pieces = []  # (destination, source, bytes)
            for src in srcs:
                if src.nbytes:
                    pieces.append((address, src.data.ptr, src.nbytes))
                address += src.nbytes
            if len(pieces) > 1 and _kernels.launch_concatenation(cp, pieces, stream):
                return
            for to, source, nbytes in pieces:
                cp.cuda.runtime.memcpyAsync(to, source, nbytes, DEVICE_TO_DEVICE, stream.ptr)

    # -- DLPack export -----------------------------------------------------------
    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)`` with the array's device current (a consumer's
        stream belongs to that device): made current for the call when it is not."""
        with current(self.module(), array.device.id):
            return super().export(array, **kwargs)

    def exports_itself(self, dtype: Any) -> bool:
        """``False``: CuPy's export depends on the current device and stream at the
        export, not on the array's dtype alone."""
        return False

    def exporter(self, array: Any) -> Any:
        """The array's own ``__dlpack__`` while its device is the current one (asked
        in every call); :meth:`export`, which makes it current, otherwise."""
        current, index = self.module().cuda.runtime.getDevice, array.data.device_id

        def on_its_device(_: Any) -> bool:
            return current() == index
        return direct_exporter(array, self.export, on_its_device)

    def _on_current_device(self, array: Any) -> bool:
        """Whether ``array``'s device is the current one (where its own ``__dlpack__`` will do)."""
        return array.data.device_id == self.module().cuda.runtime.getDevice()

    def producer(self, array: Any) -> Any:
        """``array`` itself when its device is the current one; elsewhere a shim
        exporting through :meth:`export` (which makes it current). The shim's
        device switch cost an import as much as a quarter of its time on an H200."""
        if self._on_current_device(array):
            return array
        return DLPackShim(array, export=partial(self.export, array))

    # -- streams ----------------------------------------------------------------
    def synchronize(self, device: Device | None = None) -> None:
        """``cupy.cuda.Device(i).synchronize()`` for ``device`` (every GPU when ``None``)."""
        if device is not None and device.kind != "cuda":
            return
        cp = self.module()
        indices = range(cp.cuda.runtime.getDeviceCount()) if device is None else [device.index]
        for i in indices:
            cp.cuda.Device(i).synchronize()

    def synchronize_array(self, array: Any) -> None:
        """Synchronise the device of ``array``."""
        self.module().cuda.Device(int(array.device.id)).synchronize()

    def list_operator(self, name: str, in_place: bool = False) -> Any:
        """``+``, ``-``, ``*`` and ``/`` over lists of arrays in one kernel launch per
        32 arrays (:func:`~dlmg.adapters.cupy._kernels._list_operation`), where every array is a C-contiguous
        ``float32`` or ``float64`` array of one device and the other operand is
        a list of such arrays of the same shapes or a Python number the dtype
        holds exactly. Anything else is CuPy's operator pair by pair, so results,
        dtypes and errors are the operator's: the kernel computes what CuPy's
        own elementwise kernel does, one IEEE operation per element. ``None``
        for ``pow``.

        An eager CuPy operator costs a launch and an allocation per array: on
        an H200 the loop over 8 small fragments took 14 us per array and operator.
        """
        return _kernels.list_operator(self.module(), name, in_place)

    # -- compiling --------------------------------------------------------------
    def compile_elementwise(self, fn: Any, device: Device) -> tuple[Any, str]:
        """``cupy.fuse`` of ``fn``: one elementwise kernel per dtype and shape.

        Inside the fused kernel the namespace is the ``cupy`` module itself,
        whose ufuncs ``cupy.fuse`` knows how to fuse (the array-API wrapper's
        functions are not ufuncs).
        """
        cp = self.module()

        def kernel(*args: Any) -> Any:
            return fn(cp, *args)

        # The name becomes the CUDA kernel's: a lambda's "<lambda>" is no identifier.
        name = getattr(fn, "__name__", "")
        kernel.__name__ = name if name.isidentifier() else "fused_kernel"
        return cp.fuse(kernel), "cupy.fuse"
