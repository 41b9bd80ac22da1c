"""The on-disk format: Zarr v3 metadata of a saved tensor, as plain values.

Nothing here touches a file. A saved tensor is one Zarr v3 array:

* ``shape`` is the tensor's shape; the chunk grid is ``regular`` with
  ``chunk_shape[m] = min(block[m], max(shape[m], 1))``, one chunk per block of
  the layout it was saved from, so that every chunk has exactly one owner;
* every chunk ends in a CRC-32C checksum (codec ``crc32c``); a chunk larger
  than :data:`INNER_CHUNK_BYTES` is a shard (codec ``sharding_indexed``) of
  smaller inner chunks, each with its own checksum, so that a reader can fetch
  part of a block;
* ``data_type`` is Zarr's own type for bool, the integers, the floats and the
  complex types; element types Zarr v3 lacks (bfloat16, the float8 family) are
  stored as their bits in the unsigned integer of the same size
  (``uint16`` for bfloat16), and the attribute ``dlmg.dtype`` names the real type;
* the attribute ``dlmg`` records the saved layout (see :func:`layout_record`).

A dict of tensors is a Zarr group whose members are such arrays. The format
is described for readers without dlmg in ``docs/saving.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..device import Device
from ..dtypes import canonical, info
from ..errors import CheckpointError, UnsupportedDtypeError
from ..layout import Layout

__all__ = [
    "FORMAT", "VERSION", "INNER_CHUNK_BYTES", "COMMIT_MARKER", "storage_dtype", "chunk_shape",
    "inner_chunk_shape", "array_metadata", "layout_record", "layout_from_record", "array_record",
    "check_array_record",
]

#: The value of the attribute ``dlmg.format``; a reader checks it first.
FORMAT = "dlmg.tensor"
#: The version of the attribute schema; bumped when a reader would misread a newer file.
VERSION = 1
#: Chunks above this many bytes are split into inner chunks of about this size (a reader
#: fetching part of a block then reads at most one inner chunk's worth too much per edge).
INNER_CHUNK_BYTES = 1 << 18
#: The file written last, after every process finished its chunks; without it the save is incomplete.
COMMIT_MARKER = "dlmg-commit.json"

#: Element types with a Zarr v3 data type of the same name.
_ZARR_TYPES = frozenset(
    ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
     "float16", "float32", "float64", "complex64", "complex128"]
)


def storage_dtype(dtype: Any) -> str:
    """The Zarr v3 ``data_type`` holding elements of ``dtype``.

    Zarr's own type where it has one; otherwise the unsigned integer of the
    same size, holding the element's bits (bfloat16 -> ``uint16``).

    Raises
    ------
    UnsupportedDtypeError
        For sub-byte types (float6, float4), whose packing no Zarr reader shares.
    """
    name = canonical(dtype)
    if name in _ZARR_TYPES:
        return name
    d = info(name)
    if d.bits * d.lanes % 8 or d.bits < 8:
        raise UnsupportedDtypeError(
            f"dtype {name!r} packs {d.bits}-bit elements, which no Zarr v3 data type holds; "
            f"save it as a tensor of bytes (uint8) instead"
        )
    return f"uint{8 * d.itemsize}"


def chunk_shape(layout: Layout) -> tuple[int, ...]:
    """One chunk per block of ``layout`` (cut to the extent where a block is larger)."""
    return tuple(min(b, max(n, 1)) for n, b in zip(layout.shape, layout.block))


def _smallest_factor(n: int) -> int:
    for f in range(2, math.isqrt(n) + 1):
        if n % f == 0:
            return f
    return n


def inner_chunk_shape(chunk: tuple[int, ...], itemsize: int, limit: int = INNER_CHUNK_BYTES) -> tuple[int, ...]:
    """Inner chunks dividing ``chunk`` evenly, about ``limit`` bytes, as cubic as the divisors allow.

    The largest extent is cut by its smallest prime factor until the inner
    chunk fits in ``limit`` (a prime extent drops to 1). Returns ``chunk``
    itself when it fits already.
    """
    inner = list(chunk)
    while math.prod(inner) * itemsize > limit:
        m = max(range(len(inner)), key=lambda k: inner[k])
        if inner[m] <= 1:
            break
        inner[m] //= _smallest_factor(inner[m])
    return tuple(inner)


def _codecs(inner: tuple[int, ...], chunk: tuple[int, ...]) -> list[dict[str, Any]]:
    plain: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": "little"}}, {"name": "crc32c"}]
    if inner == chunk:
        return plain
    return [{
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(inner),
            "codecs": plain,
            "index_codecs": plain,
            "index_location": "end",
        },
    }]


def _fill_value(storage: str) -> Any:
    if storage == "bool":
        return False
    if storage.startswith("complex"):
        return [0.0, 0.0]
    if storage.startswith("float"):
        return 0.0
    return 0


def layout_record(layout: Layout, frameworks: list[str | None]) -> dict[str, Any]:
    """The saved layout as JSON values (the ``dlmg.layout`` attribute).

    Fields: ``shape``, ``block``, ``grid``, ``replicas``, ``devices`` (strings,
    column-major over the grid, then replica), ``ranks`` (the process of each
    fragment) and ``frameworks`` (each fragment's framework). Memory strides
    are not recorded: they say nothing about the elements.
    """
    return {
        "shape": list(layout.shape),
        "block": list(layout.block),
        "grid": list(layout.grid),
        "replicas": layout.nreplicas,
        "devices": [str(d) for d in layout.devices],
        "ranks": list(layout.ranks),
        "frameworks": list(frameworks),
    }


def layout_from_record(record: Mapping[str, Any], where: str) -> Layout:
    """The :class:`~dlmg.Layout` of a ``dlmg.layout`` attribute."""
    try:
        return Layout(
            tuple(record["shape"]), block=tuple(record["block"]), grid=tuple(record["grid"]),
            devices=[Device.parse(d) for d in record["devices"]],
            ranks=tuple(record["ranks"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CheckpointError(f"{where}: the attribute dlmg.layout = {dict(record)!r} is no layout ({exc})") from None


def array_record(layout: Layout, dtype: str, frameworks: list[str | None]) -> dict[str, Any]:
    """The ``dlmg`` attribute of one saved tensor."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "dtype": dtype,
        "layout": layout_record(layout, frameworks),
        "chunks": "one chunk per block of layout; the fragment of grid coordinates "
                  "(chunk index mod grid), replica 0, wrote it",
    }


def array_metadata(layout: Layout, dtype: str, frameworks: list[str | None]) -> dict[str, Any]:
    """The Zarr v3 array metadata (``zarr.json`` without ``zarr_format``/``node_type``) of a tensor."""
    storage = storage_dtype(dtype)
    chunk = chunk_shape(layout)
    inner = inner_chunk_shape(chunk, info(dtype).itemsize)
    return {
        "shape": list(layout.shape),
        "data_type": storage,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk)}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": _fill_value(storage),
        "codecs": _codecs(inner, chunk),
        "attributes": {"dlmg": array_record(layout, dtype, frameworks)},
    }


def check_array_record(attributes: Mapping[str, Any], data_type: str, shape: tuple[int, ...],
                       where: str) -> tuple[str, Layout]:
    """``(dtype, saved layout)`` of a saved array's attributes, checked against its metadata.

    Raises
    ------
    CheckpointError
        When the attributes are no dlmg record, of a newer version, or disagree with
        the array's own ``data_type`` or ``shape``.
    """
    record = attributes.get("dlmg")
    if not isinstance(record, Mapping) or record.get("format") != FORMAT:
        raise CheckpointError(
            f"{where} is a Zarr array but no tensor saved by dlmg (attribute dlmg.format is "
            f"{None if not isinstance(record, Mapping) else record.get('format')!r}, expected {FORMAT!r}); "
            f"read it with zarr or tensorstore"
        )
    version = record.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise CheckpointError(f"{where}: dlmg.version = {version!r}; this dlmg reads versions up to {VERSION}")
    try:
        dtype = canonical(record.get("dtype"))
    except (TypeError, ValueError):
        raise CheckpointError(f"{where}: dlmg.dtype = {record.get('dtype')!r} is no element type dlmg knows") from None
    if storage_dtype(dtype) != data_type:
        raise CheckpointError(
            f"{where}: dlmg.dtype = {dtype!r} is stored as {storage_dtype(dtype)!r}, "
            f"but the array's data_type is {data_type!r}"
        )
    layout = layout_from_record(record.get("layout") or {}, where)
    if layout.shape != tuple(shape):
        raise CheckpointError(f"{where}: dlmg.layout.shape = {layout.shape} but the array's shape is {tuple(shape)}")
    return dtype, layout
