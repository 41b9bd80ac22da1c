"""What the contract checks share: the context they get and how values are compared."""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field
from typing import Any, Callable

from dlmg.device import Device

__all__ = ["DEFAULT_DTYPES", "ContractContext", "default_make_array", "expected", "host_values", "is_capsule",
           "NUMPY_DLPACK"]

#: The element types the contract exercises by default.
DEFAULT_DTYPES: tuple[str, ...] = (
    "bool", "int8", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64", "complex64",
)
#: What ``numpy.from_dlpack`` takes (values are compared in NumPy on the host).
NUMPY_DLPACK = frozenset(
    ["bool", "float16", "float32", "float64", "complex64", "complex128"]
    + [f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)]
)


def is_capsule(obj: Any) -> bool:
    """Whether ``obj`` is a DLPack capsule (``"dltensor"`` or ``"dltensor_versioned"``)."""
    if type(obj).__name__ != "PyCapsule":
        return False
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(obj) in (b"dltensor", b"dltensor_versioned")


def host_values(adapter: Any, array: Any) -> Any:
    """The values of ``array`` as a NumPy array (a copy where needed), for comparisons.

    bfloat16 and other types NumPy cannot take through DLPack are cast to
    float32 (through the adapter's namespace) first; arrays off the host go
    through ``adapter.to_device(array, cpu)``, ``array.get()`` or ``array.cpu()``.
    """
    import numpy as np

    if not hasattr(array, "__dlpack__"):  # a NumPy scalar from a reduction
        return np.array(array, copy=True)
    dtype = adapter.dtype_of(array)
    if dtype not in NUMPY_DLPACK:
        xp = adapter.namespace()
        array = xp.astype(array, xp.float32)
    if not adapter.device_of(array).is_host:
        try:
            array = adapter.to_device(array, Device("cpu", 0))
        except Exception:
            for name in ("get", "cpu"):
                method = getattr(array, name, None)
                if method is not None:
                    array = method()
                    break
    return np.array(np.from_dlpack(array), copy=True)


def expected(shape: tuple[int, ...], dtype: str) -> Any:
    import numpy as np

    n = math.prod(shape)
    values = np.arange(n, dtype=np.int64).reshape(shape)
    if dtype == "bool":
        return (values % 2).astype(bool)
    return (values % 100).astype(np.float32 if dtype not in NUMPY_DLPACK else dtype)


def default_make_array(adapter: Any, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
    """``arange(n) % 100`` (``% 2`` for bool) of ``shape`` and ``dtype`` on ``device``."""
    xp = adapter.namespace()
    n = math.prod(shape)
    base = xp.arange(n) % (2 if dtype == "bool" else 100)
    base = xp.reshape(base, tuple(shape))
    target = getattr(xp, dtype, None)
    if target is None:
        target = adapter.native_dtype(dtype)
    out = xp.astype(base, target)
    return adapter.to_device(out, device)


@dataclass
class ContractContext:
    """What a contract check gets.

    Attributes
    ----------
    adapter : Adapter
        The adapter under test.
    device : Device
        A device the adapter supports, where arrays are made.
    dtypes : tuple of str
        Element types to exercise (those the framework supports).
    make_array : callable
        ``make_array(adapter, shape, dtype, device)`` -> an array whose values
        equal ``arange(n) % 100`` (``% 2`` for bool) reshaped to ``shape``.
    to_numpy : callable
        ``to_numpy(adapter, array)`` -> a NumPy copy of the values.
    run_compiled : bool
        Whether to run the kernels a compiler makes (a compiler that builds
        native code may take many seconds for its first kernel).
    """

    adapter: Any
    device: Device
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    make_array: Callable[..., Any] = default_make_array
    to_numpy: Callable[..., Any] = host_values
    notes: list[str] = field(default_factory=list)
    run_compiled: bool = True

    def array(self, shape: tuple[int, ...], dtype: str = "float32") -> Any:
        """An array with known values (see :attr:`make_array`)."""
        return self.make_array(self.adapter, tuple(shape), dtype, self.device)

    def values(self, array: Any) -> Any:
        """NumPy copy of ``array``'s values."""
        return self.to_numpy(self.adapter, array)

    def assert_values(self, array: Any, shape: tuple[int, ...], dtype: str, what: str) -> None:
        """Assert ``array`` holds :func:`expected` values of ``shape``/``dtype``."""
        import numpy as np

        got = self.values(array)
        want = expected(tuple(shape), dtype)
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        assert np.array_equal(got.astype(want.dtype), want), f"{what}: values differ:\n{got}\n!=\n{want}"
