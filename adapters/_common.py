"""Helpers shared by the framework adapters.

Nothing here imports a framework at import time. The pieces are:

* :class:`BaseAdapter`, the :class:`~dlmg.adapters.Adapter` subclass every
  built-in adapter derives from: it caches the framework module and adds the
  methods dlmg needs beyond the base interface (:meth:`BaseAdapter.export`,
  :meth:`BaseAdapter.describe`, :meth:`BaseAdapter.is_readonly`, ...);
* :func:`describe_producer`, which reads shape, strides, dtype, device and
  data pointer of any DLPack producer *before* a consumer framework sees it,
  so that adapters can refuse what a framework would crash on, copy silently
  or downcast;
* :func:`call_dlpack`, the consumer side of the ``__dlpack__`` keyword
  negotiation;
* :class:`DLPackShim`, a stand-in producer that forwards ``__dlpack__`` to a
  real one but may report another device or route the export through the
  producer's adapter (torch on a non-current CUDA device);
* stride predicates (:func:`is_c_contiguous`, :func:`is_compact`,
  :func:`has_negative_strides`).
"""

from __future__ import annotations

import math

import importlib
from dataclasses import dataclass
from collections.abc import Sequence
from typing import Any, ClassVar

from dlmg._shapes import c_strides
from dlmg.device import Device, as_device
from dlmg.registry import adapter_for
from dlmg.dtypes import canonical, info
from dlmg.errors import (
    CopyRequiredError,
    DLPackError,
    FrameworkError,
    FrameworkNotInstalledError,
    UnsupportedDtypeError,
    ViewNotSupportedError,
)

from ._base import Adapter

__all__ = [
    "element_strides",
    "ArrayInfo",
    "BaseAdapter",
    "DLPackShim",
    "UnsupportedDtypeError",
    "ViewNotSupportedError",
    "call_dlpack",
    "check_copy",
    "describe_producer",
    "has_negative_strides",
    "is_c_contiguous",
    "is_compact",
    "SIXTY_FOUR_BIT",
    "NUMPY_DLPACK_DTYPES",
]

#: Element types NumPy can take in and hand out through DLPack.
NUMPY_DLPACK_DTYPES: frozenset[str] = frozenset(
    ["bool", "float16", "float32", "float64", "complex64", "complex128"]
    + [f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)]
)

#: Element types that JAX silently narrows to 32 bits unless ``jax_enable_x64`` is on.
SIXTY_FOUR_BIT: frozenset[str] = frozenset({"int64", "uint64", "float64", "complex128"})


@dataclass(frozen=True)
class ArrayInfo:
    """What dlmg knows about an array or DLPack producer without importing it.

    Attributes
    ----------
    device : Device
        Where the data lives (for JAX the JAX device, so ``cpu:3`` is kept).
    dtype : str
        dlmg dtype name.
    shape : tuple of int
    strides : tuple of int
        Strides in elements (C-contiguous ones when the producer gave none).
    ptr : int
        Address of the first element (``data + byte_offset``).
    readonly : bool
        Whether the producer marks the memory read-only (or is immutable).
    framework : str
        The name of the adapter that described it (``"dlpack"`` for foreign
        producers).
    """

    device: Device
    dtype: str
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    ptr: int
    readonly: bool
    framework: str

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return info(self.dtype).itemsize


# -- strides ---------------------------------------------------------------------
def is_c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the element strides are C-contiguous (ignoring modes of extent <= 1)."""
    if math.prod(shape) == 0:
        return True
    expected = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def is_compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether the strides describe a dense buffer in some mode order.

    True for C-contiguous arrays and any transposition of one (what JAX's
    DLPack import calls trivial striding), false for slices with gaps,
    broadcasts (zero strides) and negative strides. Modes of extent 1 are
    ignored; an empty array is compact.
    """
    if math.prod(shape) == 0:
        return True
    modes = sorted((s, n) for n, s in zip(shape, strides) if n != 1)
    expected = 1
    for s, n in modes:
        if s != expected:
            return False
        expected *= n
    return True


def has_negative_strides(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether any mode of extent > 1 runs backwards in memory."""
    return math.prod(shape) > 0 and any(s < 0 for n, s in zip(shape, strides) if n > 1)


def check_copy(copy: Any) -> bool | None:
    """Validate the array-API ``copy`` argument (``None``, ``True`` or ``False``)."""
    if copy is None or copy is True or copy is False:
        return copy
    raise ValueError(f"copy must be None, True or False, got {copy!r}")


# -- the __dlpack__ protocol, consumer side -------------------------------------
def element_strides(byte_strides: Sequence[int], itemsize: int, framework: str) -> tuple[int, ...]:
    """Byte strides (NumPy's and CuPy's) as element strides.

    Raises
    ------
    DLPackError
        When a byte stride is not a multiple of the item size (DLPack counts
        strides in elements and cannot describe it).
    """
    out = []
    for s in byte_strides:
        q, r = divmod(int(s), itemsize)
        if r:
            raise DLPackError(
                f"{framework} array strides {tuple(byte_strides)} (bytes) are not multiples of the item size {itemsize}"
            )
        out.append(q)
    return tuple(out)


def call_dlpack(
    obj: Any,
    *,
    stream: Any = None,
    max_version: tuple[int, int] | None = None,
    dl_device: tuple[int, int] | None = None,
    copy: bool | None = None,
) -> Any:
    """Call ``obj.__dlpack__`` with the keywords given, falling back for old producers.

    Keywords left at ``None`` are not passed. A producer that rejects
    ``max_version`` (a pre-2023 one) is asked again without it and may return
    a legacy capsule, as the protocol allows. A producer that rejects
    ``dl_device`` or ``copy`` cannot honour them, which raises.

    Raises
    ------
    DLPackError
        When ``obj`` has no ``__dlpack__`` or cannot honour ``dl_device``/``copy``.
    """
    method = getattr(obj, "__dlpack__", None)
    if method is None:
        raise DLPackError(f"an object of type {type(obj).__name__} has no __dlpack__ method")
    kwargs: dict[str, Any] = {}
    if stream is not None:
        kwargs["stream"] = stream
    if max_version is not None:
        kwargs["max_version"] = tuple(max_version)
    if dl_device is not None:
        kwargs["dl_device"] = tuple(dl_device)
    if copy is not None:
        kwargs["copy"] = copy
    try:
        return method(**kwargs)
    except TypeError:
        if dl_device is not None or copy is not None:
            raise DLPackError(
                f"the DLPack producer {type(obj).__name__} does not accept dl_device= or copy= "
                f"(asked dl_device={dl_device!r}, copy={copy!r}); it implements an older protocol"
            ) from None
        if max_version is None:
            raise
        return method(**({"stream": stream} if stream is not None else {}))


class DLPackShim:
    """A DLPack producer standing in for another one.

    ``__dlpack__`` goes to ``export`` (by default the producer's own
    ``__dlpack__``); ``__dlpack_device__`` reports ``device`` (by default the
    producer's). It keeps the producer alive as long as the shim lives; the
    capsule it hands out keeps the memory alive after that, as usual.

    dlmg uses it to let JAX import host memory onto any of its CPU devices
    zero-copy (JAX places an import on the device the producer reports), and
    to route a torch CUDA export through ``torch.cuda.device`` whatever the
    current device is.

    Parameters
    ----------
    producer : object
        The real producer.
    device : tuple of int, optional
        The DLPack ``(device_type, device_id)`` to report.
    export : callable, optional
        Called as ``export(**dlpack_kwargs)`` instead of ``producer.__dlpack__``.
    """

    __slots__ = ("producer", "_device", "_export")

    def __init__(self, producer: Any, device: tuple[int, int] | None = None, export: Any = None) -> None:
        self.producer = producer
        self._device = device
        self._export = export

    def __dlpack__(self, **kwargs: Any) -> Any:
        if self._export is not None:
            return self._export(**kwargs)
        return self.producer.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        if self._device is not None:
            return self._device
        return self.producer.__dlpack_device__()

    def __repr__(self) -> str:
        return f"DLPackShim({type(self.producer).__name__}, device={self.__dlpack_device__()})"


# -- describing producers --------------------------------------------------------
def _known_adapter(obj: Any) -> "BaseAdapter | None":
    """The adapter of ``obj`` when it is an array of a known framework (no import)."""
    try:
        adapter = adapter_for(obj)
    except FrameworkError:
        return None
    if adapter.name == "dlpack" or not hasattr(adapter, "describe"):
        return None
    return adapter  # type: ignore[return-value]


def describe_producer(obj: Any) -> ArrayInfo:
    """Shape, strides, dtype, device, data pointer and read-only flag of a producer.

    Arrays of a known framework are described by their adapter (no export);
    any other ``__dlpack__`` producer is exported once and read through
    :func:`dlmg.dlpack.inspect`.

    Raises
    ------
    DLPackError
        When ``obj`` is no DLPack producer or what it hands over is invalid.
    """
    adapter = _known_adapter(obj)
    if adapter is not None:
        return adapter.describe(obj)
    return _inspect(obj)


def _inspect(obj: Any) -> ArrayInfo:
    try:
        from dlmg.dlpack import inspect as dl_inspect  # the ABI layer
    except ImportError as exc:  # pragma: no cover - only while dlmg.dlpack is being written
        raise DLPackError(
            f"cannot describe a {type(obj).__name__}: dlmg.dlpack.inspect is not available ({exc})"
        ) from exc
    if not hasattr(obj, "__dlpack__") and type(obj).__name__ != "PyCapsule":
        raise DLPackError(
            f"an object of type {type(obj).__module__}.{type(obj).__qualname__} is not a DLPack "
            "producer (it has no __dlpack__ method)"
        )
    d = dl_inspect(obj)
    get = d.get if isinstance(d, dict) else (lambda k, default=None: getattr(d, k, default))
    shape = tuple(int(n) for n in get("shape"))
    strides = get("strides")
    strides = c_strides(shape) if strides is None else tuple(int(s) for s in strides)
    device = get("device")
    device = as_device(tuple(device) if isinstance(device, list) else device)
    return ArrayInfo(
        device=device,
        dtype=canonical(get("dtype")),
        shape=shape,
        strides=strides,
        ptr=int(get("ptr") if get("ptr") is not None else get("data", 0)),
        readonly=bool(get("readonly", False)),
        framework="dlpack",
    )


# -- the base class of the built-in adapters -------------------------------------
class BaseAdapter(Adapter):
    """:class:`~dlmg.adapters.Adapter` with the methods dlmg adds beyond the interface.

    Beyond :class:`~dlmg.adapters.Adapter`, every built-in adapter has

    * :meth:`export` -- ``__dlpack__`` of one of its arrays, made to work
      whatever the framework's current device (the method a Fragment's
      ``__dlpack__`` forwards to);
    * :meth:`dlpack_device` -- ``__dlpack_device__`` of one of its arrays;
    * :meth:`describe` -- an :class:`ArrayInfo` of one of its arrays;
    * :meth:`is_readonly` -- whether its memory must not be written;
    * :meth:`synchronize_array` -- wait until the array's producing work is done;
    * :meth:`ascontiguous` -- a C-contiguous copy (or the array itself when it is one).
    """

    _module_cache: ClassVar[dict[str, Any]] = {}

    def module(self) -> Any:
        """Import (once) and return the framework's module.

        Raises
        ------
        FrameworkNotInstalledError
            When the framework is not installed; the message says what to install.
        """
        mod = BaseAdapter._module_cache.get(self.package)
        if mod is None:
            mod = super().module()
            BaseAdapter._module_cache[self.package] = mod
        return mod

    def _import(self, name: str) -> Any:
        """Import a submodule of the framework, with the install hint on failure."""
        mod = BaseAdapter._module_cache.get(name)
        if mod is None:
            self.module()
            try:
                mod = importlib.import_module(name)
            except ImportError as exc:
                missing = (getattr(exc, "name", None) or name).partition(".")[0]
                hint = (
                    f"pip install {missing.replace('_', '-')}" if missing != self.package.partition(".")[0]
                    else self.install_hint
                )
                raise FrameworkNotInstalledError(
                    f"dlmg needs {name!r} for framework {self.name!r} ({exc}); install it with: {hint}"
                ) from exc
            BaseAdapter._module_cache[name] = mod
        return mod

    def __repr__(self) -> str:
        return f"<dlmg adapter {self.name!r}>"

    # -- describing ----------------------------------------------------------
    def is_readonly(self, array: Any) -> bool:
        """Whether ``array``'s memory must not be written (read-only or immutable)."""
        return False

    def describe(self, array: Any) -> ArrayInfo:
        """An :class:`ArrayInfo` of ``array``."""
        return ArrayInfo(
            device=self.device_of(array),
            dtype=self.dtype_of(array),
            shape=self.shape_of(array),
            strides=self.strides_of(array),
            ptr=self.data_ptr(array),
            readonly=self.is_readonly(array),
            framework=self.name,
        )

    def dlpack_device(self, array: Any) -> tuple[int, int]:
        """``array.__dlpack_device__()`` as a plain ``(device_type, device_id)`` pair."""
        dev_type, dev_id = array.__dlpack_device__()
        return (int(dev_type), int(dev_id))

    # -- DLPack export -------------------------------------------------------
    def export(
        self,
        array: Any,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of ``array`` (what ``array.__dlpack__(...)`` returns).

        Takes the keywords of the protocol's ``__dlpack__``; keywords left at
        ``None`` are not passed on. The capsule may be a legacy one even when
        ``max_version`` asks for a versioned one (JAX); consumers check its name.
        """
        return call_dlpack(array, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def producer(self, array: Any) -> Any:
        """An object whose ``__dlpack__`` is :meth:`export` of ``array``.

        Hand this, rather than ``array``, to another framework's
        ``from_dlpack`` where the framework's own ``__dlpack__`` has a quirk
        (torch on a non-current CUDA device). Returns ``array`` itself where
        there is none.
        """
        return array

    def synchronize_array(self, array: Any) -> None:
        """Wait until the work producing ``array`` is done."""
        return None

    def ascontiguous(self, array: Any) -> Any:
        """``array`` as a C-contiguous array of this framework (a copy unless it is one)."""
        raise NotImplementedError

    # -- helpers for from_dlpack ---------------------------------------------
    def _contiguous_producer(self, obj: Any, src: ArrayInfo) -> Any:
        """A C-contiguous copy of producer ``obj``, made by its own framework.

        Used where the consumer cannot represent the producer's strides and
        the caller allowed a copy.
        """
        adapter = _known_adapter(obj)
        if adapter is not None:
            return adapter.producer(adapter.ascontiguous(obj))
        if src.device.kind == "cpu" and src.dtype in NUMPY_DLPACK_DTYPES:
            import numpy as np

            return np.ascontiguousarray(np.from_dlpack(obj))
        raise DLPackError(
            f"{self.name} cannot import a {src.dtype} DLPack tensor with strides {src.strides} "
            f"(shape {src.shape}) on {src.device}, and dlmg cannot copy it there: make the "
            "producer contiguous first"
        )

    def _copy_required(self, what: str) -> CopyRequiredError:
        return CopyRequiredError(f"copy=False was requested but {self.name} {what}; pass copy=None or copy=True to allow a copy")
