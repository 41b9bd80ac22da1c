"""The default layout policy: how tensors made from nothing but a shape are laid out.

The array API's creation functions (``asarray``, ``zeros``, ``arange``...)
take a shape, never a layout. The policy says which layout and which
framework they get:

* ``"single"`` (the default in one process): one fragment on one device
  (``cpu:0`` for host frameworks);
* ``"slab"``: one contiguous piece per device along ``axis`` (mode 0 by
  default), over the given ``devices``;
* ``"processes"`` (the default after :func:`dlmg.distributed.init`): one
  piece per process along ``axis``, each on its process's device;
* a callable ``shape -> Layout`` for anything else.

Set it for a block of code with :func:`default_layout` (a context manager),
for the rest of the program with :func:`set_default_layout`, or before
Python starts with the environment variables ``DLMG_DEFAULT_LAYOUT``
(``single``, ``slab`` or ``processes``), ``DLMG_DEFAULT_DEVICES``
(comma-separated, ``cpu:0,cpu:1``) and ``DLMG_DEFAULT_FRAMEWORK``.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ..device import Device, as_device
from .. import distributed as _distributed
from ..distributed import state as process_state
from ..errors import LayoutError
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK

__all__ = ["LayoutPolicy", "default_layout", "set_default_layout", "get_default_layout", "layout_for"]

_KINDS = ("single", "slab", "processes")


@dataclass(frozen=True)
class LayoutPolicy:
    """How new tensors are laid out (see the module's description).

    Attributes
    ----------
    kind : str or callable
        ``"single"``, ``"slab"``, ``"processes"``, or ``shape -> Layout``.
    devices : tuple of Device
        ``"single"``: the first one is the device; ``"slab"``: the devices
        the pieces go to, in order; ``"processes"``: each process's device
        (one entry for all, or one per process).
    framework : str
        The framework of new fragments.
    axis : int
        The mode ``"slab"`` and ``"processes"`` split.
    """

    kind: Any = "single"
    devices: tuple[Device, ...] = (Device.parse("cpu:0"),)
    framework: str = DEFAULT_FRAMEWORK
    axis: int = 0

    def layout(self, shape: Sequence[int]) -> Layout:
        """The layout of a new tensor of ``shape``."""
        distributed = process_state.current() is not None
        if self.kind == "processes" and distributed:  # each process's own device, as the engine says
            policy = LayoutPolicy(self.kind, _distributed.devices(), self.framework, self.axis)
            return _layout(policy, tuple(shape), process_state.world_size(), True)
        return _layout(self, tuple(shape), process_state.world_size(), distributed)


# a program makes tensors of a few dozen shapes; building and validating a layout anew
# for each costs far more than a look-up
@lru_cache(maxsize=512)
def _layout(policy: LayoutPolicy, shape: tuple[int, ...], nprocs: int, distributed: bool) -> Layout:
    kind = policy.kind
    if callable(kind):
        out = kind(shape)
        if not isinstance(out, Layout) or out.shape != shape:
            raise LayoutError(f"the default layout policy {kind!r} gave {out!r} for shape {shape}; it must "
                              "return a dlmg.Layout of that shape")
        return out
    if kind == "single" or not shape:
        return Layout.single(shape, policy.devices[0])
    axis = policy.axis % len(shape) if -len(shape) <= policy.axis < len(shape) else 0
    if kind == "slab":
        return Layout.slab(shape, axis, policy.devices)
    # one piece per process, each on that process's device
    devices = policy.devices if len(policy.devices) == nprocs else policy.devices[:1] * nprocs
    return Layout.slab(shape, axis, devices, ranks=list(range(nprocs)))


def _from_environment() -> LayoutPolicy:
    kind = os.environ.get("DLMG_DEFAULT_LAYOUT", "single")
    devices = os.environ.get("DLMG_DEFAULT_DEVICES", "cpu:0")
    framework = os.environ.get("DLMG_DEFAULT_FRAMEWORK", DEFAULT_FRAMEWORK)
    return _policy(kind, [d for d in devices.split(",") if d.strip()], framework, 0)


def _policy(kind: Any, devices: Sequence[Any] | None, framework: str | None, axis: int) -> LayoutPolicy:
    if not callable(kind) and kind not in _KINDS:
        raise ValueError(f"default layout kind {kind!r} is not one of {', '.join(_KINDS)} or a callable")
    devs = tuple(as_device(d) for d in devices) if devices else (Device.parse("cpu:0"),)
    return LayoutPolicy(kind, devs, framework or DEFAULT_FRAMEWORK, int(axis))


_CURRENT: contextvars.ContextVar[LayoutPolicy | None] = contextvars.ContextVar("dlmg_default_layout", default=None)
_GLOBAL = [_from_environment()]  # the process-wide policy (set_default_layout)


def get_default_layout() -> LayoutPolicy:
    """The policy in force here: the innermost :func:`default_layout` block, else the
    program's (:func:`set_default_layout`); ``"processes"`` under
    :func:`dlmg.distributed.init` when neither chose one."""
    policy = _CURRENT.get()
    if policy is not None:
        return policy
    policy = _GLOBAL[0]
    if policy.kind == "single" and process_state.current() is not None and process_state.world_size() > 1:
        return LayoutPolicy("processes", policy.devices, policy.framework, policy.axis)
    return policy


def layout_for(shape: Sequence[int]) -> Layout:
    """The layout the policy in force gives a new tensor of ``shape``."""
    return get_default_layout().layout(shape)


def set_default_layout(kind: str | Callable[[tuple[int, ...]], Layout] = "single", *,
                       devices: Sequence[Device | str] | None = None, framework: str | None = None,
                       axis: int = 0) -> LayoutPolicy:
    """Set the policy for the rest of the program; returns the previous one.

    Parameters
    ----------
    kind : {"single", "slab", "processes"} or callable
        See :mod:`dlmg.array_api._policy`; a callable takes a shape and
        returns a :class:`~dlmg.Layout` of it.
    devices : sequence of Device or str, optional
        ``["cpu:0"]`` by default.
    framework : str, optional
        The framework of new fragments (``"numpy"`` by default).
    axis : int
        The mode ``"slab"`` and ``"processes"`` split.
    """
    previous = _GLOBAL[0]
    _GLOBAL[0] = _policy(kind, devices, framework, axis)
    return previous


@contextlib.contextmanager
def default_layout(kind: str | Callable[[tuple[int, ...]], Layout] = "single", *,
                   devices: Sequence[Device | str] | None = None, framework: str | None = None,
                   axis: int = 0) -> Iterator[LayoutPolicy]:
    """A block of code whose new tensors follow this policy (arguments as :func:`set_default_layout`).

    Examples
    --------
    >>> import dlmg.array_api as xp
    >>> with dlmg.default_layout("slab", devices=["cpu:0", "cpu:1"]):   # doctest: +SKIP
    ...     x = xp.zeros((4, 3))            # two fragments of 2 rows
    """
    token = _CURRENT.set(_policy(kind, devices, framework, axis))
    try:
        yield _CURRENT.get()  # type: ignore[misc]
    finally:
        _CURRENT.reset(token)
