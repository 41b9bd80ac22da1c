"""Multi-process scenarios of contractions (run by :mod:`tests._mp_worker`).

Every process draws the same random cases from fixed seeds, holds only its own
fragments, and checks ``dlmg.einsum`` against ``numpy.einsum`` of the whole
operands; pending sums are resolved into every kind of layout.
"""

from __future__ import annotations

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout

from tests._contract_cases import run_case

SEEDS = range(24)


def _scatter(x, layout, framework):
    return dlmg.scatter(x if dd.rank() == 0 else None, layout, framework=framework)


def contract_property():
    """The one-process property, over fragments spread on every process (fixed seeds)."""
    world = dd.world_size()
    for seed in SEEDS:
        run_case(seed, ["cpu"], ranks=list(range(world)), frameworks=("numpy", "torch"))
    return len(SEEDS)


def contract_pending():
    """A @ B split along k across processes is a pending sum; resolved into replicated, slab
    and block-cyclic layouts it equals the product on every process."""
    world = dd.world_size()
    ranks = list(range(world))
    rng = np.random.default_rng(3)
    A, B = rng.standard_normal((6, 4 * world)), rng.standard_normal((4 * world, 5))
    a = _scatter(A, Layout.slab(A.shape, 1, ["cpu"] * world, ranks=ranks), framework="numpy")
    b = _scatter(B, Layout.slab(B.shape, 0, ["cpu"] * world, ranks=ranks), framework="numpy")
    plan = dlmg.einsum_plan("ik,kj->ij", a, b, pending=True)
    assert plan.strategy == "pending sum" and plan.moved.nbytes == 0, str(plan)
    c = dlmg.einsum("ik,kj->ij", a, b, pending=True)  # asked for: left pending
    assert c.layout.partial == "sum" and c.layout.nreplicas == world
    want = A @ B
    targets = [
        Layout.replicated(want.shape, ["cpu"] * world, ranks=ranks),
        Layout.slab(want.shape, 0, ["cpu"] * world, ranks=ranks),
        Layout(want.shape, block=(1, 2), grid=(world, 1), devices=["cpu"] * world, ranks=ranks),
    ]
    for target in targets:
        r = c.redistribute(target)
        np.testing.assert_allclose(np.asarray(r.gather(framework="numpy")), want)
    np.testing.assert_allclose(np.asarray((2 * c - c).gather(framework="numpy")), want)
    np.testing.assert_allclose(np.asarray((c + 1).gather(framework="numpy")), want + 1)  # resolved first
    try:
        c += 1
    except dlmg.LayoutError as exc:
        assert "redistribute" in str(exc)
    else:
        raise AssertionError("adding a scalar into a pending sum in place was not refused")
    return True


def contract_pending_extrema():
    """A pending max (min) whose candidates are spread over the processes: kept by adding a
    scalar, positive scaling, maximum (minimum) of two alike and the same reduction over a mode
    (no communication, the processes agree first), resolved first otherwise; every result resolves to
    the operation on the resolved value on every process."""
    world = dd.world_size()
    rng = np.random.default_rng(5)
    candidates = rng.standard_normal((world, 2, 6, 4))  # per process, its two fragments' values
    out = {}
    for kind, np_reduce, dl_reduce, np_both, dl_both in (("max", np.max, dlmg.max, np.maximum, dlmg.maximum),
                                                         ("min", np.min, dlmg.min, np.minimum, dlmg.minimum)):
        layout = Layout((12, 4), block=(6, 4), grid=(2, 1), devices=["cpu"] * 2 * world,
                        ranks=[r for r in range(world) for _ in range(2)], partial=kind)
        mine = layout.fragments_of(dd.rank())
        x = dlmg.from_fragments({f: candidates[dd.rank(), i].copy() for i, f in enumerate(mine)}, layout)
        want = np_reduce(candidates, axis=0).reshape(12, 4)
        kept = [(3.0 * x + 1.5, 3.0 * want + 1.5), (dl_both(x, x / 2.0), np_both(want, want / 2.0)),
                (dl_reduce(x, axis=0), np_reduce(want, axis=0)), (dl_reduce(x - 1.0, axis=1), np_reduce(want - 1.0, axis=1))]
        for got, expected in kept:
            assert got.layout.partial == kind, got.layout
            np.testing.assert_allclose(np.asarray(got.gather(framework="numpy")), expected)
        np.testing.assert_allclose(float(dl_reduce(x)), np_reduce(want))  # over every mode: its value
        np.testing.assert_allclose(np.asarray((-x).gather(framework="numpy")), -want)  # resolved first
        try:
            x *= -1.0
        except dlmg.LayoutError as exc:
            assert "redistribute" in str(exc)
        else:
            raise AssertionError(f"negating a pending {kind} in place was not refused")
        out[kind] = float(np_reduce(want))
    return out


def contract_moves():
    """Row slabs @ column slabs across processes: the smaller operand is gathered to every process."""
    world = dd.world_size()
    ranks = list(range(world))
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((4 * world, 8)), rng.standard_normal((8, world))
    a = _scatter(A, Layout.slab(A.shape, 0, ["cpu"] * world, ranks=ranks), framework="torch")
    b = _scatter(B, Layout.slab(B.shape, 1, ["cpu"] * world, ranks=ranks), framework="numpy")
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert plan.strategy == "move x1", str(plan)
    # every process receives the (world - 1) columns it lacks: 8 float64 each
    assert plan.moved.between_processes == world * (world - 1) * 8 * 8, str(plan)
    c = a @ b
    np.testing.assert_allclose(np.asarray(c.gather(framework="numpy")), A @ B)
    return plan.moved.between_processes


def contract_summa():
    """A 2 x 2 block-cyclic grid over the processes: SUMMA panel by panel (4 processes), the
    product equal everywhere."""
    world = dd.world_size()
    ranks = [c % world for c in range(4)]
    n = 512
    lay = Layout((n, n), block=(64, 64), grid=(2, 2), devices=["cpu"] * 4, ranks=ranks)
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    a, b = _scatter(A, lay, "numpy"), _scatter(B, lay, "torch")
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    if world == 4:
        assert plan.strategy == "summa", str(plan)
    c = a @ b
    np.testing.assert_allclose(np.asarray(c.gather(framework="numpy")), A @ B)
    return plan.strategy


def contract_mismatch():
    """Processes passing different layouts: every process raises, none computes."""
    world = dd.world_size()
    ranks = list(range(world))
    axis = 0 if dd.rank() == 0 else 1  # rank 0 splits rows, the others columns
    lay = Layout.slab((4 * world, 4 * world), axis, ["cpu"] * world, ranks=ranks)
    a = dlmg.zeros(layout=lay, dtype="float64", framework="numpy")
    try:
        dlmg.einsum("ij,jk->ik", a, a)
    except dlmg.CollectiveMismatchError as exc:
        assert "einsum" in str(exc), exc
        return True
    raise AssertionError("different layouts on different processes were not refused")


SCENARIOS = {
    "contract_mismatch": contract_mismatch,
    "contract_summa": contract_summa,
    "contract_property": contract_property,
    "contract_pending": contract_pending,
    "contract_pending_extrema": contract_pending_extrema,
    "contract_moves": contract_moves,
}
