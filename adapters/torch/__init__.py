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

from functools import lru_cache, partial
from operator import attrgetter
from collections.abc import Sequence
from typing import Any

import numpy

from dlmg.device import Device
from dlmg.dtypes import canonical
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError, DtypeError

from .._base import ProtocolHook, Traits
from .._common import (
    BaseAdapter,
    DLPackShim,
    ViewNotSupportedError,
    source_of,
    call_dlpack,
    check_copy,
    describe_producer,
    direct_exporter,
    has_negative_strides,
    import_producer,
    other_known_framework,
)
from ..capabilities import (
    BulkCopies, CompiledElementwise, ListOperators, QuickExport, QuickImport, concatenate_by_views,
)
from . import _compile, _copies, _lists
from ._export import consumer_stream, current, current_device, plain, quick_export

__all__ = ["TorchAdapter"]

#: NumPy's array type, which torch takes in directly (numpy is a dependency of dlmg).
_NDARRAY = numpy.ndarray

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

_TORCH_TO_KIND = {"cpu": "cpu", "cuda": "cuda", "mps": "metal", "xpu": "oneapi"}
_KIND_TO_TORCH = {v: k for k, v in _TORCH_TO_KIND.items()}


@lru_cache(maxsize=1)
def _from_numpy() -> Any:
    """``torch.from_numpy``, looked up once (an attribute of a large module)."""
    import torch

    return torch.from_numpy


@lru_cache(maxsize=64)
def _device_of_native(dev: Any) -> Device:
    """The dlmg device of a ``torch.device`` (hashable), asked per fragment per copy:
    building the Device costs 4.3 us, the remembered one 0.08 us on the 2-core CPU."""
    kind = _TORCH_TO_KIND.get(dev.type)
    if kind is None:
        raise DeviceError(f"torch device {dev} has no DLPack counterpart dlmg knows")
    return Device(kind, 0 if kind == "cpu" else int(dev.index or 0))


@lru_cache(maxsize=64)
def _native_dtype(dtype: str) -> Any:
    """The ``torch.dtype`` of a dtype name, asked for every allocation: looked up anew 0.49 us, remembered 0.07 us on the 2-core CPU."""
    import torch

    name = canonical(dtype)
    found = getattr(torch, name, None)
    if found is None or type(found).__name__ != "dtype":
        raise DtypeError(f"torch {torch.__version__} has no element type {name!r}")
    return found


@lru_cache(maxsize=64)
def _native_device(device: Device) -> Any:
    """The ``torch.device`` of a dlmg device, asked for every allocation: built anew 0.7-1.5 us, remembered 0.21 us on the 2-core CPU."""
    import torch

    if device.kind == "cpu":
        return torch.device("cpu")
    kind = _KIND_TO_TORCH.get(device.kind)
    if kind is None:
        raise DeviceError(f"torch has no device of kind {device.kind!r} ({device})")
    return torch.device(kind, device.index)


@lru_cache(maxsize=64)
def _has_cuda_device(index: int) -> bool:
    """Whether torch sees CUDA device ``index``, asked per import; torch's answer is fixed
    once CUDA is set up (``torch.cuda.device_count`` costs 1.2-2.8 us a question, the remembered answer 0.06 us on the 2-core CPU)."""
    import torch

    return bool(torch.cuda.is_available()) and index < torch.cuda.device_count()


@lru_cache(maxsize=16)
def _importer_of(torch: Any, source: Any) -> Any:
    """:meth:`TorchAdapter.importer`'s ``take_in`` for arrays of adapter ``source`` (one of
    the registry's adapters), made once per source: making one costs a third of a small ``to()``."""
    take, export, producer = torch.from_dlpack, source.export, source.producer
    cuda = torch.cuda.is_available()  # torch asserts, not raises, on CUDA memory without CUDA
    from_numpy = _from_numpy() if source.name == "numpy" else None

    def take_in(array: Any, device: Device) -> Any:
        if device.kind == "cpu":
            if from_numpy is not None and array.flags.writeable:
                return from_numpy(array)
            return take(export(array, max_version=(1, 0)))
        if device.kind == "cuda" and cuda:
            stream = consumer_stream(torch, device.index)
            return take(call_dlpack(producer(array), stream=stream, max_version=(1, 0)))
        return None

    return take_in


_REQUIRES_GRAD = attrgetter("requires_grad")

# Not Delegating: DTensor.redistribute was slower than dlmg's all-to-all at 64 MiB on
# 2 gloo processes (dlmg at 0.12-0.89 of its time per transition; docs/tensors.md).

def _positive_steps(key: tuple[Any, ...], shape: Sequence[int]) -> tuple[tuple[Any, ...], list[int]]:
    """``key`` (ints, slices, ``None``, a trailing ``...``) with every negative-step slice
    replaced by one over the same elements with a positive step, and the result axes to
    flip afterwards."""
    plain: list[Any] = []
    flips: list[int] = []
    axis = source = 0
    for k in key:
        if isinstance(k, slice) and k.step is not None and k.step < 0:
            span = range(*k.indices(shape[source]))
            plain.append(slice(span[-1], span[0] + 1, -k.step) if len(span) else slice(0, 0))
            flips.append(axis)
        else:
            plain.append(k)
        if k is None or isinstance(k, slice):
            axis += 1
        if k is not None and k is not Ellipsis:
            source += 1
    return tuple(plain), flips


class TorchAdapter(BaseAdapter, BulkCopies, QuickImport, QuickExport, ListOperators,
                   CompiledElementwise):
    """Adapter for :class:`torch.Tensor` (CPU and CUDA)."""

    name = "torch"
    modules = ("torch",)
    package = "torch"
    install_hint = "pip install torch (see https://pytorch.org for CUDA builds)"
    traits = Traits(
        can_view=True,
        done_on_return=True,  # host work is finished when the call returns
        stream_ordered=True,
        orders_across_devices=True,  # a device-to-device copy waits for the source's stream
        synchronizes_device=True,
        batches_elementwise=True,
        # torch.ones(8, 4) + dt says to scatter; torch.sum(dt) names dlmg.sum and gather
        protocols=(ProtocolHook("__torch_function__", "dispatch"),),
    )

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a ``torch.Tensor`` (checked without importing torch)."""
        if type(array).__module__.partition(".")[0] != "torch":
            return False
        return hasattr(array, "data_ptr") and hasattr(array, "stride")

    def index(self, array: Any, key: tuple[Any, ...]) -> Any:
        """``array[key]``; torch has no negative strides and refuses negative steps, so a
        slice with one is read with the positive step over the same elements, then flipped
        (a copy, where NumPy gives a view)."""
        plain, flips = _positive_steps(key, array.shape)
        out = array[plain]
        return out.flip(flips) if flips else out

    def assign(self, array: Any, key: tuple[Any, ...], value: Any) -> Any:
        """``array[key] = value``; negative steps as in :meth:`index`: the value,
        broadcast to the selection, is flipped and written through the positive step."""
        plain, flips = _positive_steps(key, array.shape)
        if flips and hasattr(value, "shape"):
            target = array[plain]
            value = value.expand(target.shape).flip(flips) if value.ndim else value
        array[plain] = value
        return None

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
        return _native_dtype(dtype if isinstance(dtype, str) else canonical(dtype))

    def native_device(self, device: Device) -> Any:
        """The ``torch.device`` of a dlmg :class:`~dlmg.device.Device` (host: ``cpu``).

        Raises
        ------
        DeviceError
            For a kind torch has no device for.
        """
        return _native_device(device)

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
        return partial(current, self.module(), device.index)

    def tracks_gradients(self, arrays: Sequence[Any]) -> bool:
        """Whether any of ``arrays`` has ``requires_grad``."""
        try:  # (map: no Python frame per array; every operator asks this of its operands)
            return any(map(_REQUIRES_GRAD, arrays))
        except AttributeError:  # not all torch tensors
            return any([getattr(a, "requires_grad", False) for a in arrays])

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """``cpu:0`` for CPU tensors, ``cuda:i`` for CUDA tensors."""
        return _device_of_native(array.device)

    def shape_of(self, array: Any) -> tuple[int, ...]:
        """``array.shape`` as a plain tuple (a ``torch.Size`` holds Python ints already)."""
        return tuple(array.shape)

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """``array.stride()`` (already in elements)."""
        return tuple(array.stride())

    def runs_backwards(self, array: Any) -> bool:
        """False: torch has no negative strides (see :meth:`index`)."""
        return False

    def data_ptr(self, array: Any) -> int:
        """``array.data_ptr()`` (includes the storage offset)."""
        return int(array.data_ptr())

    def memory_signature(self, array: Any) -> Any:
        """``(shape, stride(), data_ptr())`` as torch gives them (see
        :meth:`Adapter.memory_signature`): no conversion to tuples of ints."""
        return (array.shape, array.stride(), array.data_ptr())

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
        return device.kind == "cuda" and _has_cuda_device(device.index)

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
                return _from_numpy()(obj)
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
        known, inner = source_of(obj)
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
        stream ``torch.from_dlpack`` would pass (:func:`~dlmg.adapters.torch._export.consumer_stream`: the
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
        return _importer_of(self.module(), source)

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
        """``dst.copy_(src)``; a large strided copy on CUDA in wider words."""
        _copies.copy_into(self.module(), dst, src)

    def copy_many(self, dsts: Any, srcs: Any) -> None:
        """Several copies on one CUDA device with as few launches as torch allows
        (see :func:`dlmg.adapters.torch._copies.copy_many`); pair by pair elsewhere."""
        _copies.copy_many(self.module(), dsts, srcs)

    def concatenate_into(self, dst: Any, srcs: Sequence[Any]) -> None:
        """``torch.cat(srcs, out=dst)``: one kernel for all the pieces, strided or not,
        where they share ``dst``'s dtype and device; the view and copy per piece
        otherwise."""
        if not _copies.concatenate_into(self.module(), dst, srcs):
            concatenate_by_views(self, dst, srcs)

    def list_operator(self, name: str, in_place: bool = False) -> Any:
        """``torch._foreach_<op>`` (``_foreach_<op>_`` in place): one kernel for all
        the arrays of a CUDA device, one C++ loop on the CPU. Its results and
        errors equal the operator's pair by pair for every dtype and scalar type
        (checked on the CPU and on CUDA). CUDA arrays of 32 MiB and more take the
        operator array by array instead, alternating between the current stream
        and a second one (see :mod:`dlmg.adapters.torch._lists`): a list kernel
        runs a few hundred blocks, which streams large arrays slower than one
        kernel each, and kernels one after another leave SMs idle in each one's
        last wave."""
        return _lists.list_operator(self.module(), name, in_place)

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
            with current(self.module(), array.get_device()):
                return super().export(array, **kwargs)
        return super().export(array, **kwargs)

    def exports_itself(self, dtype: Any) -> bool:
        """``False``: whether torch's own ``__dlpack__`` will do depends on the tensor's
        state at the export (grad, the lazy conjugate bit, the current CUDA device),
        not on its dtype."""
        return False

    def exporter(self, array: Any) -> Any:
        """The tensor's own ``__dlpack__`` while it works as is (no grad, no lazy
        conjugate bit and, for a CUDA tensor, its device current: asked in every
        call, as each may change); :meth:`export` otherwise. A CUDA
        ``torch.Tensor`` whose consumer names torch's current stream gets its
        capsule without ``__dlpack__``'s Python (:func:`~dlmg.adapters.torch._export.quick_export`)."""
        if not array.is_cuda:
            return direct_exporter(array, self.export, plain)
        # what stays true of the tensor is asked once: its device; the current one may change
        torch = self.module()
        current, index = current_device(torch), array.get_device()

        def as_is(tensor: Any) -> bool:
            return plain(tensor) and current() == index
        slow = direct_exporter(array, self.export, as_is)
        return quick_export(torch, array, slow) or slow

    def _exports_as_is(self, tensor: Any) -> bool:
        """Whether torch's own ``__dlpack__`` of ``tensor`` gives what :meth:`export` would."""
        # is_cuda and get_device() answer without building a torch.device, asked on every export
        if not plain(tensor):
            return False
        return not tensor.is_cuda or tensor.get_device() == current_device(self.module())()

    def producer(self, array: Any) -> Any:
        """``array`` itself where its own ``__dlpack__`` works as is (on the host or
        the current CUDA device, without grad or the lazy conjugate bit), for a
        CUDA ``torch.Tensor`` a shim exporting through
        :func:`~dlmg.adapters.torch._export.quick_export` (the capsule without ``__dlpack__``'s
        Python where the consumer is on torch's stream); else a shim exporting
        through :meth:`export`."""
        if self._exports_as_is(array):
            if array.is_cuda:  # a consumer on torch's current stream then skips __dlpack__'s Python
                quick = quick_export(self.module(), array, array.__dlpack__)
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
        """Synchronise the CUDA device of ``array`` (nothing for CPU tensors: torch's host
        work is done when its call returns)."""
        if array.is_cuda:
            self.module().cuda.synchronize(array.device.index)

    # -- compiling --------------------------------------------------------------
    def compile_elementwise(self, fn: Any, device: Device) -> tuple[Any, str]:
        """``torch.compile`` of ``fn`` where torch's compiler can build for
        ``device`` (CUDA: Triton installed; host: a C++ compiler on the path);
        eager otherwise (the second value says which)."""
        return _compile.compile_elementwise(self.module(), self.namespace(), fn, device)
