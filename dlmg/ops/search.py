"""``searchsorted`` of a distributed sorted tensor: bounds exchanged once, requests routed
to their owner, local binary searches.

The sorted 1-D tensor ``x1`` is read where it lies, block by block: a fragment
holding several blocks (a cyclic deal) holds them in increasing order, so its
array is itself sorted. The first value of every block is shared once
(:func:`~dlmg.ops.pieces.share`, one number per block; beyond
:data:`~dlmg.ops.scan.BLOCKS_IN_PLACE` blocks per fragment ``x1`` is first
redistributed into a slab). Each fragment of ``x2`` finds, per value, the one
block where its answer lies (a search among the firsts), and sends its values to
the owners of those blocks (one all-to-all); each owner answers by a binary
search of its whole array plus, per value, the distance between its block's
global and local starts, and the answers come back by the reverse all-to-all into
the layout of ``x2``. This is the owner-routed request of distributed hash and
range lookups (as in the distributed sorted-array search of Heat's
``searchsorted`` and of PGAS range queries); no fragment of ``x1`` leaves its
owner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DtypeError
from ._dtypes import index_dtype, kind_of, narrow_for
from ._executor import array_device, fail
from .contract.pending import settled
from .dispatch import is_distributed, new_tensor
from .pieces import alltoall, host, members, on, share
from .scan import BLOCKS_IN_PLACE, slab_along
from .sort import work_dtype

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["searchsorted"]



def searchsorted(x1: "DistributedTensor", x2: "DistributedTensor", /, *, side: str = "left") -> "DistributedTensor":
    """Where the values of ``x2`` would go in the sorted 1-D ``x1`` (see the module).

    Parameters
    ----------
    x1 : DistributedTensor
        1-D, sorted increasingly (NaNs last).
    x2 : DistributedTensor
        The values, any shape.
    side : {"left", "right"}
        The first or the last suitable position among equal values.

    Returns
    -------
    DistributedTensor
        Indices into ``x1`` (int64, int32 where a JAX fragment takes part without
        x64), in ``x2``'s layout, on its devices and processes.
    """
    for name, t in (("x1", x1), ("x2", x2)):
        if not is_distributed(t):
            raise TypeError(f"dlmg.searchsorted: {name} must be a DistributedTensor, got {type(t).__name__}")
    if side not in ("left", "right"):
        raise ValueError(f"dlmg.searchsorted: side must be 'left' or 'right', got {side!r}")
    x1, x2 = settled(x1), settled(x2)
    if x1.ndim != 1:
        raise ValueError(f"dlmg.searchsorted: x1 must be 1-D, got shape {x1.shape}")
    if "c" in (kind_of(x1.dtype), kind_of(x2.dtype)):
        raise DtypeError("dlmg.searchsorted is not defined for complex tensors")
    frameworks = (*x1.frameworks, *x2.frameworks)
    common = work_dtype(narrow_for(str(np.result_type(np.dtype(str(x1.dtype)), np.dtype(str(x2.dtype)))),
                                   frameworks), frameworks)
    idx = narrow_for(index_dtype(), frameworks)
    if max((f.nblocks[0] for f in x1.layout.fragments), default=0) > BLOCKS_IN_PLACE:
        x1 = x1.redistribute(slab_along(x1.layout, 0))
    blocks = _Blocks(x1, common, side)
    fields = {"x1": x1.layout, "x2": x2.layout, "side": side}
    askers = members(x2)
    kept: dict[int, Any] = {}  # per local fragment of x2: the permutation its requests were sent in
    asked = alltoall("dlmg.searchsorted (requests)", askers, blocks.slots,
                     lambda m: _requests(m, x2, blocks, kept), common, **fields)
    answers = _answers(x1, blocks, asked, idx)
    back = alltoall("dlmg.searchsorted (answers)", blocks.slots, askers, lambda m: answers.pop(m.index), idx,
                    joined=True, **fields)
    out: list[Any] = [None] * x2.layout.nfragments
    for m in askers:
        if m.local:
            try:
                out[m.index] = _placed(m, [kept.pop(m.index), back.pop(m.index)],
                                       x2.layout.fragments[m.index].shape, idx)
            except Exception as exc:
                raise fail("dlmg.searchsorted", m.index, m.executor, exc) from exc
    return new_tensor(out, x2.layout.dense, idx)


class _Blocks:
    """The blocks of the sorted ``x1``: their owners (``slots``, by grid coordinate) and first
    values, shared once; and the search that finds the block of a value."""

    def __init__(self, x1: "DistributedTensor", common: str, side: str) -> None:
        lay = x1.layout
        self.b, self.g, self.side, self.common = lay.block[0], lay.grid[0], side, common
        self.slots = members(x1, [lay.fragment_index((c,), 0) for c in range(self.g)])
        self.total = lay.shape[0]
        self.one_each = all(f.nblocks[0] <= 1 for f in lay.fragments)
        slots = self.slots

        def firsts() -> dict[int, Any]:
            found = {}
            for m in slots:
                n = x1.fragments[m.index].shape[0]
                if m.local and n:
                    ex = m.executor
                    at = on(np.arange(0, n, self.b, dtype=np.int32 if n < 2**31 else np.int64), ex)
                    found[m.index] = host(ex.run(lambda xp, a, i: xp.take(a, i), x1.fragments[m.index].array, at),
                                          ex).astype(common).tolist()  # each block's first value
            return found

        first = share("dlmg.searchsorted (bounds)", firsts, x1=lay, side=side)
        self.bounds = np.asarray([first[slots[j % self.g].index][j // self.g] for j in range(lay.nblocks[0])],
                                 dtype=common)
        self.floating = kind_of(common) == "f"
        # not every framework's searchsorted orders NaNs: they are searched for apart
        self.numbered = int(np.count_nonzero(~np.isnan(self.bounds))) if self.floating else len(self.bounds)

    def block_of(self, xp: Any, ex: Any, v: Any) -> Any:
        """The global block where each value of ``v`` finds its answer: how many blocks after the
        first start at or below it (NaNs: the last block starting with a number)."""
        if self.numbered > 1:
            where = xp.searchsorted(on(self.bounds[1:self.numbered], ex), v, side=self.side)
        else:
            where = xp.zeros(v.shape, dtype=xp.int32, device=array_device(v))
        if self.floating and bool(xp.any(xp.isnan(v))):
            where = xp.where(xp.isnan(v), xp.full_like(where, max(self.numbered - 1, 0)), where)
        return where


def _requests(m: Any, x2: "DistributedTensor", blocks: _Blocks, kept: dict[int, Any]) -> list[Any]:
    """Fragment ``m`` of ``x2``'s values, one piece per owner of the blocks they fall in (the
    permutation that grouped them kept in ``kept``)."""
    ex = m.executor
    g = blocks.g

    def route(xp: Any, a: Any) -> tuple[Any, Any, Any]:
        v = xp.reshape(a, (-1,))
        if v.dtype != ex.dtype(blocks.common):
            v = xp.astype(v, ex.dtype(blocks.common))
        if not blocks.bounds.size:
            return v, None, None
        owner = blocks.block_of(xp, ex, v) % g
        perm = xp.argsort(owner, stable=True)
        cuts = [0]
        for c in range(g):
            cuts.append(cuts[-1] + int(xp.sum(xp.astype(owner == c, xp.int32))))
        del owner
        return xp.take(v, perm), perm, cuts

    ordered, perm, c = ex.run(route, x2.fragments[m.index].array)
    kept[m.index] = perm
    if perm is None:
        return [None] * g
    return [ordered[c[k]:c[k + 1]] if c[k + 1] > c[k] else None for k in range(g)]


def _answers(x1: "DistributedTensor", blocks: _Blocks, asked: dict[int, list[Any]], idx: str) -> dict[int, list[Any]]:
    """Each local owner's answers to the pieces it was asked (global positions in ``x1``)."""
    answers: dict[int, list[Any]] = {}
    b, g, side = blocks.b, blocks.g, blocks.side
    for c, m in enumerate(blocks.slots):
        if not m.local:
            continue
        ex = m.executor
        pieces = asked.pop(m.index, [])
        run = x1.fragments[m.index].array
        offset = c * b  # of the first block: where each fragment holds one block, of every one

        def answer(xp: Any, r: Any, pieces: list[Any]) -> list[Any]:
            if r.dtype != ex.dtype(blocks.common):
                r = xp.astype(r, ex.dtype(blocks.common))
            want = getattr(xp, idx)
            numbers = r.shape[0]
            if blocks.floating and numbers:
                numbers -= int(host(xp.sum(xp.astype(xp.isnan(r), xp.int32)), ex))
            out = []
            for k, p in enumerate(pieces):
                if p is None:
                    out.append(None)
                    continue
                pieces[k] = None
                found = xp.astype(xp.searchsorted(r[:numbers], p, side=side), want, copy=False)
                if blocks.one_each:
                    shift = offset
                else:  # a local block q holding global block j starts (j - q) blocks further globally
                    j = xp.astype(blocks.block_of(xp, ex, p), want, copy=False)
                    shift = (j - j // g) * b
                    del j
                if blocks.floating:  # NaNs: after the numbers (left) or at the end (right)
                    found = xp.where(xp.isnan(p), numbers if side == "left" else blocks.total - shift, found)
                found += shift
                out.append(found)
                del shift, found
            return out

        try:
            answers[m.index] = ex.run(answer, run, pieces)
        except Exception as exc:
            raise fail("dlmg.searchsorted", m.index, ex, exc) from exc
        del pieces
    return answers


def _placed(m: Any, box: list[Any], shape: tuple[int, ...], idx: str) -> Any:
    """Fragment ``m`` of the result: the answers (``box``: the permutation the requests were
    sent in, then the answers in that order) put back in the order of its values."""
    ex = m.executor

    def place(xp: Any, box: list[Any]) -> Any:
        want = getattr(xp, idx)
        if box[0] is None:
            return ex.adapter.full(shape, 0, idx, ex.device)
        inverse, box[0] = xp.argsort(box[0]), None  # (the permutation is released once inverted)
        got, box[1] = box[1], None
        return xp.reshape(xp.astype(xp.take(got, inverse), want, copy=False), shape)

    return ex.run(place, box)
