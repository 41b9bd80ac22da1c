"""Framework-neutral devices.

A :class:`Device` is a plain value: a kind (``"cpu"``, ``"cuda"``, ...) and an
index. The host is ``Device("cpu", 0)``; JAX's several CPU devices are the
distinct devices ``cpu:0``, ``cpu:1``, ... so that a layout can place fragments
on each of them, while NumPy and torch CPU arrays (one host memory) fit any
``cpu`` slot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ._hooks import Hook
from .errors import DeviceError

__all__ = ["Device", "DL_DEVICE_TYPES", "Placement", "as_device", "unreachable_hint"]

#: DLPack device type codes (``DLDeviceType``) and dlmg's kind names.
DL_DEVICE_TYPES: dict[int, str] = {
    1: "cpu",
    2: "cuda",
    3: "cuda_host",
    4: "opencl",
    7: "vulkan",
    8: "metal",
    9: "vpi",
    10: "rocm",
    11: "rocm_host",
    12: "ext_dev",
    13: "cuda_managed",
    14: "oneapi",
    15: "webgpu",
    16: "hexagon",
    17: "maia",
    18: "trn",
}
_KIND_TO_DL: dict[str, int] = {kind: code for code, kind in DL_DEVICE_TYPES.items()}
_ALIASES = {"gpu": "cuda", "host": "cpu"}
_HOST_KINDS = frozenset({"cpu", "cuda_host", "rocm_host"})
_PATTERN = re.compile(r"^\s*([a-z_]+)\s*(?::\s*(\d+))?\s*$")


@dataclass(frozen=True, order=True)
class Device:
    """A device: a kind and an index.

    Parameters
    ----------
    kind : str
        ``"cpu"``, ``"cuda"`` or another DLPack device kind
        (see :data:`DL_DEVICE_TYPES`), or ``"kind:index"`` such as ``"cpu:3"``.
    index : int, optional
        The device ordinal; 0 by default.

    Examples
    --------
    >>> Device("cuda:1")
    Device('cuda:1')
    >>> Device.parse("cuda:1") == Device("cuda", 1)
    True
    >>> Device.parse("cpu") == Device("cpu", 0)
    True
    """

    kind: str
    index: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.kind, str) and ":" in self.kind:  # Device("cpu:3"), as layouts accept
            parsed = Device.parse(self.kind)
            if self.index not in (0, parsed.index):
                raise DeviceError(
                    f"device {self.kind!r} with index={self.index!r}: give the index once, "
                    f"as Device({parsed.kind!r}, {self.index!r}) or Device('{parsed.kind}:{self.index}')"
                )
            object.__setattr__(self, "kind", parsed.kind)
            object.__setattr__(self, "index", parsed.index)
        if not isinstance(self.kind, str):
            raise DeviceError(f"device kind must be a string such as 'cpu' or 'cuda:1', got {self.kind!r}")
        kind = _ALIASES.get(self.kind.lower(), self.kind.lower())
        if kind not in _KIND_TO_DL:
            raise DeviceError(
                f"device kind {self.kind!r} is unknown; expected one of "
                f"{sorted(_KIND_TO_DL)}"
            )
        object.__setattr__(self, "kind", kind)
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < 0:
            raise DeviceError(f"device index must be a non-negative int, got {self.index!r}")
        if self.index >= 2**31:  # DLPack's device_id, and cuTENSORMg's, are int32
            raise DeviceError(f"device index {self.index} does not fit a DLPack device id (int32, below 2**31)")

    @classmethod
    def parse(cls, text: str) -> "Device":
        """Parse ``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"gpu:0"`` and the like."""
        match = _PATTERN.match(text.lower()) if isinstance(text, str) else None
        if match is None:
            raise DeviceError(f"device {text!r} is not of the form 'kind' or 'kind:index'")
        return cls(match.group(1), int(match.group(2) or 0))

    @classmethod
    def from_dlpack(cls, device_type: int, device_id: int) -> "Device":
        """The device of a DLPack ``(device_type, device_id)`` pair."""
        kind = DL_DEVICE_TYPES.get(int(device_type))
        if kind is None:
            raise DeviceError(f"DLPack device type {int(device_type)} is unknown")
        return cls(kind, int(device_id))

    @property
    def dlpack(self) -> tuple[int, int]:
        """The DLPack ``(device_type, device_id)`` pair."""
        return (_KIND_TO_DL[self.kind], self.index)

    @property
    def is_host(self) -> bool:
        """Whether this is host memory (the CPU, pinned or not)."""
        return self.kind in _HOST_KINDS

    # Written out rather than generated: devices are compared and hashed for every
    # fragment of every copy, and the same object usually meets itself.
    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.kind == other.kind and self.index == other.index  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __str__(self) -> str:
        return f"{self.kind}:{self.index}"

    def __repr__(self) -> str:
        return f"Device('{self}')"


#: A framework's own device object (``torch.device``, a JAX device...) as a
#: :class:`Device`, or ``None``: the adapters know, through :mod:`dlmg.registry`.
native_device: Hook = Hook("reading a framework's device object", "dlmg.registry")


def as_device(obj: Any) -> Device:
    """Turn a device given in any common form into a :class:`Device`.

    Accepts a :class:`Device`; a string (``"cpu"``, ``"cuda:1"``); a DLPack
    ``(device_type, device_id)`` pair; an int (a CUDA ordinal); or a framework's
    device object, read by the adapter of the framework that owns its type
    (:meth:`dlmg.adapters.Adapter.device_from_native`) without importing the
    framework.

    Raises
    ------
    DeviceError
        When the object names no device dlmg knows.
    """
    if isinstance(obj, Device):
        return obj
    if isinstance(obj, str):
        return Device.parse(obj)
    if isinstance(obj, bool):
        raise DeviceError(f"device {obj!r} is not a device")
    if isinstance(obj, int):
        return Device("cuda", obj)
    if isinstance(obj, tuple) and len(obj) == 2:
        return Device.from_dlpack(obj[0], obj[1])
    found = native_device(obj)  # the framework that owns the object's type knows
    if found is not None:
        return found
    raise DeviceError(f"device {obj!r} of type {type(obj).__name__} is not a device dlmg knows")


def unreachable_hint(devices: Any) -> str:
    """A sentence to append when a framework cannot reach ``devices``.

    Integers in a device list mean CUDA ordinals, which surprises on a machine
    without CUDA: say so whenever a CUDA device is among those unreachable.
    """
    if any(as_device(d).kind == "cuda" for d in devices):
        return (
            "; integers in a device list mean CUDA ordinals (0 is cuda:0): on a machine without "
            "a CUDA GPU name host devices 'cpu' or 'cpu:k' instead"
        )
    return ""


@dataclass(frozen=True)
class Placement:
    """The devices of a tensor spread over several of them: its array API ``device``.

    Array code passes ``x.device`` on to creation functions
    (``xp.zeros(n, device=x.device)``): a placement there lays the new tensor
    out as one piece per device along mode 0 (see :mod:`dlmg.array_api`).

    Attributes
    ----------
    devices : tuple of Device
        The distinct devices, in the order the layout lists them.
    ranks : tuple of int
        The process of each device (empty in one process).

    Notes
    -----
    Two placements are equal when they name the same devices of the same processes,
    in any order: tensors on the same devices are on the same ``device`` (the array
    API's rule for combining them), whatever order their layouts list them in.
    """

    devices: tuple[Device, ...]
    ranks: tuple[int, ...] = ()

    def _members(self) -> frozenset[tuple[Device, int]]:
        return frozenset(zip(self.devices, self.ranks or (0,) * len(self.devices)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Placement) and self._members() == other._members()

    def __hash__(self) -> int:
        return hash(self._members())

    def __str__(self) -> str:
        return "[" + ", ".join(str(d) for d in self.devices) + "]"
