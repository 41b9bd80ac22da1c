"""The generic adapter: any other ``__dlpack__`` producer, held as it is.

A fragment may be an object of a framework dlmg has no adapter for, as long
as it speaks DLPack. dlmg keeps the object itself (so it keeps its memory
alive), describes it by exporting it once and reading the DLTensor
(:func:`dlmg.dlpack.inspect`), and hands it to other frameworks unchanged.
There is no math for such fragments: import them into a framework first
(``get_adapter("torch").from_dlpack(x)``). Strided views are DLPack
producers over the same memory (:class:`dlmg.dlpack.DLPackExporter`).
"""

from __future__ import annotations

from typing import Any

from dlmg.device import Device
from dlmg.dlpack import DLPackExporter
from dlmg.dtypes import info
from dlmg.errors import DeviceError, DLPackError, FrameworkError

from ._base import Traits
from ._common import ArrayInfo, BaseAdapter, ViewNotSupportedError, inspect_array, call_dlpack, check_copy

__all__ = ["GenericAdapter"]

_NO_MATH = (
    "a foreign DLPack producer ({kind}) has no framework dlmg can run {what} in; import it into "
    "one first, e.g. dlmg.get_adapter('torch').from_dlpack(x) or get_adapter('numpy').from_dlpack(x)"
)


class GenericAdapter(BaseAdapter):
    """Adapter for any object with ``__dlpack__`` and ``__dlpack_device__``."""

    name = "dlpack"
    modules = ()
    package = "dlmg.dlpack"
    install_hint = "dlmg itself (dlmg.dlpack is part of it)"
    traits = Traits(mutable=False)  # nothing written through a foreign producer

    def owns(self, array: Any) -> bool:
        """Whether ``array`` has ``__dlpack__`` and ``__dlpack_device__``."""
        cls = type(array)
        return hasattr(cls, "__dlpack__") and hasattr(cls, "__dlpack_device__")

    def namespace(self) -> Any:
        """No namespace: raises :class:`~dlmg.errors.FrameworkError`."""
        raise FrameworkError(_NO_MATH.format(kind="generic", what="array-API math"))

    # -- describing -----------------------------------------------------------
    def describe(self, array: Any) -> ArrayInfo:
        """Export ``array`` once and read its DLTensor (:func:`dlmg.dlpack.inspect`)."""
        return inspect_array(array)

    def device_of(self, array: Any) -> Device:
        """From ``__dlpack_device__`` (no export needed)."""
        dev_type, dev_id = array.__dlpack_device__()
        return Device.from_dlpack(int(dev_type), int(dev_id))

    def dtype_of(self, array: Any) -> str:
        """dlmg dtype name read from the DLTensor."""
        return self.describe(array).dtype

    def shape_of(self, array: Any) -> tuple[int, ...]:
        """Shape read from the DLTensor (or ``array.shape`` when it has one)."""
        shape = getattr(array, "shape", None)
        if shape is not None:
            try:
                return tuple(int(n) for n in shape)
            except TypeError:
                pass
        return self.describe(array).shape

    def strides_of(self, array: Any) -> tuple[int, ...]:
        """Element strides read from the DLTensor (C-contiguous where it gives none)."""
        return self.describe(array).strides

    def data_ptr(self, array: Any) -> int:
        """``data + byte_offset`` read from the DLTensor."""
        return self.describe(array).ptr

    def is_readonly(self, array: Any) -> bool:
        """The DLPack READ_ONLY flag (legacy capsules carry none: False)."""
        return self.describe(array).readonly

    def supports(self, device: Device) -> bool:
        """True: a foreign producer may live anywhere (dlmg only holds it)."""
        return True

    # -- making and moving ----------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """Not possible: raises :class:`~dlmg.errors.FrameworkError` (allocate in a framework)."""
        raise FrameworkError(_NO_MATH.format(kind="generic", what="allocation"))

    def full(self, shape: tuple[int, ...], fill_value: Any, dtype: str, device: Device) -> Any:
        """Not possible: raises :class:`~dlmg.errors.FrameworkError` (allocate in a framework)."""
        raise FrameworkError(_NO_MATH.format(kind="generic", what="allocation"))

    def from_dlpack(self, obj: Any, *, device: Device | None = None, copy: bool | None = None) -> Any:
        """``obj`` itself (validated by one export), never a copy.

        Raises
        ------
        CopyRequiredError
            For ``copy=True`` (a generic producer cannot be copied: import it
            into a framework) or a ``device`` it is not on.
        DLPackError
            When ``obj`` is no valid DLPack producer.
        """
        copy = check_copy(copy)
        if not self.owns(obj):
            raise DLPackError(
                f"an object of type {type(obj).__module__}.{type(obj).__qualname__} is not a DLPack "
                "producer (it needs __dlpack__ and __dlpack_device__)"
            )
        if copy:
            raise DLPackError(_NO_MATH.format(kind=type(obj).__name__, what="a copy"))
        if device is not None and self.device_of(obj) != device:
            raise DeviceError(f"the producer is on {self.device_of(obj)}, not {device}; dlmg cannot move it")
        self.describe(obj)  # validates what it hands over
        return obj

    def to_device(self, array: Any, device: Device) -> Any:
        """``array`` when it is on ``device``; otherwise :class:`~dlmg.errors.DeviceError`."""
        current = self.device_of(array)
        if current == device or (current.kind == "cpu" and device.kind == "cpu"):
            return array
        raise DeviceError(
            f"a foreign DLPack producer on {current} cannot be moved to {device} by dlmg; import it "
            "into a framework first (get_adapter('torch').from_dlpack(x))"
        )

    def as_strided(self, array: Any, shape: tuple[int, ...], strides: tuple[int, ...], offset: int = 0) -> Any:
        """A :class:`dlmg.dlpack.DLPackExporter` over ``array``'s memory (keeping ``array`` alive)."""
        d = self.describe(array)
        ptr = d.ptr + int(offset) * info(d.dtype).itemsize
        return DLPackExporter(
            ptr, tuple(shape), d.dtype, d.device, strides=tuple(int(s) for s in strides),
            owner=array, readonly=d.readonly,
        )

    def copy_into(self, dst: Any, src: Any) -> None:
        """Not possible: raises :class:`~dlmg.errors.ViewNotSupportedError`."""
        raise ViewNotSupportedError(_NO_MATH.format(kind=type(dst).__name__, what="writes"))

    def ascontiguous(self, array: Any) -> Any:
        """Not possible for a foreign producer (raises :class:`~dlmg.errors.ViewNotSupportedError`)."""
        raise ViewNotSupportedError(_NO_MATH.format(kind=type(array).__name__, what="a contiguous copy"))

    def export(self, array: Any, **kwargs: Any) -> Any:
        """``array.__dlpack__(**kwargs)`` with the protocol's fallbacks."""
        return call_dlpack(array, **kwargs)
