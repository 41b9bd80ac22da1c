"""The PyTorch adapter: CPU and CUDA tensors.

Quirks handled here:

* torch cannot represent negative strides, and ``torch.from_dlpack`` of a
  producer with negative strides aborts the process (a C++ ``terminate``),
  so dlmg checks the producer's strides first: ``copy=False`` raises
  :class:`~dlmg.errors.CopyRequiredError`, otherwise the producer's own
  framework makes a contiguous copy first;
* torch refuses to export a CUDA tensor that is not on the current device
  (``BufferError``); :meth:`TorchAdapter.export` wraps the export in
  ``torch.cuda.device(index)`` and :meth:`TorchAdapter.producer` gives other
  consumers an object that does the same;
* torch refuses to export a tensor that requires grad; dlmg exports its
  ``detach()`` (same memory);
* torch refuses a shape whose extents, multiplied left to right, overflow
  64 bits (``(2**62, 2**62, 0)``: zero elements, yet "numel: integer
  multiplication overflow"), and it does so after handing the producer's
  deleter to a storage that it then frees: the deleter runs while the
  capsule keeps its ``dltensor`` name, so the producer frees the tensor a
  second time. dlmg refuses such shapes (:class:`~dlmg.errors.DLPackError`)
  before torch sees the capsule;
* torch does not honour DLPack's READ_ONLY flag: read-only NumPy arrays and
  JAX buffers come in writable. dlmg records read-only-ness on its fragments
  (from :meth:`~dlmg.adapters._common.BaseAdapter.is_readonly` of the
  producer), not in the tensor;
* ``Tensor.__dlpack__`` of a CUDA tensor spends about 12 us (an H200 host)
  in Python finding streams and devices before making the capsule. Where the
  consumer names torch's current stream (nothing to order) and asks nothing
  else, a fragment's export and the producer :meth:`TorchAdapter.producer`
  hands to other frameworks make the capsule with torch's own
  ``torch._C._to_dlpack`` / ``_to_dlpack_versioned``; any other stream goes
  through ``__dlpack__``, which makes the consumer's stream wait for torch's.
"""

from __future__ import annotations

import os
from functools import partial
from collections.abc import Sequence
from typing import Any, Callable

import numpy

from dlmg._protocols import function_refused
from dlmg.device import Device
from dlmg.dtypes import canonical
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError, DtypeError

from ._common import (
    ALREADY_CURRENT,
    BaseAdapter,
    DLPackShim,
    ViewNotSupportedError,
    _source,
    call_dlpack,
    check_copy,
    copy_word,
    describe_producer,
    direct_exporter,
    has_negative_strides,
    OPERATORS,
    pair_by_pair,
    import_producer,
    other_known_framework,
    partners,
)

__all__ = ["TorchAdapter"]

#: NumPy's array type, which torch takes in directly (numpy is a dependency of dlmg).
_NDARRAY = numpy.ndarray
_FROM_NUMPY: dict[str, Any] = {}  # torch.from_numpy, looked up once
_IMPORTERS: dict[Any, Any] = {}  # TorchAdapter.importer per source adapter

_NUMEL_MAX = 2**63 - 1


def _check_numel(shape: tuple[int, ...]) -> None:
    """Refuse a shape torch cannot hold: a running product of extents over int64.

    torch checks the product left to right, so ``(2**62, 2**62, 0)`` fails
    though it has no element; it fails after taking over the deleter.

    Raises
    ------
    DLPackError
        Naming the shape and the first extents whose product overflows.
    """
    product = 1
    for axis, extent in enumerate(shape):
        product *= extent
        if product > _NUMEL_MAX:
            raise DLPackError(
                f"torch cannot hold a tensor of shape {tuple(shape)}: the product of extents 0..{axis} "
                f"({product}) exceeds 2**63 - 1, even with a zero extent after them"
            )


def _compiler_missing(device: Device) -> str:
    """Why ``torch.compile`` cannot build kernels for ``device`` here ("" when it can)."""
    import importlib.util
    import shutil

    if device.kind == "cuda":
        return "" if importlib.util.find_spec("triton") is not None else "torch.compile needs triton for CUDA"
    if device.kind == "cpu":
        compilers = (os.environ.get("CXX", ""), "g++", "c++", "clang++")
        found = any(shutil.which(c) for c in compilers if c)
        return "" if found else "torch.compile needs a C++ compiler for the host"
    return f"torch.compile has no backend dlmg trusts for {device.kind}"


class _CombinedFirst:
    """A ``torch.compile`` kernel built with inductor's combo kernels, falling back
    to the plain build where that one fails.

    Combo kernels launch the independent kernels of one graph (one per
    fragment, when a device's fragments run as one compiled call) as a single
    kernel: on an H200, ``a * b + c`` over 8 CUDA fragments of 32 MiB took 264
    against 279 us per call, with 91 against 164 us of host time (one array of
    256 MiB: 258 us). Inductor calls them experimental, so a build they break
    is retried once without them, and that build is kept from then on.
    """

    __slots__ = ("call", "plain")

    def __init__(self, call: Any, plain: Any) -> None:
        self.call = call
        self.plain = plain  # makes the plain build; None once it replaced the combined one

    def __call__(self, *args: Any) -> Any:
        try:
            return self.call(*args)
        except Exception:  # noqa: BLE001 - retried once without combo kernels
            if self.plain is None:
                raise
            self.call, self.plain = self.plain(), None
            return self.call(*args)


_TORCH_TO_KIND = {"cpu": "cpu", "cuda": "cuda", "mps": "metal", "xpu": "oneapi"}
_KIND_TO_TORCH = {v: k for k, v in _TORCH_TO_KIND.items()}
_DEVICES: dict[Any, Device] = {}


def _torch_function(cls: type, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None) -> Any:
    """torch functions and tensor methods meeting a distributed tensor: refuse, naming the fix."""
    raise function_refused("torch", getattr(func, "__name__", str(func)), (*args, *(kwargs or {}).values()))


#: Pieces below this size are copied in one batched launch; larger ones one by one.
_BATCHED_COPY_BYTES = 1 << 20
#: dtypes torch._foreach_copy_ refuses (found on first use).
_NO_FOREACH_COPY: set[Any] = set()
#: torch's list operations of the arithmetic operators (see ``list_operator``). Not
#: ``pow``: on CUDA ``_foreach_pow`` differs from ``**`` in the last bit for float64
#: and complex64 with small integer exponents, which ``**`` computes as products.
_FOREACH_NAMES = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div"}
#: CUDA arrays from this size on take the operator array by array, alternating
#: between the current stream and a second one, so that one array's kernel fills
#: the SMs another's last wave leaves idle. ``a * b + c`` over 8 float32 fragments
#: on an H200 (us; one array of the whole size, the list operation, array by
#: array on one stream, on two streams; timed by a script, the 32 MiB row's two
#: streams through dlmg's operators):
#:
#: =============  =====  =======  ===========  ===========
#: fragments      one    list     one stream   two streams
#: =============  =====  =======  ===========  ===========
#: 8 x 8 MiB      100    107      126          158
#: 8 x 16 MiB     192    217      227          211
#: 8 x 32 MiB     376    446      425          382-388
#: 8 x 64 MiB     744    866      801          750
#: =============  =====  =======  ===========  ===========
#:
#: The streams cost the host about 16 us per array (allocating, switching,
#: launching): below 32 MiB that is more than the kernel's time, and the host
#: falls behind the device.
_TWO_STREAM_BYTES = 32 << 20
#: CUDA device index -> the second stream of the large list operations
_SIDE_STREAMS: dict[int, Any] = {}
#: (operator, dtypes and 0-d-ness of both operands) -> the dtype of the operator's result
_RESULT_DTYPES: dict[tuple[Any, ...], Any] = {}
_LIST_OPERATORS: dict[tuple[str, bool], Any] = {}
#: torch's dtype and device objects of dlmg's names, asked for every allocation.
_NATIVE_DTYPES: dict[str, Any] = {}
_NATIVE_DEVICES: dict[Device, Any] = {}
_SUPPORTED: dict[Device, bool] = {}  # CUDA devices torch has


def _consecutive(tensors: Sequence[Any]) -> bool:
    """Whether C-contiguous tensors lie one right after another in the storage of the
    first, in order (so that one view of that storage covers them all). Pointers
    are compared first: the storage is asked for once, not per tensor."""
    first = tensors[0]
    end = first.data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != end:
            return False
        end += t.numel() * t.element_size()
    storage = first.untyped_storage()
    return end <= storage.data_ptr() + storage.nbytes()


#: The widest word strided CUDA copies move elements in: torch's copy kernel ran a
#: cyclic gather of 8 float32 fragments of 32 MiB on an H200 in 227 us as float32,
#: 181 us as int64, and 179 to 353 us as complex128 (unsteady between runs).
_COPY_WORD = 8
#: (dtype, shape, strides of both sides, addresses modulo the word) -> word dtype or False
_WORDS_OF: dict[tuple[Any, ...], Any] = {}


def _as_words(torch: Any, dst: Any, src: Any) -> tuple[Any, Any]:
    """``dst`` and ``src`` (same shape) viewed as integers of up to
    :data:`_COPY_WORD` bytes where both allow a word wider than their element
    (see :func:`~dlmg.adapters._common.copy_word`); themselves otherwise.
    The answer is remembered per dtype, shape, strides and address alignment:
    a plan's copies repeat them every call, and the host time per piece is what
    keeps a scatter ahead of the device. torch refuses to view a conjugate or
    negative-bit tensor as another dtype; such a pair is copied as it is."""
    dtype = dst.dtype
    if src.dtype is not dtype:
        return dst, src
    dst_address, src_address = dst.data_ptr(), src.data_ptr()
    key = (dtype, dst.shape, dst.stride(), src.stride(), dst_address % _COPY_WORD, src_address % _COPY_WORD)
    word = _WORDS_OF.get(key)
    if word is None:
        word = _word_for(torch, dst, src, dst_address, src_address)
        if len(_WORDS_OF) > 4096:
            _WORDS_OF.clear()
        _WORDS_OF[key] = word
    if word is False:
        return dst, src
    try:
        return dst.view(word), src.view(word)
    except RuntimeError:  # a conjugate or negative-bit view, or a storage offset apart from the address
        return dst, src


def _word_for(torch: Any, dst: Any, src: Any, dst_address: int, src_address: int) -> Any:
    """The integer dtype :func:`_as_words` views ``dst`` and ``src`` as, or ``False``."""
    size = dst.element_size()
    if size >= _COPY_WORD or src.shape != dst.shape or (dst.is_contiguous() and src.is_contiguous()):
        return False
    word = copy_word(dst.shape, size, _COPY_WORD,
                     (dst_address, [s * size for s in dst.stride()]),
                     (src_address, [s * size for s in src.stride()]))
    return False if word == size else _word_dtype(torch, word)


def _cat_as_words(torch: Any, dst: Any, srcs: Sequence[Any]) -> tuple[Any, Sequence[Any]]:
    """``dst`` and the pieces concatenated into it viewed as one word type where all
    allow a word wider than their element and some piece is strided (see
    :func:`_as_words`); themselves otherwise."""
    size = dst.element_size()
    if size >= _COPY_WORD or all(s.is_contiguous() for s in srcs):
        return dst, srcs
    word = _COPY_WORD
    for a in (dst, *srcs):
        word = min(word, copy_word(a.shape, size, word, (a.data_ptr(), [s * size for s in a.stride()])))
        if word == size:
            return dst, srcs
    dtype = _word_dtype(torch, word)
    try:
        return dst.view(dtype), [s.view(dtype) for s in srcs]
    except RuntimeError:  # as in _as_words
        return dst, srcs


def _current_device(torch: Any) -> Any:
    """``torch.cuda.current_device`` without its lazy-initialisation check, for callers
    holding a CUDA tensor (so CUDA is initialised): on an H200 host the check made it
    cost 0.6 us, asked once per export of a CUDA fragment. The public function where
    torch lacks the binding."""
    return getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


#: torch's own capsule makers of ``Tensor.__dlpack__``, its current-stream query and
#: its test for ``__torch_function__`` overrides (``_to_dlpack``, ``_to_dlpack_versioned``,
#: ``_cuda_getCurrentRawStream``, ``_has_torch_function_unary``), found once; ``None``
#: where this torch lacks one or runs on ROCm
_CAPSULE_MAKERS: list[Any] = []


def _capsule_makers(torch: Any) -> Any:
    if not _CAPSULE_MAKERS:
        found = None
        if torch.version.hip is None:
            names = ("_to_dlpack", "_to_dlpack_versioned", "_cuda_getCurrentRawStream", "_has_torch_function_unary")
            calls = tuple(getattr(torch._C, name, None) for name in names)
            if all(callable(call) for call in calls):
                found = calls
        _CAPSULE_MAKERS.append(found)
    return _CAPSULE_MAKERS[0]


def _same_stream_export(
    torch: Any, tensor: Any, index: int, slow: Callable[..., Any], *, stream: Any = -1, max_version: Any = None,
    dl_device: Any = None, copy: Any = None,
) -> Any:
    """Export CUDA tensor ``tensor`` (of type ``torch.Tensor`` itself, on device
    ``index``) as ``Tensor.__dlpack__`` does, making the capsule without its
    Python checks where nothing is left to order: the tensor plain (no grad,
    no lazy conjugate bit, strided, no ``__torch_function__`` mode or override
    in force) and on the current device, and the consumer's stream torch's
    current one there (``None`` and ``1`` name the legacy default stream, as
    in ``__dlpack__``). Anything else, another stream included, goes to
    ``slow(**keywords)``, which orders the streams or refuses.

    On an H200 host ``Tensor.__dlpack__`` cost about 12 us a call, most of it
    finding streams and devices in Python; a consumer's import of a torch
    array is mostly that.
    """
    legacy, versioned, raw_stream, overridden = _CAPSULE_MAKERS[0]
    if (
        tensor.requires_grad or tensor.is_conj() or tensor.layout is not torch.strided or overridden(tensor)
        or _current_device(torch)() != index
        or copy or (dl_device is not None and tuple(dl_device) != (2, index))
        or (type(stream) is not int and stream is not None) or stream in (0, 2)  # (torch refuses 0 and 2)
        or (stream != -1 and (0 if stream is None or stream == 1 else stream) != raw_stream(index))
    ):
        return slow(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
    return versioned(tensor) if max_version is not None and max_version[0] >= 1 else legacy(tensor)


def _quick_export(torch: Any, tensor: Any, slow: Callable[..., Any]) -> Callable[..., Any] | None:
    """:func:`_same_stream_export` bound to CUDA tensor ``tensor`` (``slow`` for the
    rest), or ``None`` where it does not apply (a subclass of ``torch.Tensor``,
    whose ``__dlpack__`` may differ; a torch without the capsule makers)."""
    if type(tensor) is not torch.Tensor or _capsule_makers(torch) is None:
        return None
    return partial(_same_stream_export, torch, tensor, tensor.get_device(), slow)


def _plain(tensor: Any) -> bool:
    """Whether a host tensor exports as it is: no grad to detach, no lazy conjugate bit."""
    return not (tensor.requires_grad or tensor.is_conj())


def _word_dtype(torch: Any, word: int) -> Any:
    """torch's integer dtype of ``word`` bytes."""
    return getattr(torch, f"int{8 * word}")


def _one_kernel(torch: Any, dsts: Sequence[Any], srcs: Sequence[Any]) -> bool:
    """Copy pieces that tile one contiguous range as a single kernel: consecutive
    pieces into consecutive pieces are one copy of the whole range, a gather of
    contiguous pieces into consecutive parts of one buffer is ``torch.cat`` into
    that range, the reverse is ``torch.split_with_sizes_copy`` (measured on an
    H200: 8 pieces of 32 MiB in one kernel run at the rate of one 256 MiB copy,
    pair by pair they leave gaps between the copies). Returns whether it copied."""
    dtype = dsts[0].dtype
    for d, s in zip(dsts, srcs):
        if d.dtype != dtype or s.dtype != dtype or d.shape != s.shape:
            return False
    into, out_of = _consecutive(dsts), _consecutive(srcs)
    if into and out_of:  # one range into another (pieces of one storage are on its device)
        total = sum(d.numel() for d in dsts)
        dsts[0].as_strided((total,), (1,)).copy_(srcs[0].as_strided((total,), (1,)))
        return True
    if not (into or out_of):
        return False
    device = dsts[0].device
    if not all(d.device == device and s.device == device for d, s in zip(dsts, srcs)):
        return False
    sizes = [d.numel() for d in dsts]
    if into and all(s.is_contiguous() for s in srcs):
        whole = dsts[0].as_strided((sum(sizes),), (1,))
        torch.cat([s.view(-1) for s in srcs], out=whole)
        return True
    split = getattr(torch, "split_with_sizes_copy", None)
    if out_of and split is not None and all(d.is_contiguous() for d in dsts):
        whole = srcs[0].as_strided((sum(sizes),), (1,))
        split(whole, sizes, dim=0, out=[d.view(-1) for d in dsts])
        return True
    return False


def _list_operation(torch: Any, foreach: Any, pairwise: tuple[Any, Any, str], in_place: bool,
                    xs: list[Any], ys: Any) -> Any:
    """``foreach(xs, ys)``; for CUDA arrays of :data:`_TWO_STREAM_BYTES` and more the
    operator array by array on two streams (:func:`_on_two_streams`), or pair by pair
    where they are not all C-contiguous. In place the results are written into ``xs``."""
    if not xs or not xs[0].is_cuda or xs[0].nbytes < _TWO_STREAM_BYTES:
        return foreach(xs, ys)
    plain, inplace, function = pairwise
    operation = inplace if in_place else plain
    if len(xs) < 2 or not all(x.is_contiguous() for x in xs) or (
            isinstance(ys, list) and not all(y.is_contiguous() for y in ys)):
        return pair_by_pair(operation, in_place, xs, ys)
    return _on_two_streams(torch, operation, None if in_place else getattr(torch, function), xs, ys)


def _current(torch: Any, index: int) -> Any:
    """A context making CUDA device ``index`` current: nothing to enter when it is
    already (asking which device is current costs less than switching to it)."""
    return ALREADY_CURRENT if torch.cuda.current_device() == index else torch.cuda.device(index)


def _on_two_streams(torch: Any, operation: Any, into: Any, xs: list[Any], ys: Any) -> list[Any] | None:
    """``operation(x, y)`` for every pair, every other pair queued on a second stream
    of the arrays' device (see :data:`_TWO_STREAM_BYTES`); ``into(x, y, out=...)``
    writes results allocated on the current stream, in place (``into`` ``None``)
    ``operation`` writes into ``x``.

    The second stream starts after the work queued so far on the current one,
    and the current one waits for it before anything queued later: to other
    streams and to the caching allocator (which hands memory out again per
    stream) the call is work of the current stream, like one operator.
    """
    cuda = torch.cuda
    device = xs[0].device
    others = partners(xs, ys)
    outs = xs
    if into is not None:
        dtype = _result_dtype(torch, operation, xs[0], others[0])
        outs = [torch.empty_like(x, dtype=dtype) for x in xs]  # on the current stream
    index = device.index
    side = _SIDE_STREAMS.get(index)
    if side is None:
        side = _SIDE_STREAMS[index] = cuda.Stream(device)
    with _current(torch, index):  # set_stream also makes the stream's device current
        current = cuda.current_stream(index)
        side.wait_stream(current)
        try:
            cuda.set_stream(side)
            try:
                _each(operation, into, xs[1::2], others[1::2], outs[1::2])
            finally:
                cuda.set_stream(current)
            _each(operation, into, xs[0::2], others[0::2], outs[0::2])
        finally:
            current.wait_stream(side)
    return None if into is None else outs


def _each(operation: Any, into: Any, xs: list[Any], ys: list[Any], outs: list[Any]) -> None:
    """``into(x, y, out=out)`` for every triple, or ``operation(x, y)`` in place."""
    if into is None:
        for x, y in zip(xs, ys):
            operation(x, y)
    else:
        for x, y, out in zip(xs, ys, outs):
            into(x, y, out=out)


def _result_dtype(torch: Any, operation: Any, x: Any, y: Any) -> Any:
    """The dtype of ``operation(x, y)``: torch's promotion, which looks at dtypes, at
    which operands are 0-d and at the kind of a Python number, worked out once on
    meta tensors (raising the operator's own error for operands it refuses)."""
    tensor = isinstance(y, torch.Tensor)
    key = (operation, x.dtype, x.dim() == 0, y.dtype if tensor else type(y), tensor and y.dim() == 0)
    found = _RESULT_DTYPES.get(key)
    if found is None:
        meta_x = torch.empty(x.shape, dtype=x.dtype, device="meta")
        meta_y = torch.empty(y.shape, dtype=y.dtype, device="meta") if tensor else y
        found = _RESULT_DTYPES[key] = operation(meta_x, meta_y).dtype
    return found


def _consumer_stream(torch: Any, index: int) -> int:
    """The stream torch names to a CUDA producer on device ``index`` in
    ``torch.from_dlpack``: its current stream there, ``1`` for the legacy default
    stream (which the array API numbers 1, not 0). Asked through torch's raw
    query where it has one (:func:`_capsule_makers`), as the quick export asks it:
    ``torch.cuda.current_stream`` builds a ``Stream`` object on every call."""
    makers = _capsule_makers(torch)
    handle = makers[2](index) if makers is not None else torch.cuda.current_stream(index).cuda_stream
    return 1 if handle == 0 else handle


class TorchAdapter(BaseAdapter):
    """Adapter for :class:`torch.Tensor` (CPU and CUDA)."""

    name = "torch"
    modules = ("torch",)
    package = "torch"
    install_hint = "pip install torch (see https://pytorch.org for CUDA builds)"
    #: torch.ones(8, 4) + dt says to scatter; torch.sum(dt) names dlmg.sum and gather.
    tensor_protocols = {"__torch_function__": classmethod(_torch_function)}
    mutable = True
    can_view = True
    done_on_return = True  # host work is finished when the call returns
    stream_ordered = True
    orders_across_devices = True  # a device-to-device copy waits for the source's stream
    synchronizes_device = True

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a ``torch.Tensor`` (checked without importing torch)."""
        if type(array).__module__.partition(".")[0] != "torch":
            return False
        return hasattr(array, "data_ptr") and hasattr(array, "stride")

    def namespace(self) -> Any:
        """``array_api_compat.torch``."""
        return self._import("array_api_compat.torch")

    # -- conversions ----------------------------------------------------------
    def native_dtype(self, dtype: Any) -> Any:
        """The ``torch.dtype`` of a dlmg dtype.

        Raises
        ------
        DtypeError
            When this torch build has no such type.
        """
        found = _NATIVE_DTYPES.get(dtype) if isinstance(dtype, str) else None
        if found is not None:
            return found
        name = canonical(dtype)
        found = getattr(self.module(), name, None)
        if found is None or type(found).__name__ != "dtype":
            raise DtypeError(f"torch {self.module().__version__} has no element type {name!r}")
        if isinstance(dtype, str):
            _NATIVE_DTYPES[dtype] = found
        return found

    def native_device(self, device: Device) -> Any:
        """The ``torch.device`` of a dlmg :class:`~dlmg.device.Device` (host: ``cpu``).

        Raises
        ------
        DeviceError
            For a kind torch has no device for.
        """
        found = _NATIVE_DEVICES.get(device)
        if found is not None:
            return found
        torch = self.module()
        if device.kind == "cpu":
            found = torch.device("cpu")
        else:
            kind = _KIND_TO_TORCH.get(device.kind)
            if kind is None:
                raise DeviceError(f"torch has no device of kind {device.kind!r} ({device})")
            found = torch.device(kind, device.index)
        _NATIVE_DEVICES[device] = found
        return found

    def device_from_native(self, obj: Any) -> Device | None:
        """The dlmg device of a ``torch.device``; ``None`` for other objects."""
        kind = getattr(obj, "type", None)
        if not isinstance(kind, str) or not hasattr(obj, "index"):
            return None
        return Device(_TORCH_TO_KIND.get(kind, kind), int(obj.index or 0))

    def device_context(self, device: Device) -> Any:
        """``torch.cuda.device(index)`` for CUDA devices (torch queues work on the current
        one); nothing to enter when that device is current already."""
        if device.kind != "cuda":
            return None
        return partial(_current, self.module(), device.index)

    def tracks_gradients(self, array: Any) -> bool:
        """``array.requires_grad``."""
        return bool(getattr(array, "requires_grad", False))

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """``cpu:0`` for CPU tensors, ``cuda:i`` for CUDA tensors."""
        dev = array.device
        found = _DEVICES.get(dev)  # asked per fragment per copy: torch.device is hashable
        if found is None:
            kind = _TORCH_TO_KIND.get(dev.type)
            if kind is None:
                raise DeviceError(f"torch device {dev} has no DLPack counterpart dlmg knows")
            found = _DEVICES[dev] = Device(kind, 0 if kind == "cpu" else int(dev.index or 0))
        return found

    def shape_of(self, array: Any) -> tuple[int, ...]:
        """``array.shape`` as a plain tuple (a ``torch.Size`` holds Python ints already)."""
        return tuple(array.shape)

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """``array.stride()`` (already in elements)."""
        return tuple(array.stride())

    def data_ptr(self, array: Any) -> int:
        """``array.data_ptr()`` (includes the storage offset)."""
        return int(array.data_ptr())

    def is_readonly(self, array: Any) -> bool:
        """False: torch has no read-only tensors (and imports read-only buffers writable)."""
        return False

    def shares_memory(self, a: Any, b: Any) -> bool:
        """Whether the tensors view one storage (torch returns ``self`` from
        ``+t``, ``t.conj()`` and ``t.real`` of real tensors)."""
        if a is b:
            return True
        pa = a.untyped_storage().data_ptr()
        return pa != 0 and pa == b.untyped_storage().data_ptr()

    def supports(self, device: Device) -> bool:
        """``cpu`` devices always; ``cuda:i`` when torch sees that GPU."""
        if device.kind == "cpu":
            return True
        if device.kind == "cuda":
            found = _SUPPORTED.get(device)
            if found is None:  # asked per import; torch's answer is fixed once CUDA is set up
                torch = self.module()
                found = _SUPPORTED[device] = bool(torch.cuda.is_available()) and device.index < torch.cuda.device_count()
            return found
        return False

    # -- making and moving ----------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """``torch.empty`` on ``device``."""
        return self.module().empty(tuple(shape), dtype=self.native_dtype(dtype), device=self.native_device(device))

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """``torch.full`` on ``device``."""
        return self.module().full(
            tuple(shape), fill_value, dtype=self.native_dtype(dtype), device=self.native_device(device)
        )

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """``torch.from_dlpack`` with dlmg's checks.

        Zero-copy when ``obj`` is on ``device`` (default: where it is) and
        ``copy`` is not ``True``. A producer with negative strides is copied
        by its own framework first (``copy=None``) or refused (``copy=False``).
        Read-only producers come in writable (torch has no read-only tensors).

        Raises
        ------
        CopyRequiredError
            ``copy=False`` where the import needs a copy (negative strides, another device).
        DLPackError
            When torch rejects the producer.
        """
        if type(obj) is _NDARRAY and copy is None and (device is None or device.kind == "cpu") and obj.flags.writeable:
            # torch.from_numpy: the same memory as torch.from_dlpack at a third of its cost
            # (read-only arrays go the general way: from_numpy warns about them)
            try:
                return (_FROM_NUMPY.get("torch") or self._bind_from_numpy())(obj)
            except (TypeError, ValueError):  # dtype, byte order, strides: the general import says why
                pass
        torch = self.module()
        copy = check_copy(copy)
        if self.owns(obj):
            if device is None or self._same_place(self.device_of(obj), device):
                return obj.clone() if copy else obj
            if copy is False:
                raise self._copy_required(f"cannot move a tensor from {self.device_of(obj)} to {device} without a copy")
            return obj.to(self.native_device(device))
        known, inner = _source(obj)
        if known is None:
            src = describe_producer(obj)
            here, shape, strides = src.device, src.shape, src.strides
            backwards = has_negative_strides(shape, strides)
        else:  # only what the import needs: the full description is made when something fails
            src = None
            here, shape = known.device_of(inner), known.shape_of(inner)
            backwards = known.runs_backwards(inner)
        target = here if device is None else device
        if not self.supports(here):  # torch asserts (not raises) on CUDA memory without CUDA
            raise DLPackError(f"torch cannot take in memory on {here}: no such device in this torch "
                              f"(CUDA available: {self.module().cuda.is_available()})")
        _check_numel(shape)  # before torch takes the capsule: its refusal would run the deleter
        # dtype limits of the producer first
        producer = import_producer(obj, known, inner)
        if backwards:
            strides = src.strides if src is not None else known.strides_of(inner)  # type: ignore[union-attr]
            if copy is False:
                raise self._copy_required(
                    f"cannot represent the producer's negative strides {strides} (shape {shape})"
                )
            producer = self._contiguous_producer(obj, src or known.describe(inner))  # type: ignore[union-attr]
            copy = None  # the copy is made
        moving = not self._same_place(here, target)
        if moving and copy is False:
            raise self._copy_required(f"cannot take in memory on {here} as a tensor on {target}")
        try:
            if copy is None and not moving and here.is_host and known is not None and producer is obj:
                # host memory of a known framework: its capsule, made here, skips
                # torch's negotiation of the protocol's keywords (a third of the import)
                out = torch.from_dlpack(known.export(inner, max_version=(1, 0)))
            elif copy is None or moving:
                out = torch.from_dlpack(producer)
            else:
                out = torch.from_dlpack(producer, copy=copy)
        except (BufferError, RuntimeError, TypeError, ValueError) as exc:  # ValueError: "Expected zero byte_offset"
            if isinstance(exc, CopyRequiredError):
                raise
            dtype = (src or known.describe(inner)).dtype  # type: ignore[union-attr]
            raise DLPackError(f"torch could not import a {dtype} tensor of shape {shape} "
                              f"on {here}: {exc}") from exc
        if moving:
            out = out.to(self.native_device(target), copy=bool(copy))
        return out

    def importer(self, source: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """Arrays of another known framework, imported without :meth:`from_dlpack`'s
        description of each (see :meth:`Adapter.importer`): host memory as
        ``torch.from_dlpack`` of the source's capsule (writable NumPy arrays by
        ``torch.from_numpy``), CUDA memory likewise, the capsule asked with the
        stream ``torch.from_dlpack`` would pass (:func:`_consumer_stream`: the
        current stream of the array's device, 1 for the legacy default one),
        so that the producer's queued work is ordered before torch's. ``None``
        for shapes torch cannot hold and for producers of no known framework.
        """
        if not other_known_framework(self, source):
            return None
        try:
            _check_numel(shape)  # every array of the tensor is at most this large along each axis
        except DLPackError:
            return None
        found = _IMPORTERS.get(source)  # made once per source: making one costs a third of a small to()
        if found is None:
            found = _IMPORTERS[source] = self._importer_of(source)
        return found

    def _importer_of(self, source: Any) -> Any:
        torch = self.module()
        take, export, producer = torch.from_dlpack, source.export, source.producer
        cuda = torch.cuda.is_available()  # torch asserts, not raises, on CUDA memory without CUDA
        from_numpy = (_FROM_NUMPY.get("torch") or self._bind_from_numpy()) if source.name == "numpy" else None

        def take_in(array: Any, device: Device) -> Any:
            if device.kind == "cpu":
                if from_numpy is not None and array.flags.writeable:
                    return from_numpy(array)
                return take(export(array, max_version=(1, 0)))
            if device.kind == "cuda" and cuda:
                stream = _consumer_stream(torch, device.index)
                return take(call_dlpack(producer(array), stream=stream, max_version=(1, 0)))
            return None

        return take_in

    def _bind_from_numpy(self) -> Any:
        take = _FROM_NUMPY["torch"] = self.module().from_numpy
        return take

    @staticmethod
    def _same_place(a: Device, b: Device) -> bool:
        if a.kind == "cpu" and b.kind == "cpu":
            return True
        return a == b

    def to_device(self, array: Any, device: Device) -> Any:
        """``array.to(device)`` (``array`` itself when already there)."""
        if self._same_place(self.device_of(array), device):
            return array
        return array.to(self.native_device(device))

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """``torch.as_strided`` with the storage offset of ``array`` plus ``offset``.

        Raises
        ------
        ViewNotSupportedError
            For negative strides (torch cannot represent them).
        ValueError
            When the view would start before the tensor's storage.
        """
        if strides and min(strides) < 0:  # torch takes any integers (Python's, NumPy's) as they are
            raise ViewNotSupportedError(f"torch cannot represent negative strides {tuple(strides)}")
        start = array.storage_offset() + offset
        if start < 0:
            raise ValueError(f"offset {offset} puts the view before the start of the tensor's storage")
        return array.as_strided(shape, strides, start)

    def allocation_of(self, array: Any) -> tuple[Any, int] | None:
        """``array._base`` (the tensor a view was made from) where that is a
        one-dimensional contiguous tensor of the same dtype and device, with the
        difference of their storage offsets."""
        base = array._base
        if (base is None or base.dim() != 1 or not base.is_contiguous() or base.dtype != array.dtype
                or base.device != array.device):
            return None
        return base, array.storage_offset() - base.storage_offset()

    def ascontiguous(self, array: Any) -> Any:
        """``array.contiguous()``."""
        return array.contiguous()

    def copy_into(self, dst: Any, src: Any) -> None:
        """``dst.copy_(src)``; a large strided copy on CUDA in wider words (see ``_as_words``)."""
        if dst.is_cuda and src.is_cuda and dst.nbytes >= _BATCHED_COPY_BYTES:
            dst, src = _as_words(self.module(), dst, src)
        dst.copy_(src)

    def copy_many(self, dsts: Any, srcs: Any) -> None:
        """Several copies on one CUDA device with as few launches as torch allows:
        pieces that tile one contiguous range in order as one kernel (see
        ``_one_kernel``), many small pieces as one ``torch._foreach_copy_``;
        ``copy_`` pair by pair elsewhere and for other large pieces, where each
        contiguous copy is a ``cudaMemcpyAsync`` (measured on an H200: 8 pieces of
        32 MiB take 153 us pair by pair, 164 us batched, 133 us as one kernel,
        129 us as one 256 MiB copy) and each strided one moves 8-byte words
        where it can (see ``_as_words``)."""
        if len(dsts) > 1 and dsts[0].is_cuda:
            torch = self.module()
            if _one_kernel(torch, dsts, srcs):
                return
            foreach = getattr(torch, "_foreach_copy_", None)
            device, dtype = dsts[0].device, dsts[0].dtype
            if foreach is not None and dsts[0].nbytes < _BATCHED_COPY_BYTES and dtype not in _NO_FOREACH_COPY and all(
                d.device == device and s.device == device and d.dtype == dtype and s.dtype == dtype
                for d, s in zip(dsts, srcs)
            ):
                try:
                    foreach(list(dsts), list(srcs))
                    return
                except (NotImplementedError, RuntimeError):
                    # torch refuses the dtype before queuing anything (uint32: "not
                    # implemented"); the copies are made pair by pair below
                    _NO_FOREACH_COPY.add(dtype)
        for dst, src in zip(dsts, srcs):
            self.copy_into(dst, src)

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """``torch.cat(srcs, out=dst)``: one kernel for all the pieces, strided or not,
        where they share ``dst``'s dtype and device (the view and copy per piece
        otherwise). Strided pieces of a large CUDA ``dst`` go as 8-byte words
        where every piece allows it (see ``_as_words``): row slabs to column
        slabs of 8192 x 8192 float32 on an H200 took 207 us instead of 226 us."""
        device, dtype = dst.device, dst.dtype
        if len(srcs) > 1 and all(s.device == device and s.dtype == dtype for s in srcs):
            torch = self.module()
            if dst.is_cuda and dst.dim() > 1 and dst.nbytes >= _BATCHED_COPY_BYTES:
                dst, srcs = _cat_as_words(torch, dst, srcs)
            try:
                torch.cat(list(srcs), out=dst)
                return
            except (NotImplementedError, RuntimeError):  # a dtype without the kernel: refused before queuing
                pass
        super().concatenate_into(dst, srcs)

    def list_operator(self, name: str, in_place: bool = False) -> Any:
        """``torch._foreach_<op>`` (``_foreach_<op>_`` in place): one kernel for all
        the arrays of a CUDA device, one C++ loop on the CPU. Its results and
        errors equal the operator's pair by pair for every dtype and scalar type
        (checked on the CPU and on CUDA). CUDA arrays of 32 MiB and more take the
        operator array by array instead, alternating between the current stream
        and a second one (:data:`_TWO_STREAM_BYTES`): a list kernel runs a few
        hundred blocks, which streams large arrays slower than one kernel each,
        and kernels one after another leave SMs idle in each one's last wave."""
        key = (name, in_place)
        found = _LIST_OPERATORS.get(key)
        if found is None:
            suffix = _FOREACH_NAMES.get(name)
            if suffix is None:
                return None
            foreach = getattr(self.module(), f"_foreach_{suffix}{'_' if in_place else ''}", None)
            if foreach is None:  # an older torch
                return None
            found = _LIST_OPERATORS[key] = partial(
                _list_operation, self.module(), foreach, (*OPERATORS[name], suffix), in_place
            )
        return found

    # -- DLPack export ----------------------------------------------------------
    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)``, made inside ``torch.cuda.device(index)``
        for CUDA tensors, so it works whatever the current device is.

        A tensor that requires grad is exported through ``detach()`` (the same
        memory; torch refuses to export it otherwise). A tensor with the lazy
        conjugate bit raises :class:`~dlmg.errors.DLPackError` (resolving it
        would be a copy: call ``resolve_conj()`` first).
        """
        if array.requires_grad:
            array = array.detach()
        if array.is_complex() and array.is_conj():
            raise DLPackError(
                "torch cannot export a tensor with the lazy conjugate bit set; call "
                "tensor.resolve_conj() first (a copy)"
            )
        if array.is_cuda:
            with _current(self.module(), array.get_device()):
                return super().export(array, **kwargs)
        return super().export(array, **kwargs)

    def exporter(self, array: Any) -> Any:
        """The tensor's own ``__dlpack__`` while it works as is (no grad, no lazy
        conjugate bit and, for a CUDA tensor, its device current: asked in every
        call, as each may change); :meth:`export` otherwise. A CUDA
        ``torch.Tensor`` whose consumer names torch's current stream gets its
        capsule without ``__dlpack__``'s Python (:func:`_same_stream_export`)."""
        if not array.is_cuda:
            return direct_exporter(array, self.export, _plain)
        # what stays true of the tensor is asked once: its device; the current one may change
        torch = self.module()
        current, index = _current_device(torch), array.get_device()

        def as_is(tensor: Any) -> bool:
            return _plain(tensor) and current() == index
        slow = direct_exporter(array, self.export, as_is)
        return _quick_export(torch, array, slow) or slow

    def _exports_as_is(self, tensor: Any) -> bool:
        """Whether torch's own ``__dlpack__`` of ``tensor`` gives what :meth:`export` would."""
        # is_cuda and get_device() answer without building a torch.device (0.06 against 0.3 us)
        if not _plain(tensor):
            return False
        return not tensor.is_cuda or tensor.get_device() == _current_device(self.module())()

    def dlpack_device_on(self, device: Device) -> tuple[int, int] | None:
        """The device's own pair, or ``(kDLROCM, i)`` for ``cuda:i`` under ROCm
        (torch's HIP build): torch reports a tensor's device alone. ``None`` on
        the host, where pinned memory reports another type."""
        if device.is_host:
            return None
        if device.kind == "cuda" and self.module().version.hip is not None:
            return (10, device.index)
        return device.dlpack

    def producer(self, array: Any) -> Any:
        """``array`` itself where its own ``__dlpack__`` works as is (on the host or
        the current CUDA device, without grad or the lazy conjugate bit), for a
        CUDA ``torch.Tensor`` a shim exporting through
        :func:`_same_stream_export` (the capsule without ``__dlpack__``'s
        Python where the consumer is on torch's stream); else a shim exporting
        through :meth:`export`."""
        if self._exports_as_is(array):
            if array.is_cuda:  # a consumer on torch's current stream then skips __dlpack__'s Python
                quick = _quick_export(self.module(), array, array.__dlpack__)
                if quick is not None:
                    return DLPackShim(array, export=quick)
            return array
        return DLPackShim(array, export=partial(self.export, array))

    # -- arithmetic ---------------------------------------------------------------
    def accumulate_dtype(self, dtype: str, op: str) -> str:
        """int64 for sums and products of uint16/32/64 results, which torch
        cannot compute (``"sum_cpu" not implemented for 'UInt64'``); int64
        arithmetic wraps modulo ``2**64`` as unsigned arithmetic does, so the
        cast back is exact."""
        if op in ("sum", "prod") and dtype in ("uint16", "uint32", "uint64"):
            return "int64"
        return dtype

    # -- streams ----------------------------------------------------------------
    def synchronize(self, device: Device | None = None) -> None:
        """``torch.cuda.synchronize`` of ``device`` (all GPUs when ``None``; nothing for the host)."""
        if device is not None and device.kind != "cuda":
            return
        torch = self.module()
        if not torch.cuda.is_available() or not torch.cuda.is_initialized():
            return
        indices = range(torch.cuda.device_count()) if device is None else [device.index]
        for i in indices:
            torch.cuda.synchronize(i)

    def synchronize_array(self, array: Any) -> None:
        """Synchronise the CUDA device of ``array`` (nothing for CPU tensors)."""
        if array.device.type == "cuda":
            self.module().cuda.synchronize(array.device.index)

    # -- compiling --------------------------------------------------------------
    batches_elementwise = True

    def compile_elementwise(self, fn: Any, device: Device) -> tuple[Any, str]:
        """``torch.compile`` of ``fn`` where torch's compiler can build for
        ``device`` (CUDA: Triton installed; host: a C++ compiler on the path);
        eager otherwise (the second value says which)."""
        xp = self.namespace()

        def kernel(*args: Any) -> Any:
            return fn(xp, *args)

        kernel.__name__ = getattr(fn, "__name__", "kernel")
        missing = _compiler_missing(device)
        if missing:
            return kernel, f"eager ({missing})"
        torch = self.module()
        if device.kind != "cuda":
            return torch.compile(kernel), "torch.compile"

        def plain_kernel(*args: Any) -> Any:  # its own code object: dynamo keeps compiled code per code object
            return fn(xp, *args)

        plain_kernel.__name__ = kernel.__name__
        combined = torch.compile(kernel, options={"combo_kernels": True})
        return _CombinedFirst(combined, lambda: torch.compile(plain_kernel)), "torch.compile"
