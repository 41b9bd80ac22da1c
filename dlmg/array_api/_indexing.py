"""Indexing a distributed tensor: ``dt[2:5]``, ``dt[:, 1]``, ``dt[..., ::2]``, ``dt[None]``, masks.

Basic indexing (integers, slices, ``...``, ``None``) runs fragment by
fragment as **views** when every mode it restricts is held whole by each
fragment (grid 1 there): each fragment indexes its own array, no element
moves, and the result shares the fragments' memory (NumPy, torch, CuPy; JAX
arrays are values). Where a restricted mode is split over devices, or for
integer-array and boolean-mask indexing, the tensor is collected onto one
fragment (see :mod:`._collect`) and the result is a new tensor.

Assignment (``dt[key] = value``) writes into the fragments in place the same
way: fragment by fragment where the key allows, otherwise through a collected
copy that is redistributed back into the tensor's own fragments.
"""

from __future__ import annotations

import operator
from typing import Any

from ..errors import ReadOnlyError
from ..layout import Layout
from ..ops._operands import is_distributed
from ..ops._writes import check_writable
from ..ops.broadcast import align
from ..ops.dispatch import new_tensor
from ._collect import collect, settle

__all__ = ["getitem", "setitem"]


def _expand(key: Any, ndim: int) -> tuple[list[Any], bool]:
    """The key as one entry per mode (with ``None`` entries kept) and whether it is basic."""
    items = list(key) if isinstance(key, tuple) else [key]
    basic = True
    for k in items:
        if is_distributed(k) or (hasattr(k, "shape") and hasattr(k, "dtype")) or isinstance(k, (list, bool)):
            basic = False
    if not basic:
        return items, False
    ellipses = sum(1 for k in items if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in items if k is not None and k is not Ellipsis)
    if used > ndim:
        raise IndexError(f"too many indices: {used} for a tensor of {ndim} modes")
    if ellipses:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (ndim - used)
    else:
        items += [slice(None)] * (ndim - used)
    for k in items:
        if k is not None and not isinstance(k, slice):
            try:
                operator.index(k)
            except TypeError:
                raise IndexError(f"index entry {k!r} of type {type(k).__name__} is not an int, slice, "
                                 "..., None or an array") from None
    return items, True


def _local_layout(x: Any, items: list[Any]) -> tuple[Layout, list[Any]] | None:
    """The result layout of a basic key that every fragment can apply to its own array, and the
    per-mode keys (negative steps as positive slices to flip afterwards), or ``None``."""
    layout = x.layout
    shape: list[int] = []
    block: list[int] = []
    grid: list[int] = []
    keys: list[Any] = []
    mode = 0
    for k in items:
        if k is None:
            shape.append(1)
            block.append(1)
            grid.append(1)
            keys.append(None)
            continue
        n = layout.shape[mode]
        if isinstance(k, slice):
            if k == slice(None):
                shape.append(n)
                block.append(layout.block[mode])
                grid.append(layout.grid[mode])
                keys.append(slice(None))
            else:
                if layout.grid[mode] != 1:
                    return None
                span = range(*k.indices(n))
                shape.append(len(span))
                block.append(max(len(span), 1))
                grid.append(1)
                keys.append(span)
        else:
            i = operator.index(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for mode {mode} of extent {n}")
            if layout.grid[mode] != 1:
                return None
            keys.append(i % n)
        mode += 1
    out = Layout(tuple(shape), block=tuple(block), grid=tuple(grid), devices=layout.devices, ranks=layout.ranks)
    return out, keys


def _apply(xp: Any, a: Any, keys: list[Any]) -> Any:
    """One fragment's part: basic indexing, negative steps by a positive slice and a flip."""
    plain: list[Any] = []
    flips = []
    out_mode = 0
    for k in keys:
        if isinstance(k, range):
            if k.step < 0 and len(k):
                plain.append(slice(k[-1], k[0] + 1, -k.step))
                flips.append(out_mode)
            elif not len(k):
                plain.append(slice(0, 0))
            else:
                plain.append(slice(k.start, k.stop, k.step))
        else:
            plain.append(k)
        if not isinstance(k, int):
            out_mode += 1
    out = a[tuple(plain) + (Ellipsis,)]  # a 0-d view, not a scalar, for a full integer key
    for m in flips:
        out = xp.flip(out, axis=m)
    return out


def _element(x: Any, items: list[Any]) -> Any:
    """``x[i, j, ...]`` with one int per mode: a 0-d view of a fragment holding the element
    (one of this process's where it holds one), on that fragment's device and process."""
    index = []
    for mode, (k, n) in enumerate(zip(items, x.shape)):
        i = operator.index(k)
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for mode {mode} of extent {n}")
        index.append(i % n)
    pairs = x.layout.global_to_local(tuple(index))
    f, local = next(((f, li) for f, li in pairs if x.fragments[f].is_local), pairs[0])
    frag = x.fragments[f]
    layout = Layout.single((), frag.device, ranks=frag.rank)
    if not frag.is_local:
        return new_tensor([None], layout, x.dtype)
    if frag.is_padded:
        view = frag.adapter.as_strided(frag.memory, (), (), frag.layout.memory_offset(local))
    else:
        view = frag.array[tuple(local) + (Ellipsis,)]
    return new_tensor([view], layout, x.dtype)


def getitem(x: Any, key: Any) -> Any:
    """``x[key]`` (see the module)."""
    items, basic = _expand(key, x.ndim)
    if basic and x.ndim and len(items) == x.ndim and not any(k is None or isinstance(k, slice) for k in items):
        return _element(x, items)
    if basic:
        found = _local_layout(x, items)
        if found is not None:
            layout, keys = found
            arrays: list[Any] = []
            for frag in x.fragments:
                if not frag.is_local:
                    arrays.append(None)
                    continue
                arrays.append(_apply(frag.adapter.namespace(), frag.array, keys))
            return new_tensor(arrays, layout, x.dtype)
    return _collected_getitem(x, key)


def _collected_getitem(x: Any, key: Any) -> Any:
    tensors = [x] + [k for k in (key if isinstance(key, tuple) else (key,)) if is_distributed(k)]
    got = collect("__getitem__", *tensors)
    arrays = iter(got.arrays[1:])
    if isinstance(key, tuple):
        local_key: Any = tuple(next(arrays) if is_distributed(k) else k for k in key)
    else:
        local_key = next(arrays) if is_distributed(key) else key
    a = got.arrays[0]
    return settle(got.executor.run(lambda xp: a[local_key]), got)


def setitem(x: Any, key: Any, value: Any) -> None:
    """``x[key] = value`` in place (see the module)."""
    local = [f.index for f in x.fragments if f.is_local]
    check_writable(x, local, "__setitem__")
    items, basic = _expand(key, x.ndim)
    found = _local_layout(x, items) if basic else None
    if found is not None and not any(isinstance(k, range) and k.step < 0 for k in found[1]):
        view = getitem(x, key)
        if is_distributed(value):
            value = align((view, value), "__setitem__", communicate=True)[1]
        keys = found[1]
        replaced = {}
        for frag in x.fragments:
            if not frag.is_local:
                continue
            part = value.fragments[frag.index].array if is_distributed(value) else value
            new = frag.adapter.namespace()
            replaced_array = _write(new, frag, keys, part)
            if replaced_array is not None:
                replaced[frag.index] = replaced_array
        if replaced:
            x._replace_arrays(replaced)
        return
    _collected_setitem(x, key, value)


def _write(xp: Any, frag: Any, keys: list[Any], part: Any) -> Any:
    """Write ``part`` into the fragment's selection; a new array for immutable frameworks."""
    plain = tuple(slice(k.start, k.stop, k.step) if isinstance(k, range) else k for k in keys if k is not None)
    a = frag.array
    if is_distributed(part):
        part = part.fragments[0].array
    if hasattr(part, "shape") and type(part) is not type(a):
        part = xp.asarray(part)
    if not frag.adapter.mutable:
        return a.at[plain].set(part)
    if frag.readonly:
        raise ReadOnlyError(f"__setitem__: fragment {frag.index} is read-only")
    a[plain] = part
    return None


def _collected_setitem(x: Any, key: Any, value: Any) -> None:
    """Assignment through one collected copy, redistributed back into ``x``'s fragments."""
    keys = key if isinstance(key, tuple) else (key,)
    indices = [k for k in keys if is_distributed(k)]
    operands = [x] + ([value] if is_distributed(value) else []) + indices
    # one collection: the index tensors land in x's framework too (a torch tensor indexed
    # by a NumPy mask reads it as integers)
    got = collect("__setitem__", *operands)
    whole = got.arrays[0]
    whole = got.executor.run(lambda xp: xp.asarray(whole, copy=True))
    if indices:
        collected_keys = iter(got.arrays[len(operands) - len(indices):])
        local_key: Any = tuple(next(collected_keys) if is_distributed(k) else k for k in keys)
        if not isinstance(key, tuple):
            local_key = local_key[0]
    else:
        local_key = key
    part = got.arrays[1] if is_distributed(value) else value
    if got.executor.adapter.mutable:
        whole[local_key] = part
    else:
        whole = whole.at[local_key].set(part)
    back = settle(whole, got).redistribute(x.layout.dense)
    replaced = {}
    for frag in x.fragments:
        if not frag.is_local:
            continue
        new = back.fragments[frag.index].array
        if frag.adapter.mutable:
            frag.array[...] = frag.adapter.namespace().asarray(new) if type(new) is not type(frag.array) else new
        else:
            replaced[frag.index] = new
    if replaced:
        x._replace_arrays(replaced)
