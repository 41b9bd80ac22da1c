"""Framework helpers for the benchmarks: placing data, native operations, sync.

Everything a case needs to do natively (allocate on a device, import through
DLPack, concatenate, copy, wait for completion) for NumPy, PyTorch, JAX and
CuPy, so that the case modules stay framework-neutral. Frameworks are imported
on first use.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Sequence

import numpy as np

__all__ = [
    "block",
    "concatenate",
    "copy_of",
    "data_ptr",
    "fragment_arrays",
    "from_dlpack_fn",
    "is_cuda",
    "jax_device",
    "make_sync",
    "module",
    "put",
    "to_numpy",
]

_MODULES = {"numpy": "numpy", "torch": "torch", "jax": "jax.numpy", "cupy": "cupy"}


def module(framework: str) -> Any:
    """The array namespace of ``framework`` (``jax.numpy`` for JAX)."""
    try:
        return importlib.import_module(_MODULES[framework])
    except KeyError:
        raise ValueError(f"framework {framework!r} is not one of {sorted(_MODULES)}") from None


def is_cuda(device: str) -> bool:
    """Whether a device string such as ``"cuda:0"`` names a GPU."""
    return device.split(":", 1)[0] in ("cuda", "gpu")


def _index(device: str) -> int:
    return int(device.split(":", 1)[1]) if ":" in device else 0


def jax_device(device: str) -> Any:
    """The JAX device for ``"cpu"``, ``"cpu:3"`` or ``"cuda:0"``."""
    import jax

    platform = "gpu" if is_cuda(device) else "cpu"
    return jax.devices(platform)[_index(device)]


def put(array: np.ndarray, framework: str, device: str = "cpu") -> Any:
    """A copy of the NumPy ``array`` as an array of ``framework`` on ``device``."""
    if framework == "numpy":
        if is_cuda(device):
            raise ValueError("NumPy arrays live on the host, not on " + device)
        return np.array(array, copy=True)
    if framework == "torch":
        import torch

        # clone: torch's allocator aligns to 64 bytes (NumPy's to 16, which JAX copies)
        tensor = torch.from_numpy(np.ascontiguousarray(array)).clone()
        return tensor.to(f"cuda:{_index(device)}") if is_cuda(device) else tensor
    if framework == "jax":
        import jax

        return jax.device_put(array, jax_device(device))
    if framework == "cupy":
        import cupy

        if not is_cuda(device):
            raise ValueError("CuPy arrays live on a GPU, not on " + device)
        with cupy.cuda.Device(_index(device)):
            return cupy.asarray(array)
    raise ValueError(f"framework {framework!r} is not one of {sorted(_MODULES)}")


def from_dlpack_fn(framework: str) -> Callable[[Any], Any]:
    """The framework's own ``from_dlpack`` (the consumer side of an export)."""
    if framework == "jax":
        import jax.dlpack

        return jax.dlpack.from_dlpack
    return module(framework).from_dlpack


def fragment_array(fragment: Any) -> Any:
    """The framework array inside a dlmg Fragment (any other object as it is)."""
    if type(fragment).__module__.startswith("dlmg"):
        return fragment.array
    return fragment


def fragment_arrays(tensor: Any) -> list[Any]:
    """The framework arrays of a DistributedTensor's fragments, in order."""
    return [fragment_array(f) for f in tensor.fragments]


def _walk(obj: Any) -> list[Any]:
    if isinstance(obj, (list, tuple)):
        out: list[Any] = []
        for item in obj:
            out.extend(_walk(item))
        return out
    if hasattr(obj, "fragments") and hasattr(obj, "layout"):
        return fragment_arrays(obj)
    return [obj]


def block(obj: Any) -> None:
    """Wait for every JAX array in ``obj`` (arrays, lists, distributed tensors)."""
    for item in _walk(obj):
        wait = getattr(item, "block_until_ready", None)
        if wait is not None:
            wait()


def make_sync(device: str) -> Callable[[Any], None]:
    """A function that waits until a result's work on ``device`` is complete.

    On the CPU it blocks JAX arrays (NumPy and PyTorch CPU work is
    synchronous). On a GPU it also synchronises the device through PyTorch and
    CuPy, whichever is loaded, so that every stream's work is done.
    """
    if not is_cuda(device):
        return block
    import sys

    index = _index(device)

    def sync(obj: Any) -> None:
        block(obj)
        torch = sys.modules.get("torch")
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.synchronize(index)
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            with cupy.cuda.Device(index):
                cupy.cuda.runtime.deviceSynchronize()

    return sync


def concatenate(framework: str, arrays: Sequence[Any], axis: int = 0) -> Any:
    """The framework's own concatenation (``np.concatenate``, ``torch.cat``...)."""
    if framework == "torch":
        import torch

        return torch.cat(list(arrays), dim=axis)
    return module(framework).concatenate(list(arrays), axis=axis)


def copy_of(framework: str, array: Any) -> Any:
    """A contiguous copy of ``array`` (always a new buffer)."""
    if framework == "torch":
        import torch

        return array.clone(memory_format=torch.contiguous_format)
    if framework == "jax":
        import jax.numpy as jnp

        return jnp.array(array, copy=True)
    return array.copy()


def to_numpy(array: Any) -> np.ndarray:
    """A host NumPy copy of any framework's array (for result checks)."""
    array = fragment_array(array)
    if type(array).__module__.startswith("torch"):
        return array.detach().cpu().numpy()
    if type(array).__module__.startswith("cupy"):
        return array.get()
    return np.asarray(array)


def data_ptr(array: Any) -> int | None:
    """The address of an array's first element, or None when unknown."""
    array = fragment_array(array)
    mod = type(array).__module__
    try:
        if mod.startswith("torch"):
            return int(array.data_ptr())
        if mod.startswith("cupy"):
            return int(array.data.ptr)
        if hasattr(array, "unsafe_buffer_pointer"):
            return int(array.unsafe_buffer_pointer())
        if isinstance(array, np.ndarray):
            return int(array.__array_interface__["data"][0])
    except Exception:  # noqa: BLE001 - a pointer is only used for a check
        return None
    return None
