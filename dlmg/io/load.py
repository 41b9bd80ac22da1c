"""``dlmg.load``: a saved tensor into any layout, framework and number of processes.

Each process reads only what its own fragments of the target layout hold:
per fragment, the outer product of its global indices, which TensorStore
serves from the chunks (and inner chunks) that hold them. The bytes land in
host buffers, become fragments of the target framework without a copy where
the target is host memory, and move to their devices through a
redistribution otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..distributed.agree import describe
from ..errors import CheckpointError, ChunkError, FrameworkError, LayoutError
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK, get_adapter
from ..tensor import DistributedTensor
from . import store
from .format import check_array_record
from .geometry import fragment_index
from .host import aligned_empty, host_framework, host_layout, staged_tensor
from .publish import check_complete
from .steps import rank, step, world_size

__all__ = ["load", "saved_layout"]


def _array_meta(directory: str, where: str) -> tuple[dict[str, Any], str, Layout]:
    meta = store.read_metadata(directory, where)
    if meta.get("node_type") != "array":
        raise CheckpointError(f"{where} is a Zarr {meta.get('node_type')!r}, not an array")
    dtype, saved = check_array_record(meta.get("attributes") or {}, str(meta.get("data_type")), meta.get("shape", ()), where)
    return meta, dtype, saved


def saved_layout(path: str | os.PathLike[str]) -> Layout | dict[str, Layout]:
    """The layout a checkpoint was saved from (a dict of them for a dict of tensors).

    Reads only metadata; refuses an incomplete save as :func:`load` does.
    """
    path = os.path.abspath(os.fspath(path))
    found = {k: _array_meta(d, where)[2] for k, (d, where) in _nodes(path).items()}
    return found[""] if list(found) == [""] else found


def _keys(root: dict[str, Any], where: str) -> list[str]:
    record = (root.get("attributes") or {}).get("dlmg")
    keys = record.get("keys") if isinstance(record, Mapping) else None
    if not isinstance(keys, list):
        raise CheckpointError(f"{where} is a Zarr group but no dict of tensors saved by dlmg (no attribute dlmg.keys)")
    return keys


def _target(saved: Layout, layout: Any, where: str) -> Layout:
    target = saved if layout is None else layout
    if not isinstance(target, Layout):
        raise TypeError(f"load: layout must be a dlmg.Layout or None, got {type(layout).__name__}")
    if target.shape != saved.shape:
        raise LayoutError(f"load: layout.shape = {target.shape}, but {where} holds a tensor of shape {saved.shape}")
    if target.nprocesses > world_size():
        given = "the saved layout (layout=None)" if layout is None else "layout"
        raise LayoutError(
            f"load: {given} has ranks up to {target.nprocesses - 1} (layout.nprocesses = {target.nprocesses}), "
            f"but {world_size()} process(es) run; pass a layout for {world_size()} process(es)"
        )
    return target


def _framework(meta: dict[str, Any], framework: str | None) -> Any:
    if framework is not None:
        return get_adapter(framework)
    saved = (meta["attributes"]["dlmg"].get("layout") or {}).get("frameworks") or []
    for name in saved:
        if name is None:
            continue
        try:
            adapter = get_adapter(name)
        except FrameworkError:
            continue
        if adapter.available():
            return adapter
    return get_adapter(DEFAULT_FRAMEWORK)


class _Plan:
    """One array to load: its metadata and the checked target (built before any read)."""

    def __init__(self, directory: str, where: str, layout: Any, framework: str | None) -> None:
        self.directory, self.where = directory, where
        self.meta, self.dtype, self.saved = _array_meta(directory, where)
        self.target = _target(self.saved, layout, where)
        self.adapter = _framework(self.meta, framework)
        self.adapter.check_dtype(self.dtype)
        self.stage = host_framework(self.adapter, self.dtype)
        self.staging = host_layout(self.target)

    def read(self) -> dict[int, np.ndarray]:
        """This process's fragments of the target layout, as host buffers of the storage type."""
        chunk = tuple(self.meta["chunk_grid"]["configuration"]["chunk_shape"])
        storage = np.dtype(self.meta["data_type"])
        handle = None
        buffers: dict[int, np.ndarray] = {}
        by_coords: dict[tuple[int, ...], np.ndarray] = {}
        me = rank()
        for frag in self.staging.fragments:
            if frag.rank != me:
                continue
            if frag.size == 0:
                buffers[frag.index] = np.empty(frag.shape, storage)
                continue
            if frag.coords in by_coords:  # a replica of one this process read already
                buffers[frag.index] = aligned_empty(frag.shape, storage)
                buffers[frag.index][...] = by_coords[frag.coords]
                continue
            index = fragment_index(frag)
            missing = store.missing_chunks(self.directory, index, self.saved.shape, chunk)
            if missing:
                raise ChunkError(
                    f"{self.where}: chunk {missing[0]!r} is missing ({len(missing)} missing of those fragment "
                    f"{frag.index} of the target layout needs); the checkpoint is damaged"
                )
            if handle is None:
                handle = store.open_array(self.directory)
            data = aligned_empty(frag.shape, storage)
            store.read_into(handle, index, data, self.where)
            by_coords[frag.coords] = buffers[frag.index] = data
        return buffers

    def staged(self, buffers: dict[int, np.ndarray]) -> DistributedTensor:
        """The buffers as fragments of the host layout, in the staging framework."""
        return staged_tensor(buffers, self.staging, self.dtype, self.stage)


def load(path: str | os.PathLike[str], layout: Any = None, framework: str | None = None) -> Any:
    """Load a tensor (or dict of tensors) saved by :func:`save`, into any layout and framework.

    Every process calls it (SPMD); each reads only the chunks holding its own
    fragments of ``layout``. The number of processes, the layout and the
    framework may all differ from the save.

    Parameters
    ----------
    path : str or os.PathLike
        What :func:`save` wrote.
    layout : Layout or dict of str to Layout, optional
        The layout of the result (a dict for a dict of tensors; missing keys
        keep their saved layout). By default the saved one, which needs as
        many processes as saved it (or more).
    framework : str, optional
        The framework of the fragments (``"numpy"``, ``"torch"``, ``"jax"``,
        ``"cupy"``...); by default the one the tensor was saved from where it
        is installed, else NumPy.

    Returns
    -------
    DistributedTensor or dict of str to DistributedTensor

    Raises
    ------
    CheckpointError
        ``path`` holds no tensor saved by dlmg.
    IncompleteCheckpointError
        The save of ``path`` did not finish (no commit marker).
    ChunkError
        A chunk is missing, truncated or fails its checksum (names the chunk).
    LayoutError
        ``layout`` has another shape, or needs more processes than run.
    CollectiveError
        Another process failed; no process returns a tensor.
    """
    path = os.path.abspath(os.fspath(path))
    what = describe("load", path=path, layout=layout, framework=framework)

    def read() -> tuple[dict[str, DistributedTensor], None]:
        plans = _plans(path, layout, framework)  # every check before the first byte is read
        buffers = {k: plan.read() for k, plan in plans.items()}
        return {k: plan.staged(buffers[k]) for k, plan in plans.items()}, None

    staged, _ = step(what, read)
    plans = _plans(path, layout, framework)
    done = {k: _finish(staged[k], plan.target, plan.adapter) for k, plan in plans.items()}
    return done[""] if list(done) == [""] else done


def _nodes(path: str) -> dict[str, tuple[str, str]]:
    """The saved arrays of a finished checkpoint: ``{"": (path, path)}`` for one tensor,
    ``{key: (directory, name)}`` for a dict of them."""
    root = store.read_metadata(path, path)
    if root.get("node_type") != "group":
        _array_meta(path, path)  # a dlmg tensor at all, before asking whether its save finished
        check_complete(path)
        return {"": (path, path)}
    keys = _keys(root, path)
    check_complete(path)
    return {k: (os.path.join(path, k), f"{path}/{k}") for k in keys}


def _plans(path: str, layout: Any, framework: str | None) -> dict[str, _Plan]:
    """What to load, every target checked."""
    nodes = _nodes(path)
    if list(nodes) == [""]:
        if isinstance(layout, Mapping):
            raise TypeError(f"load: {path} holds one tensor; layout must be a Layout or None, not a dict")
        return {"": _Plan(path, path, layout, framework)}
    if layout is not None and not isinstance(layout, Mapping):
        raise TypeError(f"load: {path} holds a dict of tensors; layout must be a dict of Layouts or None")
    layouts = layout or {}
    unknown = sorted(set(layouts) - set(nodes))
    if unknown:
        raise CheckpointError(f"load: layout names {unknown}, which {path} does not hold (it holds {list(nodes)})")
    return {k: _Plan(d, where, layouts.get(k), framework) for k, (d, where) in nodes.items()}


def _finish(staged: DistributedTensor, target: Layout, adapter: Any) -> DistributedTensor:
    """``staged`` in the target layout and framework (a redistribution where they differ)."""
    if staged.layout == target and all(f.framework == adapter.name for f in staged.fragments if f.is_local):
        return staged
    return staged.redistribute(target, framework=adapter.name)
