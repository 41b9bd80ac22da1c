"""Multi-process scenarios of scans, sorting, searching, unique values and ``nonzero``
(run by :mod:`tests._mp_worker`).

Every process builds the same tensors over layouts that spread fragments over all
processes (slabs, cyclic blocks with several fragments per process, replicas on
other processes) and checks the results, gathered, against NumPy. The memory
scenario holds NumPy fragments of 2^17 float64 per process and measures, with
``tracemalloc``, the peak of new allocations during each call against the bound
1.5 x (share of the operands + share of the result) + one block.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

import dlmg
import dlmg.array_api as xp
import dlmg.distributed as dd
from dlmg import Layout
from tests._memory import peak_of

try:
    import array_api_compat.numpy as cnp
except ImportError:  # pragma: no cover - array-api-compat is a dependency of dlmg
    cnp = None


def _layouts(n: int) -> list[Layout]:
    world = dd.world_size()
    return [
        Layout.slab((n,), 0, ["cpu"] * world, ranks=list(range(world))),
        Layout((n,), block=(3,), grid=(2 * world,), devices=["cpu"] * (2 * world),
               ranks=[i % world for i in range(2 * world)]),
        Layout((n,), block=(5,), grid=(world,), devices=["cpu"] * (2 * world),
               ranks=list(range(world)) + list(reversed(range(world)))),
    ]


def _same(got, want) -> None:
    got = np.asarray(got.gather() if hasattr(got, "gather") else got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


def _mine(t) -> None:
    """Every fragment of the result on a process of the world, this process's ones held here."""
    me = dd.rank()
    for f in t.fragments:
        assert f.is_local == (f.rank == me)


def sorting_across():
    """Scans, sorts, searches, unique values and nonzero across processes equal NumPy's."""
    world = dd.world_size()
    rng = np.random.default_rng(11)
    n = 40 * world + 7
    data = rng.integers(0, 30, n).astype(np.float64)
    data[::9] = np.nan
    ints = rng.integers(0, 5, n).astype(np.int64)
    checked = 0
    for lay in _layouts(n):
        for value in (data, ints):
            x = dlmg.scatter(value if dd.rank() == 0 else None, lay)
            for desc in (False, True):
                s = xp.sort(x, descending=desc)
                _mine(s)
                assert s.layout.same_distribution(lay.dense)
                _same(s, cnp.sort(value, descending=desc))
                _same(xp.argsort(x, descending=desc), cnp.argsort(value, descending=desc, stable=True))
            small = np.where(np.isnan(value), 1.0, value % 3 + 0.5) if value.dtype.kind == "f" else value % 2 + 1
            _same(xp.cumulative_sum(x, include_initial=True), cnp.cumulative_sum(value, include_initial=True))
            y = dlmg.scatter(small if dd.rank() == 0 else None, lay)
            np.testing.assert_allclose(xp.cumulative_prod(y).gather(), np.cumprod(small), rtol=1e-12)
            _same(xp.diff(x, n=2), np.diff(value, n=2))
            edge = dlmg.scatter(value[:3].copy() if dd.rank() == 0 else None, dd.slab((3,), axis=0))
            got = xp.diff(x, prepend=edge, append=value[-2:])  # joined by the distributed concat
            _mine(got)
            _same(got, np.diff(value, prepend=value[:3], append=value[-2:]))
            _same(xp.unique_values(x), cnp.unique_values(value))
            for g, w in zip(xp.unique_all(x), cnp.unique_all(value)):
                _same(g, w)
            inv = xp.unique_inverse(x)
            _same(cnp.unique_values(value)[np.asarray(inv.inverse_indices.gather())], value)
            for g, w in zip(xp.nonzero(x), cnp.nonzero(value)):
                _same(g, w)
            ordered = xp.sort(x)
            probe = dlmg.scatter(value[::-1].copy() if dd.rank() == 0 else None, lay)
            for side in ("left", "right"):
                _same(xp.searchsorted(ordered, probe, side=side), np.searchsorted(np.sort(value), value[::-1], side=side))
            order = xp.argsort(x)  # a distributed sorter: x read through a routed take
            got = xp.searchsorted(x, probe, side="right", sorter=order)
            _mine(got)
            _same(got, np.searchsorted(value, value[::-1], side="right", sorter=np.argsort(value, kind="stable")))
            checked += 1
    # several modes: sorting along a split mode moves the split; nonzero in row-major order
    m = np.arange(6 * world * 5, dtype=np.float64).reshape(6 * world, 5)[::-1].copy() % 7
    lay2 = Layout(m.shape, block=(2, 2), grid=(world, 2), devices=["cpu"] * (2 * world),
                  ranks=[i % world for i in range(2 * world)])
    t = dlmg.scatter(m if dd.rank() == 0 else None, lay2)
    for axis in (0, 1):
        _same(xp.sort(t, axis=axis), np.sort(m, axis=axis))
        _same(xp.argsort(t, axis=axis), np.argsort(m, axis=axis, kind="stable"))
        np.testing.assert_allclose(xp.cumulative_sum(t, axis=axis).gather(), np.cumsum(m, axis=axis))
    for g, w in zip(xp.nonzero(t), np.nonzero(m)):
        _same(g, w)
    _same(xp.unique_counts(t).counts, np.unique(m, return_counts=True)[1])
    return checked


def _bound(*shares: int, block: int) -> float:
    return 1.5 * sum(shares) + block


def _within(peaks: dict[str, tuple[int, float]]) -> None:
    """Every ``(peak, bound)`` of ``peaks`` held, or this process fails naming those over it."""
    over = {k: v for k, v in peaks.items() if v[0] > v[1]}
    assert not over, f"rank {dd.rank()}: peaks over the bound (peak, bound) in bytes: {over}"


class _Dealt(NamedTuple):
    """A vector dealt in blocks over two fragments per process: its layout, this process's
    arrays, the tensor, a positive twin (for products), this process's share in bytes."""

    layout: Layout
    mine: dict[int, np.ndarray]
    x: Any
    positive: Any
    share: int


def _dealt(block: int, rng: np.random.Generator) -> _Dealt:
    """``2^17`` float64 per process in blocks of ``block`` dealt cyclically over ``2 x world``
    fragments, two per process."""
    world, me = dd.world_size(), dd.rank()
    n = (1 << 17) * world
    lay = Layout((n,), block=(block,), grid=(2 * world,), devices=["cpu"] * (2 * world),
                 ranks=[i % world for i in range(2 * world)])
    mine = {i: rng.standard_normal(lay.fragments[i].shape[0]) for i in lay.fragments_of(me)}
    return _Dealt(lay, mine, dlmg.from_fragments(mine, lay),
                  dlmg.from_fragments({i: 1.0 + a * 1e-6 for i, a in mine.items()}, lay),
                  sum(a.nbytes for a in mine.values()))


def _peaks(x: Any, positive: Any, share: int, block: int) -> dict[str, tuple[int, float]]:
    """``(peak, bound)`` of the sorting, scanning, unique-value and searching functions on ``x``
    (``positive`` for the product), this process holding ``share`` bytes of it."""
    ordered = xp.sort(x)
    return {
        "sort": (peak_of(lambda: xp.sort(x)), _bound(share, share, block=block)),
        "argsort": (peak_of(lambda: xp.argsort(x)), _bound(share, share, block=block)),
        "cumulative_sum": (peak_of(lambda: xp.cumulative_sum(x)), _bound(share, share, block=block)),
        "cumulative_prod": (peak_of(lambda: xp.cumulative_prod(positive)), _bound(share, share, block=block)),
        "diff": (peak_of(lambda: xp.diff(x)), _bound(share, share, block=block)),
        "unique_values": (peak_of(lambda: xp.unique_values(x)), _bound(share, share, block=block)),
        "unique_counts": (peak_of(lambda: xp.unique_counts(x)), _bound(share, 2 * share, block=block)),
        "nonzero": (peak_of(lambda: xp.nonzero(x)), _bound(share, share, block=block)),
        "searchsorted": (peak_of(lambda: xp.searchsorted(ordered, x)), _bound(2 * share, share, block=block)),
    }


def sorting_memory():
    """Per process, the peak of new memory of each call stays within the bound."""
    world, me = dd.world_size(), dd.rank()
    per = 1 << 17
    n = per * world
    lay = Layout.slab((n,), 0, ["cpu"] * world, ranks=list(range(world)))
    rng = np.random.default_rng(100 + me)
    local = rng.standard_normal(per)
    x = dlmg.from_fragments({me: local}, lay)
    share = local.nbytes
    positive = dlmg.from_fragments({me: 1.0 + local * 1e-6}, lay)
    peaks = _peaks(x, positive, share, share)
    _within(peaks)
    return {k: round(v[0] / share, 2) for k, v in peaks.items()}


def sorting_memory_cyclic():
    """As :func:`sorting_memory`, blocks of 4096 dealt out cyclically, two fragments per process
    (the bound's block is then 4096 elements), with the searching, indexing, reordering and
    joining functions beside (every call on a cyclic operand held to the bound)."""
    rng = np.random.default_rng(200 + dd.rank())
    lay, mine, x, positive, share = _dealt(4096, rng)
    block = 4096 * 8
    idx = dlmg.from_fragments({i: rng.integers(0, x.shape[0], a.shape[0]) for i, a in mine.items()}, lay)
    peaks = _peaks(x, positive, share, block)
    peaks |= {
        "take": (peak_of(lambda: xp.take(x, idx)), _bound(share, share, share, block=block)),
        "flip": (peak_of(lambda: xp.flip(x)), _bound(share, share, block=block)),
        "concat": (peak_of(lambda: xp.concat([x, x])), _bound(2 * share, 2 * share, block=block)),
    }
    _within(peaks)
    return {k: round(v[0] / share, 2) for k, v in peaks.items()}


def sorting_memory_many_blocks():
    """Blocks of 256 dealt out cyclically, two fragments per process: 256 blocks per fragment
    along the mode, more than diff and searchsorted take where they lie. The scans (with
    ``include_initial`` too, and along the second mode of a matrix whose first mode is
    split as well) stay within the bound (the bound's block: 256 elements); ``diff`` and
    ``searchsorted`` first move into the slab and back, within it too."""
    world, me = dd.world_size(), dd.rank()
    block = 256
    rng = np.random.default_rng(300 + me)
    lay, _, x, positive, share = _dealt(block, rng)
    n = x.shape[0]
    assert min(lay.fragments[i].nblocks[0] for i in lay.fragments_of(me)) > 64
    rows = 4
    lay2 = Layout((rows * world, n // (rows * world) * 2), block=(rows, block), grid=(world, 2),
                  devices=["cpu"] * (2 * world), ranks=[(i + i // world) % world for i in range(2 * world)])
    assert min(lay2.fragments[i].nblocks[1] for i in lay2.fragments_of(me)) > 64
    matrix = dlmg.from_fragments({i: rng.standard_normal(lay2.fragments[i].shape) for i in lay2.fragments_of(me)},
                                 lay2)
    share2 = sum(matrix.fragments[i].array.nbytes for i in lay2.fragments_of(me))
    ordered = xp.sort(x)
    peaks = {
        "cumulative_sum": (peak_of(lambda: xp.cumulative_sum(x)), _bound(share, share, block=block * 8)),
        "cumulative_prod": (peak_of(lambda: xp.cumulative_prod(positive)), _bound(share, share, block=block * 8)),
        "cumulative_sum include_initial": (peak_of(lambda: xp.cumulative_sum(x, include_initial=True)),
                                           _bound(share, share + 8, block=block * 8)),
        "cumulative_sum of a matrix": (peak_of(lambda: xp.cumulative_sum(matrix, axis=1)),
                                       _bound(share2, share2, block=rows * block * 8)),
        "diff": (peak_of(lambda: xp.diff(x)), _bound(share, share, block=block * 8)),
        "searchsorted": (peak_of(lambda: xp.searchsorted(ordered, x)), _bound(2 * share, share, block=block * 8)),
    }
    _within(peaks)
    full = np.asarray(x.gather())
    np.testing.assert_allclose(np.asarray(xp.cumulative_sum(x).gather()), np.cumsum(full), rtol=1e-9, atol=1e-6)
    return {k: round(v[0] / (share2 if "matrix" in k else share), 2) for k, v in peaks.items()}


SCENARIOS = {"sorting_across": sorting_across, "sorting_memory": sorting_memory,
             "sorting_memory_cyclic": sorting_memory_cyclic, "sorting_memory_many_blocks": sorting_memory_many_blocks}
