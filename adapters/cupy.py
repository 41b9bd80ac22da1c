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

from functools import partial
from typing import Any, Sequence

import numpy

from dlmg.device import Device
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError

from ._common import (
    ALREADY_CURRENT,
    BaseAdapter,
    DLPackShim,
    _source,
    check_copy,
    copy_word,
    describe_producer,
    direct_exporter,
    element_strides,
    import_producer,
    OPERATORS,
    pair_by_pair,
    runs_backwards_by_byte_strides,
    other_known_framework,
)

__all__ = ["CupyAdapter"]


#: cudaMemcpyDeviceToDevice
_DEVICE_TO_DEVICE = 3
#: dlmg's device of each CUDA ordinal.
_CUDA_DEVICES: dict[int, Device] = {}


def _rows(array: Any) -> tuple[int, int, int] | None:
    """``(rows, row bytes, pitch)`` of an array that is rows of contiguous elements at a
    pitch (a 2-D array whose last mode is contiguous) or one contiguous row; else None."""
    item = array.itemsize
    if array.ndim == 2 and array.strides[1] == item and array.strides[0] >= array.shape[1] * item:
        return array.shape[0], array.shape[1] * item, array.strides[0]
    if array.flags.c_contiguous:
        return 1, array.nbytes, array.nbytes
    return None


#: The widest word strided copies move elements in, and its dtype per width: in one
#: 64 MiB pitched copy of float32 rows on an H200 CuPy's assignment took 97 us, in
#: 8-byte words 60 us, in 16-byte words 51 us; the 2-D memcpy 88 us (53 us for rows
#: of 512 bytes), a contiguous memcpy 40 us.
_COPY_WORD = 16
_WORD_DTYPES = {8: numpy.dtype(numpy.int64), 16: numpy.dtype(numpy.complex128)}
#: Copies from this size on take the words; smaller ones cost more on the host than on the device.
_WORDS_FROM = 1 << 20
#: (dtype, shape, byte strides of both sides, addresses modulo the word) -> the word's dtype,
#: True for the elements' own, False for no assignment in words (asked per piece per call)
_WORDS_OF: dict[tuple[Any, ...], Any] = {}


def _in_words(dst: Any, src: Any) -> bool:
    """Queue ``dst[...] = src`` (same dtype and shape, one device) as CuPy's assignment
    in words of 8 or 16 bytes where both sides allow one (see
    :func:`~dlmg.adapters._common.copy_word`); whether it did."""
    dst_address, src_address = dst.data.ptr, src.data.ptr
    key = (dst.dtype, dst.shape, dst.strides, src.strides, dst_address % _COPY_WORD, src_address % _COPY_WORD)
    word = _WORDS_OF.get(key)
    if word is None:
        item = dst.itemsize
        word = copy_word(dst.shape, item, _COPY_WORD, (dst_address, dst.strides), (src_address, src.strides))
        word = False if word < 8 else True if word == item else _WORD_DTYPES[word]
        if len(_WORDS_OF) > 4096:
            _WORDS_OF.clear()
        _WORDS_OF[key] = word
    if word is False:
        return False
    if word is not True:
        dst, src = dst.view(word), src.view(word)
    dst[...] = src
    return True


def _copy_engine(cp: Any, dst: Any, src: Any, stream: int) -> bool:
    """Queue ``dst[...] = src`` as one (2-D) memcpy when both sides allow it; whether it did."""
    if dst.size == 0:
        return True
    if dst.dtype != src.dtype or dst.shape != src.shape or dst.device.id != src.device.id:
        return False
    d, s = _rows(dst), _rows(src)
    if d is None or s is None:
        return False
    if d[0] == 1 and s[0] == 1:  # both contiguous
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, _DEVICE_TO_DEVICE, stream)
        return True
    if d[1] != s[1] or d[0] != s[0]:
        return False
    cp.cuda.runtime.memcpy2DAsync(dst.data.ptr, d[2], src.data.ptr, s[2], d[1], d[0], _DEVICE_TO_DEVICE, stream)
    return True


class CupyAdapter(BaseAdapter):
    """Adapter for :class:`cupy.ndarray` (CUDA device memory)."""

    name = "cupy"
    modules = ("cupy", "cupy_backends")
    package = "cupy"
    install_hint = "pip install cupy-cuda12x (or cupy-cuda13x, matching your CUDA)"
    mutable = True
    can_view = True
    stream_ordered = True  # on one device; copies between devices are not ordered
    synchronizes_device = True

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a ``cupy.ndarray`` (type module ``cupy._core.core``)."""
        return type(array).__module__.partition(".")[0] in self.modules and hasattr(array, "data") and hasattr(array, "device")

    def namespace(self) -> Any:
        """``array_api_compat.cupy``."""
        return self._import("array_api_compat.cupy")

    # -- conversions ----------------------------------------------------------
    def native_dtype(self, dtype: Any) -> Any:
        """The dtype CuPy uses for a dlmg dtype (NumPy's, bfloat16 through ml_dtypes)."""
        from dlmg.registry import get_adapter

        return get_adapter("numpy").native_dtype(dtype)

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
        return partial(_current, self.module(), device.index)

    def _check_device(self, device: Device) -> int:
        if device.kind != "cuda":
            raise DeviceError(
                f"CuPy arrays live on CUDA devices; {device} is not one (use NumPy or torch for the host)"
            )
        return device.index

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """``cuda:i`` with ``i`` the device of the array's memory."""
        index = array.data.device_id  # without making a cupy.cuda.Device (0.12 against 0.28 us)
        found = _CUDA_DEVICES.get(index)  # asked per fragment per copy: made once per GPU
        if found is None:
            found = _CUDA_DEVICES[index] = Device("cuda", int(index))
        return found

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
        known, inner = _source(obj)
        # only the device is needed to import; the full description is made for messages
        src = describe_producer(obj) if known is None else None
        here = src.device if src is not None else known.device_of(inner)  # type: ignore[union-attr]
        if here.kind != "cuda":
            if copy is True and here.is_host:
                from dlmg.registry import get_adapter

                host = get_adapter("numpy").from_dlpack(obj)
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
            with _current(cp, device.index):
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
        assignment in 16- or 8-byte words (see :data:`_COPY_WORD`: 0.79 of a
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
                        memcpy(run[0], run[1], run[2], _DEVICE_TO_DEVICE, stream)
                    run = [d, s, n]
                    continue
                if run is not None:
                    memcpy(run[0], run[1], run[2], _DEVICE_TO_DEVICE, stream)
                    run = None
                if dst.nbytes >= _WORDS_FROM and dst.dtype == src.dtype and dst.shape == src.shape and (
                        dst.device.id == src.device.id) and _in_words(dst, src):
                    continue
                if not _copy_engine(cp, dst, src, stream):
                    dst[...] = src
            if run is not None:
                memcpy(run[0], run[1], run[2], _DEVICE_TO_DEVICE, stream)

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """The pieces one after another in ``dst``, in one kernel where they are
        contiguous and of ``dst``'s dtype and device; the default otherwise.

        The kernel (:func:`_concatenation_kernel`) copies every piece in one
        launch, with the widest loads and stores (up to 16 bytes) that every
        address and size allows: one ``cudaMemcpyAsync`` per piece leaves a gap
        of a few microseconds between pieces (8 pieces of 32 MiB reach 0.83 of
        the copy bandwidth), and CuPy's ``concatenate`` reaches 0.37. Without a
        CUDA compiler the pieces go one ``cudaMemcpyAsync`` each.
        """
        if not dst.flags.c_contiguous or not all(
            s.flags.c_contiguous and s.dtype == dst.dtype and s.device.id == dst.device.id for s in srcs
        ):
            super().concatenate_into(dst, srcs)
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
            if len(pieces) > 1 and _launch_concatenation(cp, pieces, stream):
                return
            for to, source, nbytes in pieces:
                cp.cuda.runtime.memcpyAsync(to, source, nbytes, _DEVICE_TO_DEVICE, stream.ptr)

    # -- DLPack export -----------------------------------------------------------
    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)`` with the array's device current (a consumer's
        stream belongs to that device): made current for the call when it is not."""
        with _current(self.module(), array.device.id):
            return super().export(array, **kwargs)

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
        32 arrays (:func:`_list_operation`), where every array is a C-contiguous
        ``float32`` or ``float64`` array of one device and the other operand is
        a list of such arrays of the same shapes or a Python number the dtype
        holds exactly. Anything else is CuPy's operator pair by pair, so results,
        dtypes and errors are the operator's: the kernel computes what CuPy's
        own elementwise kernel does, one IEEE operation per element. ``None``
        for ``pow``.

        An eager CuPy operator costs a launch and an allocation per array: on
        an H200 the loop over 8 small fragments took 14 us per array and operator.
        """
        found = _LIST_CALLS.get((name, in_place))
        if found is None:
            op = _LIST_SYMBOLS.get(name)
            if op is None:
                return None
            found = _LIST_CALLS[(name, in_place)] = partial(_list_operation, self.module(), op, in_place)
        return found

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


# -- one kernel for many contiguous copies ------------------------------------------
#: Pieces per launch: each is three kernel arguments.
_PIECES_PER_LAUNCH = 32
#: Load and store type per width in bytes.
_WORDS = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short", 1: "unsigned char"}
#: (pieces, width) -> compiled kernel, or None where compiling failed (no CUDA compiler).
_KERNELS: dict[tuple[int, int], Any] = {}
# 512 threads, 32 blocks per SM and piece between them: 0.965 of a device copy's rate for
# 8 pieces of 32 MiB on an H200, against 0.90 at 256 threads and 8 blocks (unrolling,
# __restrict__ and other counts measured between the two)
_THREADS = 512
_BLOCKS_PER_SM = 32
_SMS: dict[int, int] = {}


def _multiprocessors(cp: Any) -> int:
    """The current device's multiprocessor count (asked once per device)."""
    device = cp.cuda.runtime.getDevice()
    found = _SMS.get(device)
    if found is None:
        found = _SMS[device] = cp.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"]
    return found


def _current(cp: Any, index: int) -> Any:
    """A context making CUDA device ``index`` current: nothing to enter when it is already
    (asking costs 0.14 us on an H200, entering and leaving the device's context 0.82)."""
    return ALREADY_CURRENT if cp.cuda.runtime.getDevice() == index else cp.cuda.Device(index)


def _concatenation_source(pieces: int, width: int) -> str:
    """CUDA source of a kernel copying ``pieces`` contiguous ranges, one per ``blockIdx.y``,
    in words of ``width`` bytes (arguments: destination, source, count, per piece)."""
    word = _WORDS[width]
    params = ", ".join(f"{word}* d{i}, const {word}* s{i}, unsigned long long n{i}" for i in range(pieces))
    cases = " ".join(f"case {i}: dst = d{i}; src = s{i}; count = n{i}; break;" for i in range(pieces))
    return f"""extern "C" __global__ void dlmg_concatenate({params}) {{
    {word}* dst; const {word}* src; unsigned long long count;
    switch (blockIdx.y) {{ {cases} default: return; }}
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        dst[i] = src[i];
}}
"""


def _concatenation_kernel(cp: Any, pieces: int, width: int) -> Any:
    """The compiled kernel for ``pieces`` ranges in words of ``width`` bytes, or ``None``."""
    key = (pieces, width)
    if key not in _KERNELS:
        try:
            kernel = cp.RawKernel(_concatenation_source(pieces, width), "dlmg_concatenate")
            kernel.compile()
        except Exception:  # no NVRTC or no driver support: the memcpy path still works
            kernel = None
        _KERNELS[key] = kernel
    return _KERNELS[key]


def _launch_concatenation(cp: Any, pieces: list[tuple[int, int, int]], stream: Any) -> bool:
    """Queue the copies ``(destination, source, bytes)`` on ``stream`` as kernels of
    up to :data:`_PIECES_PER_LAUNCH` pieces; ``False`` (nothing queued) without a compiler."""
    width = 16
    for to, source, nbytes in pieces:
        while (to | source | nbytes) % width:
            width //= 2
    sms = _multiprocessors(cp)
    launches = [pieces[i:i + _PIECES_PER_LAUNCH] for i in range(0, len(pieces), _PIECES_PER_LAUNCH)]
    kernels = [_concatenation_kernel(cp, len(group), width) for group in launches]
    if any(k is None for k in kernels):
        return False
    uint64 = numpy.uint64  # kernel arguments by value: addresses and counts of 8 bytes
    for kernel, group in zip(kernels, launches):
        words = max(nbytes for _, _, nbytes in group) // width
        blocks = min(-(-words // _THREADS), max(1, sms * _BLOCKS_PER_SM // len(group)))
        args: list[Any] = []
        for to, source, nbytes in group:
            args += (uint64(to), uint64(source), uint64(nbytes // width))
        kernel((blocks, len(group)), (_THREADS,), tuple(args), stream=stream)
    return True



# -- one kernel for an operator over many arrays ------------------------------------------
#: list_operator name -> (C operator, the Python operator pair by pair, its in-place form)
_LIST_SYMBOLS = {
    name: (symbol, *OPERATORS[name])
    for name, symbol in (("add", "+"), ("subtract", "-"), ("multiply", "*"), ("divide", "/"))
}
#: dtype name -> (C type, NumPy scalar type, the largest integer it holds exactly, its largest finite value)
_LIST_TYPES = {
    "float32": ("float", numpy.float32, 1 << 24, float(numpy.finfo(numpy.float32).max)),
    "float64": ("double", numpy.float64, 1 << 53, float(numpy.finfo(numpy.float64).max)),
}
#: Arrays per launch: each is four kernel arguments.
_ARRAYS_PER_LAUNCH = 32
_LIST_THREADS = 256
#: (name, in_place) -> the call list_operator hands out
_LIST_CALLS: dict[tuple[str, bool], Any] = {}
#: (C operator, C type, with a scalar, arrays) -> compiled kernel, or None where compiling failed
_LIST_KERNELS: dict[tuple[str, str, bool, int], Any] = {}


def _list_source(symbol: str, ctype: str, scalar: bool, count: int) -> str:
    """CUDA source of ``o = x <symbol> y`` for ``count`` arrays, one per ``blockIdx.y``
    (``y`` one scalar for all of them where ``scalar``)."""
    if scalar:
        params = ", ".join([f"const {ctype} y"] + [f"{ctype}* o{i}, const {ctype}* x{i}, unsigned long long n{i}"
                                                   for i in range(count)])
        cases = " ".join(f"case {i}: o = o{i}; x = x{i}; n = n{i}; break;" for i in range(count))
        declare, operand = f"{ctype}* o; const {ctype}* x;", "y"
    else:
        params = ", ".join(f"{ctype}* o{i}, const {ctype}* x{i}, const {ctype}* y{i}, unsigned long long n{i}"
                           for i in range(count))
        cases = " ".join(f"case {i}: o = o{i}; x = x{i}; y = y{i}; n = n{i}; break;" for i in range(count))
        declare, operand = f"{ctype}* o; const {ctype}* x; const {ctype}* y;", "y[i]"
    return f"""extern "C" __global__ void dlmg_list_operation({params}) {{
    {declare} unsigned long long n;
    switch (blockIdx.y) {{ {cases} default: return; }}
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        o[i] = x[i] {symbol} {operand};
}}
"""


def _list_kernel(cp: Any, symbol: str, ctype: str, scalar: bool, count: int) -> Any:
    key = (symbol, ctype, scalar, count)
    if key not in _LIST_KERNELS:
        try:
            kernel = cp.RawKernel(_list_source(symbol, ctype, scalar, count), "dlmg_list_operation")
            kernel.compile()
        except Exception:  # no NVRTC or no driver support: the operators pair by pair still work
            kernel = None
        _LIST_KERNELS[key] = kernel
    return _LIST_KERNELS[key]


def _exact_scalar(value: Any, scalar_type: Any, limit: int, largest: float) -> Any:
    """``value`` as the dtype's scalar when it holds it exactly (then computing in the
    dtype equals computing in double and rounding once), else ``None``."""
    kind = type(value)
    if kind is bool or (kind is int and -limit <= value <= limit):
        return scalar_type(value)
    if kind is float:
        if value != value:  # NaN stays NaN
            return scalar_type(value)
        if -largest <= value <= largest:
            cast = scalar_type(value)
            if float(cast) == value:
                return cast
    return None


def _list_operation(cp: Any, op: tuple[str, Any, Any], in_place: bool, xs: list[Any], ys: Any) -> Any:
    """``xs[i] <op> ys[i]`` (or ``<op> ys`` for a scalar) for every ``i``: one kernel
    per :data:`_ARRAYS_PER_LAUNCH` arrays where they qualify (see
    :meth:`CupyAdapter.list_operator`), CuPy's operator pair by pair otherwise.
    In place: written into ``xs``, returns ``None``."""
    symbol, pairwise, inplace = op
    launch = _list_launch(cp, symbol, in_place, xs, ys)
    if launch is not None:
        return None if in_place else launch
    return pair_by_pair(inplace if in_place else pairwise, in_place, xs, ys)


def _list_launch(cp: Any, symbol: str, in_place: bool, xs: list[Any], ys: Any) -> list[Any] | None:
    """The kernels of :func:`_list_operation` queued, with the results (``xs`` in
    place); ``None`` (nothing queued) where the arrays do not qualify."""
    if not xs:
        return None
    first = xs[0]
    dtype = first.dtype
    kind = _LIST_TYPES.get(dtype.name)
    if kind is None:
        return None
    ctype, scalar_type, limit, largest = kind
    scalar = not isinstance(ys, list)
    value = None
    if scalar:
        value = _exact_scalar(ys, scalar_type, limit, largest)
        if value is None:
            return None
    device = first.data.device_id
    for x in xs:
        if x.dtype != dtype or not x.flags.c_contiguous or x.data.device_id != device:
            return None
    if not scalar:
        for x, y in zip(xs, ys):
            if y.dtype != dtype or y.shape != x.shape or not y.flags.c_contiguous or y.data.device_id != device:
                return None
    work = [i for i, x in enumerate(xs) if x.size]
    groups = [work[i:i + _ARRAYS_PER_LAUNCH] for i in range(0, len(work), _ARRAYS_PER_LAUNCH)]
    kernels = [_list_kernel(cp, symbol, ctype, scalar, len(group)) for group in groups]
    if any(k is None for k in kernels):
        return None
    with _current(cp, device):
        if in_place:
            outs = xs
        else:  # the results carved from one allocation: one call to CuPy's pool instead of one per array
            itemsize = dtype.itemsize
            whole = cp.empty(sum(x.size for x in xs), dtype)
            outs, at = [], whole.data
            for x in xs:
                outs.append(cp.ndarray(x.shape, dtype, at))
                at = at + x.size * itemsize
        _queue_lists(kernels, groups, xs, ys, outs, _multiprocessors(cp), value)
    return outs


def _queue_lists(kernels: list[Any], groups: list[list[int]], xs: list[Any], ys: Any, outs: list[Any], sms: int,
                 value: Any) -> None:
    """Launch ``kernels`` over ``groups`` of the arrays on the current device and stream
    (``value``: the scalar operand, ``None`` for lists)."""
    scalar = value is not None
    for kernel, group in zip(kernels, groups):
        most = max(xs[i].size for i in group)
        blocks = min(-(-most // _LIST_THREADS), max(1, sms * _BLOCKS_PER_SM // len(group)))
        # the arrays themselves and sizes as Python ints: CuPy takes those in a third of
        # the time of NumPy scalars (8 arrays: 17 against 45 us a launch on an H200)
        args: list[Any] = [value] if scalar else []
        for i in group:
            x = xs[i]
            if scalar:
                args += (outs[i], x, x.size)
            else:
                args += (outs[i], x, ys[i], x.size)
        kernel((blocks, len(group)), (_LIST_THREADS,), tuple(args))
