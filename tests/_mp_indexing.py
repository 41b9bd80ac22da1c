"""Multi-process scenarios of owner-routed indexing (run by :mod:`tests._mp_worker`).

Integer-array indexing, ``take`` and ``take_along_axis`` of tensors split over
the processes: values equal NumPy's, the result is split over the same
processes, and with NumPy fragments the new memory of each process during a
call (``tracemalloc``) stays within 1.5 x (its share of the operands + its
share of the result) plus one block.
"""

from __future__ import annotations


import numpy as np

import dlmg
import dlmg.array_api as xp
import dlmg.distributed as dd
from dlmg import Layout
from tests._memory import peak_of


def indexing_routed():
    """Values and placement of routed indexing across processes."""
    world = dd.world_size()
    host = np.arange(8.0 * world * 5).reshape(8 * world, 5)
    x = dlmg.scatter(host if dd.rank() == 0 else None, dd.slab(host.shape, axis=0), framework="numpy")
    rng = np.random.default_rng(3)
    rows = rng.integers(-host.shape[0], host.shape[0], size=11)
    for key in [rows, (rows, 2), (slice(None), np.array([4, 0])), (slice(3, None, 3),), host > 17.0]:
        got = x[key]
        assert got.layout.ranks == x.layout.ranks or got.ndim == 0, repr(got.layout)
        np.testing.assert_array_equal(got.gather(), host[key])
    np.testing.assert_array_equal(xp.take(x, rows, axis=0).gather(), np.take(host, rows, axis=0))
    along = rng.integers(0, 5, size=host.shape)
    np.testing.assert_array_equal(xp.take_along_axis(x, along, axis=1).gather(), np.take_along_axis(host, along, 1))
    idx = dlmg.scatter(rows % host.shape[0] if dd.rank() == 0 else None, dd.slab(rows.shape, axis=0),
                       framework="numpy")
    got = xp.take(x, idx, axis=0)
    assert got.layout.ranks == idx.layout.ranks
    np.testing.assert_array_equal(got.gather(), host[rows % host.shape[0]])
    mask = dlmg.scatter(host % 3 == 1 if dd.rank() == 0 else None, dd.slab(host.shape, axis=1), framework="numpy")
    got = x[mask]  # a distributed mask: row slabs compacted, an exclusive scan of counts
    assert got.layout.ranks == x.layout.ranks
    np.testing.assert_array_equal(got.gather(), host[host % 3 == 1])
    got = x[idx]  # a distributed index: a take keeping the index's distribution
    assert got.layout.ranks == idx.layout.ranks
    np.testing.assert_array_equal(got.gather(), host[rows % host.shape[0]])
    want = host.copy()
    for key, value in [(rows, -1.0), ((rows, 2), 7.0), (host > 30.0, np.arange((host > 30.0).sum()) * 1.0),
                       ((slice(3, None, 3), slice(None, None, -2)), np.array([1.0, 2.0, 3.0]))]:
        want[key] = value
        x[key] = value
        np.testing.assert_array_equal(x.gather(), want)
    x[idx] = -7.0  # through a distributed index and a distributed mask, routed to the owners
    want[rows % host.shape[0]] = -7.0
    x[mask] = 0.25
    want[host % 3 == 1] = 0.25
    np.testing.assert_array_equal(x.gather(), want)
    # several distributed index arrays (and a mask of some modes): a routed gather of the
    # broadcast indices, the result in the first index's distribution
    cols = dlmg.scatter(np.arange(rows.size) % 5 if dd.rank() == 0 else None,
                        Layout((rows.size,), block=(2,), grid=(world,), devices=["cpu"] * world,
                               ranks=list(range(world))), framework="numpy")
    state = x.gather()
    got = x[idx, cols]
    assert got.layout.ranks == idx.layout.ranks
    np.testing.assert_array_equal(got.gather(), state[rows % host.shape[0], np.arange(rows.size) % 5])
    np.testing.assert_array_equal(x[idx[:, None], cols[:2]].gather(),
                                  state[(rows % host.shape[0])[:, None], np.arange(2)])
    rowmask = dlmg.scatter(host[:, 0] % 2 == 0 if dd.rank() == 0 else None, dd.slab((host.shape[0],), axis=0),
                           framework="numpy")
    np.testing.assert_array_equal(x[rowmask, 3].gather(), state[host[:, 0] % 2 == 0, 3])
    uniq = np.unique(rows % host.shape[0])
    du = dlmg.scatter(uniq if dd.rank() == 0 else None, dd.slab(uniq.shape, axis=0), framework="numpy")
    dc = dlmg.scatter(uniq % 5 if dd.rank() == 0 else None, dd.slab(uniq.shape, axis=0), framework="numpy")
    x[du, dc] = np.arange(uniq.size) + 100.0
    want = state.copy()
    want[uniq, uniq % 5] = np.arange(uniq.size) + 100.0
    np.testing.assert_array_equal(x.gather(), want)
    # an integer along the split mode: a view held by the owner of the row, writes land in x
    k = host.shape[0] - 3
    row = x[k]
    owner = x.layout.fragments[x.layout.global_to_local((k, 0))[0][0]].index
    assert row.layout.ranks == (x.layout.ranks[owner],)
    assert all(f.is_local == (f.rank == dd.rank()) for f in row.fragments)
    if row.fragments[0].is_local:
        assert np.shares_memory(np.asarray(row.fragments[0].array), np.asarray(x.fragments[owner].array))
    row[1] = 123.0
    want = x.gather()
    assert want[k, 1] == 123.0
    np.testing.assert_array_equal(x[:, 4].gather(), want[:, 4])
    total = xp.sum(x)  # a 0-d tensor on every process, read through 0-d masks: its element as often as asked
    for keep in (total > 1e12, total < 1e12):
        got = total[keep]
        np.testing.assert_array_equal(got.gather(), np.asarray(float(total.gather()))[np.asarray(bool(keep.gather()))])
    replicated = Layout.replicated(host.shape, ["cpu:0"] * world, ranks=list(range(world)))
    r = dlmg.scatter(host if dd.rank() == 0 else None, replicated, framework="numpy")
    np.testing.assert_array_equal(r[rows].gather(), host[rows])
    r[rows, 1] = -5.0
    want = host.copy()
    want[rows, 1] = -5.0
    for frag in r.fragments:  # every replica written, each process's own one checked
        if frag.is_local:
            np.testing.assert_array_equal(np.asarray(frag.array), want)
    return True


def indexing_memory():
    """Peak new memory of routed ``take``, ``take_along_axis`` and ``x[idx]`` on each process,
    each against 1.5 x (the process's share of the operands + of the result) + one block."""
    world = dd.world_size()
    n = 1 << 17
    share = n // world
    layout = dd.slab((n,), axis=0)
    mine = [f for f, r in enumerate(layout.ranks) if r == dd.rank()][0]
    x = dlmg.from_fragments({mine: np.arange(share, dtype=np.float64) + mine * share}, layout)
    rng = np.random.default_rng(0)
    idx_share = rng.integers(0, n, size=share)
    idx = dlmg.from_fragments({mine: idx_share}, layout)
    host_idx = rng.integers(0, n, size=share)  # the same on every process: a host operand, whole here
    block = layout.block[0] * 8
    xp.take(x, idx[:8], axis=0)  # the first calls import modules: not the calls' memory
    x[host_idx[:8]]
    xp.take_along_axis(x, host_idx[:8], axis=0)
    mask = dlmg.from_fragments({mine: rng.random(share) < 0.5}, layout)
    x[mask]  # warm-up
    selected = int(np.asarray(mask.fragments[mine].array).sum())
    out = xp.take(x, idx, axis=0)
    np.testing.assert_array_equal(np.asarray(out.fragments[mine].array), idx_share.astype(np.float64))
    del out

    def assign():
        x[host_idx] = 1.0

    assign()
    figures = {
        "setitem": (peak_of(assign), 1.5 * (share + share) * 8 + block),
        "mask": (peak_of(lambda: x[mask]), 1.5 * (share * 9 + selected * 8) + block),
        "take": (peak_of(lambda: xp.take(x, idx, axis=0)), 1.5 * 3 * share * 8 + block),
        "getitem": (peak_of(lambda: x[host_idx]), 1.5 * (share + share + share // world) * 8 + block),
        "take_along_axis": (peak_of(lambda: xp.take_along_axis(x, host_idx, axis=0)),
                            1.5 * (share + share + share // world) * 8 + block),
    }
    return figures


SCENARIOS = {"indexing_routed": indexing_routed, "indexing_memory": indexing_memory}

