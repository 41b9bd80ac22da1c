"""Indexing keys read as NumPy reads them, before any framework sees one.

:func:`normalize` turns a key (``dt[key]``) into one entry per mode, checked
against the tensor's shape: integers within bounds, slices as ``range``
objects, ``None`` for new axes, and index arrays as NumPy ``int64`` arrays
within bounds (boolean arrays as the integer arrays of their ``nonzero()``,
a 0-d boolean as an index over a new axis of extent one, as NumPy does).
Frameworks answer out-of-bounds indices differently (JAX clamps them, torch
reads negative ones from the end, NumPy raises), so dlmg answers before them.

:func:`coordinates` gives, for a key with index arrays, the result's shape and
for every mode of the tensor the global index each result element reads there,
as small arrays broadcastable to the result (NumPy's rules for where the
broadcast index dimensions go); nothing of the result's size is made.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..device import Device
from ..ops._executor import executor, move_array
from ..ops._operands import is_distributed

__all__ = ["NewAxisIndex", "normalize", "coordinates", "is_advanced", "as_index_array"]


@dataclass(frozen=True)
class NewAxisIndex:
    """A 0-d boolean of the key: a new axis of extent one, indexed by ``array``
    (``[0]`` for true, ``[]`` for false)."""

    array: np.ndarray


def is_advanced(item: Any) -> bool:
    """Whether a normalized entry is an index array (host or distributed)."""
    return isinstance(item, (np.ndarray, NewAxisIndex)) or is_distributed(item)


def as_index_array(k: Any) -> np.ndarray:
    """A host index (a list, any framework's array) as a NumPy array, refused unless
    integer or boolean (NumPy's ``IndexError``)."""
    if isinstance(k, np.ndarray):
        a = k
    elif isinstance(k, (list, tuple)):
        try:
            a = np.asarray(k)
        except ValueError as exc:
            raise IndexError(f"index list {k!r} is not a regular array of integers: {exc}") from None
        if a.size == 0 and a.dtype.kind == "f":
            a = a.astype(np.int64)  # NumPy reads x[[]] as an empty integer index
    else:
        try:
            a = np.asarray(move_array(k, executor("numpy", Device("cpu", 0))) if hasattr(k, "__dlpack__") else k)
        except Exception as exc:
            raise IndexError(f"index array of type {type(k).__name__} cannot be read on the host ({exc}); "
                             "pass a NumPy array or a DistributedTensor") from None
    if a.dtype.kind not in "biu":
        raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got an array of "
                         f"dtype {a.dtype}")
    return a


def _checked(a: np.ndarray, n: int, mode: int) -> np.ndarray:
    a = a.astype(np.int64, copy=False)
    if a.size:
        lo, hi = int(a.min()), int(a.max())
        if lo < -n or hi >= n:
            bad = hi if hi >= n else lo
            raise IndexError(f"index {bad} is out of bounds for axis {mode} with size {n}")
        if lo < 0:
            a = np.where(a < 0, a + n, a)
    return a


def _slice(k: slice, n: int) -> range:
    parts = []
    for name in ("start", "stop", "step"):
        v = getattr(k, name)
        if v is None or isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
            parts.append(v)
            continue
        try:
            parts.append(operator.index(v))
        except TypeError:
            raise TypeError(f"slice indices must be integers or None, got {name}={v!r} "
                            f"({type(v).__name__})") from None
    if parts[2] == 0:
        raise ValueError("slice step cannot be zero")
    return range(*slice(*parts).indices(n))


def _is_bool_scalar(k: Any) -> bool:
    return isinstance(k, (bool, np.bool_)) or (isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype == bool)


def normalize(key: Any, shape: tuple[int, ...]) -> list[Any]:
    """One entry per mode of ``shape`` (plus ``None`` / :class:`NewAxisIndex` entries for
    new axes): ``int`` (non-negative), ``range``, ``None``, NumPy ``int64`` arrays
    (non-negative) and distributed index tensors, checked as NumPy checks them.

    Raises
    ------
    IndexError
        For out-of-bounds indices, too many indices, a second ``...``, a boolean
        array whose shape differs from the modes it covers, float index arrays and
        entries that are no index at all.
    TypeError
        For slices with non-integer entries.
    """
    items = list(key) if isinstance(key, tuple) else [key]
    staged: list[Any] = []
    for k in items:
        if k is None or k is Ellipsis or isinstance(k, slice) or is_distributed(k):
            staged.append(k)
        elif _is_bool_scalar(k):
            staged.append(NewAxisIndex(np.zeros(1 if bool(k) else 0, dtype=np.int64)))
        elif isinstance(k, (int, np.integer)):
            staged.append(int(k))
        elif isinstance(k, list) or hasattr(k, "shape") and hasattr(k, "dtype"):
            a = as_index_array(k)
            staged.append(a if a.ndim or a.dtype == bool else int(a))
        else:
            try:
                staged.append(operator.index(k))
            except TypeError:
                raise IndexError(
                    f"only integers, slices (`:`), ellipsis (`...`), None and integer or boolean arrays are "
                    f"valid indices; got {k!r} of type {type(k).__name__}") from None
    ellipses = sum(1 for k in staged if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    ndim = len(shape)
    used = sum(_modes_used(k) for k in staged)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {used} were indexed")
    if ellipses:
        at = next(i for i, k in enumerate(staged) if k is Ellipsis)
        staged[at:at + 1] = [slice(None)] * (ndim - used)
    else:
        staged += [slice(None)] * (ndim - used)
    out: list[Any] = []
    mode = 0
    for k in staged:
        if k is None or isinstance(k, NewAxisIndex):
            out.append(k)
            continue
        if is_distributed(k):
            if k.dtype == "bool":
                if tuple(k.shape) != tuple(shape[mode:mode + k.ndim]):
                    raise IndexError(f"boolean index of shape {k.shape} does not match the indexed modes "
                                     f"{tuple(shape[mode:mode + k.ndim])}")
                out.append(k)
                mode += k.ndim
                continue
            if k.dtype[0] not in "iu":
                raise IndexError(f"arrays used as indices must be of integer (or boolean) type, got a "
                                 f"DistributedTensor of dtype {k.dtype}")
            out.append(k)
            mode += 1
            continue
        n = shape[mode]
        if isinstance(k, slice):
            out.append(_slice(k, n))
            mode += 1
        elif isinstance(k, int):
            if not -n <= k < n:
                raise IndexError(f"index {k} is out of bounds for axis {mode} with size {n}")
            out.append(k % n)
            mode += 1
        elif k.dtype == bool:
            covered = shape[mode:mode + k.ndim]
            for j, (a, b) in enumerate(zip(k.shape, covered)):
                if a != b:
                    raise IndexError(f"boolean index did not match indexed array along axis {mode + j}; size "
                                     f"of axis is {b} but size of corresponding boolean axis is {a}")
            out.extend(np.asarray(c, dtype=np.int64) for c in np.nonzero(k))
            mode += k.ndim
        else:
            out.append(_checked(k, n, mode))
            mode += 1
    return out


def _modes_used(k: Any) -> int:
    if k is None or k is Ellipsis or isinstance(k, NewAxisIndex):
        return 0
    if isinstance(k, np.ndarray) and k.dtype == bool or is_distributed(k) and k.dtype == "bool":
        return k.ndim
    return 1


def coordinates(items: list[Any], shape: tuple[int, ...]) -> tuple[tuple[int, ...], list[np.ndarray]]:
    """The result shape of a normalized key of host entries and, per mode of ``shape``,
    the global indices read there as an array broadcastable to the result shape.

    Integers count as index arrays when the key has one (NumPy's rule); the broadcast
    dimensions of the index arrays go where the first one stands when they stand
    together, otherwise first.
    """
    advanced = [i for i, k in enumerate(items) if isinstance(k, (np.ndarray, NewAxisIndex))]
    if advanced:
        arrays = [k.array if isinstance(k, NewAxisIndex) else k for k in items
                  if isinstance(k, (np.ndarray, NewAxisIndex))]
        ints = [i for i, k in enumerate(items) if isinstance(k, int)]
        try:
            bshape = np.broadcast_shapes(*(a.shape for a in arrays))
        except ValueError:
            raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                             + " ".join(str(a.shape) for a in arrays)) from None
        joined = sorted(advanced + ints)
        together = joined == list(range(joined[0], joined[-1] + 1))
    else:
        bshape, joined, together = (), [], True
    nb = len(bshape)
    # the result's axes: one per None / range entry, the broadcast block placed once
    axes: list[Any] = []  # per entry: the result axis (int), the block's first axis, or None
    rshape: list[int] = []
    block_at = 0 if not together else None
    if advanced and not together:
        rshape.extend(bshape)
    for i, k in enumerate(items):
        if advanced and i in joined:
            if together and block_at is None:
                block_at = len(rshape)
                rshape.extend(bshape)
            axes.append(block_at)
        elif isinstance(k, range):
            axes.append(len(rshape))
            rshape.append(len(k))
        elif k is None:
            axes.append(None)
            rshape.append(1)
        else:  # an int with no index array: no axis
            axes.append(None)
    ndim = len(rshape)
    coords: list[np.ndarray] = []
    mode = 0
    for i, k in enumerate(items):
        if k is None or isinstance(k, NewAxisIndex):
            continue
        if isinstance(k, range):
            c = np.arange(k.start, k.stop, k.step, dtype=np.int64) if len(k) else np.zeros(0, np.int64)
            sh = [1] * ndim
            sh[axes[i]] = len(k)
            coords.append(c.reshape(sh))
        elif advanced and i in joined:
            a = np.asarray(k, dtype=np.int64)
            a = a.reshape((1,) * (nb - a.ndim) + a.shape)
            at = axes[i]
            coords.append(a.reshape((1,) * at + a.shape + (1,) * (ndim - at - nb)))
        else:
            coords.append(np.full((1,) * ndim, k, dtype=np.int64))
        mode += 1
    assert mode == len(shape)
    return tuple(rshape), coords
