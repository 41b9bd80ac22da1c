"""Multi-process scenarios of the Array API namespace (run by :mod:`tests._mp_worker`).

Under :func:`dlmg.distributed.init` the default layout policy puts one piece
of every new tensor on each process; the standard's elementwise functions,
reductions, views and creation functions work there, and the functions that
collect a tensor onto one device refuse with a clear error.
"""

from __future__ import annotations

import numpy as np

import dlmg
import dlmg.array_api as xp
import dlmg.distributed as dd


def array_api_processes():
    """Creation by the processes policy, broadcasting, reductions and slicing across processes."""
    world, me = dd.world_size(), dd.rank()
    assert dlmg.get_default_layout().kind == "processes"
    x = xp.reshape(xp.arange(4.0 * world * 3), (4 * world, 3))
    host = np.arange(4.0 * world * 3).reshape(4 * world, 3)
    assert x.layout.ranks == tuple(range(world)) and x.layout.grid == (world, 1), repr(x.layout)
    assert [f.is_local for f in x.fragments] == [i == me for i in range(world)]
    y = xp.add(x * 2.0, xp.asarray([1.0, 2.0, 3.0]))  # the row moves to every process
    total = float(xp.sum(y))
    assert total == float((host * 2 + [1, 2, 3]).sum())
    np.testing.assert_allclose(xp.mean(x, axis=0).gather(), host.mean(axis=0))
    np.testing.assert_array_equal(x[:, 1].gather(), host[:, 1])  # a view of every piece
    try:
        xp.sort(x, axis=0)
    except NotImplementedError as exc:
        refused = "across processes" in str(exc)
    else:
        refused = False
    assert refused
    return total


SCENARIOS = {"array_api_processes": array_api_processes}
