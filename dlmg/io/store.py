"""Reading and writing Zarr v3 arrays through TensorStore.

Every touch of the library is here: creating an array from its metadata,
writing a fragment's elements, reading a fragment's elements (TensorStore
fetches only the chunks, and within shards only the inner chunks, that hold
them), and turning the library's errors into dlmg's, naming the chunk.

TensorStore, the C++ library JAX and Orbax write checkpoints with, was
chosen over zarr-python for speed (see ``docs/saving.md``); zarr-python reads
the same files (tested). It is imported only when a file is touched.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from typing import Any

from ..errors import CheckpointError, ChunkError, DlmgError, FrameworkNotInstalledError

__all__ = ["Index", "create_array", "open_array", "read_metadata", "write", "read_into", "chunk_key",
           "missing_chunks", "failures"]

#: Per mode, a slice (a run of indices) or a sorted int64 array of global indices.
Index = tuple[Any, ...]


def _ts() -> Any:
    try:
        import tensorstore
    except ImportError:
        raise FrameworkNotInstalledError(
            "saving and loading need TensorStore: pip install 'dlmg[io]' (or pip install tensorstore)"
        ) from None
    return tensorstore


@lru_cache(maxsize=1)
def _context() -> Any:
    # One context per process: a shared thread pool; no chunk cache, since a checkpoint is
    # read once (a cache would hold a second copy of every byte read).
    return _ts().Context({"cache_pool": {"total_bytes_limit": 0}})


@contextmanager
def failures(where: str, part: str) -> Iterator[None]:
    """Turn a failure of the store or the operating system into a
    :class:`~dlmg.errors.CheckpointError` naming the path and the part (dlmg's
    own errors pass as they are; the original is the ``__cause__``)."""
    try:
        yield
    except DlmgError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{where}: {part} failed ({type(exc).__name__}: {exc})") from exc


def _spec(directory: str) -> dict[str, Any]:
    return {"driver": "zarr3", "kvstore": {"driver": "file", "path": os.path.abspath(directory)}}


def create_array(directory: str, metadata: dict[str, Any]) -> None:
    """Write ``directory/zarr.json`` of a new array through TensorStore."""
    spec = dict(_spec(directory), metadata=metadata, create=True)
    with failures(directory, "creating the array's zarr.json"):
        _ts().open(spec, context=_context()).result()


def read_metadata(directory: str, where: str) -> dict[str, Any]:
    """The parsed ``zarr.json`` of ``directory``.

    Raises
    ------
    CheckpointError
        When there is none, or it is no Zarr v3 metadata.
    """
    path = os.path.join(directory, "zarr.json")
    try:
        with open(path, encoding="utf-8") as f:
            meta = json.load(f)
    except FileNotFoundError:
        raise CheckpointError(f"{where} holds no Zarr v3 node (no file zarr.json)") from None
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{where}: zarr.json is no Zarr v3 metadata ({exc})") from None
    if not isinstance(meta, dict) or meta.get("zarr_format") != 3:
        found = meta.get("zarr_format") if isinstance(meta, dict) else type(meta).__name__
        raise CheckpointError(f"{where}: zarr.json has zarr_format = {found!r}, expected 3")
    return meta


def open_array(directory: str, where: str | None = None) -> Any:
    """The TensorStore of an existing array, for reading and writing.

    Chunks equal to the fill value are written too (TensorStore would leave them out,
    and a reader could not tell such a chunk from a lost one).

    Raises
    ------
    CheckpointError
        When TensorStore cannot open it (names ``where``, by default ``directory``).
    """
    spec = dict(_spec(directory), open=True, store_data_equal_to_fill_value=True)
    with failures(directory if where is None else where, "opening the array"):
        return _ts().open(spec, context=_context()).result()


def _oindex(store: Any, index: Index) -> Any:
    if not index:
        return store
    if all(isinstance(i, slice) for i in index):
        return store[index]
    return store.oindex[index]


def write(store: Any, index: Index, values: Any) -> Any:
    """Start writing ``values`` (a host array of the indexed shape) at ``index``; returns the future."""
    return _oindex(store, index).write(values)


def read_into(store: Any, index: Index, out: Any, directory: str, where: str | None = None) -> None:
    """Read the elements at ``index`` into the host array ``out`` (NumPy, the storage data
    type, the indexed shape), straight from the decoded chunks.

    Raises
    ------
    ChunkError
        When a chunk fails its checksum or cannot be decoded; names the chunk and
    its file under ``where`` (the path the caller knows ``directory`` by).
    """
    try:
        _ts().array(out, copy=False, write=True).write(_oindex(store, index)).result()
    except Exception as exc:
        raise _chunk_error(exc, directory, directory if where is None else where) from exc


_FILE = re.compile(r'local file "([^"]+)"')


def _chunk_error(exc: Exception, directory: str, where: str) -> Exception:
    text = str(exc)
    found = _FILE.search(text)
    if found is None:
        return CheckpointError(f"reading {where} failed ({type(exc).__name__}: {text})")
    key = os.path.relpath(found.group(1), os.path.abspath(directory)).replace(os.sep, "/")
    text = text.replace(os.path.abspath(directory), where)
    return ChunkError(f"chunk {key!r} of {where} ({os.path.join(where, *key.split('/'))}) is corrupt or "
                      f"truncated: {text}")


def chunk_key(coords: Sequence[int]) -> str:
    """The key of the chunk at grid position ``coords`` (Zarr's default encoding)."""
    return "/".join(["c", *(str(c) for c in coords)])


def _touched(index: Index, shape: Sequence[int], chunk: Sequence[int]) -> list[Sequence[int]]:
    per_mode: list[Sequence[int]] = []
    for i, n, c in zip(index, shape, chunk):
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            per_mode.append(range(start // c, (stop - 1) // c + 1) if stop > start else range(0))
        else:
            per_mode.append(sorted({int(k) // c for k in i}))
    return per_mode


def missing_chunks(directory: str, index: Index, shape: Sequence[int], chunk: Sequence[int]) -> list[str]:
    """The keys of chunks holding elements at ``index`` that are no regular file (Zarr would
    silently read a missing one, or a directory in its place, as the fill value)."""
    if any(n == 0 for n in shape):
        return []
    per_mode = _touched(index, shape, chunk) if index else []
    missing = []
    for coords in itertools.product(*per_mode):
        key = chunk_key(coords)
        if not os.path.isfile(os.path.join(directory, *key.split("/"))):
            missing.append(key)
    return missing
