"""``dlmg.save``: a tensor, or a dict of tensors, as Zarr v3, from every process at once."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from ..distributed.agree import describe
from ..errors import CheckpointError
from ..ops._pending import guard
from ..tensor import DistributedTensor
from . import store
from .format import array_metadata, check_array_metadata, check_key, storage_dtype, FORMAT, VERSION
from .geometry import fragment_index
from .host import host_view, on_host
from . import locks
from .publish import check_target, discard, publish, remove_stale, staging_path, write_marker
from .steps import collective_timeout, rank, step, world_size

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
        check_key(name, "save")
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


def _write_fragments(directory: str, tensor: DistributedTensor, storage: str, where: str) -> int:
    """Write this process's replica-0 fragments (each block a chunk of its own); returns the count."""
    handle = store.open_array(directory, where)
    pending = []
    with store.failures(where, "writing the chunks"):
        for frag in tensor.fragments:
            if not frag.is_local or frag.replica != 0 or frag.size == 0:
                continue
            pending.append(store.write(handle, fragment_index(frag.layout), host_view(frag, storage)))
        for future in pending:
            future.result()
    return len(pending)


def _check_staged(staging: str, names: list[str], is_group: bool, path: str) -> None:
    """Refuse to commit a staging directory whose metadata is not all there and whole."""
    where = f"save {path}: the staged metadata"
    if is_group:
        root = store.read_metadata(staging, where)
        attributes = root.get("attributes")
        record = attributes.get("dlmg") if isinstance(attributes, Mapping) else None
        if root.get("node_type") != "group" or not isinstance(record, Mapping) or record.get("keys") != names:
            raise CheckpointError(f"{where}: the group's zarr.json does not list the keys {names}")
    for name in names:
        check_array_metadata(store.read_metadata(os.path.join(staging, name), where), f"{where} of {name!r}")


def save(path: str | os.PathLike[str], tensor: Any, *, overwrite: bool = False) -> None:
    """Save a distributed tensor, or a dict of them, as Zarr v3 at ``path``.

    Every process calls it (SPMD); each writes the chunks of its own
    fragments of replica 0, straight from host memory (fragments on other
    devices are copied to the host first). The save goes to a staging
    directory beside ``path`` and is published in one rename after every
    process has finished, so an earlier checkpoint at ``path`` stays whole
    if the save dies part way. Saves of one path run one at a time (a lock
    file beside it); a load running meanwhile reads the earlier checkpoint
    whole. A ``path`` that is a symbolic link is followed: the checkpoint
    goes where it points and the link stays.

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
    CheckpointError
        A key of the dict cannot name an array (reserved names, ``/``, NUL,
        more than 255 bytes), before anything is written; another save of
        ``path`` held it for longer than the lock's timeout; the file system or
        TensorStore failed (the message names the path and the part).
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
    path = os.path.realpath(path)  # through a symbolic link: the checkpoint goes where it points
    hosted = {name: on_host(t) for name, t in items.items()}  # collective where data moves
    what = describe("save", path=path, overwrite=overwrite,
                    arrays=[(name, t.layout, t.dtype) for name, t in items.items()])
    me = rank()
    engine_timeout = collective_timeout()
    # The peers wait for process 0 in an agreement meanwhile: it gives up on the lock well before them.
    lock_timeout = None if engine_timeout is None else min(locks.LOCK_TIMEOUT, engine_timeout / 2)
    with ExitStack() as held:
        def check() -> tuple[dict[str, str], Any]:
            storages = {name: storage_dtype(t.dtype) for name, t in hosted.items()}
            token = None
            if me == 0:
                held.enter_context(locks.exclusive(path, lock_timeout))  # one save of a path at a time
                check_target(path, overwrite)
                with store.failures(path, "removing what earlier saves left beside it"):
                    remove_stale(path)
                token = uuid.uuid4().hex[:12]
            return storages, (token, {name: _local_frameworks(t) for name, t in items.items()})

        storages, votes = step(what, check)
        token = votes[0][0]
        staging = staging_path(path, token)
        _stage(what, path, staging, token, items, hosted, storages, votes, is_group)


def _stage(what: str, path: str, staging: str, token: str, items: dict[str, DistributedTensor],
           hosted: dict[str, DistributedTensor], storages: dict[str, str], votes: list[Any], is_group: bool) -> None:
    """Write the staging directory from every process, then commit and publish it (process 0)."""
    me = rank()

    def create() -> tuple[None, None]:
        if me == 0:
            with store.failures(path, "creating the staging directory"):
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
            return None, sum(_write_fragments(os.path.join(staging, name), hosted[name], storages[name],
                                              f"{path}/{name}" if is_group else path)
                             for name in items)

        _, written = step(what + ".write", write)

        def commit() -> tuple[None, None]:
            if me == 0:
                _check_staged(staging, list(items), is_group, path)  # a marker only over whole metadata
                with store.failures(path, "committing and publishing"):
                    write_marker(staging, {"processes": world_size(), "fragments_written": sum(written),
                                           "arrays": list(items) if is_group else None, "generation": token})
                    publish(staging, path)
                with store.failures(path, "removing what earlier saves left beside it"):
                    remove_stale(path)  # copies kept aside while the path held no finished checkpoint
            return None, None

        step(what + ".commit", commit)
    except Exception:
        # Every process that still runs has finished its part of the failed step (each step
        # ends in an agreement), so nothing writes into the staging directory any more.
        if me == 0:
            discard(staging)
        raise
