"""Contractions' two fast paths: fragments on one device joined into one product, and a whole
contraction handed to JAX's compiler when every operand is JAX's and sharded as JAX can say."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from dlmg.ops.contract.merge import Join, joins

RNG = np.random.default_rng(11)
J8 = [f"cpu:{i}" for i in range(8)]


def _step(plan):
    (step,) = plan.steps
    return step


# -- joined products -------------------------------------------------------------------------
def test_row_slabs_on_one_device_make_one_product_cut_into_views():
    A, B = RNG.standard_normal((8, 6)), RNG.standard_normal((6, 5))
    a = dlmg.scatter(A, Layout.slab(A.shape, 0, ["cpu"] * 4), framework="numpy")
    b = dlmg.scatter(B, Layout.replicated(B.shape, ["cpu"] * 4), framework="numpy")
    step = _step(dlmg.einsum_plan("ik,kj->ij", a, b))
    found, done = joins(step.subscripts, a.layout, b.layout, step.pairing)
    # one device: every product reads B's replica 0
    assert found == (Join(((0, 0, 0), (1, 1, 0), (2, 2, 0), (3, 3, 0)), 0, 0),)
    assert done == {0, 1, 2, 3}
    c = a @ b
    bases = {id(f.array.base) for f in c.fragments}
    assert len(bases) == 1 and c.fragments[0].array.base is not None  # slices of one result
    np.testing.assert_allclose(c.gather(), A @ B)


def test_two_devices_join_their_own_fragments():
    A, B = RNG.standard_normal((8, 3)), RNG.standard_normal((3, 2))
    devices = ["cpu:0", "cpu:1", "cpu:0", "cpu:1"]
    a = dlmg.scatter(A, Layout.slab(A.shape, 0, devices), framework="numpy")
    b = dlmg.scatter(B, Layout.replicated(B.shape, devices), framework="numpy")
    step = _step(dlmg.einsum_plan("ik,kj->ij", a, b))
    found, _ = joins(step.subscripts, a.layout, b.layout, step.pairing)
    assert sorted(j.triples for j in found) == [((0, 0, 0), (2, 2, 0)), ((1, 1, 1), (3, 3, 1))]
    np.testing.assert_allclose((a @ b).gather(), A @ B)


def test_block_cyclic_rows_join_and_land_in_their_fragments():
    A, B = RNG.standard_normal((10, 4)), RNG.standard_normal((4, 3))
    layout = Layout(A.shape, block=(2, 4), grid=(3, 1), devices=["cpu"] * 3)
    a = dlmg.scatter(A, layout, framework="numpy")
    b = dlmg.scatter(B, Layout.replicated(B.shape, ["cpu"] * 3), framework="numpy")
    c = a @ b
    assert [f.array.shape for f in c.fragments] == [tuple(s) for s in (f.shape for f in c.layout.fragments)]
    np.testing.assert_allclose(c.gather(), A @ B)


@pytest.mark.parametrize("case", ["pending", "two split modes", "contracted split", "one per device"])
def test_no_join_where_products_do_not_share_the_follower(case):
    A, B = RNG.standard_normal((8, 8)), RNG.standard_normal((8, 4))
    one = ["cpu"] * 4
    if case == "pending":
        la, lb = Layout.slab(A.shape, 1, one), Layout.slab(B.shape, 0, one)
    elif case == "two split modes":
        la, lb = Layout(A.shape, grid=(2, 2), devices=one), Layout(B.shape, grid=(2, 1), devices=["cpu"] * 2)
    elif case == "contracted split":
        la, lb = Layout.slab(A.shape, 1, one), Layout.replicated(B.shape, one)
    else:
        la, lb = Layout.slab(A.shape, 0, J8[:4]), Layout.replicated(B.shape, J8[:4])
    a, b = (dlmg.scatter(x, lay, framework="numpy") for x, lay in ((A, la), (B, lb)))
    plan = dlmg.einsum_plan("ik,kj->ij", a, b, pending=True)
    for step in plan.steps:
        if hasattr(step, "pairing") and step.follower is not None:
            assert joins(step.subscripts, a.layout if step.lead == "x0" else b.layout,
                         b.layout if step.lead == "x0" else a.layout, step.pairing) == ((), frozenset())
    np.testing.assert_allclose((a @ b).redistribute(Layout.single((8, 4))).gather(), A @ B)


def test_mixed_frameworks_on_one_device_fall_back_to_one_product_each():
    torch = pytest.importorskip("torch")
    A, B = RNG.standard_normal((4, 3)), RNG.standard_normal((3, 2))
    layout = Layout.slab(A.shape, 0, ["cpu"] * 2)
    rows = [torch.from_numpy(A[:2].copy()), A[2:].copy()]  # a torch row slab and a NumPy one
    a = dlmg.from_fragments(rows, layout)
    b = dlmg.scatter(B, Layout.replicated(B.shape, ["cpu"] * 2), framework="numpy")
    c = a @ b
    assert isinstance(c.fragments[0].array, torch.Tensor) and isinstance(c.fragments[1].array, np.ndarray)
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B)


def test_torch_fragments_join_too():
    torch = pytest.importorskip("torch")
    A, B = RNG.standard_normal((6, 4)), RNG.standard_normal((4, 5))
    a = dlmg.scatter(A, Layout.slab(A.shape, 0, ["cpu"] * 3), framework="torch")
    b = dlmg.scatter(B, Layout.replicated(B.shape, ["cpu"] * 3), framework="torch")
    c = a @ b
    assert all(isinstance(f.array, torch.Tensor) for f in c.fragments)
    assert len({f.array.untyped_storage().data_ptr() for f in c.fragments}) == 1
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B)


# -- one JAX program ---------------------------------------------------------------------------
CALL = "jax.jit(jnp.einsum) over NamedShardings"


def _jax(x, layout):
    pytest.importorskip("jax")
    return dlmg.scatter(np.asarray(x, dtype=np.float32), layout, framework="jax")


def test_all_jax_sharded_operands_run_as_one_program_shown_in_the_plan():
    A, B = RNG.standard_normal((16, 8)), RNG.standard_normal((8, 4))
    a = _jax(A, Layout.slab(A.shape, 0, J8))
    b = _jax(B, Layout.replicated(B.shape, J8))
    plan = dlmg.einsum_plan("ik,kj->ij", a, b)
    assert plan.delegated == CALL and f"runs as one call: {CALL}" in str(plan)
    c = dlmg.einsum("ik,kj->ij", a, b)
    assert c.layout == plan.out == Layout.slab((16, 4), 0, J8)
    assert [str(f.device) for f in c.fragments] == J8
    assert all(f.framework == "jax" and {str(d.id) for d in f.array.devices()} == {J8[i][4:]}
               for i, f in enumerate(c.fragments))
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B, rtol=1e-5, atol=1e-5)


def test_a_pending_result_is_not_delegated_but_a_named_layout_is():
    A, B = RNG.standard_normal((8, 16)), RNG.standard_normal((16, 8))
    a = _jax(A, Layout.slab(A.shape, 1, J8))
    b = _jax(B, Layout.slab(B.shape, 0, J8))
    assert dlmg.einsum_plan("ik,kj->ij", a, b, pending=True).delegated is None  # the pending sum stays dlmg's
    assert dlmg.einsum("ik,kj->ij", a, b, pending=True).layout.partial == "sum"
    rows = Layout.slab((8, 8), 0, J8)
    assert dlmg.einsum_plan("ik,kj->ij", a, b, layout=rows).delegated == CALL
    c = dlmg.einsum("ik,kj->ij", a, b, layout=rows)
    assert c.layout == rows
    np.testing.assert_allclose(c.gather(framework="numpy"), A @ B, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["block-cyclic", "mixed frameworks", "mixed dtypes", "other devices"])
def test_not_delegated_where_jax_cannot_say_it_and_still_right(case):
    A, B = RNG.standard_normal((16, 8)), RNG.standard_normal((8, 4))
    a = _jax(A, Layout(A.shape, block=(1, 8), grid=(8, 1), devices=J8) if case == "block-cyclic"
             else Layout.slab(A.shape, 0, J8))
    if case == "mixed frameworks":
        b = dlmg.scatter(B.astype(np.float32), Layout.replicated(B.shape, J8), framework="numpy")
    elif case == "mixed dtypes":
        b = _jax(B, Layout.replicated(B.shape, J8)).astype("float16")
    elif case == "other devices":
        b = _jax(B, Layout.replicated(B.shape, J8[:4])).redistribute(Layout.slab(B.shape, 0, J8[:4]))
    else:
        b = _jax(B, Layout.replicated(B.shape, J8))
    assert dlmg.einsum_plan("ik,kj->ij", a, b).delegated is None
    c = dlmg.einsum("ik,kj->ij", a, b).redistribute(Layout.single((16, 4)))
    tol = 1e-2 if case == "mixed dtypes" else 1e-4  # B rounded to float16
    np.testing.assert_allclose(np.asarray(c.gather(framework="numpy"), dtype=np.float64), A @ B,
                               rtol=tol, atol=tol)
