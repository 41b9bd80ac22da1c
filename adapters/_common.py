"""Helpers shared by the framework adapters.

Nothing here imports a framework at import time. The pieces are:

* :class:`BaseAdapter`, the :class:`~dlmg.adapters.Adapter` subclass every
  built-in adapter derives from: it caches the framework module and
  negotiates the ``__dlpack__`` keywords on export;
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
  :func:`has_negative_strides`);
* :data:`ALREADY_CURRENT`, the context a device context hands out when its
  device is current already;
* :func:`pair_by_pair`, an operator over two lists of arrays one pair at a time
  (the fallback of the list operators).
"""

from __future__ import annotations

import importlib
import math
import operator
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, ClassVar

from dlmg.dlpack import c_contiguous_strides as c_strides  # noqa: F401  (the adapters take it from here)
from dlmg.dlpack import inspect as dl_inspect
from dlmg.errors import (
    CopyRequiredError,
    DLPackError,
    FrameworkNotInstalledError,
    UnsupportedDtypeError,
    ViewNotSupportedError,
)

from ._base import Adapter, ArrayInfo
from .builtin import known_adapter

__all__ = [
    "ALREADY_CURRENT",
    "element_strides",
    "ArrayInfo",
    "BaseAdapter",
    "DLPackShim",
    "UnsupportedDtypeError",
    "ViewNotSupportedError",
    "call_dlpack",
    "check_copy",
    "describe_producer",
    "import_producer",
    "has_negative_strides",
    "runs_backwards_by_byte_strides",
    "is_c_contiguous",
    "pair_by_pair",
    "OPERATORS",
    "partners",
    "other_known_framework",
    "is_compact",
    "SIXTY_FOUR_BIT",
    "NUMPY_DLPACK_DTYPES",
]

#: What a device context gives when its device is current already: nothing to
#: enter (entering a CUDA device context costs several times asking which one is current).
ALREADY_CURRENT = nullcontext()


#: :meth:`~dlmg.adapters.Adapter.list_operator` name -> (the Python operator, its in-place form):
#: what a list operation computes pair by pair, and falls back on
OPERATORS: dict[str, tuple[Any, Any]] = {
    "add": (operator.add, operator.iadd), "subtract": (operator.sub, operator.isub),
    "multiply": (operator.mul, operator.imul), "divide": (operator.truediv, operator.itruediv),
    "pow": (operator.pow, operator.ipow), "floor_divide": (operator.floordiv, operator.ifloordiv),
    "remainder": (operator.mod, operator.imod),
}


def partners(xs: Sequence[Any], ys: Any) -> list[Any]:
    """The other operand of each array of ``xs`` in a list operation: the matching
    item where ``ys`` is a list, else ``ys`` itself for every array."""
    return ys if isinstance(ys, list) else [ys] * len(xs)


def pair_by_pair(operation: Any, in_place: bool, xs: Sequence[Any], ys: Any) -> list[Any] | None:
    """``operation(x, y)`` for every array ``x`` of ``xs`` and its partner
    (:func:`partners`). In place (``operation`` writes into ``x``) returns
    ``None``, and a failure carries the position of its pair as the
    exception's ``list_position`` (the arrays before it are written);
    otherwise the results in order."""
    others = partners(xs, ys)
    if in_place:
        for position, (x, y) in enumerate(zip(xs, others)):
            try:
                operation(x, y)
            except Exception as exc:
                try:
                    exc.list_position = position  # type: ignore[attr-defined]
                except AttributeError:  # an exception class that takes no attributes: the first is named
                    pass
                raise
        return None
    return [operation(x, y) for x, y in zip(xs, others)]

#: Element types NumPy can take in and hand out through DLPack.
NUMPY_DLPACK_DTYPES: frozenset[str] = frozenset(
    ["bool", "float16", "float32", "float64", "complex64", "complex128"]
    + [f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)]
)

#: Element types that JAX silently narrows to 32 bits unless ``jax_enable_x64`` is on.
SIXTY_FOUR_BIT: frozenset[str] = frozenset({"int64", "uint64", "float64", "complex128"})


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


def copy_word(shape: Sequence[int], itemsize: int, widest: int, *sides: tuple[int, Sequence[int]]) -> int:
    """The widest word, in bytes and at most ``widest``, in which a copy between
    views of ``shape`` can move elements of ``itemsize`` bytes; each side is
    given as ``(address, byte strides)``. ``itemsize`` where no wider word fits.

    A word fits where each side's last mode is contiguous and a whole number
    of words long, and its address and every other stride are multiples of
    the word (modes of extent 1 included: a framework's view as a wider dtype
    checks them too). A GPU's strided copy kernel computes an address per
    element, so wider elements make fewer of them: one 64 MiB pitched copy of
    float32 rows on an H200 took 97 us in CuPy's assignment, 60 us in 8-byte
    words, 51 us in 16-byte words (a contiguous copy 40 us, CuPy's 2-D memcpy
    88 us). Empty and 0-d copies keep ``itemsize``.
    """
    if itemsize >= widest or not shape or 0 in shape:
        return itemsize
    row = shape[-1] * itemsize
    for address, strides in sides:
        if strides[-1] != itemsize:
            return itemsize
    word = widest
    while word > itemsize:
        if row % word == 0 and all(
            address % word == 0 and all(s % word == 0 for s in strides[:-1]) for address, strides in sides
        ):
            return word
        word //= 2
    return itemsize


def runs_backwards_by_byte_strides(self: Any, array: Any) -> bool:
    """:meth:`~dlmg.adapters.Adapter.runs_backwards` for arrays with byte strides
    (NumPy's, CuPy's): their signs are the element strides' signs, so they are read
    without converting them."""
    strides = array.strides
    return bool(strides) and min(strides) < 0 and has_negative_strides(array.shape, strides)


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


def direct_exporter(
    array: Any, fallback: Callable[..., Any], ready: Callable[[Any], bool] | None = None
) -> Callable[..., Any]:
    """An export of ``array`` that calls its own ``__dlpack__`` with the consumer's
    keywords as given, as a consumer importing the array itself would, whenever
    ``ready(array)`` says the adapter's export adds nothing now (no ``ready``:
    always). Otherwise, and where the producer refuses a keyword (an older
    framework), ``fallback(array, **keywords)``: the adapter's full export.

    What an :meth:`Adapter.exporter` keeps for a fragment: its exports then cost
    one Python call more than the framework's own, not the several layers of the
    full export.
    """
    dlpack = array.__dlpack__
    if ready is None:
        def export(**kwargs: Any) -> Any:
            try:
                return dlpack(**kwargs)
            except TypeError:
                return fallback(array, **kwargs)
        return export

    def guarded(**kwargs: Any) -> Any:
        if ready(array):
            try:
                return dlpack(**kwargs)
            except TypeError:
                pass
        return fallback(array, **kwargs)
    return guarded


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
def other_known_framework(target: "BaseAdapter", source: "BaseAdapter") -> bool:
    """Whether ``source`` is a framework other than ``target`` that dlmg knows: the
    arrays an importer (:meth:`Adapter.importer`) takes without describing each.
    Producers of no known framework (the generic adapter's) are described one by one."""
    return source.name != target.name and source.name != "dlpack"


def _known_adapter(obj: Any) -> "BaseAdapter | None":
    """The adapter of ``obj`` when it is an array of a built-in framework (no import).
    Arrays of frameworks added by an entry point or at run time are read through DLPack."""
    adapter = known_adapter(obj)
    if adapter is None or adapter.name == "dlpack":
        return None
    return adapter  # type: ignore[return-value]


def source_of(obj: Any) -> "tuple[BaseAdapter | None, Any]":
    """The adapter of ``obj`` and the array it stands for: a :class:`DLPackShim`
    that reports its producer's own device stands for that producer, so that
    importing it reads the producer's description instead of exporting twice.
    ``(None, obj)`` for producers of no known framework."""
    if type(obj) is DLPackShim and obj._device is None:
        adapter = _known_adapter(obj.producer)
        if adapter is not None:
            return adapter, obj.producer
    return _known_adapter(obj), obj


def import_producer(obj: Any, known: "BaseAdapter | None", inner: Any) -> Any:
    """What an import hands to the consumer for ``obj`` (with ``(known, inner)``
    from :func:`source_of`): a known framework's array through its adapter's
    ``producer`` (which checks the dtypes its DLPack can carry first); a shim, or
    a producer of no known framework, as it is."""
    return obj if known is None or inner is not obj else known.producer(obj)


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
    adapter, inner = source_of(obj)
    if adapter is not None:
        return adapter.describe(inner)
    return inspect_array(obj)


def inspect_array(obj: Any) -> ArrayInfo:
    if not hasattr(obj, "__dlpack__") and type(obj).__name__ != "PyCapsule":
        raise DLPackError(
            f"an object of type {type(obj).__module__}.{type(obj).__qualname__} is not a DLPack "
            "producer (it has no __dlpack__ method)"
        )
    d = dl_inspect(obj)
    return ArrayInfo(
        device=d.device,
        dtype=d.dtype,
        shape=d.shape,
        strides=d.strides,
        ptr=d.ptr,
        readonly=d.readonly,
        framework="dlpack",
    )


# -- the base class of the built-in adapters -------------------------------------
class BaseAdapter(Adapter):
    """:class:`~dlmg.adapters.Adapter` with what the built-in adapters share:
    the framework module imported once, submodule imports with the install
    hint, and :meth:`export` through the ``__dlpack__`` keyword negotiation."""

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

    # -- helpers for from_dlpack ---------------------------------------------
    def _contiguous_producer(self, obj: Any, src: ArrayInfo) -> Any:
        """A C-contiguous copy of producer ``obj``, made by its own framework.

        Used where the consumer cannot represent the producer's strides and
        the caller allowed a copy.
        """
        adapter, inner = source_of(obj)
        if adapter is not None:
            return adapter.producer(adapter.ascontiguous(inner))
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
