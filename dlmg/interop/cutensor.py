"""cuTENSORMg and cuTENSORMp tensor descriptors of a :class:`~dlmg.Layout`.

dlmg's layout model is cuTENSORMg's, so a layout maps field by field onto the
arguments of ``cutensorMgCreateTensorDescriptor`` (one process, several
devices) and ``cutensorMpCreateTensorDescriptor`` (several processes, one
device each):

========================  ==============================  ========================
dlmg                      cuTENSORMg                      cuTENSORMp
========================  ==============================  ========================
``len(shape)``            ``numModes``                    ``numModes``
``shape``                 ``extent`` (int64)              ``extent`` (int64)
element strides           ``elementStride`` (int64)       ``elementStride`` (int64)
``block``                 ``blockSize`` (int64)           ``blockSize`` (int64)
block strides             ``blockStride`` (int64)         ``blockStride`` (int64)
``grid``                  ``deviceCount`` (int32)         ``nranksPerMode`` (int64)
``len(devices)``          ``numDevices``                  ``nranks``
``devices``               ``devices`` (int32)             --
fragment ranks            --                              ``ranks`` (int32)
========================  ==============================  ========================

Modes keep their order (mode 0 is cuTENSOR's first mode). ``devices`` and
``ranks`` list fragments in dlmg's fragment order, which is the column-major
order of the device grid that the descriptor's ``devices`` parameter
documents (mode 0 varies fastest, the replica index last). The worked 9x9
example of the cuTENSORMg documentation numbers its devices row-major;
dlmg follows the parameter's description.

Strides are always given explicitly. Fragments of a dense dlmg layout are
C-contiguous arrays of their own local shape; cuTENSORMg takes one stride per
mode for every device, so a dense layout is expressible when all its
fragments share their strides (always when the blocks divide the extents
evenly). Otherwise :func:`cutensormg` says which layout with explicit strides
describes the same blocks in memory that cuTENSORMg can address.

Nothing here imports a framework or cuTENSOR; the arrays are NumPy arrays of
the C types, ready for ``ctypes`` (``arr.ctypes.data``) or any binding.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._shapes import c_strides
from ..device import Device
from ..errors import LayoutError
from ..layout import Layout

__all__ = [
    "CUTENSOR_MG_DEVICE_HOST",
    "CUTENSOR_MG_DEVICE_HOST_PINNED",
    "CutensorMgArgs",
    "CutensorMpArgs",
    "cutensormg",
    "cutensormp",
    "layout_from_cutensormg",
]

#: ``cutensorMgHostDevice_t``: blocks in ordinary host memory.
CUTENSOR_MG_DEVICE_HOST = -1
#: ``cutensorMgHostDevice_t``: blocks in pinned host memory.
CUTENSOR_MG_DEVICE_HOST_PINNED = -2

_HOST_CODES = {"cpu": CUTENSOR_MG_DEVICE_HOST, "cuda_host": CUTENSOR_MG_DEVICE_HOST_PINNED}
_CODE_HOSTS = {code: kind for kind, code in _HOST_CODES.items()}


class CutensorMgArgs(NamedTuple):
    """The layout arguments of ``cutensorMgCreateTensorDescriptor``, in its order.

    ``handle``, ``desc`` and the data type are the caller's; everything else
    is here, so ``cutensorMgCreateTensorDescriptor(handle, &desc, *args, type)``
    with the arrays passed as pointers.
    """

    num_modes: int
    extent: Any  # np.ndarray[int64]
    element_stride: Any  # np.ndarray[int64]
    block_size: Any  # np.ndarray[int64]
    block_stride: Any  # np.ndarray[int64]
    device_count: Any  # np.ndarray[int32]
    num_devices: int
    devices: Any  # np.ndarray[int32]


class CutensorMpArgs(NamedTuple):
    """The layout arguments of ``cutensorMpCreateTensorDescriptor``, in its order."""

    num_modes: int
    extent: Any  # np.ndarray[int64]
    element_stride: Any  # np.ndarray[int64]
    block_size: Any  # np.ndarray[int64]
    block_stride: Any  # np.ndarray[int64]
    nranks_per_mode: Any  # np.ndarray[int64]
    nranks: int
    ranks: Any  # np.ndarray[int32]


# -- strides ---------------------------------------------------------------------------
def _dense_common_strides(layout: Layout) -> tuple[int, ...] | None:
    """One element stride per mode valid for every dense fragment, or ``None``.

    Fragment 0 holds the most elements along every mode; its C strides are the
    candidate. A fragment agrees when its own C strides match along every mode
    where it holds more than one element (or when it holds nothing).
    """
    es = c_strides(layout.fragments[0].shape)
    for frag in layout.fragments[1:]:
        if frag.size == 0:
            continue
        own = c_strides(frag.shape)
        if any(n > 1 and s != e for n, s, e in zip(frag.shape, own, es)):
            return None
    return es


def _strides(layout: Layout, what: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if layout.element_strides is not None:
        assert layout.block_strides is not None
        return layout.element_strides, layout.block_strides
    es = _dense_common_strides(layout)
    if es is None:
        es = c_strides(layout.fragments[0].shape)
        odd = next(
            f for f in layout.fragments
            if f.size and any(n > 1 and s != e for n, s, e in zip(f.shape, c_strides(f.shape), es))
        )
        raise LayoutError(
            f"{what} takes one elementStride per mode for every fragment, but the dense fragments "
            f"of {layout!r} differ: fragment 0 of local shape {layout.fragments[0].shape} has strides "
            f"{es}, fragment {odd.index} of local shape {odd.shape} has {c_strides(odd.shape)}. "
            f"Use layout.replace(element_strides={es}) (every fragment laid out like the largest) "
            f"and tensor.redistribute() to it, or blocks that divide the extents evenly"
        )
    return es, tuple(b * s for b, s in zip(layout.block, es))


def _int64(values: Sequence[int], name: str) -> Any:
    return _fixed_width(values, name, "int64")


def _int32(values: Sequence[int], name: str) -> Any:
    return _fixed_width(values, name, "int32")


def _fixed_width(values: Sequence[int], name: str, dtype: str) -> Any:
    """``values`` as a NumPy array of ``dtype``; a value the type cannot hold is a
    :class:`LayoutError` naming the field, not NumPy's ``OverflowError``."""
    import numpy as np

    limits = np.iinfo(dtype)
    for i, v in enumerate(values):
        if not limits.min <= int(v) <= limits.max:
            raise LayoutError(f"{name}[{i}] = {int(v)} does not fit the descriptor's {dtype} "
                              f"(range {limits.min}..{limits.max})")
    return np.asarray(values, dtype=dtype).reshape(len(values))


def _check_extents(layout: Layout, what: str) -> None:
    for m, n in enumerate(layout.shape):
        if n == 0:
            raise LayoutError(
                f"{what} needs positive extents; shape[{m}] = 0 in {layout!r} (an empty tensor has no descriptor)"
            )


# -- cuTENSORMg --------------------------------------------------------------------------
def _device_code(device: Device, position: int) -> int:
    if device.kind == "cuda":
        return device.index
    if device.kind in _HOST_CODES:
        return _HOST_CODES[device.kind]
    raise LayoutError(
        f"devices[{position}] = {device} has no cuTENSORMg code: cuTENSORMg places blocks on CUDA "
        f"devices (their ordinals) or on the host (CUTENSOR_MG_DEVICE_HOST = {CUTENSOR_MG_DEVICE_HOST}, "
        f"pinned: CUTENSOR_MG_DEVICE_HOST_PINNED = {CUTENSOR_MG_DEVICE_HOST_PINNED})"
    )


def _mode_args(layout: Layout, what: str) -> dict[str, Any]:
    """The per-mode arguments both descriptors take: modes, extents, strides, block sizes."""
    _check_extents(layout, what)
    es, bs = _strides(layout, what)
    return {
        "num_modes": layout.ndim,
        "extent": _int64(layout.shape, "extent"),
        "element_stride": _int64(es, "element_stride"),
        "block_size": _int64(layout.block, "block_size"),
        "block_stride": _int64(bs, "block_stride"),
    }


def cutensormg(layout: Layout) -> CutensorMgArgs:
    """The arguments of ``cutensorMgCreateTensorDescriptor`` describing ``layout``.

    Also available as ``layout.cutensormg()``.

    Parameters
    ----------
    layout : Layout
        Fully on CUDA devices or fully on the host, every extent positive.

    Returns
    -------
    CutensorMgArgs
        ``num_modes``; ``extent``, ``element_stride``, ``block_size``,
        ``block_stride`` (int64 arrays); ``device_count`` (int32);
        ``num_devices``; ``devices`` (int32: CUDA ordinals, or
        :data:`CUTENSOR_MG_DEVICE_HOST` / :data:`CUTENSOR_MG_DEVICE_HOST_PINNED`
        for ``cpu`` / ``cuda_host`` slots), in dlmg's fragment order
        (column-major over the grid, then replicas).

    Raises
    ------
    LayoutError
        For a zero extent, a device kind cuTENSORMg does not know, or a
        dense layout whose fragments have different strides (the message
        gives the layout with explicit strides to use instead).

    Examples
    --------
    >>> lay = Layout((9, 9), block=(4, 2), grid=(2, 2), devices=range(4),
    ...              element_strides=(1, 5))
    >>> args = cutensormg(lay)
    >>> args.block_stride.tolist(), args.devices.tolist()
    ([4, 10], [0, 1, 2, 3])
    """
    _check_layout(layout, "cutensormg")
    mode_args = _mode_args(layout, "cutensorMgCreateTensorDescriptor")  # checked before the devices
    codes = [_device_code(d, i) for i, d in enumerate(layout.devices)]
    return CutensorMgArgs(
        **mode_args,
        device_count=_int32(layout.grid, "device_count"),
        num_devices=layout.nfragments,
        devices=_int32(codes, "devices"),
    )


def _ints(name: str, values: Any, n: int | None, *, minimum: int | None) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)):
        raise LayoutError(f"{name} must be a sequence of ints, got {values!r}")
    try:
        items = list(values.tolist() if hasattr(values, "tolist") else values)
    except TypeError:
        raise LayoutError(f"{name} must be a sequence of ints, got {values!r}") from None
    if n is not None and len(items) != n:
        raise LayoutError(f"{name} has {len(items)} entries, expected {n}: {name}={items!r}")
    out = []
    for i, v in enumerate(items):
        if isinstance(v, bool):
            raise LayoutError(f"{name}[{i}] = {v!r} is a bool, not an int")
        try:
            v = operator.index(v)
        except TypeError:
            raise LayoutError(f"{name}[{i}] = {v!r} is not an int") from None
        if minimum is not None and v < minimum:
            raise LayoutError(f"{name}[{i}] = {v} must be at least {minimum}")
        out.append(v)
    return tuple(out)


def _f_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Column-major (cuTENSOR's packed) strides of ``shape``."""
    return tuple(reversed(c_strides(tuple(reversed(tuple(shape))))))


def layout_from_cutensormg(
    num_modes: int,
    extent: Sequence[int],
    element_stride: Sequence[int] | None,
    block_size: Sequence[int] | None,
    block_stride: Sequence[int] | None,
    device_count: Sequence[int] | None,
    num_devices: int,
    devices: Sequence[int],
) -> Layout:
    """The :class:`~dlmg.Layout` that a cuTENSORMg tensor descriptor describes.

    Also available as ``Layout.from_cutensormg(...)``. Takes the arguments of
    ``cutensorMgCreateTensorDescriptor`` in its order (so
    ``Layout.from_cutensormg(*layout.cutensormg())`` works); ``None`` stands
    for a ``NULL`` pointer.

    Parameters
    ----------
    num_modes : int
    extent : sequence of int
    element_stride, block_stride : sequence of int or None
        ``None`` for both is cuTENSOR's packed column-major layout, sized for
        the largest fragment; ``None`` block strides alone is the dense
        block-interleaved layout (``block_size * element_stride``); ``None``
        element strides alone packs every block column-major.
    block_size : sequence of int or None
        ``None`` is one block per mode.
    device_count : sequence of int or None
        ``None`` is 1 per mode (no distribution).
    num_devices : int
        ``len(devices)``; a multiple of ``prod(device_count)`` (replicas).
    devices : sequence of int
        CUDA ordinals, or :data:`CUTENSOR_MG_DEVICE_HOST` (``cpu``) /
        :data:`CUTENSOR_MG_DEVICE_HOST_PINNED` (``cuda_host``) for every entry.

    Returns
    -------
    Layout
        A dense layout (no explicit strides) when the strides are exactly
        those :func:`cutensormg` gives for the dense layout; a layout with
        explicit strides otherwise.

    Raises
    ------
    LayoutError
        For inconsistent counts, unknown device codes, or anything
        :class:`~dlmg.Layout` refuses (the message names the field).
    """
    n = _ints("num_modes", [num_modes], 1, minimum=0)[0]
    shape = _ints("extent", extent, n, minimum=1)
    block = None if block_size is None else _ints("blockSize", block_size, n, minimum=1)
    grid = None if device_count is None else _ints("deviceCount", device_count, n, minimum=1)
    codes = _ints("devices", devices, None, minimum=None)
    count = _ints("numDevices", [num_devices], 1, minimum=1)[0]
    if count != len(codes):
        raise LayoutError(f"numDevices = {count} but devices has {len(codes)} entries: devices={list(codes)}")
    devs = []
    for i, code in enumerate(codes):
        if code >= 0:
            devs.append(Device("cuda", code))
        elif code in _CODE_HOSTS:
            devs.append(Device(_CODE_HOSTS[code], 0))
        else:
            raise LayoutError(
                f"devices[{i}] = {code} is neither a CUDA ordinal nor a cutensorMgHostDevice_t code "
                f"({CUTENSOR_MG_DEVICE_HOST}, {CUTENSOR_MG_DEVICE_HOST_PINNED})"
            )
    dense = Layout(shape, block=block, grid=grid, devices=devs)
    es = None if element_stride is None else _ints("elementStride", element_stride, n, minimum=1)
    bs = None if block_stride is None else _ints("blockStride", block_stride, n, minimum=1)
    if es is None:
        es = _f_strides(dense.fragments[0].shape) if bs is None else _f_strides(dense.block)
    if bs is None:
        bs = tuple(b * s for b, s in zip(dense.block, es))
    common = _dense_common_strides(dense)
    if common is not None and es == common and bs == tuple(b * s for b, s in zip(dense.block, common)):
        return dense
    return dense.replace(element_strides=es, block_strides=bs)


# -- cuTENSORMp --------------------------------------------------------------------------
def cutensormp(layout: Layout, ranks: Sequence[int] | None = None) -> CutensorMpArgs:
    """The arguments of ``cutensorMpCreateTensorDescriptor`` describing ``layout``.

    Also available as ``layout.cutensormp()``. cuTENSORMp runs one process per
    device, so every fragment must belong to a different process.

    Parameters
    ----------
    layout : Layout
    ranks : sequence of int, optional
        The process of each fragment, in fragment order; by default the
        layout's own ``ranks``.

    Returns
    -------
    CutensorMpArgs
        ``num_modes``; ``extent``, ``element_stride``, ``block_size``,
        ``block_stride``, ``nranks_per_mode`` (int64 arrays); ``nranks``;
        ``ranks`` (int32, column-major over the process grid, then replicas).

    Raises
    ------
    LayoutError
        For a zero extent, a dense layout whose fragments have different
        strides, a wrong number of ranks, or two fragments of one process.
    """
    _check_layout(layout, "cutensormp")
    mode_args = _mode_args(layout, "cutensorMpCreateTensorDescriptor")
    if ranks is None:
        ranks_t = tuple(layout.ranks)
    else:
        ranks_t = _ints("ranks", ranks, layout.nfragments, minimum=0)
    seen: dict[int, int] = {}
    for f, r in enumerate(ranks_t):
        if r in seen:
            raise LayoutError(
                f"cuTENSORMp gives every process one piece, but fragments {seen[r]} and {f} of "
                f"{layout!r} both belong to rank {r} (ranks={list(ranks_t)}); pass ranks=, one "
                f"distinct process per fragment"
            )
        seen[r] = f
    return CutensorMpArgs(
        **mode_args,
        nranks_per_mode=_int64(layout.grid, "nranks_per_mode"),
        nranks=layout.nfragments,
        ranks=_int32(ranks_t, "ranks"),
    )


# -- wiring ------------------------------------------------------------------------------
def _check_layout(layout: Any, what: str) -> None:
    if not isinstance(layout, Layout):
        raise TypeError(f"{what} needs a dlmg.Layout, got {type(layout).__name__}")


def _from_cutensormg(cls: type, *args: Any, **kwargs: Any) -> Layout:
    return layout_from_cutensormg(*args, **kwargs)


_from_cutensormg.__doc__ = layout_from_cutensormg.__doc__


def _install() -> None:
    """``Layout.cutensormg()``, ``Layout.cutensormp()`` and ``Layout.from_cutensormg(...)``."""
    if not hasattr(Layout, "cutensormg"):
        Layout.cutensormg = cutensormg  # type: ignore[attr-defined]
        Layout.cutensormp = cutensormp  # type: ignore[attr-defined]
        Layout.from_cutensormg = classmethod(_from_cutensormg)  # type: ignore[attr-defined]


_install()
