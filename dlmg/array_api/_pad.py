"""``pad``: NumPy's padding, which array libraries call beyond the standard (xarray's
``rolling`` and ``pad``).

Padding a mode that each fragment holds whole is local: every fragment pads its own
array, in its framework, on its device. A padded mode that is split is first made whole
by a redistribution onto slabs along another mode over the same devices (the transpose
step of a pencil decomposition: FFTW-MPI's and heFFTe's), then padded locally, one split
mode at a time; the result is redistributed back into slabs along the first split mode,
over the same devices. Nothing is collected onto one device: each move is an all-to-all
whose per-process share is that process's share of the tensor. A 1-D tensor split over
several fragments has no other mode to split and is refused with
:class:`NotImplementedError`, naming the explicit redistribution.
"""

from __future__ import annotations

import operator
from typing import Any

from ..layout import Layout
from ..ops._executor import executor
from ..ops._operands import is_distributed
from ..ops.dispatch import new_tensor

__all__ = ["pad"]

_MODES = ("constant", "edge", "reflect")


def _pairs(value: Any, ndim: int, what: str, kind: Any = operator.index) -> list[tuple[Any, Any]]:
    """NumPy's broadcasting of ``pad_width`` (or ``constant_values``) to one (before, after)
    pair per mode: a scalar, one pair, or one pair per mode."""
    if isinstance(value, dict):
        raise TypeError(f"pad: {what} must be a scalar or sequences of pairs, not a dict")
    if not isinstance(value, (list, tuple)) and getattr(value, "ndim", 0) == 0:
        v = kind(value)
        return [(v, v)] * ndim
    rows = [tuple(r) if isinstance(r, (list, tuple)) else (r,) for r in value]
    if not isinstance(value[0], (list, tuple)):  # one pair (or one value) for every mode
        rows = [tuple(value)]
    if len(rows) == 1:
        rows = rows * ndim
    if len(rows) != ndim:
        raise ValueError(f"pad: {what} has {len(rows)} entries for a tensor of {ndim} modes")
    out = []
    for r in rows:
        if len(r) == 1:
            r = (r[0], r[0])
        if len(r) != 2:
            raise ValueError(f"pad: each entry of {what} is (before, after), got {r!r}")
        out.append((kind(r[0]), kind(r[1])))
    return out


def _pad_array(xp: Any, a: Any, widths: list[tuple[int, int]], mode: str,
               values: list[tuple[Any, Any]]) -> Any:
    """``a`` padded along every mode of ``widths`` in its own framework (array API calls only)."""
    from array_api_compat import device as device_of  # (dlmg imports without array-api-compat)

    for m, (before, after) in enumerate(widths):
        if not before and not after:
            continue
        n = a.shape[m]
        parts = []
        for side, width in ((0, before), (1, after)):
            if not width:
                continue
            shape = tuple(width if k == m else s for k, s in enumerate(a.shape))
            if mode == "constant":
                piece = xp.full(shape, values[m][side], dtype=a.dtype, device=device_of(a))
            elif mode == "edge":
                edge = a[(slice(None),) * m + ((slice(0, 1) if side == 0 else slice(n - 1, n)),)]
                piece = xp.broadcast_to(edge, shape)
            else:  # reflect: the mirror image without the edge element
                key = slice(1, width + 1) if side == 0 else slice(n - 1 - width, n - 1)
                piece = xp.flip(a[(slice(None),) * m + (key,)], axis=m)
            parts.append((side, piece))
        ordered = [p for s, p in parts if s == 0] + [a] + [p for s, p in parts if s == 1]
        a = xp.concat(ordered, axis=m)
    return a


def pad(x: Any, /, pad_width: Any, mode: str = "constant", *, constant_values: Any = 0) -> Any:
    """``x`` padded as ``numpy.pad`` pads it (modes ``"constant"``, ``"edge"``, ``"reflect"``).

    Parameters
    ----------
    x : DistributedTensor
    pad_width : int or sequence
        ``(before, after)`` per mode, one pair for every mode, or one int.
    mode : str
        ``"constant"`` (``constant_values``), ``"edge"`` (the edge element repeated) or
        ``"reflect"`` (the mirror image without the edge element; widths up to the
        extent minus 1).
    constant_values : scalar or sequence
        The fill of ``"constant"``, as ``pad_width`` is given.

    Returns
    -------
    DistributedTensor
        On ``x``'s devices: ``x``'s layout where the padded modes were whole in every
        fragment, else slabs along ``x``'s first split mode (see the module).
    """
    if not is_distributed(x):
        raise TypeError(f"pad takes a DistributedTensor, got {type(x).__name__}")
    if mode not in _MODES:
        raise NotImplementedError(f"pad: mode={mode!r} is not supported; dlmg pads with {', '.join(_MODES)}")
    widths = _pairs(pad_width, x.ndim, "pad_width")
    if any(b < 0 or a < 0 for b, a in widths):
        raise ValueError(f"pad: pad_width must not be negative, got {pad_width!r}")
    values = _pairs(constant_values, x.ndim, "constant_values", kind=lambda v: v)
    padded = [m for m, (b, a) in enumerate(widths) if b or a]
    for m in padded:
        if mode == "edge" and x.shape[m] == 0:
            raise ValueError(f"pad: mode 'edge' of mode {m}, which has no element")
        if mode == "reflect" and max(widths[m]) > x.shape[m] - 1:
            raise ValueError(f"pad: mode 'reflect' pads mode {m} of extent {x.shape[m]} by at most "
                             f"{max(x.shape[m] - 1, 0)}, got {widths[m]}")
    if not padded:
        return x
    layout = x.layout.dense
    split = [m for m in padded if layout.grid[m] > 1]
    pairs = list(dict.fromkeys(zip(layout.devices, layout.ranks)))
    devices, ranks = [d for d, _ in pairs], [r for _, r in pairs]
    if split and x.ndim == 1:
        raise NotImplementedError(
            f"pad: the only mode of this tensor is split ({layout!r}) and a padded mode must be whole in "
            "every fragment; redistribute it first, e.g. x.redistribute(dlmg.Layout.single(x.shape, "
            "device)), then pad"
        )
    home = next((m for m in range(x.ndim) if layout.grid[m] > 1), None)
    whole = [m for m in padded if layout.grid[m] == 1]
    if whole:  # the modes every fragment holds whole: padded where they are
        x = _pad_local(x, [w if m in whole else (0, 0) for m, w in enumerate(widths)], mode, values)
    for m in split:  # one split mode at a time, made whole by a transpose onto another mode
        axis = max((k for k in range(x.ndim) if k != m), key=lambda k: x.shape[k])
        x = x.redistribute(Layout.slab(x.shape, axis, devices, ranks=ranks))
        x = _pad_local(x, [w if k == m else (0, 0) for k, w in enumerate(widths)], mode, values)
    if split:
        assert home is not None  # (a split mode exists)
        x = x.redistribute(Layout.slab(x.shape, home, devices, ranks=ranks))
    return x


def _pad_local(x: Any, widths: list[tuple[int, int]], mode: str, values: list[tuple[Any, Any]]) -> Any:
    """``x`` padded fragment by fragment along modes each fragment holds whole."""
    layout = x.layout.dense
    shape = tuple(n + b + a for n, (b, a) in zip(x.shape, widths))
    block = tuple(max(shape[m], 1) if any(widths[m]) else layout.block[m] for m in range(x.ndim))
    out_layout = Layout(shape, block=block, grid=layout.grid, devices=layout.devices, ranks=layout.ranks)
    arrays: list[Any] = []
    for frag in x.fragments:
        if not frag.is_local:
            arrays.append(None)
            continue
        ex = executor(frag.framework, frag.device)
        arrays.append(ex.run(_pad_array, frag.array, widths, mode, values))
    return new_tensor(arrays, out_layout, x.dtype)
