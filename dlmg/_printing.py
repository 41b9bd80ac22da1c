"""Printing a distributed tensor: its values, as NumPy prints them, beside its layout.

Large tensors are summarised as NumPy does (``np.get_printoptions()``:
``threshold`` elements, ``edgeitems`` per edge, ``...`` between), and only the
elements shown are read: each fragment hands over the few it owns, taken in its
own framework on its own device, then copied to the host. A tensor holding a
pending reduction shows its value (:func:`~dlmg.ops._pending.guard` resolves it
first, on every process alike).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .construct import from_fragments
from .layout import Layout
from .ops._pending import guard
from .registry import DEFAULT_FRAMEWORK
from .fragment import process_rank

if TYPE_CHECKING:  # pragma: no cover
    from .tensor import DistributedTensor

__all__ = ["format_repr", "format_str", "format_spec", "summary", "shown_values"]


def summary(dt: "DistributedTensor") -> str:
    """The layout in one line: shape, dtype, grid, replicas, devices, frameworks."""
    lay = dt.layout
    parts = [f"shape={dt.shape}", f"dtype={dt.dtype}"]
    if any(g > 1 for g in lay.grid):
        parts.append(f"block={lay.block}, grid={lay.grid}")
    if lay.nreplicas > 1:
        parts.append(f"replicas={lay.nreplicas}")
    if lay.partial is not None:  # the values shown are the resolved ones
        parts.append(f"pending {lay.partial} of the replicas (shown resolved)")
    if len(set(lay.ranks)) > 1:  # name the process of each device: cpu:0 of rank 0 and of rank 1 differ
        places = tuple(dict.fromkeys(f"rank {r} {d}" for d, r in zip(lay.devices, lay.ranks)))
    else:
        places = tuple(dict.fromkeys(str(d) for d in lay.devices))
    parts.append(f"fragments={lay.nfragments} on {', '.join(places)}")
    parts.append(f"frameworks={', '.join(dt.frameworks) or '-'}")
    if lay.element_strides is not None:
        parts.append(f"element_strides={lay.element_strides}, block_strides={lay.block_strides}")
    return "; ".join(parts)


def _shown_indices(n: int, edge: int, summarise: bool) -> list[int]:
    if summarise and n > 2 * edge:
        return list(range(edge)) + list(range(n - edge, n))
    return list(range(n))


def _to_host(array: Any, adapter: Any, xp: Any) -> Any:
    """A few elements of one fragment as a NumPy array (copied from a device if need be)."""
    import numpy as np

    device = adapter.device_of(array)
    if not device.is_host:  # a few device elements: through dlmg's own gather, which lands on the host
        one = from_fragments([array], Layout.single(tuple(array.shape), device, ranks=process_rank()))
        return one.gather(framework=DEFAULT_FRAMEWORK)  # the host framework, which values print from
    try:
        return np.from_dlpack(_Exported(array, adapter))
    except (TypeError, BufferError, RuntimeError, ValueError):
        # NumPy lacks some small floats (bfloat16 without ml_dtypes' help): show them in float32.
        target = xp.complex64 if "complex" in str(array.dtype) else xp.float32
        return np.from_dlpack(_Exported(xp.astype(array, target), adapter))


class _Exported:
    """An array handed to NumPy through its adapter's export, which knows the framework's
    conditions (torch exports a tensor that requires grad only through ``detach()``)."""

    def __init__(self, array: Any, adapter: Any) -> None:
        self.array, self.adapter = array, adapter

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.adapter.export(self.array, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.adapter.dlpack_device(self.array)


def shown_values(dt: "DistributedTensor") -> tuple[Any, list[bool]]:
    """The elements ``print`` shows, as a NumPy array, and which modes are cut.

    Returns the array of the shown elements (every element when the tensor is
    small) and, per mode, whether ``...`` goes in its middle. Elements no local
    fragment holds stay ``None`` in an object array.
    """
    import numpy as np

    opts = np.get_printoptions()
    summarise = dt.size > opts["threshold"]
    edge = int(opts["edgeitems"])
    picks = [_shown_indices(n, edge, summarise) for n in dt.shape]
    cut = [len(p) < n for p, n in zip(picks, dt.shape)]
    parts: list[tuple[tuple[Any, ...], Any]] = []
    done = np.zeros([len(p) for p in picks], dtype=bool)
    for frag in sorted(dt.local_fragments, key=lambda f: f.replica):
        if frag.size == 0:
            continue
        where, local = [], []
        for m, pick in enumerate(picks):
            owned = np.asarray(frag.layout.owned_indices(m))
            pos = np.searchsorted(owned, pick)
            hit = (pos < len(owned)) & (owned[np.minimum(pos, len(owned) - 1)] == pick)
            where.append(np.nonzero(hit)[0])
            local.append(pos[hit])
        if any(len(w) == 0 for w in where) or done[np.ix_(*where)].all():
            continue
        values = _fragment_values(dt, frag, local)
        parts.append((np.ix_(*where), values))
        done[np.ix_(*where)] = True
    try:
        dtype = np.dtype(dt.dtype)
    except TypeError:
        dtype = np.dtype(object)
    out = np.empty(done.shape, dtype=dtype if done.all() else object)
    for key, values in parts:
        out[key] = values
    return out, cut


def _fragment_values(dt: "DistributedTensor", frag: Any, local: list[Any]) -> Any:
    import numpy as np

    if frag.array is None:  # padded memory: read element by element
        out = np.empty([len(ix) for ix in local], dtype=object)
        for pos in np.ndindex(*out.shape):
            out[pos] = dt[dt.layout.local_to_global(frag.index, tuple(int(local[m][p]) for m, p in enumerate(pos)))]
        return out
    adapter = frag.adapter
    xp = adapter.namespace()
    sub = frag.array
    for m, ix in enumerate(local):
        if len(ix) != sub.shape[m]:
            sub = xp.take(sub, xp.asarray(ix.astype(np.int64), device=xp_device(xp, sub)), axis=m)
    return _to_host(sub, adapter, xp)


def xp_device(xp: Any, array: Any) -> Any:
    """The array API ``device`` of ``array`` (for arrays made next to it)."""
    import array_api_compat

    return array_api_compat.device(array)


def _element_strings(values: Any) -> list[str]:
    """Every element formatted as NumPy would, padded to one width."""
    import sys

    import numpy as np

    flat = values.ravel()
    if flat.dtype == object:
        known = np.array([v for v in flat if v is not None])
        texts = _element_strings(known) if known.size else []
        width = max((len(t) for t in texts), default=1)
        it = iter(texts)
        return [next(it) if v is not None else "?".rjust(width) for v in flat]
    text = np.array2string(flat, separator="\x00", threshold=sys.maxsize, max_line_width=sys.maxsize)
    return text[1:-1].split("\x00") if flat.size else []


def _nest(strings: list[str], shape: tuple[int, ...], cut: list[bool], indent: int, width: int) -> str:
    """Brackets, commas and ``...`` around the element strings, NumPy's way."""
    if not shape:
        return strings[0]
    n = shape[0]
    half = n // 2
    step = len(strings) // n if n else 0
    rows = [_nest(strings[i * step:(i + 1) * step], shape[1:], cut[1:], indent + 1, width) for i in range(n)]
    if cut[0]:
        rows.insert(half, "...")
    if len(shape) == 1:
        lines, line = [], "["
        for k, r in enumerate(rows):
            piece = r + ("," if k < len(rows) - 1 else "]")
            if len(line) + len(piece) + 1 > width and line.strip("["):
                lines.append(line.rstrip())
                line = " " * (indent + 1)
            line += piece + " "
        lines.append(line.rstrip())
        return "\n".join(lines)
    sep = ",\n" + "\n" * (len(shape) - 2) + " " * (indent + 1)
    return "[" + sep.join(rows) + "]"


def format_values(dt: "DistributedTensor", indent: int = 0) -> str:
    """The tensor's values as NumPy prints an array of them (summarised when large)."""
    import numpy as np

    values, cut = shown_values(dt)
    strings = _element_strings(values)
    width = int(np.get_printoptions()["linewidth"])
    return _nest(strings, values.shape, cut, indent, width)


def format_repr(dt: "DistributedTensor") -> str:
    """``DistributedTensor(<values>, <layout summary>)``."""
    head = "DistributedTensor("
    try:
        body = format_values(guard(dt, "repr()"), indent=len(head))
    except Exception as exc:  # noqa: BLE001 - printing must not fail; say why no values show
        body = f"<values not shown: {type(exc).__name__}: {exc}>"
    return f"{head}{body},\n{' ' * len(head)}{summary(dt)})"


def format_str(dt: "DistributedTensor") -> str:
    """The values only, as ``str`` of a NumPy array, then the layout summary."""
    try:
        body = format_values(guard(dt, "str()"))
    except Exception as exc:  # noqa: BLE001
        body = f"<values not shown: {type(exc).__name__}: {exc}>"
    return f"{body}\n({summary(dt)})"


def format_spec(dt: "DistributedTensor", spec: str) -> str:
    """``format(x, spec)``: ``str(x)`` for an empty ``spec``; the one element formatted by
    ``spec`` for a 0-d tensor, as NumPy's 0-d arrays do; others refuse a ``spec``."""
    if not spec:
        return format_str(dt)
    if dt.ndim == 0:
        return format(dt.item(), spec)
    raise TypeError(f"unsupported format string {spec!r} passed to a DistributedTensor of shape {dt.shape}; "
                    "only 0-d tensors take one (format x.item())")

