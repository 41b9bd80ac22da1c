"""Threads sharing tensors: every call gives the result of some serial order.

dlmg's own state is caches (copy plans, executors, layout keys). Eight
threads run gathers, redistributions, elementwise work and reductions on
shared tensors, with the plan cache shrunk to two entries so that threads
keep evicting each other's plans; every result must be exact and no call may
fail. (Writing one tensor from several threads at once is a data race, as it
is for NumPy and torch arrays; dlmg takes no locks around user data.)
"""

from __future__ import annotations

import sys
import threading

import numpy as np
import pytest

import dlmg

THREADS = 8
ROUNDS = 15


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_threads_on_shared_tensors(monkeypatch, framework):
    pytest.importorskip(framework)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython allows
    x = np.arange(48, dtype=np.float64).reshape(8, 6)
    layouts = [dlmg.Layout.slab((8, 6), axis, ["cpu"] * n) for axis in (0, 1) for n in (2, 3)]
    shared = dlmg.scatter(x, layouts[0]).to(framework)
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def work(seed: int) -> None:
        try:
            start.wait()
            for r in range(ROUNDS):
                lay = layouts[(seed + r) % len(layouts)]
                moved = shared.redistribute(lay)
                np.testing.assert_array_equal(moved.gather("numpy"), x)
                np.testing.assert_array_equal((moved * 2 + 1).gather("numpy"), x * 2 + 1)
                assert float(dlmg.sum(moved)) == x.sum()
                np.testing.assert_array_equal(dlmg.max(moved, axis=0).gather("numpy"), x.max(axis=0))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    try:
        for t in threads:
            t.join(timeout=300)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not errors, repr(errors[0])
    np.testing.assert_array_equal(shared.gather("numpy"), x)  # the shared input is unchanged
