"""Whole redistributions handed to the framework that owns every fragment.

Where every fragment of a tensor is this process's, unpadded, and an array of
one framework that declares :class:`~dlmg.adapters.capabilities.Delegating`,
and that framework can express the move (JAX: both layouts are shardings),
:func:`~dlmg.movement.relayout.redistribute` hands it the whole move (one
``jax.device_put``) instead of running dlmg's copy plan; the framework's
results become the new fragments as they are. :func:`delegation` turns this
off for a block of code (to compare with dlmg's own path, or to keep its
plan's reuse of fragments).

Moves across processes are never handed over: ``DTensor.redistribute`` of torch
shards was slower than dlmg's all-to-all at 64 MiB on 2 gloo processes, in every
transition measured (``benchmarks/dtensor_transitions.py``; figures in the
documentation of redistribution).
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Iterator

from ..adapters.capabilities import Delegating, Delegation
from ..fragment import Fragment

if TYPE_CHECKING:  # pragma: no cover
    from ..adapters import Adapter
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = ["delegated", "delegation", "delegation_enabled", "delegation_of"]

#: Whether whole operations may be handed to a framework, in this context (thread, task).
_ENABLED: ContextVar[bool] = ContextVar("dlmg_delegation", default=True)


@contextmanager
def delegation(enabled: bool = True) -> Iterator[None]:
    """Allow (the default) or forbid handing whole operations to a framework, inside a ``with`` block.

    Parameters
    ----------
    enabled : bool
        ``False``: every redistribution runs dlmg's own plan, even where every
        fragment belongs to one framework that could move the whole tensor
        itself (JAX's ``device_put`` between shardings).

    Examples
    --------
    >>> import dlmg
    >>> with dlmg.delegation(False):
    ...     dlmg.delegation_enabled()
    False
    """
    token = _ENABLED.set(bool(enabled))
    try:
        yield
    finally:
        _ENABLED.reset(token)


def delegation_enabled() -> bool:
    """Whether whole operations may be handed to a framework here (see :func:`delegation`)."""
    return _ENABLED.get()


def delegation_of(dt: DistributedTensor, layout: "Layout",
                  framework: str | None) -> tuple["Adapter", Delegation] | None:
    """The framework that would move all of ``dt`` to ``layout`` itself, and how;
    ``None`` where dlmg's plan runs (delegation off, fragments of several
    frameworks or processes, padded fragments, another target ``framework``, or
    a move the framework cannot express)."""
    if not _ENABLED.get():
        return None
    frags = dt.fragments
    if not frags or not frags[0].is_local:
        return None
    a = frags[0].adapter
    if not isinstance(a, Delegating) or (framework is not None and framework != a.name):
        return None
    for f in frags:
        if not f.is_local or f.is_padded or f.adapter is not a:
            return None
    found = a.delegated_redistribution(dt.layout, layout, dt.dtype)
    return None if found is None else (a, found)


def delegated(dt: DistributedTensor, layout: "Layout", framework: str | None) -> DistributedTensor | None:
    """``dt`` in ``layout`` moved by the framework owning every fragment, or ``None``
    where :func:`delegation_of` finds none or the framework declines the arrays."""
    found = delegation_of(dt, layout, framework)
    if found is None:
        return None
    a, how = found
    arrays = how.run([f._array for f in dt.fragments])
    if arrays is None:
        return None
    name = a.name
    out = [Fragment.of_result(frag, array, name, a) for frag, array in zip(layout.fragments, arrays)]
    return type(dt)._create(layout, out, dt.dtype)
