"""Multi-process scenarios of the Array API namespace (run by :mod:`tests._mp_worker`).

Under :func:`dlmg.distributed.init` the default layout policy puts one piece
of every new tensor on each process; the standard's elementwise functions,
reductions, views and creation functions work there; sorting and the set
functions run distributed (sample sort, range partitioning); the functions that
collect a tensor (``concat``, ``linalg``) all-gather it, compute on every
process and spread rank 0's result; the products are dlmg's contractions across
processes.
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
    try:  # a host copy needs every process: np.asarray refuses, naming the collective
        np.asarray(x)
    except dlmg.NotLocalError as exc:
        assert "dt.gather(framework='numpy')" in str(exc), exc
    else:
        raise AssertionError("np.asarray of a tensor spread over processes did not refuse")
    # sorting and sets: distributed, the result on the operand's processes
    rng = np.random.default_rng(7)
    data = rng.integers(0, 5, size=(2 * world, 3)).astype(np.float64)  # the same on every process
    d = xp.asarray(data)
    ordered = xp.sort(d, axis=0)
    assert ordered.layout.ranks == tuple(range(world)), repr(ordered.layout)
    np.testing.assert_array_equal(ordered.gather(), np.sort(data, axis=0))
    uniq = xp.unique_values(d)  # a shape that depends on the data, known to every process
    np.testing.assert_array_equal(uniq.gather(), np.unique(data))
    np.testing.assert_array_equal(xp.concat([d, x[:2]], axis=0).gather(), np.concatenate([data, host[:2]]))
    square = data[:3, :3] + 4 * np.eye(3)
    np.testing.assert_allclose(xp.linalg.inv(xp.asarray(square)).gather(), np.linalg.inv(square))
    # products: dlmg's contractions, the contracted mode split over the processes
    np.testing.assert_allclose(xp.matmul(xp.matrix_transpose(x), x).gather(), host.T @ host)
    np.testing.assert_allclose(xp.vecdot(x, x).gather(), (host * host).sum(axis=1))
    return total


SCENARIOS = {"array_api_processes": array_api_processes}
