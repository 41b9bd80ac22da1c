"""Hand-built DLPack producers for tests: every field set explicitly through ctypes.

:class:`Producer` builds a ``DLManagedTensorVersioned`` (or a legacy
``DLManagedTensor``) field by field over a small real buffer, hands out a
fresh capsule of it on every ``__dlpack__`` call and counts deleter calls.
Any field may hold an adversarial value (a huge ``byte_offset``, a stride of
``2**62``, a data pointer near the top of the address space...): the point is
to see what a consumer does with metadata no honest producer would write.

Not a test module itself; ``test_dlpack_bounds.py``, ``test_capsule_fuzz.py``
and the fuzz runner (``_capsule_runner.py``) import it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from dlmg.dlpack import abi as dl
from dlmg.dlpack.capsule import capsule_name, new_capsule

__all__ = ["Spec", "Producer"]

_U64 = (1 << 64) - 1


@dataclass
class Spec:
    """Every field of one managed tensor, as plain values.

    ``data`` is ``"buffer"`` (the address of a real 64-element float64
    buffer), ``None`` (NULL) or an int address. ``shape``/``strides`` of
    ``None`` give NULL pointers; otherwise ``ndim`` entries are read from
    them by a consumer (ndim may disagree with their length: the arrays are
    padded with zeros to at least ``max(ndim, len)`` entries, at most 128).
    """

    versioned: bool = True
    major: int = 1
    minor: int = 1
    flags: int = 0
    data: Any = "buffer"
    device_type: int = 1
    device_id: int = 0
    ndim: int = 1
    code: int = 2
    bits: int = 64
    lanes: int = 1
    shape: tuple[int, ...] | None = (8,)
    strides: tuple[int, ...] | None = (1,)
    byte_offset: int = 0
    legacy_only: bool = False
    extra: dict = field(default_factory=dict)


def _int64_array(values: tuple[int, ...], ndim: int) -> Any:
    n = min(max(ndim, len(values), 1), 128)
    arr = (ctypes.c_int64 * n)()
    for i, v in enumerate(values[:n]):
        arr[i] = ((int(v) + (1 << 63)) & _U64) - (1 << 63)  # two's complement wrap, as C would store it
    return arr


class Producer:
    """A DLPack producer whose managed tensor is written field by field.

    Parameters
    ----------
    spec : Spec
        The field values.

    Attributes
    ----------
    deleted : int
        How many times a consumer called the deleter.
    exports : int
        How many capsules were handed out.
    consumed : int
        How many of them a consumer took over (renamed); each must lead to
        exactly one deleter call, the others to none (a capsule nobody
        consumed is its producer's to free).
    memory : ctypes array
        The real buffer ``data="buffer"`` points at (64 float64, zeros).
    legacy : DLManagedTensor
        The same tensor as a legacy struct, handed to consumers that pass no
        ``max_version`` (they cannot read a versioned one).
    """

    def __init__(self, spec: Spec | None = None, **fields: Any) -> None:
        spec = spec if spec is not None else Spec(**fields)
        self.spec = spec
        self.deleted = 0
        self.exports = 0
        self.handed_out: list[Any] = []  # every capsule, to see which a consumer took over
        self.memory = (ctypes.c_double * 64)()
        self._shape = None if spec.shape is None else _int64_array(spec.shape, spec.ndim)
        self._strides = None if spec.strides is None else _int64_array(spec.strides, spec.ndim)
        managed: Any = dl.DLManagedTensorVersioned() if spec.versioned else dl.DLManagedTensor()
        if spec.versioned:
            managed.version.major = spec.major & 0xFFFFFFFF
            managed.version.minor = spec.minor & 0xFFFFFFFF
            managed.flags = spec.flags & _U64
        t = managed.dl_tensor
        if spec.data == "buffer":
            t.data = ctypes.addressof(self.memory)
        elif spec.data:
            t.data = int(spec.data) & _U64
        t.device.device_type = spec.device_type
        t.device.device_id = spec.device_id
        t.ndim = spec.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = spec.code & 0xFF, spec.bits & 0xFF, spec.lanes & 0xFFFF
        if self._shape is not None:
            t.shape = self._shape
        if self._strides is not None:
            t.strides = self._strides
        t.byte_offset = int(spec.byte_offset) & _U64
        self.managed = managed

        def deleter(address: int) -> None:
            self.deleted += 1

        self._deleter = dl.DLPACK_DELETER(deleter)
        managed.deleter = self._deleter
        # The same tensor as a legacy struct, for consumers that ask for no version (JAX).
        self.legacy = dl.DLManagedTensor()
        ctypes.memmove(ctypes.addressof(self.legacy.dl_tensor), ctypes.addressof(managed.dl_tensor),
                       ctypes.sizeof(dl.DLTensor))
        self.legacy.deleter = self._deleter

    @property
    def address(self) -> int:
        """Address of the managed tensor struct."""
        return ctypes.addressof(self.managed)

    def capsule(self) -> Any:
        """A fresh, unconsumed capsule of the managed tensor."""
        return self._hand_out(self.address, self.spec.versioned)

    def _hand_out(self, address: int, versioned: bool) -> Any:
        self.exports += 1
        capsule = new_capsule(address, versioned)
        self.handed_out.append(capsule)
        return capsule

    @property
    def consumed(self) -> int:
        """How many capsules handed out a consumer renamed ``used_*`` (took over)."""
        return sum(capsule_name(c).startswith(b"used_") for c in self.handed_out)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.spec.device_type, self.spec.device_id)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, **kwargs: Any) -> Any:
        if self.spec.legacy_only and (max_version is not None or kwargs):
            raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
        if self.spec.versioned and max_version is None:  # a consumer of the legacy protocol
            return self._hand_out(ctypes.addressof(self.legacy), False)
        return self.capsule()
