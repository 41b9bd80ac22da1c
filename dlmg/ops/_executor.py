"""Where per-fragment work runs: one :class:`Executor` per ``(framework,
device)`` pair (adapter, array-API namespace, device context), moving arrays
onto an executor, and the :class:`~dlmg.errors.FragmentError` that names the
fragment a failure happened on. Internal to :mod:`dlmg.ops`."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from ..movement.transfer import move
from ..device import Device
from ..errors import DlmgError, FragmentError
from ..registry import adapter_for, get_adapter
from ..errors import DtypeError

__all__ = ["Executor", "executor", "move_array", "fail", "array_device"]


class Executor:
    """How work for one ``(framework, device)`` pair is run.

    Attributes
    ----------
    framework : str
        The framework name (``"torch"``).
    device : Device
        The device the work runs on.
    adapter : Adapter
        The framework's adapter.
    traits : Traits
        The adapter's :attr:`~dlmg.adapters.Adapter.traits`, read per fragment.
    xp : module
        The framework's array-API namespace.
    context : callable or None
        Returns a context manager making ``device`` current
        (:meth:`~dlmg.adapters.Adapter.device_context`); ``None`` where no
        context is needed.
    """

    __slots__ = ("framework", "device", "adapter", "traits", "xp", "context", "_dtypes")

    def __init__(self, framework: str, device: Device) -> None:
        self.framework = framework
        self.device = device
        self.adapter = get_adapter(framework)
        self.traits = self.adapter.traits
        self.xp = self.adapter.namespace()
        self.context = self.adapter.device_context(device)
        self._dtypes: dict[str, Any] = {}

    def dtype(self, name: str) -> Any:
        """The framework's dtype object for the dlmg dtype ``name``."""
        found = self._dtypes.get(name)
        if found is None:
            found = getattr(self.xp, name, None)  # the array-API namespace's dtype object
            if found is None:
                raise DtypeError(f"{self.framework} has no element type {name!r}")
            self._dtypes[name] = found
        return found

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(xp, *args)`` on this executor's device."""
        if self.context is None:
            return fn(self.xp, *args)
        with self.context():
            return fn(self.xp, *args)

    def __repr__(self) -> str:
        return f"Executor({self.framework!r}, {self.device})"


@lru_cache(maxsize=None)
def executor(framework: str, device: Device) -> Executor:
    """The (cached) :class:`Executor` of ``framework`` on ``device``."""
    return Executor(framework, device)


def move_array(array: Any, target: Executor, source: Any = None) -> Any:
    """``array`` as an array of ``target``'s framework on ``target``'s device
    (:func:`dlmg.movement.transfer.move`; ``source`` is ``array``'s adapter when the
    caller knows it)."""
    return move(array, source if source is not None else adapter_for(array), target.adapter, target.device)


@lru_cache(maxsize=None)
def _fail_class_of(cls: type) -> type:
    return type(f"Fragment{cls.__name__}", (FragmentError, cls), {"__module__": __name__})


def _fail_class(exc: BaseException) -> type:
    """FragmentError, or a subclass that is also the original's dlmg error class
    (so ``except dlmg.DtypeError`` still catches a dtype failure on one fragment)."""
    if not isinstance(exc, DlmgError) or isinstance(exc, FragmentError):
        return FragmentError
    return _fail_class_of(type(exc))  # type: ignore[arg-type]  # classes are hashable


def fail(name: str, index: int, ex: Executor, exc: BaseException) -> FragmentError:
    err = _fail_class(exc)(
        f"{name} failed on fragment {index} (device {ex.device}, framework {ex.framework}): "
        f"{type(exc).__name__}: {exc}"
    )
    err.fragment = index  # type: ignore[attr-defined]
    err.device = ex.device  # type: ignore[attr-defined]
    err.framework = ex.framework  # type: ignore[attr-defined]
    return err



def array_device(a: Any) -> Any:
    """The framework's own device object of the array ``a`` (array-api-compat's ``device``), for
    arrays made beside it: torch makes new arrays on the host unless told where."""
    import array_api_compat

    return array_api_compat.device(a)
