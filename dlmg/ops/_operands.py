"""Operands of per-fragment work: distributed tensors, Python scalars and 0-d
arrays (converted once per executor); anything else is refused with a
message saying what to do. Internal to :mod:`dlmg.ops`."""

from __future__ import annotations

from typing import Any

from ..errors import FrameworkError
from ..registry import adapter_for, as_zero_d
from ._executor import Executor, move_array
from ..base import TensorBase

__all__ = ["SCALAR_TYPES", "is_distributed", "classify_operand", "is_framework_array"]

#: Python scalars broadcast to every fragment as they are.
SCALAR_TYPES = (bool, int, float, complex)


def is_distributed(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`~dlmg.DistributedTensor`."""
    return isinstance(obj, TensorBase)


class ZeroD:
    """A 0-d array operand, converted once per executor."""

    __slots__ = ("array", "adapter", "_by_executor")

    def __init__(self, array: Any, adapter: Any) -> None:
        self.array = array
        self.adapter = adapter
        # by the executor's id: safe, because executors are cached for the life of the
        # process (no other object takes their id) and this wrapper lives for one call
        self._by_executor: dict[int, Any] = {}

    def for_executor(self, ex: Executor) -> Any:
        got = self._by_executor.get(id(ex))
        if got is None:
            if self.adapter is ex.adapter and self.adapter.device_of(self.array) == ex.device:
                got = self.array
            else:
                try:
                    got = move_array(self.array, ex, self.adapter)
                except Exception:  # no DLPack route: go through a Python scalar
                    got = self.array.item()
            self._by_executor[id(ex)] = got
        return got


def classify_operand(obj: Any) -> Any:
    """Check one operand: a distributed tensor, a Python scalar or a 0-d array.

    Returns the operand, or a :class:`ZeroD` wrapper for a 0-d array.

    Raises
    ------
    TypeError
        For anything else (a regular array of rank > 0 must be scattered first).
    """
    if isinstance(obj, SCALAR_TYPES) or is_distributed(obj):
        return obj
    scalar = as_zero_d(obj)  # a framework's own scalar type (np.float32(1)) is a 0-d array
    if scalar is not None:
        obj = scalar
    try:
        adapter = adapter_for(obj)
    except FrameworkError:
        adapter = None
    if adapter is None or getattr(obj, "ndim", None) is None:
        raise TypeError(
            f"an operand of type {type(obj).__module__}.{type(obj).__qualname__} cannot be combined with "
            "a distributed tensor; use a Python scalar, a 0-d array or a DistributedTensor"
        )
    if obj.ndim != 0:
        raise TypeError(
            f"a regular {adapter.name} array of shape {tuple(obj.shape)} cannot be combined with a "
            "distributed tensor (no hidden scatter); scatter it into the tensor's layout first: "
            "dlmg.scatter(array, tensor.layout)"
        )
    return ZeroD(obj, adapter)


def is_framework_array(obj: Any) -> bool:
    """Whether ``obj`` is an array of rank > 0 of a framework an adapter knows: an operator
    refuses it with :func:`classify_operand`'s hint (scatter it first) instead of returning
    ``NotImplemented`` and leaving it to Python."""
    if not getattr(obj, "ndim", 0):
        return False
    try:
        adapter_for(obj)
    except FrameworkError:
        return False
    return True
