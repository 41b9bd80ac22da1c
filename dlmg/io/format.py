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
    "check_array_record", "check_array_metadata", "check_key", "RESERVED_NAMES",
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

#: Names of files dlmg writes into a checkpoint directory; no key of a dict of tensors may take one.
RESERVED_NAMES = frozenset({"zarr.json", COMMIT_MARKER, COMMIT_MARKER + ".tmp"})
#: The longest file name (in bytes) the common file systems take.
_NAME_MAX = 255

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
    except Exception as exc:  # any value of a damaged record: the message names it
        raise CheckpointError(f"{where}: the attribute dlmg.layout = {record!r} is no layout ({exc})") from None


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
    except (TypeError, ValueError, LookupError):
        raise CheckpointError(f"{where}: dlmg.dtype = {record.get('dtype')!r} is no element type dlmg knows") from None
    try:
        stored = storage_dtype(dtype)
    except UnsupportedDtypeError as exc:
        raise CheckpointError(f"{where}: dlmg.dtype = {dtype!r} cannot be stored ({exc})") from None
    if stored != data_type:
        raise CheckpointError(
            f"{where}: dlmg.dtype = {dtype!r} is stored as {storage_dtype(dtype)!r}, "
            f"but the array's data_type is {data_type!r}"
        )
    saved = record.get("layout")
    layout = layout_from_record(saved if isinstance(saved, Mapping) else {}, where)
    if layout.shape != tuple(shape):
        raise CheckpointError(f"{where}: dlmg.layout.shape = {layout.shape} but the array's shape is {tuple(shape)}")
    return dtype, layout


def check_key(name: Any, where: str) -> str:
    """``name`` where it can name an array of a saved dict: a directory of its own.

    A non-empty string, not only periods, not starting with ``__`` (Zarr v3's
    rules for node names), without ``/`` or NUL, at most 255 bytes in UTF-8,
    and none of the files dlmg writes beside the arrays (:data:`RESERVED_NAMES`).

    Raises
    ------
    CheckpointError
        Naming the key and the rule it breaks.
    """
    if not isinstance(name, str):
        raise CheckpointError(f"{where}: key {name!r} is a {type(name).__name__}; keys are strings")
    problem = None
    if not name or set(name) == {"."}:
        problem = "a name of only periods (or none) is no Zarr node name"
    elif "/" in name or "\0" in name:
        problem = "a key may not hold '/' or NUL"
    elif name.startswith("__"):
        problem = "Zarr reserves names starting with '__'"
    elif name in RESERVED_NAMES:
        problem = f"dlmg writes a file of that name beside the arrays ({', '.join(sorted(RESERVED_NAMES))})"
    else:
        try:
            size = len(name.encode("utf-8"))
        except UnicodeEncodeError:
            problem = "it is no valid Unicode (a lone surrogate)"
        else:
            if size > _NAME_MAX:
                problem = f"it takes {size} bytes in UTF-8; file names hold at most {_NAME_MAX}"
    if problem is not None:
        shown = name if len(name) <= 40 else name[:37] + "..."
        raise CheckpointError(f"{where}: key {shown!r} cannot name a saved array: {problem}")
    return name


def _with_defaults(codecs: Any) -> Any:
    """Codecs as read from ``zarr.json`` with the defaults TensorStore leaves out written
    in (the endianness of one-byte elements, the shard index at the end)."""
    if not isinstance(codecs, list):
        return codecs
    out = []
    for codec in codecs:
        if isinstance(codec, Mapping) and codec.get("name") == "bytes" and "configuration" not in codec:
            codec = dict(codec, configuration={"endian": "little"})
        elif isinstance(codec, Mapping) and codec.get("name") == "sharding_indexed" and isinstance(
                codec.get("configuration"), Mapping):
            config = dict(codec["configuration"])
            config.setdefault("index_location", "end")
            for key in ("codecs", "index_codecs"):
                config[key] = _with_defaults(config.get(key))
            codec = dict(codec, configuration=config)
        out.append(codec)
    return out


def _json_ints(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


def check_array_metadata(meta: Mapping[str, Any], where: str) -> tuple[str, Layout]:
    """``(dtype, saved layout)`` of a saved array's ``zarr.json``, every field dlmg reads checked.

    The metadata must be what :func:`array_metadata` writes for the recorded
    layout and element type (shape, data type, chunk grid, chunk keys, fill
    value, codecs), so that a damaged file is refused here, naming the field,
    rather than misread.

    Raises
    ------
    CheckpointError
        Naming the field, its value and what dlmg expected.
    """
    if meta.get("node_type") != "array":
        raise CheckpointError(f"{where} is a Zarr {meta.get('node_type')!r}, not an array")
    shape = meta.get("shape")
    if not isinstance(shape, list) or not _json_ints(shape):
        raise CheckpointError(f"{where}: shape = {shape!r} is no list of extents")
    attributes = meta.get("attributes")
    if not isinstance(attributes, Mapping):
        attributes = {}
    dtype, layout = check_array_record(attributes, str(meta.get("data_type")), tuple(shape), where)
    chunk = chunk_shape(layout)
    expected = {
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(chunk)}},
        "fill_value": _fill_value(storage_dtype(dtype)),
        "codecs": _codecs(inner_chunk_shape(chunk, info(dtype).itemsize), chunk),
    }
    for field, want in expected.items():
        found = _with_defaults(meta.get(field)) if field == "codecs" else meta.get(field)
        if found != want:
            raise CheckpointError(
                f"{where}: {field} = {meta.get(field)!r}, but a tensor saved by dlmg from the recorded layout "
                f"has {want!r}; the metadata is damaged"
            )
    keys = meta.get("chunk_key_encoding")
    name = keys.get("name") if isinstance(keys, Mapping) else None
    config = keys.get("configuration", {}) if isinstance(keys, Mapping) else None
    if not isinstance(config, Mapping) or name != "default" or config.get("separator", "/") != "/":
        raise CheckpointError(f"{where}: chunk_key_encoding = {keys!r}, expected the default one (separator '/')")
    return dtype, layout
