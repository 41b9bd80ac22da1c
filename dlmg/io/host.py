"""Host bytes of fragments, both ways, through the adapter contract only.

Saving reads every fragment's elements as a NumPy array of the storage data
type (:func:`host_view`: no copy for fragments already in host memory);
loading turns host buffers into fragments of any framework on any device
(:func:`staged_tensor`, then a redistribution where devices or memory
strides differ).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..adapters import available, carries, holds_dtype
from ..construct import from_fragments, from_pointers
from ..device import Device
from ..errors import DtypeError, FrameworkError
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK, adapter_names, get_adapter

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..tensor import DistributedTensor, Fragment

__all__ = ["ALIGNMENT", "on_host", "host_view", "aligned_empty", "host_framework", "host_layout", "staged_tensor"]

#: Host buffers handed to frameworks start on this boundary (the strictest any adapter asks for
#: before it takes host memory without a copy).
ALIGNMENT = 64
_HOST = Device("cpu", 0)


class _Interface:
    """Carries an ``__array_interface__`` to ``numpy.asarray`` and keeps the
    framework's array (the memory's owner) alive as the view's base."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, interface: dict[str, Any], owner: Any) -> None:
        self.__array_interface__ = interface
        self.owner = owner


def host_layout(layout: Layout) -> Layout:
    """``layout`` without memory strides, every fragment in host memory (its own host
    device where it has one, so a ``cpu:3`` slot stays there)."""
    dense = layout.dense
    if dense.on_host:
        return dense
    return dense.replace(devices=[_HOST] * dense.nfragments)


def host_framework(preferred: "Adapter", dtype: str) -> "Adapter":
    """``preferred`` where it holds ``dtype`` in host memory, else the first installed
    framework that does (the default framework first)."""
    names = [preferred.name, DEFAULT_FRAMEWORK, *adapter_names()]
    for name in dict.fromkeys(names):
        try:
            adapter = get_adapter(name)
        except FrameworkError:
            continue
        if not (available(adapter) and adapter.supports(_HOST) and holds_dtype(adapter, dtype)):
            continue
        if carries(adapter, dtype) or _holds_numpy(adapter):  # NumPy's own arrays need no DLPack
            return adapter
    raise DtypeError(f"no installed framework holds {dtype} arrays in host memory (tried {', '.join(dict.fromkeys(names))})")


def _holds_numpy(adapter: "Adapter") -> bool:
    return bool(adapter.owns(np.empty(0)))


def on_host(tensor: "DistributedTensor") -> "DistributedTensor":
    """``tensor`` itself when it is dense and in host memory, else a copy that is
    (each fragment in its framework where that reaches the host, else another)."""
    target = host_layout(tensor.layout)
    if target == tensor.layout:
        return tensor
    local = [f for f in tensor.fragments if f.is_local]
    preferred = local[0].adapter if local else get_adapter(DEFAULT_FRAMEWORK)
    return tensor.redistribute(target, framework=host_framework(preferred, tensor.dtype).name)


def host_view(fragment: "Fragment", storage: str) -> np.ndarray:
    """The elements of a local fragment in host memory as a NumPy array of ``storage``
    (the same bits; bfloat16 as ``uint16``), sharing the fragment's memory."""
    array = fragment.array
    adapter = fragment.adapter
    shape = fragment.shape
    dt = np.dtype(storage)
    if fragment.size == 0:
        return np.empty(shape, dt)
    adapter.synchronize_array(array)
    info = adapter.describe(array)
    if not info.device.is_host:  # pragma: no cover - on_host() ran first
        raise DtypeError(f"fragment {fragment.index} is on {info.device}, not in host memory")
    if info.itemsize != dt.itemsize:  # pragma: no cover - storage_dtype keeps the size
        raise DtypeError(f"fragment {fragment.index}: {info.dtype} is not stored as {storage}")
    interface = {
        "shape": tuple(shape),
        "strides": tuple(s * dt.itemsize for s in info.strides),
        "typestr": dt.str,
        "data": (info.ptr, True),
        "version": 3,
    }
    return np.asarray(_Interface(interface, array))


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """An uninitialised C-contiguous host array starting on :data:`ALIGNMENT`."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + ALIGNMENT, np.uint8)
    skip = -raw.ctypes.data % ALIGNMENT
    return raw[skip:skip + nbytes].view(dtype).reshape(shape)


def staged_tensor(buffers: dict[int, np.ndarray], layout: Layout, dtype: str, adapter: "Adapter") -> "DistributedTensor":
    """A tensor of the host ``layout`` whose fragment ``i`` is ``buffers[i]`` (a NumPy array of
    the storage type, its bits those of ``dtype``), as arrays of ``adapter``'s framework, no copy."""
    if _holds_numpy(adapter):  # the framework's arrays are NumPy's: a view of another type
        native = adapter.native_dtype(dtype)
        return from_fragments({i: b.view(native) for i, b in buffers.items()}, layout, dtype=dtype)
    # fragments without elements get no address: from_pointers allocates those itself
    pointers = {i: b.ctypes.data for i, b in buffers.items() if b.size}
    return from_pointers(layout, pointers, dtype, owner=tuple(buffers.values()), framework=adapter.name)
