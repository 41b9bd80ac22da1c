"""``dlmg.save``: a tensor, or a dict of tensors, as Zarr v3, from every process at once."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any

from ..distributed.agree import describe
from ..errors import CheckpointError
from ..ops._pending import guard
from ..tensor import DistributedTensor
from . import store
from .format import array_metadata, storage_dtype, FORMAT, VERSION
from .geometry import fragment_index
from .host import host_view, on_host
from .publish import check_target, discard, publish, remove_stale, staging_path, write_marker
from .steps import rank, step, world_size

__all__ = ["save"]


def _items(obj: Any) -> tuple[dict[str, DistributedTensor], bool]:
    """``({name: tensor}, is_group)``; a single tensor is the one unnamed array ``""``."""
    if isinstance(obj, DistributedTensor):
        return {"": obj}, False
    if not isinstance(obj, Mapping):
        raise TypeError(f"save takes a DistributedTensor or a dict of them, got {type(obj).__name__}")
    if not obj:
        raise CheckpointError("save: the dict of tensors is empty")
    items = {}
    for name, value in obj.items():
        if not isinstance(name, str) or not name or "/" in name or name.startswith("__") or name in (".", ".."):
            raise CheckpointError(
                f"save: key {name!r} cannot name a Zarr array (a non-empty string without '/', "
                f"not starting with '__', not '.' or '..')"
            )
        if not isinstance(value, DistributedTensor):
            raise TypeError(f"save: value of key {name!r} is a {type(value).__name__}, not a DistributedTensor")
        items[name] = value
    return items, True


def _local_frameworks(tensor: DistributedTensor) -> dict[int, str | None]:
    return {f.index: f.framework for f in tensor.fragments if f.is_local}


def _write_group(directory: str, names: list[str]) -> None:
    """The Zarr v3 group node of a dict of tensors (its ``zarr.json``, as the spec gives it)."""
    node = {
        "zarr_format": 3,
        "node_type": "group",
        "attributes": {"dlmg": {"format": FORMAT, "version": VERSION, "kind": "dict", "keys": names}},
    }
    with open(os.path.join(directory, "zarr.json"), "w", encoding="utf-8") as f:
        json.dump(node, f)


def _write_fragments(directory: str, tensor: DistributedTensor, storage: str) -> int:
    """Write this process's replica-0 fragments (each block a chunk of its own); returns the count."""
    handle = store.open_array(directory)
    pending = []
    for frag in tensor.fragments:
        if not frag.is_local or frag.replica != 0 or frag.size == 0:
            continue
        pending.append(store.write(handle, fragment_index(frag.layout), host_view(frag, storage)))
    for future in pending:
        future.result()
    return len(pending)


def save(path: str | os.PathLike[str], tensor: Any, *, overwrite: bool = False) -> None:
    """Save a distributed tensor, or a dict of them, as Zarr v3 at ``path``.

    Every process calls it (SPMD); each writes the chunks of its own
    fragments of replica 0, straight from host memory (fragments on other
    devices are copied to the host first). The save goes to a staging
    directory beside ``path`` and is published in one rename after every
    process has finished, so an earlier checkpoint at ``path`` stays whole
    if the save dies part way.

    Parameters
    ----------
    path : str or os.PathLike
        A directory to create (or replace, with ``overwrite``).
    tensor : DistributedTensor or dict of str to DistributedTensor
        One tensor becomes a Zarr array at ``path``; a dict becomes a Zarr
        group with one array per key.
    overwrite : bool
        Replace a dlmg checkpoint already at ``path``. Anything else at
        ``path`` is never replaced.

    Raises
    ------
    CheckpointExistsError
        ``path`` exists and ``overwrite`` is false, or it is no dlmg checkpoint.
    UnsupportedDtypeError
        Sub-byte element types (float6, float4), which no Zarr type holds.
    CollectiveError
        Another process failed; the save is not published.

    See Also
    --------
    load : read it back into any layout, framework and number of processes.

    Notes
    -----
    The format is described in ``docs/saving.md``: one chunk per block of the
    saved layout, a CRC-32C checksum per chunk, the layout in the attribute
    ``dlmg``.
    """
    tensor = ({k: guard(v, "dlmg.save") for k, v in tensor.items()} if isinstance(tensor, Mapping)
              else guard(tensor, "dlmg.save"))  # values, never the addends of a pending reduction
    path = os.path.abspath(os.fspath(path))
    items, is_group = _items(tensor)
    hosted = {name: on_host(t) for name, t in items.items()}  # collective where data moves
    what = describe("save", path=path, overwrite=overwrite,
                    arrays=[(name, t.layout, t.dtype) for name, t in items.items()])
    me = rank()

    def check() -> tuple[dict[str, str], Any]:
        storages = {name: storage_dtype(t.dtype) for name, t in hosted.items()}
        token = None
        if me == 0:
            check_target(path, overwrite)
            remove_stale(path)  # what earlier saves that died left beside it
            token = uuid.uuid4().hex[:12]
        return storages, (token, {name: _local_frameworks(t) for name, t in items.items()})

    storages, votes = step(what, check)
    staging = staging_path(path, votes[0][0])

    def create() -> tuple[None, None]:
        if me == 0:
            os.makedirs(staging)
            if is_group:
                _write_group(staging, list(items))
            for name, t in items.items():
                frameworks: list[str | None] = [None] * t.layout.nfragments
                for _, local in votes:
                    for i, fw in local[name].items():
                        frameworks[i] = fw
                store.create_array(os.path.join(staging, name), array_metadata(t.layout, t.dtype, frameworks))
        return None, None

    try:
        step(what + ".create", create)

        def write() -> tuple[None, int]:
            return None, sum(_write_fragments(os.path.join(staging, name), hosted[name], storages[name])
                             for name in items)

        _, written = step(what + ".write", write)

        def commit() -> tuple[None, None]:
            if me == 0:
                write_marker(staging, {"processes": world_size(), "fragments_written": sum(written),
                                       "arrays": list(items) if is_group else None})
                publish(staging, path)
                remove_stale(path)  # copies kept aside while the path held no finished checkpoint
            return None, None

        step(what + ".commit", commit)
    except Exception:
        # Every process that still runs has finished its part of the failed step (each step
        # ends in an agreement), so nothing writes into the staging directory any more.
        if me == 0:
            discard(staging)
        raise
