"""Contractions: strategies and byte counts of named cases, pending sums, the product family."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout

D4 = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
RNG = np.random.default_rng(7)


def _t(x, layout):
    return dlmg.scatter(x, layout, framework="numpy")


# -- plans: the strategy and the bytes of named cases ---------------------------------------
def test_aligned_batch_is_local():
    a = _t(RNG.standard_normal((4, 3, 5)), Layout.slab((4, 3, 5), 0, D4))
    b = _t(RNG.standard_normal((4, 5, 2)), Layout.slab((4, 5, 2), 0, D4))
    plan = dlmg.einsum_plan("bik,bkj->bij", a, b)
    assert plan.strategy == "local"
    assert plan.moved.nbytes == 0 and plan.moved.messages == 0
    assert plan.out == Layout.slab((4, 3, 2), 0, D4)
    np.testing.assert_allclose(dlmg.einsum("bik,bkj->bij", a, b).gather(), a.gather() @ b.gather())


def test_shared_contracted_split_is_pending_sum():
    a = _t(RNG.standard_normal((8, 8)), Layout.slab((8, 8), 1, D4))
    b = _t(RNG.standard_normal((8, 8)), Layout.slab((8, 8), 0, D4))
    plan = dlmg.einsum_plan("ik,kj->ij", a, b, pending=True)
    assert plan.strategy == "pending sum"
    assert plan.moved.nbytes == 0
    assert plan.out == Layout((8, 8), devices=D4, partial="sum")
    # each device multiplies an 8x2 panel by a 2x8 one: 2 * 8 * 2 * 8 flops
    assert [f for _, _, f in plan.steps[0].flops] == [256] * 4
    c = dlmg.einsum("ik,kj->ij", a, b, pending=True)
    assert c.layout.partial == "sum"
    np.testing.assert_allclose(c.gather(), a.gather() @ b.gather())
    # unless asked for, every contraction gives the value: the plan resolves it (a reduce-scatter
    # into row slabs on the addends' devices)
    value = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert value.out == Layout.slab((8, 8), 0, D4) and "resolve" in str(value)
    for got in (a @ b, dlmg.matmul(a, b), dlmg.einsum("ik,kj->ij", a, b), dlmg.tensordot(a, b, axes=1),
                dlmg.dot(a, b)):
        assert got.layout.partial is None
        np.testing.assert_allclose(got.gather(), a.gather() @ b.gather())
    assert dlmg.matmul(a, b, pending=True).layout.partial == "sum"
    assert dlmg.tensordot(a, b, axes=1, pending=True).layout.partial == "sum"


def test_row_slabs_times_replicated_is_local():
    a = _t(RNG.standard_normal((8, 6)), Layout.slab((8, 6), 0, D4))
    b = _t(RNG.standard_normal((6, 5)), Layout.replicated((6, 5), D4))
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert plan.strategy == "local" and plan.moved.nbytes == 0
    assert plan.out == Layout.slab((8, 5), 0, D4)
    np.testing.assert_allclose((a @ b).gather(), a.gather() @ b.gather())


def test_rows_times_columns_moves_the_smaller_operand_with_hand_counted_bytes():
    # A (8x8 float64) in row slabs, B (8x4) in column slabs over 4 devices: B is smaller.
    # Each device needs all of B (8x4) and holds one column (8x1): it receives 8*3 elements.
    a = _t(RNG.standard_normal((8, 8)), Layout.slab((8, 8), 0, D4))
    b = _t(RNG.standard_normal((8, 4)), Layout.slab((8, 4), 1, D4))
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert plan.strategy == "move x1"
    moved = plan.moved
    assert moved.nbytes == 4 * 8 * 3 * 8
    assert moved.messages == 4 * 3
    assert dict(moved.received) == {(0, dlmg.as_device(d)): 8 * 3 * 8 for d in D4}
    assert "move x1[kj]" in str(plan) and "768 bytes" in str(plan)
    np.testing.assert_allclose((a @ b).gather(), a.gather() @ b.gather())


def test_resolving_a_pending_sum_counts_reduce_scatter_and_all_gather():
    a = _t(RNG.standard_normal((8, 8)), Layout.slab((8, 8), 1, D4))
    b = _t(RNG.standard_normal((8, 8)), Layout.slab((8, 8), 0, D4))
    # into row slabs: a reduce-scatter; each device receives its 2x8 rows from 3 others
    plan = dlmg.einsum_plan("ik,kj->ij", a, b, layout=Layout.slab((8, 8), 0, D4))
    assert plan.moved.nbytes == 4 * 3 * 2 * 8 * 8
    # replicated: reduce-scatter then all-gather, 2 (k - 1) / k of the matrix per device
    plan = dlmg.einsum_plan("ik,kj->ij", a, b, layout=Layout.replicated((8, 8), D4))
    assert plan.moved.nbytes == 2 * 4 * 3 * 2 * 8 * 8
    c = dlmg.einsum("ik,kj->ij", a, b, layout=Layout.replicated((8, 8), D4))
    for f in c.fragments:
        np.testing.assert_allclose(f.array, a.gather() @ b.gather())


# -- pending sums --------------------------------------------------------------------------
@pytest.fixture
def pending():
    a = _t(RNG.standard_normal((6, 8)), Layout.slab((6, 8), 1, D4))
    b = _t(RNG.standard_normal((8, 5)), Layout.slab((8, 5), 0, D4))
    return dlmg.einsum("ik,kj->ij", a, b, pending=True), a.gather() @ b.gather()


def test_pending_layout_validation_repr_equality():
    lay = Layout((4, 4), devices=D4, partial="sum")
    assert "partial='sum'" in repr(lay)
    assert lay == Layout((4, 4), devices=D4, partial="sum")
    assert hash(lay) == hash(Layout((4, 4), devices=D4, partial="sum"))
    assert lay != Layout((4, 4), devices=D4)
    assert not lay.same_distribution(Layout((4, 4), devices=D4))
    with pytest.raises(dlmg.LayoutError, match="partial = 'mean'"):
        Layout((4, 4), devices=D4, partial="mean")
    assert Layout((4, 4), devices=D4, partial="max").partial == "max"


def test_linear_operations_keep_the_pending_sum(pending):
    c, want = pending
    d = 3 * c - c / 2 + (-c)
    assert d.layout == c.layout
    np.testing.assert_allclose(d.gather(), 1.5 * want)
    e = c + c
    assert e.layout.partial == "sum"
    np.testing.assert_allclose(e.gather(), 2 * want)
    s = dlmg.sum(c, axis=1)
    assert s.layout.partial == "sum"
    np.testing.assert_allclose(s.gather(), want.sum(axis=1))
    np.testing.assert_allclose(float(dlmg.sum(c)), want.sum())


@pytest.mark.parametrize("op", [lambda c: c + 1, lambda c: c * c, lambda c: dlmg.exp(c), lambda c: 1 / c,
                                lambda c: dlmg.max(c, axis=0), lambda c: abs(c)])
def test_other_operations_resolve_first(pending, op):
    c, want = pending
    got = op(c)
    assert got.layout.partial is None
    value = dlmg.from_fragments([want], Layout.single(want.shape, "cpu:0"))
    np.testing.assert_allclose(got.gather(), op(value).gather())


@pytest.mark.parametrize("target", [
    Layout.replicated((6, 5), D4),
    Layout.slab((6, 5), 0, D4[:3]),
    Layout((6, 5), block=(2, 2), grid=(2, 2), devices=D4),
    Layout.single((6, 5), "cpu:2"),
])
def test_resolve_into_any_layout(pending, target):
    c, want = pending
    r = c.redistribute(target)
    assert r.layout == target
    for f in r.fragments:
        owned = np.ix_(*(target.owned_indices(f.index, m) for m in range(2)))
        np.testing.assert_allclose(np.asarray(f.array), want[owned])


def test_pending_max_resolves():
    parts = [RNG.standard_normal((3, 4)) for _ in range(4)]
    lay = Layout((3, 4), devices=D4, partial="max")
    x = dlmg.from_fragments(parts, lay)
    np.testing.assert_allclose(x.gather(), np.max(parts, axis=0))
    np.testing.assert_allclose((-x).gather(), -np.max(parts, axis=0))  # not kept: resolved first
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        x *= -1.0  # a write that would not keep it


def test_contraction_of_a_pending_lead_stays_pending(pending):
    c, want = pending
    v = _t(RNG.standard_normal(5), Layout.replicated(5, D4))
    out = dlmg.einsum("ij,j->i", c, v)
    np.testing.assert_allclose(out.gather(), want @ v.gather())


# -- the product family ---------------------------------------------------------------------
def test_products_match_numpy():
    x = _t(RNG.standard_normal((3, 4, 5)), Layout((3, 4, 5), block=(2, 1, 3), grid=(2, 2, 1), devices=D4))
    y = _t(RNG.standard_normal((5, 4, 2)), Layout.slab((5, 4, 2), 0, D4[:2]))
    v = _t(RNG.standard_normal(5), Layout.slab(5, 0, D4))
    w = _t(RNG.standard_normal(6), Layout.slab(6, 0, D4[1:]))
    X, Y, V, W = (t.gather() for t in (x, y, v, w))
    np.testing.assert_allclose(dlmg.tensordot(x, y, axes=([1, 2], [1, 0])).gather(),
                               np.tensordot(X, Y, axes=([1, 2], [1, 0])))
    np.testing.assert_allclose(dlmg.tensordot(x, y, axes=1).gather(), np.tensordot(X, Y, axes=1))
    np.testing.assert_allclose(dlmg.matmul(x, v).gather(), X @ V)
    np.testing.assert_allclose((x @ v).gather(), X @ V)
    np.testing.assert_allclose(dlmg.vecdot(x, v).gather(), np.vecdot(X, V) if hasattr(np, "vecdot") else X @ V)
    z = _t(RNG.standard_normal((2, 5, 3)), Layout.slab((2, 5, 3), 1, D4[:3]))
    np.testing.assert_allclose(dlmg.dot(x, z).gather(), np.dot(X, z.gather()))
    np.testing.assert_allclose(dlmg.inner(x, v).gather(), np.inner(X, V))
    np.testing.assert_allclose(dlmg.outer(v, w).gather(), np.outer(V, W))
    np.testing.assert_allclose(float(dlmg.matmul(v, v).gather()), V @ V)


def test_mixed_frameworks_run_in_the_leads_framework():
    torch = pytest.importorskip("torch")
    a = dlmg.scatter(RNG.standard_normal((6, 4)), Layout.slab((6, 4), 0, D4[:2]), framework="torch")
    b = dlmg.scatter(RNG.standard_normal((4, 3)), Layout.replicated((4, 3), D4[:2]), framework="numpy")
    c = a @ b
    assert set(c.frameworks) == {"torch"}
    assert isinstance(c.fragments[0].array, torch.Tensor)
    np.testing.assert_allclose(c.gather(framework="numpy"), a.gather(framework="numpy") @ b.gather())


def test_out_and_layout_arguments():
    a = _t(RNG.standard_normal((4, 6)), Layout.slab((4, 6), 1, D4[:2]))
    b = _t(RNG.standard_normal((6, 3)), Layout.slab((6, 3), 0, D4[:2]))
    out = dlmg.zeros(layout=Layout.slab((4, 3), 0, D4[:2]), dtype="float64", framework="numpy")
    got = dlmg.einsum("ik,kj->ij", a, b, out=out)
    assert got is out
    np.testing.assert_allclose(out.gather(), a.gather() @ b.gather())
    with pytest.raises(ValueError, match="shape"):
        dlmg.einsum("ik,kj->ij", a, b, layout=Layout.single((3, 3)))


@pytest.mark.parametrize("bad, match", [
    (("ij,jk->ik",), "names 2 operands"),
    (("ij,jk->iz", "second"), "output"),
    (("ij->k",), "output"),
])
def test_bad_equations(bad, match):
    a = _t(np.ones((2, 3)), Layout.single((2, 3)))
    b = _t(np.ones((3, 2)), Layout.single((3, 2)))
    ops = (a, b) if bad[0].count(",") and len(bad) > 1 else (a,)
    with pytest.raises(ValueError):
        dlmg.einsum(bad[0], *ops)


def test_bool_and_non_tensors_refused():
    a = _t(np.ones((2, 2), dtype=bool), Layout.single((2, 2)))
    with pytest.raises(dlmg.DtypeError):
        dlmg.einsum("ij,jk", a, a)
    with pytest.raises(TypeError, match="DistributedTensor"):
        dlmg.einsum("ij", np.ones((2, 2)))


# -- SUMMA ----------------------------------------------------------------------------------
def test_two_d_block_cyclic_is_summa_with_hand_counted_bytes():
    n, devices = 512, D4
    lay = Layout((n, n), block=(64, 64), grid=(2, 2), devices=devices)
    A, B = RNG.standard_normal((n, n)), RNG.standard_normal((n, n))
    a, b = _t(A, lay), _t(B, lay)
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert plan.strategy == "summa"
    # every k-block (8 of 64) sends A's panel (n x 64) to the other grid column and
    # B's (64 x n) to the other grid row: K * (M * (pc - 1) + N * (pr - 1)) elements
    assert plan.moved.nbytes == n * (n * 1 + n * 1) * 8
    assert plan.out == lay
    assert "8 panel steps" in str(plan)
    np.testing.assert_allclose((a @ b).gather(), A @ B)


@pytest.mark.parametrize("shape_a, shape_b, grid, blocks", [
    ((30, 26), (26, 10), (2, 3), ((4, 3), (3, 2))),
    ((9, 7), (7, 11), (3, 2), ((2, 2), (2, 5))),
])
def test_summa_uneven_blocks_and_mixed_frameworks(shape_a, shape_b, grid, blocks):
    from dlmg.ops.contract.summa import run_summa, summa_candidate

    pr, pc = grid
    devices = [f"cpu:{i % 4}" for i in range(pr * pc)]
    la = Layout(shape_a, block=blocks[0], grid=(pr, pc), devices=devices)
    lb = Layout(shape_b, block=(blocks[0][1], blocks[1][1]), grid=(pr, pc), devices=devices)
    A, B = RNG.standard_normal(shape_a), RNG.standard_normal(shape_b)
    a = dlmg.scatter(A, la, framework="torch")
    b = dlmg.scatter(B, lb, framework="numpy")
    extents = tuple(sorted({"i": shape_a[0], "k": shape_a[1], "j": shape_b[1]}.items()))
    step = summa_candidate(("x0", "ik", la), ("x1", "kj", lb), "ij", "t1", extents, 8)
    assert step is not None
    c = run_summa(step, a, b, "float64", "ik,kj->ij")
    assert c.layout == step.out
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B)


def test_partitioned_export_describes_the_value_of_a_pending_sum(pending):
    c, want = pending
    np.testing.assert_allclose(dlmg.from_partitioned(c.__partitioned__).gather(), want)


def test_printing_says_pending(pending):
    c, want = pending
    assert "pending sum" in repr(c)
    assert "pending sum" in str(c.layout).splitlines()[0]


# -- cases the property test found ------------------------------------------------------------
def test_full_contraction_to_a_scalar():
    # NumPy's einsum returns a NumPy scalar for 0-d results; fragments must be arrays
    a = _t(RNG.standard_normal((4, 3)), Layout.slab((4, 3), 0, D4[:2]))
    b = _t(RNG.standard_normal((4, 3)), Layout.slab((4, 3), 0, D4[:2]))
    c = dlmg.einsum("ij,ij->", a, b, pending=True)
    assert c.shape == () and c.layout.partial == "sum"
    np.testing.assert_allclose(float(c.gather()), float(np.sum(a.gather() * b.gather())))


def test_lead_split_on_a_letter_the_other_holds_whole():
    # the lead splits k, the other holds k whole on the same devices: not a local pairing
    a = _t(RNG.standard_normal((5, 6)), Layout((5, 6), block=(5, 3), grid=(1, 2), devices=["cpu:3"] * 2))
    b = _t(RNG.standard_normal((4, 6)), Layout.single((4, 6), "cpu:3"))
    np.testing.assert_allclose(dlmg.einsum("da,ca->dc", a, b).gather(), a.gather() @ b.gather().T)
