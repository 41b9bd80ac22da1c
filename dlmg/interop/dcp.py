"""PyTorch Distributed Checkpoint (``torch.distributed.checkpoint``, DCP) with dlmg tensors.

DCP saves ``DTensor`` values of a state dict shard by shard and reshards them
on load. dlmg tensors take part through the DTensor bridge
(:mod:`.dtensor`), without a copy:

* :func:`dcp_save` hands every dlmg tensor of a state dict to ``dcp.save``
  as the DTensor over its fragments; a checkpoint written so is an ordinary
  DCP checkpoint, which ``dcp.load`` reads into DTensors of any placement;
* :func:`dcp_load` loads a DCP checkpoint (written by :func:`dcp_save` or by
  DCP from DTensors) into dlmg tensors of any layout: DCP reshards into a
  layout DTensor can express (the template's own where it is one, else one
  row slab per process), then dlmg redistributes into the template's layout.

Every process calls these functions (SPMD), as DCP requires. PyTorch is
imported only inside the functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..construct import empty
from ..errors import CheckpointError
from ..layout import Layout
from ..ops._pending import guard
from ..base import is_tensor
from ._dtensor_layout import expressibility_problems
from .dtensor import torch_distributed, to_dtensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["dcp_state_dict", "dcp_save", "dcp_load"]


def _checkpoint() -> Any:
    import torch.distributed.checkpoint as dcp

    return dcp


@contextmanager
def _refusals(action: str, checkpoint_id: Any) -> Iterator[None]:
    """DCP's ``CheckpointException`` (a ``BaseException``, which ``except Exception`` misses)
    as dlmg's :class:`~dlmg.errors.CheckpointError`, naming the checkpoint and each
    failing rank's error; DCP's exception is the ``__cause__``."""
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        yield
    except CheckpointException as exc:
        failures = getattr(exc, "failures", {}) or {}
        ranks = "; ".join(f"rank {r}: {_last_line(f)}" for r, f in sorted(failures.items()))
        raise CheckpointError(f"{action} {checkpoint_id!s} failed in DCP ({ranks or exc})") from exc


def _last_line(failure: Any) -> str:
    """The error of a rank as DCP reports it: an exception, or ``(exception, stack)``."""
    inner = failure[0] if isinstance(failure, tuple) and failure else failure
    text = f"{type(inner).__name__}: {inner}" if isinstance(inner, BaseException) else str(inner)
    return text.strip().splitlines()[-1] if text.strip() else type(inner).__name__


def dcp_state_dict(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with every dlmg tensor (also in nested dicts) replaced by its DTensor, no copy.

    Raises
    ------
    LayoutError
        For a layout DTensor cannot express (block-cyclic, several fragments in
        one process); the message names the ``redistribute`` call that reaches
        one it can.
    """
    out: dict[str, Any] = {}
    for key, value in state.items():
        if is_tensor(value):
            out[key] = to_dtensor(value)
        elif isinstance(value, Mapping):
            out[key] = dcp_state_dict(value)
        else:
            out[key] = value
    return out


def dcp_save(state: Mapping[str, Any], checkpoint_id: Any, **kwargs: Any) -> Any:
    """``torch.distributed.checkpoint.save`` of a state dict holding dlmg tensors.

    Parameters
    ----------
    state : dict
        Values may be dlmg tensors (of layouts DTensor can express: one
        fragment per process, slabs of ``torch.chunk`` sizes, replicas), torch
        tensors, DTensors, nested dicts, anything DCP saves.
    checkpoint_id : str or os.PathLike
        The checkpoint directory.
    **kwargs
        Passed on to ``dcp.save`` (``storage_writer``, ``planner``...).

    Returns
    -------
    object
        Whatever ``dcp.save`` returns (its metadata).

    Notes
    -----
    A tensor holding a pending reduction (``layout.partial``) is saved as its value.

    Raises
    ------
    CheckpointError
        Where DCP fails (its ``CheckpointException``, a ``BaseException``, is
        the ``__cause__``), naming the checkpoint and each failing rank's error.
    """
    converted = dcp_state_dict(_values(state))
    with _refusals("dcp_save to", checkpoint_id):
        return _checkpoint().save(converted, checkpoint_id=checkpoint_id, **kwargs)


def _values(state: Mapping[str, Any]) -> dict[str, Any]:
    """``state`` with every pending reduction resolved (:func:`~dlmg.ops._pending.guard`):
    a checkpoint holds values, never the parts of one. The value goes to every replica
    (an all-reduce), where DTensor's ``Partial`` stood: its placements express it."""
    out: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, Mapping):
            out[key] = _values(value)
        elif is_tensor(value) and value.layout.partial is not None:
            out[key] = guard(value, "dcp_save", into=value.layout.replace(partial=None))
        else:
            out[key] = value
    return out


def _holder_layout(template: DistributedTensor, world: int) -> Layout:
    """A layout DCP can load into for ``template``: its own where DTensor expresses it and
    it has one fragment per process, else one row slab per process."""
    layout = template.layout
    ranks = sorted(f.rank for f in layout.fragments)
    if not expressibility_problems(layout) and ranks == list(range(world)) and layout.is_dense:
        return layout  # what to_dtensor takes as it is
    devices = [layout.devices[0]] * world if layout.on_host else list(layout.devices[:world])
    if layout.ndim == 0 or len(devices) < world:
        return Layout.replicated(layout.shape, [layout.devices[0]] * world, ranks=list(range(world)))
    return Layout.slab(layout.shape, 0, devices, ranks=list(range(world)))


def dcp_load(templates: Mapping[str, Any], checkpoint_id: Any, **kwargs: Any) -> dict[str, Any]:
    """Load a DCP checkpoint into dlmg tensors of any layout.

    Parameters
    ----------
    templates : dict
        A state dict whose dlmg tensors give the layout, element type and
        framework wanted for their keys (their values are not used; make them
        with :func:`dlmg.empty`). Other values (torch tensors, DTensors) are
        loaded in place by DCP, as ``dcp.load`` does.
    checkpoint_id : str or os.PathLike
        The checkpoint directory (written by :func:`dcp_save` or by ``dcp.save``
        from DTensors or tensors).
    **kwargs
        Passed on to ``dcp.load``.

    Returns
    -------
    dict
        ``templates`` with every dlmg tensor replaced by a new one holding the
        checkpoint's values in the template's layout and framework.

    Raises
    ------
    CheckpointError
        Where DCP fails, e.g. a template whose shape differs from the saved
        tensor's (DCP's ``CheckpointException``, a ``BaseException``, is the
        ``__cause__``), naming the checkpoint and each failing rank's error.
    """
    dist = torch_distributed()
    world = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
    holders: dict[str, tuple[DistributedTensor, DistributedTensor]] = {}

    def swap(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in state.items():
            if is_tensor(value):
                holder = empty(_holder_layout(value, world), value.dtype, "torch")
                holders[prefix + key] = (holder, value)
                out[key] = to_dtensor(holder)
            elif isinstance(value, Mapping):
                out[key] = swap(value, prefix + key + ".")
            else:
                out[key] = value
        return out

    loaded = swap(templates, "")
    with _refusals("dcp_load from", checkpoint_id):
        _checkpoint().load(loaded, checkpoint_id=checkpoint_id, **kwargs)

    def finish(state: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in state.items():
            if is_tensor(value):
                holder, template = holders[prefix + key]
                local = [f.framework for f in template.fragments if f.is_local]
                out[key] = holder.redistribute(template.layout, framework=local[0] if local else None)
            elif isinstance(value, Mapping):
                out[key] = finish(value, prefix + key + ".")
            else:
                out[key] = value
        return out

    return finish(templates, "")
