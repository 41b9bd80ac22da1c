"""Moving arrays between frameworks and devices, and waiting for their work.

The two operations every part of dlmg that touches more than one framework
needs, written once: :func:`move` hands an array to another framework on
another device (zero-copy through DLPack where the memory stays where it
is), :func:`synchronize_arrays` waits for the queued work producing some
arrays. Both ask only the adapter contract (:class:`dlmg.adapters.Adapter`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..adapters import Adapter, available
from ..device import Device
from ..errors import DeviceError, DlmgError, DLPackError, DtypeError, FrameworkError
from ..registry import adapter_names, get_adapter

__all__ = ["move", "same_memory", "synchronize_arrays"]

_HOST = Device("cpu", 0)
_BRIDGE_ERRORS = (DlmgError, TypeError, ValueError, RuntimeError)


def same_memory(a: Device, b: Device) -> bool:
    """Whether two devices address the same memory (equal, or both the host)."""
    return a == b or (a.is_host and b.is_host)


def _installed(name: str) -> "Adapter | None":
    try:
        adapter = get_adapter(name)
    except FrameworkError:
        return None
    return adapter if available(adapter) else None


def move(array: Any, src: "Adapter", dst: "Adapter", device: Device) -> Any:
    """``array`` (of framework ``src``) as an array of ``dst`` on ``device``.

    Zero-copy on the same memory. Across devices, whichever of the two
    frameworks reaches both devices moves it; otherwise ``dst`` is asked for a
    copying import, then another installed framework that reaches both
    devices carries it over, and last the host does.

    Raises
    ------
    DeviceError
        When no route exists; the message lists what was tried.
    """
    if src is dst or src.name == dst.name:
        return dst.to_device(array, device)
    here = src.device_of(array)
    if same_memory(here, device):
        return dst.from_dlpack(src.producer(array), device=device)
    if src.supports(device):  # the source framework moves it, then a zero-copy hand-over
        return dst.from_dlpack(src.producer(src.to_device(array, device)), device=device)
    if dst.supports(here):  # a zero-copy hand-over, then the target framework moves it
        return dst.to_device(dst.from_dlpack(src.producer(array)), device)
    errors = []
    try:
        return dst.from_dlpack(src.producer(array), device=device, copy=True)
    except (DLPackError, DeviceError, TypeError, ValueError, RuntimeError) as exc:
        errors.append(f"{dst.name}: {exc}")
    for name in adapter_names():
        bridge = _installed(name) if name not in (src.name, dst.name) else None
        if bridge is None or not (bridge.supports(here) and bridge.supports(device)):
            continue
        try:
            moved = bridge.to_device(bridge.from_dlpack(src.producer(array)), device)
            return dst.from_dlpack(bridge.producer(moved), device=device)
        except _BRIDGE_ERRORS as exc:
            errors.append(f"{name}: {exc}")
    if src.supports(_HOST) and not (here.is_host or device.is_host):
        try:
            return dst.from_dlpack(src.producer(src.to_device(array, _HOST)), device=device)
        except (DLPackError, DeviceError, DtypeError, TypeError, ValueError, RuntimeError) as exc:
            errors.append(f"through the host: {exc}")
    raise DeviceError(
        f"cannot move a {src.name} array from {here} to a {dst.name} array on {device} "
        f"({'; '.join(errors)}); install a framework that reaches both devices"
    )


def synchronize_arrays(items: Iterable[tuple["Adapter", Any, Device]]) -> None:
    """Wait for the queued work producing each ``(adapter, array, device)``.

    Nothing for host arrays of frameworks whose host work is complete when
    the call returns (:attr:`~dlmg.adapters.Traits.done_on_return`); one wait
    per device for frameworks whose wait is device-wide
    (:attr:`~dlmg.adapters.Traits.synchronizes_device`), one per array otherwise.
    """
    seen: set[tuple[str, Device]] = set()
    last, traits = None, Adapter.traits
    for adapter, array, device in items:
        if adapter is not last:  # a tensor's fragments are mostly of one framework: its traits read once
            last, traits = adapter, adapter.traits
        if traits.done_on_return and device.is_host:
            continue
        if traits.synchronizes_device:
            key = (adapter.name, device)
            if key in seen:
                continue
            seen.add(key)
        adapter.synchronize_array(array)
