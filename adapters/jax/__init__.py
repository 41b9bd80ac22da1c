"""The JAX adapter: immutable ``jax.Array`` on one CPU or GPU device.

Quirks handled here (each has a test in ``tests/test_adapters.py``):

* JAX exports legacy ``"dltensor"`` capsules only, even when asked for a
  versioned one, and its consumer asks for legacy ones only (it calls
  ``__dlpack__`` without ``max_version``); every producer dlmg hands it
  supports that;
* with ``jax_enable_x64`` off, JAX silently narrows int64, uint64, float64 and
  complex128 to 32 bits on import and allocation; dlmg refuses with
  :class:`~dlmg.errors.DtypeError` instead (checked at call time);
* JAX copies host buffers that are not 64-byte aligned, silently with
  ``copy=None``; a ``copy=False`` import raises
  :class:`~dlmg.errors.CopyRequiredError` (the alignment is checked first and
  the data pointers are compared afterwards);
* JAX asks for legacy capsules, which cannot say READ_ONLY, so read-only
  producers (a read-only NumPy array, a read-only DLPackExporter) refuse to
  export to it: ``copy=False`` raises
  :class:`~dlmg.errors.CopyRequiredError`, otherwise JAX copies the memory
  on import;
* ``jax.dlpack.from_dlpack(x, copy=True)`` does not copy host memory (the
  result shares the producer's buffer); dlmg imports and then copies with
  ``jnp.array(x, copy=True)``;
* JAX cannot import non-compact strides (slices with gaps, negative strides,
  broadcasts; transposes are fine): ``copy=False`` raises
  :class:`~dlmg.errors.CopyRequiredError`, otherwise the producer's framework
  makes a contiguous copy first;
* JAX's CPU devices share the host memory, but ``jax.dlpack.from_dlpack``
  with ``device=cpu:k`` copies; dlmg imports host memory onto ``cpu:k``
  zero-copy by handing JAX a producer that reports DLPack device ``(1, k)``.
  JAX arrays on ``cpu:k`` themselves report ``(1, 0)`` in ``__dlpack_device__``;
  :meth:`JaxAdapter.device_of` reads the real device from ``devices()``;
* JAX arrays cannot be viewed with other strides nor written in place
  (:class:`~dlmg.errors.ViewNotSupportedError`);
* an array on several devices cannot be exported at all (``BufferError``);
  export its ``addressable_shards[i].data`` instead;
* ``jax.dlpack.from_dlpack`` and ``jax.Array.__dlpack__`` spend most of their
  time in Python around one jaxlib call each (35 against 4.2 us per import,
  2.4 against 0.46 us per export, on the 2-core CPU). Where jaxlib has the
  signatures known here, ``to("jax")`` hands capsules to
  ``dlpack_managed_tensor_to_buffer`` itself, after the checks it makes once
  per tensor, and a fragment's export of what lies where it is asked for calls
  ``buffer_to_dlpack_managed_tensor``; a call refusing its arguments turns the
  route off for the process (:mod:`dlmg.adapters.jax._jaxlib`).
"""

from __future__ import annotations

import sys

from typing import Any

from dlmg.device import Device
from dlmg.dlpack import DLPackExporter
from dlmg.dtypes import canonical
from dlmg.errors import CopyRequiredError, DeviceError, DLPackError, DtypeError

from .._base import ProtocolHook, Traits
from .._common import (
    SIXTY_FOUR_BIT,
    BaseAdapter,
    DLPackShim,
    ViewNotSupportedError,
    source_of,
    c_strides,
    check_copy,
    describe_producer,
    direct_exporter,
    import_producer,
    is_c_contiguous,
    is_compact,
    other_known_framework,
)
from ..capabilities import CompiledElementwise, ListOperators, QuickExport, QuickImport, Rearranging
from . import _rearrange
from ._delegate import JaxDelegation
from ._devices import by_sharding, device_of_native, dlpack_of_sharding, native_device, to_device
from ._jaxlib import buffer_import, host_slot, quick_exporter, ready_stream, takes_every_keyword, turn_off_import

__all__ = ["JaxAdapter"]

#: JAX copies host buffers whose address is not a multiple of this on import.
JAX_HOST_ALIGNMENT = 64


class JaxAdapter(BaseAdapter, QuickImport, QuickExport, Rearranging, ListOperators, CompiledElementwise,
                 JaxDelegation):
    """Adapter for single-device ``jax.Array`` (immutable)."""

    name = "jax"
    modules = ("jaxlib", "jax")
    package = "jax"
    install_hint = "pip install jax (or jax[cuda12] for GPUs)"
    traits = Traits(
        mutable=False,
        distinct_host_devices=True,  # cpu:0 ... cpu:7 are JAX devices of their own
        batches_elementwise=True,
        batches_operators=True,  # an eager JAX operation costs more host work than one compiled call
        # jnp.asarray(dt) says to gather; jax_array + dt goes on to the tensor's reflected operator
        protocols=(ProtocolHook("__jax_array__", "array", "; for a sharded jax.Array on the same buffers: dt.to_jax()"),),
    )

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is a ``jax.Array`` (type module ``jaxlib._jax``), checked without importing JAX."""
        return type(array).__module__.partition(".")[0] in self.modules and hasattr(array, "devices")

    def namespace(self) -> Any:
        """``jax.numpy``, which follows the array API standard itself."""
        return self._import("jax.numpy")

    # -- configuration and conversions ---------------------------------------------
    def x64_enabled(self) -> bool:
        """Whether ``jax_enable_x64`` is on now (read at every call: it can be toggled)."""
        config = self.module().config
        value = getattr(config, "jax_enable_x64", None)
        if value is None:
            value = config.read("jax_enable_x64")
        return bool(value)

    def check_dtype(self, dtype: str) -> None:
        """Refuse a 64-bit type while ``jax_enable_x64`` is off (JAX would narrow it silently).

        Raises
        ------
        DtypeError
            For int64, uint64, float64 and complex128 with x64 disabled.
        """
        if dtype in SIXTY_FOUR_BIT and not self.x64_enabled():
            narrow = {"int64": "int32", "uint64": "uint32", "float64": "float32", "complex128": "complex64"}[dtype]
            raise DtypeError(
                f"JAX has 64-bit types disabled (jax_enable_x64 is off) and would silently narrow "
                f"{dtype} to {narrow}; dlmg refuses. Enable them with "
                f"jax.config.update('jax_enable_x64', True) (or JAX_ENABLE_X64=1) before creating "
                f"arrays, or convert the data to {narrow} explicitly"
            )

    def native_dtype(self, dtype: Any) -> Any:
        """The NumPy-style dtype JAX uses for a dlmg dtype (64-bit types need x64)."""
        name = canonical(dtype)
        self.check_dtype(name)
        jnp = self.namespace()
        try:
            return jnp.dtype(name)
        except TypeError as exc:
            raise DtypeError(f"JAX has no element type {name!r}") from exc

    def native_device(self, device: Device) -> Any:
        """The JAX device of a dlmg :class:`~dlmg.device.Device`.

        ``cpu:k`` is JAX's CPU device ``k`` (8 of them with
        ``XLA_FLAGS=--xla_force_host_platform_device_count=8``); ``cuda:i``
        the GPU with local hardware id ``i``.

        Raises
        ------
        DeviceError
            When JAX has no such device.
        FrameworkNotInstalledError
            When JAX is not installed (what to install).
        """
        if sys.modules.get("jax") is None:  # (not imported yet: the import says what to install)
            self.module()
        return native_device(device)

    def device_from_native(self, obj: Any) -> Device | None:
        """The dlmg device of a JAX device (``cpu:k`` keeps JAX's CPU device
        number; GPUs go by local hardware id); ``None`` for other objects."""
        if not isinstance(getattr(obj, "platform", None), str) or not hasattr(obj, "id"):
            return None
        return to_device(obj)

    # -- describing -----------------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """The one device of ``array`` (``cpu:k`` keeps JAX's CPU device index).

        Raises
        ------
        DeviceError
            For an array on several devices (use its ``addressable_shards``), or
            one deleted (donated to a computation, or ``delete()``).
        """
        try:
            devices = array.devices()
        except RuntimeError:
            if array.is_deleted():  # asked only then: a sharding's answer kept would hide it
                raise DeviceError(
                    f"the JAX array ({array.dtype}{list(array.shape)}) was deleted (donated to a "
                    "computation or deleted): its memory is gone"
                ) from None
            raise
        if len(devices) != 1:
            raise DeviceError(
                f"a JAX array on {len(devices)} devices is not one fragment; wrap its "
                f"addressable_shards[i].data instead"
            )
        return device_of_native(next(iter(devices)))

    def dlpack_device(self, array: Any) -> tuple[int, int]:
        """``array.__dlpack_device__()``, kept per sharding (see :func:`~dlmg.adapters.jax._devices.dlpack_of_sharding`)."""
        return dlpack_of_sharding(by_sharding(array))

    def runs_backwards(self, array: Any) -> bool:
        """False: JAX has no views, its buffers never run backwards."""
        return False

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """Element strides of the buffer, from its layout (``format.layout.major_to_minor``).

        Usually C-contiguous; an array imported from a transposed view keeps
        the transposed layout (zero-copy), which this reports.
        """
        shape = self.shape_of(array)
        minor_first: tuple[int, ...] | None
        try:  # the buffer's own layout, without ``format``, which builds a Format object each time
            minor_first = tuple(array._pjrt_layout._xla_layout().minor_to_major())
        except Exception:  # noqa: BLE001 - another JAX, or a deleted array: the public way
            fmt = getattr(array, "format", None)
            order = getattr(getattr(fmt, "layout", None), "major_to_minor", None)
            minor_first = None if order is None else tuple(reversed(tuple(order)))
        if minor_first is None or len(minor_first) != len(shape):
            return c_strides(shape)
        strides = [0] * len(shape)
        acc = 1
        for mode in minor_first:
            strides[mode] = acc
            acc *= max(shape[mode], 1)
        return tuple(strides)

    def data_ptr(self, array: Any) -> int:
        """``array.unsafe_buffer_pointer()``."""
        return int(array.unsafe_buffer_pointer())

    def is_readonly(self, array: Any) -> bool:
        """True: JAX arrays are immutable (even if a consumer such as torch imports them writable)."""
        return True

    def supports(self, device: Device) -> bool:
        """Whether JAX has ``device``."""
        try:
            self.native_device(device)
        except DeviceError:
            return False
        return True

    # -- making and moving ----------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """Zeros on ``device`` (JAX has no uninitialised arrays).

        Raises
        ------
        DtypeError
            For a 64-bit type while ``jax_enable_x64`` is off.
        """
        jnp = self.namespace()
        return jnp.zeros(tuple(shape), dtype=self.native_dtype(dtype), device=self.native_device(device))

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """``jax.numpy.full`` on ``device`` (64-bit types need ``jax_enable_x64``)."""
        jnp = self.namespace()
        return jnp.full(tuple(shape), fill_value, dtype=self.native_dtype(dtype), device=self.native_device(device))

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """``jax.dlpack.from_dlpack`` with dlmg's checks.

        Zero-copy for compact, 64-byte aligned host memory onto any JAX CPU
        device, and for GPU memory onto its own GPU. ``copy=None`` lets JAX
        copy what it cannot take in as is (unaligned, strided, another GPU).

        Raises
        ------
        DtypeError
            For a 64-bit producer while ``jax_enable_x64`` is off (JAX would narrow it).
        CopyRequiredError
            ``copy=False`` with an unaligned host buffer, non-compact strides or another device.
        DLPackError
            When JAX rejects the producer otherwise.
        """
        jax = self.module()
        copy = check_copy(copy)
        if self.owns(obj):
            current = self.device_of(obj)
            if device is None or device == current:
                self.check_dtype(self.dtype_of(obj))
                return self.namespace().array(obj, copy=True) if copy else obj
        known, inner = source_of(obj)
        src = describe_producer(obj) if known is None else known.describe(inner)
        self.check_dtype(src.dtype)
        target = device
        if target is None and src.framework == "jax":
            target = src.device
        jdev = None if target is None else self.native_device(target)
        # dtype limits of the producer first
        producer = import_producer(obj, known, inner)
        if src.size == 0:
            # nothing to share; JAX would still insist on an aligned pointer
            jnp = self.namespace()
            where = jdev if jdev is not None else self.native_device(src.device) if src.device.kind != "cpu" else None
            return jnp.zeros(src.shape, dtype=jnp.dtype(src.dtype), device=where)
        host = src.device.kind == "cpu"
        if not is_compact(src.shape, src.strides):
            if copy is False:
                raise self._copy_required(
                    f"cannot import non-compact strides {src.strides} (shape {src.shape}); JAX takes "
                    "only C-contiguous arrays and transpositions of them"
                )
            producer = self._contiguous_producer(obj, src)
            copy = None
        elif host and src.size > 0 and src.ptr % JAX_HOST_ALIGNMENT and copy is False:
            raise self._copy_required(
                f"copies host buffers that are not {JAX_HOST_ALIGNMENT}-byte aligned, and this one "
                f"starts at 0x{src.ptr:x} ({src.ptr % JAX_HOST_ALIGNMENT} bytes past a boundary)"
            )
        elif src.readonly and src.framework != "jax":
            # JAX asks for a legacy capsule, which cannot carry READ_ONLY, so a
            # read-only producer refuses to export to it (NumPy, DLPackExporter).
            if copy is False:
                raise self._copy_required(
                    "asks for legacy DLPack capsules only, which cannot mark memory read-only, so a "
                    "read-only producer cannot hand its memory to JAX without a copy"
                )
            producer = DLPackExporter(src.ptr, src.shape, src.dtype, src.device, strides=src.strides, owner=obj)
            copy = True  # copied below: JAX never keeps the read-only memory
        if host and target is not None and target.kind == "cpu":
            # JAX places an import on the device the producer reports; all of its
            # CPU devices share the host memory, so this is zero-copy.
            producer = DLPackShim(producer, device=host_slot(jdev))
        elif target is not None and target != src.device and copy is False:
            raise self._copy_required(f"cannot take in memory on {src.device} as an array on {target}")
        try:
            # JAX's own copy=True does not copy host memory (measured on 0.10): copy afterwards
            out = jax.dlpack.from_dlpack(producer, device=jdev, copy=None if copy else copy)
            if copy:
                out = self.namespace().array(out, copy=True)
        except ValueError as exc:
            if copy is False:
                raise self._copy_required(f"refused a zero-copy import ({exc})") from exc
            raise DLPackError(f"JAX could not import a {src.dtype} tensor of shape {src.shape}: {exc}") from exc
        except (TypeError, BufferError, RuntimeError) as exc:  # JaxRuntimeError is a RuntimeError
            raise DLPackError(
                f"JAX could not import a {src.dtype} tensor of shape {src.shape}, strides "
                f"{src.strides} on {src.device}: {exc}"
            ) from exc
        got = canonical(out.dtype)
        if got != src.dtype:  # never hand back a narrowed array
            raise DtypeError(f"JAX turned a {src.dtype} tensor into {got}; dlmg refuses the narrowed result")
        if copy is False and src.size > 0 and self.data_ptr(out) != src.ptr:
            raise CopyRequiredError("copy=False was requested but JAX copied the buffer on import")
        return out

    def importer(self, source: Any, dtype: str, shape: tuple[int, ...]) -> Any:
        """Arrays of another known framework, imported without
        :meth:`from_dlpack`'s description of each (see :meth:`Adapter.importer`).

        Where this jaxlib's DLPack import has the signature known here
        (:func:`~dlmg.adapters.jax._jaxlib.buffer_import`), the capsule goes to it directly, as
        ``jax.dlpack.from_dlpack`` does after its checks (which
        ``dt.to("jax")`` has made once per tensor): host memory is taken in
        onto the target CPU device, device memory with JAX's stream for
        external producers. That is 6.4 against 35 us per array on the 2-core
        CPU. Elsewhere ``jax.dlpack.from_dlpack`` imports the source's
        producer, host memory named as the target CPU device's, as
        :meth:`from_dlpack` does. Either way JAX itself refuses what it
        cannot take as it is (strides that are no transposition, read-only
        producers) and copies unaligned host buffers, as with ``copy=None``.
        ``None`` for the 64-bit types while ``jax_enable_x64`` is off and for
        producers of no known framework.
        """
        if not other_known_framework(self, source):
            return None
        try:
            want = self.native_dtype(dtype)  # refuses 64-bit types while x64 is off
        except DtypeError:
            return None
        take, producer, place = self.module().dlpack.from_dlpack, source.producer, self.native_device
        buffer_import()  # looked up before the first import (take_in reads the kept answer)

        def through_jax(array: Any, device: Device, jdev: Any) -> Any:
            obj = producer(array)
            if device.kind == "cpu":
                obj = DLPackShim(obj, device=host_slot(jdev))
            return take(obj, device=jdev, copy=None)

        def take_in(array: Any, device: Device) -> Any:
            jdev = place(device)
            direct = buffer_import()
            if direct is None:
                out = through_jax(array, device, jdev)
            else:
                obj = producer(array)
                if device.kind == "cpu":  # host memory lands on the slot's CPU device, zero-copy
                    kind, stream = 1, None
                else:
                    kind, stream = obj.__dlpack_device__()[0], ready_stream(jdev)
                capsule = obj.__dlpack__(stream=stream)
                try:
                    out = direct(capsule, jdev, stream, None, kind)
                except TypeError:  # another signature after all: the public way from now on
                    turn_off_import()
                    out = through_jax(array, device, jdev)
            return out if out.dtype == want else None  # never a narrowed array

        return take_in

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` on ``device``: zero-copy between JAX CPU devices, ``jax.device_put`` otherwise."""
        current = self.device_of(array)
        if current == device:
            return array
        if current.kind == "cpu" and device.kind == "cpu":
            try:
                return self.from_dlpack(array, device=device, copy=False)
            except CopyRequiredError:
                pass
        return self.module().device_put(array, self.native_device(device))

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """Not possible: JAX cannot view memory with other strides.

        Raises
        ------
        ViewNotSupportedError
            Always.
        """
        raise ViewNotSupportedError(
            "JAX arrays cannot be viewed with other strides or offsets (JAX has no views of memory); "
            "slice them (a copy) or use a framework with views (torch, NumPy, CuPy) for this fragment"
        )

    def copy_into(self, dst: Any, src: Any) -> None:
        """Not possible: JAX arrays are immutable.

        Raises
        ------
        ViewNotSupportedError
            Always; build a new array (``dst.at[...].set(src)``) instead.
        """
        raise ViewNotSupportedError("JAX arrays are immutable and cannot be written in place; use dst.at[...].set(src)")

    def ascontiguous(self, array: Any) -> Any:
        """``array`` when its buffer is C-ordered, else a C-ordered copy."""
        if is_c_contiguous(self.shape_of(array), self.strides_of(array)):
            return array
        jnp = self.namespace()
        return jnp.array(array, copy=True)

    # -- DLPack export -------------------------------------------------------------
    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)`` -- always a legacy ``"dltensor"`` capsule.

        Raises
        ------
        DLPackError
            For an array on several devices (export ``addressable_shards[i].data``).
        """
        try:
            if len(kwargs) == 1 and "max_version" in kwargs:  # what imports ask: no negotiation to fall back on
                return array.__dlpack__(max_version=kwargs["max_version"])
            return super().export(array, **kwargs)
        except BufferError as exc:  # asked after the fact: counting the devices first cost a third of an export
            count = len(array.devices())
            if count == 1:
                raise
            raise DLPackError(
                f"a JAX array on {count} devices cannot be exported through DLPack; "
                "export its addressable_shards[i].data instead"
            ) from exc

    def exports_itself(self, dtype: Any) -> bool:
        """``False``: :meth:`exporter` finds per array an export quicker than its own."""
        return False

    def exporter(self, array: Any) -> Any:
        """The array's own ``__dlpack__``: a fragment's array lies on one device, so
        nothing :meth:`export` adds applies. An older JAX, whose ``__dlpack__``
        lacks some of the protocol's keywords, gets :meth:`export` as the fallback.
        What a consumer asks of the array where it lies goes to jaxlib's export
        directly, where this jaxlib has it (:func:`~dlmg.adapters.jax._jaxlib.quick_exporter`)."""
        kind: Any = type(array)
        own = array.__dlpack__ if takes_every_keyword(kind) else direct_exporter(array, self.export)
        return quick_exporter(array, own) or own

    # -- streams ----------------------------------------------------------------
    def synchronize(self, device: Device | None = None) -> None:
        """Block until every live JAX array on ``device`` (or anywhere) is computed.

        JAX has no per-device barrier; this waits on ``jax.live_arrays()``.
        """
        jax = self.module()
        for arr in jax.live_arrays():
            if device is None or any(to_device(d) == device for d in arr.devices()):
                arr.block_until_ready()

    def synchronize_array(self, array: Any) -> None:
        """``array.block_until_ready()``."""
        array.block_until_ready()

    # -- compiling --------------------------------------------------------------
    def assemble(self, pieces: Any, shape: tuple[int, ...], device: Device) -> Any:
        """One compiled concatenation of the spans (``jax.jit``, kept per geometry):
        a single XLA copy on ``device``, where staging through another framework
        costs an import per piece, a host wait and an import of the result.
        ``None`` for arrays elsewhere or not C-ordered (transposed imports)."""
        if not self._plain_on([p.array for p in pieces], device):
            return None
        return _rearrange.assemble(pieces, shape)

    def split(self, array: Any, pieces: Any) -> Any:
        """One compiled call (``jax.jit``, kept per geometry) cutting ``array`` into
        the pieces on its device; ``None`` for a transposed (not C-ordered) array."""
        if not self._plain_on([array], self.device_of(array)):
            return None
        return list(_rearrange.splitter(tuple(pieces))(array))

    def compose(self, arrays: Any, stacked: tuple[int, ...], axes: tuple[int, ...], shape: tuple[int, ...],
                device: Device) -> Any:
        """One compiled stack, transpose and reshape (``jax.jit``, kept per geometry): one
        XLA copy on ``device``. ``None`` for arrays elsewhere or not C-ordered, and
        on the CPU: there the staging array is host memory that JAX takes in
        without a copy, and XLA's transposes of small blocks were slower than
        dlmg's copies (8 fragments of 64 x 128 float32 blocks of a 2048 x 1024
        array: 1.68 against 0.68 ms on 2 cores)."""
        if device.kind == "cpu" or not self._plain_on(list(arrays), device):
            return None
        return _rearrange.composer(tuple(stacked), tuple(axes), tuple(shape))(*arrays)

    def decompose(self, array: Any, shape: tuple[int, ...], axes: tuple[int, ...], count: int,
                  part: tuple[int, ...]) -> Any:
        """The inverse of :meth:`compose` as one compiled call on ``array``'s device;
        ``None`` for a transposed (not C-ordered) array and on the CPU (see :meth:`compose`)."""
        device = self.device_of(array)
        if device.kind == "cpu" or not self._plain_on([array], device):
            return None
        return list(_rearrange.decomposer(tuple(shape), tuple(axes), count, tuple(part))(array))

    def retile(self, arrays: Any, targets: Any, device: Device) -> list[Any] | None:
        """One compiled call (``jax.jit``, kept per geometry) making every target
        array from slices of ``arrays`` and concatenations of them: XLA reads each
        slice where it lies and writes each result once. No transposes, so unlike
        :meth:`compose` it runs on the CPU too: row slabs to column slabs of a
        2048 x 2048 float32 array in 8 fragments on one CPU device took 1.8-2.3
        ms, against 4.1-4.9 ms as a gather and a scatter. ``None`` for arrays
        elsewhere or not C-ordered."""
        if not self._plain_on(list(arrays), device):
            return None
        return list(_rearrange.retiler(tuple(targets))(*arrays))

    def _plain_on(self, arrays: list[Any], device: Device) -> bool:
        """Whether every array is C-ordered and on ``device`` alone."""
        for a in arrays:
            if self.device_of(a) != device or not is_c_contiguous(a.shape, self.strides_of(a)):
                return False
        return True

    def list_operator(self, name: str, in_place: bool = False) -> Any:
        """The operator over all the arrays of one device as one ``jax.jit`` call
        (one array: ``jax.jit`` of the operator itself, which dispatches 0.2 us
        faster on the CPU than a call taking lists). It runs the same XLA
        operation on each array on its own device as the eager operator, with
        the same promotion of Python scalars (weakly typed in both), and a
        compiled call's C++ dispatch costs less host time than the eager
        operator (on the CPU 4.7 against 6.8 us per array). ``None`` in place
        (JAX arrays are immutable) and for ``pow``."""
        return None if in_place else _rearrange.list_operator(name)

    def compile_elementwise(self, fn: Any, device: Device) -> tuple[Any, str]:
        """``jax.jit`` of ``fn`` with ``jax.numpy`` as its namespace: one XLA
        computation (one pass over memory) per dtype and shape, run on the
        arrays' own device."""
        jax = self.module()
        jnp = self.namespace()

        def kernel(*args: Any) -> Any:
            return fn(jnp, *args)

        kernel.__name__ = getattr(fn, "__name__", "kernel")
        return jax.jit(kernel), "jax.jit"

