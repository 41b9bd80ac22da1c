"""The interface every framework adapter implements.

An adapter holds only what differs between frameworks: recognising arrays,
devices, allocation, DLPack import and export quirks, strided views, streams.
Math goes through the framework's array-API namespace (:meth:`Adapter.namespace`).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, ClassVar, Sequence

from dlmg.device import Device
from dlmg.dtypes import canonical, info
from dlmg.errors import FrameworkNotInstalledError

__all__ = ["Adapter"]


class Adapter:
    """Base class of the framework adapters.

    Subclasses set the class attributes and implement the methods that raise
    ``NotImplementedError`` here. Instances are stateless singletons obtained
    through :func:`dlmg.registry.get_adapter`.

    Attributes
    ----------
    name : str
        Framework name used throughout dlmg (``"torch"``).
    modules : tuple of str
        Top-level module names whose array types this adapter owns.
    package : str
        The module to import for the framework.
    install_hint : str
        What to install when the framework is missing.
    mutable : bool
        Whether arrays can be written in place (``False`` for JAX).
    negative_strides : bool
        Whether arrays can have negative strides (``False`` where the
        framework has no such views, as JAX: importers then need not ask).
    """

    name: ClassVar[str] = ""
    modules: ClassVar[tuple[str, ...]] = ()
    package: ClassVar[str] = ""
    install_hint: ClassVar[str] = ""
    mutable: ClassVar[bool] = True
    negative_strides: ClassVar[bool] = True

    # -- the framework itself -------------------------------------------------
    def available(self) -> bool:
        """Whether the framework can be imported."""
        try:
            self.module()
        except FrameworkNotInstalledError:
            return False
        return True

    def module(self) -> Any:
        """Import and return the framework's module.

        Raises
        ------
        FrameworkNotInstalledError
            When it is not installed; the message says what to install.
        """
        try:
            return importlib.import_module(self.package)
        except ImportError as exc:
            raise FrameworkNotInstalledError(
                f"dlmg needs {self.package!r} for framework {self.name!r} but it is not "
                f"installed ({exc}); install it with: {self.install_hint}"
            ) from exc

    def owns(self, array: Any) -> bool:
        """Whether ``array`` is an array of this framework (checked without importing it)."""
        return type(array).__module__.partition(".")[0] in self.modules

    def namespace(self) -> Any:
        """The framework's array-API namespace (through array-api-compat where needed)."""
        raise NotImplementedError

    # -- describing arrays ----------------------------------------------------
    def device_of(self, array: Any) -> Device:
        """The :class:`~dlmg.device.Device` holding ``array``."""
        raise NotImplementedError

    def dtype_of(self, array: Any) -> str:
        """The dlmg dtype name of ``array`` (by default read from ``array.dtype``)."""
        return canonical(array.dtype)

    def shape_of(self, array: Any) -> tuple[int, ...]:
        """The shape of ``array`` as a tuple of ints."""
        shape = array.shape
        if type(shape) is tuple:  # NumPy, JAX, CuPy: already a tuple of ints
            return shape
        return tuple(int(n) for n in shape)

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """The strides of ``array`` in elements."""
        raise NotImplementedError

    def data_ptr(self, array: Any) -> int:
        """The address of ``array``'s first element."""
        raise NotImplementedError

    def supports(self, device: Device) -> bool:
        """Whether this framework can hold arrays on ``device``."""
        raise NotImplementedError

    def landing_device(self, device: Device) -> Device:
        """Where a whole array gathered from fragments on ``device`` goes when no device is asked for.

        The fragments' own device when this framework can hold arrays there,
        otherwise the host: asking NumPy for an array of GPU fragments means
        host memory.
        """
        return device if self.supports(device) else Device("cpu", 0)

    # -- making and moving arrays ---------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """An uninitialised array on ``device``."""
        raise NotImplementedError

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """An array filled with ``fill_value`` on ``device``."""
        raise NotImplementedError

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """Take in any DLPack producer as this framework's array.

        Zero-copy when ``obj`` is on a device this framework can address and
        ``copy`` is not ``True``; ``copy=False`` raises
        :class:`~dlmg.errors.CopyRequiredError` where a copy would be needed.
        """
        raise NotImplementedError

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` on ``device`` (the same array when it already is there)."""
        raise NotImplementedError

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A view of ``array``'s memory with the given shape, element strides and
        element offset (relative to ``array``'s first element)."""
        raise NotImplementedError

    def copy_into(self, dst: Any, src: Any) -> None:
        """Write ``src`` (same framework, same shape) into the view ``dst``."""
        dst[...] = src

    def copy_many(self, dsts: Sequence[Any], srcs: Sequence[Any]) -> None:
        """Write each ``srcs[i]`` into the view ``dsts[i]`` (pairs as for :meth:`copy_into`;
        the destinations do not overlap).

        The default calls :meth:`copy_into` pair by pair. A framework may
        issue the copies together instead (one batched launch, or its copy
        engine directly), as long as they are queued in order on its current
        stream with no host-side wait.
        """
        for dst, src in zip(dsts, srcs):
            self.copy_into(dst, src)

    def export(self, array: Any, **kwargs: Any) -> Any:
        """A DLPack capsule of ``array``: ``array.__dlpack__(**kwargs)``, with
        whatever the framework needs around it (a device context, a check)."""
        return array.__dlpack__(**kwargs)

    # -- streams --------------------------------------------------------------
    def synchronize(self, device: Device | None = None) -> None:
        """Wait until all work this framework queued on ``device`` (or all devices) is done."""
        return None

    # -- what the framework computes in and what its results share ------------
    def accumulate_dtype(self, dtype: str, op: str) -> str:
        """The element type reduction ``op`` (``"sum"``, ``"prod"``) runs in here
        when its result must have type ``dtype``.

        By default ``dtype`` itself. A framework that lacks the arithmetic for
        ``dtype`` names a type it has where the result is exact after a cast
        back to ``dtype`` (two's-complement int64 for unsigned sums and
        products: both wrap modulo ``2**64``); dlmg casts the result back.
        """
        return dtype

    def shares_memory(self, a: Any, b: Any) -> bool:
        """Whether arrays ``a`` and ``b`` of this framework may overlap in memory.

        The default compares the byte ranges their data pointers, shapes and
        strides span (conservative: interleaved views count as overlapping).
        Frameworks with immutable arrays answer False (nothing can be written
        through either).
        """
        if not self.mutable:
            return False
        ranges = []
        for array in (a, b):
            shape = self.shape_of(array)
            if not all(shape):
                return False
            strides = self.strides_of(array)
            itemsize = info(self.dtype_of(array)).itemsize
            start = self.data_ptr(array)
            low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0) * itemsize
            high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) * itemsize + itemsize
            ranges.append((start + low, start + high))
        (a0, a1), (b0, b1) = ranges
        return a0 < b1 and b0 < a1

    # -- compiling --------------------------------------------------------------
    def compile_elementwise(self, fn: Callable[..., Any], device: Device) -> tuple[Callable[..., Any], str]:
        """A compiled form of an elementwise function for this framework's arrays on ``device``.

        Parameters
        ----------
        fn : callable
            ``fn(xp, *args)``: the work on one fragment, given an array-API
            namespace ``xp`` and the fragment's arrays (and Python scalars).
        device : Device
            Where the arrays live.

        Returns
        -------
        kernel : callable
            ``kernel(*args)`` returns what ``fn(xp, *args)`` returns. A compiler
            may trace ``fn`` once and specialise on the arguments' shapes and
            dtypes; callers keep one kernel per (function, dtype, shape, device).
        compiler : str
            What compiles it (``"jax.jit"``, ``"cupy.fuse"``, ...); the default
            runs ``fn`` as it is: ``"eager"``.
        """
        xp = self.namespace()

        def eager(*args: Any) -> Any:
            return fn(xp, *args)

        return eager, "eager"
