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

from ..adapters import available
from ..construct import from_fragments
from ..distributed.agree import describe
from ..errors import CheckpointError, ChunkError, FrameworkError, LayoutError
from ..layout import Layout
from ..registry import DEFAULT_FRAMEWORK, get_adapter
from ..tensor import DistributedTensor
from . import store
from .format import check_array_metadata, check_key
from .geometry import fragment_index
from .host import aligned_empty, host_framework, host_layout, staged_tensor
from .locks import pinned
from .publish import check_complete
from .steps import rank, step, world_size

__all__ = ["load", "saved_layout"]


def _array_meta(directory: str, where: str) -> tuple[dict[str, Any], str, Layout]:
    meta = store.read_metadata(directory, where)
    dtype, saved = check_array_metadata(meta, where)
    return meta, dtype, saved


def _resolved(path: str | os.PathLike[str]) -> str:
    """The absolute path with symbolic links resolved: the directory saves publish to, and
    beside which their lock file lies."""
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def saved_layout(path: str | os.PathLike[str]) -> Layout | dict[str, Layout]:
    """The layout a checkpoint was saved from (a dict of them for a dict of tensors).

    Reads only metadata, of one generation (see :func:`load`); refuses an
    incomplete save as :func:`load` does.
    """
    path = _resolved(path)
    with pinned(path) as pin:
        found = {k: _array_meta(d, where)[2] for k, (d, where) in _nodes(pin.directory, path).items()}
    return found[""] if list(found) == [""] else found


def _keys(root: dict[str, Any], where: str) -> list[str]:
    attributes = root.get("attributes")
    record = attributes.get("dlmg") if isinstance(attributes, Mapping) else None
    keys = record.get("keys") if isinstance(record, Mapping) else None
    if not isinstance(keys, list):
        raise CheckpointError(f"{where} is a Zarr group but no dict of tensors saved by dlmg (no attribute dlmg.keys)")
    for key in keys:
        check_key(key, f"{where}: dlmg.keys")
    if len(set(keys)) != len(keys):
        raise CheckpointError(f"{where}: dlmg.keys = {keys!r} names an array twice")
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
        if available(adapter):
            return adapter
    return get_adapter(DEFAULT_FRAMEWORK)


class _Plan:
    """One array to load: its metadata and the checked target (built before any read)."""

    def __init__(self, directory: str, where: str, layout: Any, framework: Any) -> None:
        self.directory, self.where = directory, where
        self.meta, self.dtype, self.saved = _array_meta(directory, where)
        self.target = _target(self.saved, layout, where)
        self.per_fragment = _per_fragment(framework, self.target)
        if self.per_fragment is not None:  # read in the framework of this process's first fragment
            mine = [self.per_fragment[f.index] for f in self.target.fragments if f.rank == rank()]
            framework = mine[0] if mine else None
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
                    f"{self.where}: chunk {missing[0]!r} is missing or no regular file ({len(missing)} such of "
                    f"those fragment {frag.index} of the target layout needs); the checkpoint is damaged"
                )
            if handle is None:
                handle = store.open_array(self.directory, self.where)
            data = aligned_empty(frag.shape, storage)
            store.read_into(handle, index, data, self.directory, self.where)
            by_coords[frag.coords] = buffers[frag.index] = data
        return buffers

    def staged(self, buffers: dict[int, np.ndarray]) -> DistributedTensor:
        """The buffers as fragments of the host layout, in the staging framework."""
        return staged_tensor(buffers, self.staging, self.dtype, self.stage)


def _per_fragment(framework: Any, target: Layout) -> dict[int, str] | None:
    """``{fragment index: framework name}`` for a sequence or mapping; ``None`` for one name."""
    if framework is None or isinstance(framework, str):
        return None
    n = target.nfragments
    if isinstance(framework, Mapping):
        per = dict(framework)
        bad = [k for k in per if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k < n]
        if bad or len(per) != n:
            raise LayoutError(
                f"load: framework as a mapping needs one entry per fragment 0..{n - 1} of the target layout, "
                f"got keys {sorted(per, key=str)}"
            )
    else:
        per = dict(enumerate(framework))
        if len(per) != n:
            raise LayoutError(f"load: framework names {len(per)} frameworks, the target layout has {n} fragments")
    for i, name in per.items():
        if not isinstance(name, str):
            raise TypeError(f"load: framework of fragment {i} is {name!r}, not a framework name")
    if target.element_strides is not None:
        raise LayoutError(
            f"load: a framework per fragment needs a dense target layout, got element_strides="
            f"{target.element_strides}; load with one framework"
        )
    return per


def _mixed(tensor: DistributedTensor, per: dict[int, str] | None) -> DistributedTensor:
    """``tensor`` with each local fragment handed to its own framework (zero-copy through DLPack)."""
    if per is None or all(f.framework == per[f.index] for f in tensor.fragments if f.is_local):
        return tensor
    arrays = {}
    for f in tensor.fragments:
        if f.is_local:
            arrays[f.index] = f.array if f.framework == per[f.index] else get_adapter(per[f.index]).from_dlpack(
                f, device=f.device)
    return from_fragments(arrays, tensor.layout, dtype=tensor.dtype)


def load(path: str | os.PathLike[str], layout: Any = None, framework: Any = None) -> Any:
    """Load a tensor (or dict of tensors) saved by :func:`save`, into any layout and framework.

    Every process calls it (SPMD); each reads only the chunks holding its own
    fragments of ``layout``. The number of processes, the layout and the
    framework may all differ from the save. A save of ``path`` running
    meanwhile (in any process) changes nothing the load reads: it returns one
    save's values whole, every process the same save.

    Parameters
    ----------
    path : str or os.PathLike
        What :func:`save` wrote.
    layout : Layout or dict of str to Layout, optional
        The layout of the result (a dict for a dict of tensors; missing keys
        keep their saved layout). By default the saved one, which needs as
        many processes as saved it (or more).
    framework : str, sequence of str or dict of int to str, optional
        The framework of the fragments (``"numpy"``, ``"torch"``, ``"jax"``,
        ``"cupy"``...), or one per fragment of the target layout (in fragment
        order, or ``{fragment index: name}``; the fragments reach their
        frameworks through DLPack, no copy); by default the one the tensor was
        saved from where it is installed, else NumPy.

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
    path = _resolved(path)
    what = describe("load", path=path, layout=layout, framework=framework)
    for attempt in range(2):
        # Every process reads the generation it pinned; where processes pinned different ones
        # (a save published between their pins), they read again, each holding the save lock
        # shared until all have pinned, so that no save publishes in between.
        with pinned(path, hold=attempt > 0 and world_size() > 1) as pin:
            def read() -> tuple[dict[str, tuple[_Plan, DistributedTensor]], str]:
                plans = _plans(pin.directory, path, layout, framework)  # every check before the first byte is read
                buffers = {k: plan.read() for k, plan in plans.items()}
                return {k: (plan, plan.staged(buffers[k])) for k, plan in plans.items()}, _generation(pin.directory, path)

            staged, generations = step(what if attempt == 0 else what + ".again", read)
        if len(set(generations)) == 1:
            break
    else:  # pragma: no cover - only where the file system takes no locks
        raise CheckpointError(f"load {path}: the processes read different saves of it (saves of it ran meanwhile)")
    done = {k: _mixed(_finish(tensor, plan.target, plan.adapter), plan.per_fragment)
            for k, (plan, tensor) in staged.items()}
    return done[""] if list(done) == [""] else done


def _generation(directory: str, where: str) -> str:
    """Which save wrote the checkpoint in ``directory``: the token its commit marker names."""
    marker = check_complete(directory, where)
    token = marker.get("generation")
    return token if isinstance(token, str) else repr(sorted(marker.items(), key=str))


def _nodes(directory: str, path: str) -> dict[str, tuple[str, str]]:
    """The saved arrays of a finished checkpoint read from ``directory`` (known as ``path``):
    ``{"": (directory, path)}`` for one tensor, ``{key: (directory/key, path/key)}`` for a dict."""
    root = store.read_metadata(directory, path)
    if root.get("node_type") != "group":
        _array_meta(directory, path)  # a dlmg tensor at all, before asking whether its save finished
        check_complete(directory, path)
        return {"": (directory, path)}
    keys = _keys(root, path)
    check_complete(directory, path)
    return {k: (os.path.join(directory, k), f"{path}/{k}") for k in keys}


def _plans(directory: str, path: str, layout: Any, framework: Any) -> dict[str, _Plan]:
    """What to load from ``directory`` (known as ``path``), every target checked."""
    nodes = _nodes(directory, path)
    if list(nodes) == [""]:
        if isinstance(layout, Mapping):
            raise TypeError(f"load: {path} holds one tensor; layout must be a Layout or None, not a dict")
        return {"": _Plan(directory, path, layout, framework)}
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
