"""The device rule and the alignment rule.

Results of the namespace's functions carry their inputs' ``device``; a reduction over a
split mode is an all-reduce whose result is replicated on the input's devices, so it
combines with ``xp.zeros(n, device=x.device)`` and broadcasts against ``x`` without a
move. Operators align operands as the namespace's functions do; ``dlmg.explain`` shows
the moves and ``dlmg.strict()`` refuses them.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp
from dlmg import Layout, LayoutMismatchError

HOST = np.arange(32.0).reshape(8, 4) % 7 - 2.5
FOUR = [f"cpu:{i}" for i in range(4)]


def rows(framework: str = "numpy", devices=FOUR):
    pytest.importorskip(framework)
    host = HOST.astype(np.float32) if framework == "jax" else HOST  # (JAX without x64)
    return dlmg.scatter(host, Layout.slab(HOST.shape, 0, devices), framework=framework)


FUNCTIONS = {
    "sum(axis=0)": lambda x: xp.sum(x, axis=0),
    "mean(axis=0)": lambda x: xp.mean(x, axis=0),
    "max(axis=0, keepdims)": lambda x: xp.max(x, axis=0, keepdims=True),
    "argmax(axis=0)": lambda x: xp.argmax(x, axis=0),
    "std(axis=0)": lambda x: xp.std(x, axis=0),
    "sum(axis=1)": lambda x: xp.sum(x, axis=1),
    "sum()": lambda x: xp.sum(x),
    "take": lambda x: xp.take(x, xp.asarray([0, 5, 2], device=x.device, dtype=xp.int32), axis=0),
    "x[mask]": lambda x: x[x[:, 0] > 0],
    "x[:, 1]": lambda x: x[:, 1],
    "sort(axis=0)": lambda x: xp.sort(x, axis=0),
    "unique_values": lambda x: xp.unique_values(x),
    "linalg.vector_norm": lambda x: xp.linalg.vector_norm(x, axis=1),
    "concat": lambda x: xp.concat([x, x]),
}


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_results_carry_their_inputs_device(name, framework):
    x = rows(framework)
    out = FUNCTIONS[name](x)
    assert isinstance(out, dlmg.DistributedTensor)
    assert out.device == x.device, (name, out.device, x.device)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_a_reduction_over_the_split_mode_is_replicated_on_the_inputs_devices(framework):
    x = rows(framework)
    total = xp.sum(x, axis=0)
    assert total.layout == Layout.replicated((4,), FOUR)
    assert [f.framework for f in total.fragments] == [framework] * 4
    for frag in total.fragments:  # every replica holds the whole value, in memory of its own
        np.testing.assert_allclose(np.asarray(frag.array), HOST.sum(axis=0))
    assert len({id(f.array) for f in total.fragments}) == 4


def test_creation_on_x_device_combines_with_reductions_and_with_x_without_a_move():
    x = rows()
    zeros = xp.zeros(4, device=x.device, dtype=x.dtype)
    total = xp.sum(x, axis=0)
    assert not dlmg.explain(total, zeros).moves_data  # each replica is sliced where it lies
    assert not dlmg.explain(x, total).moves_data  # the replicated sum broadcasts in place
    with dlmg.strict():  # so nothing here needs a move
        both = zeros + total
        centred = x - xp.mean(x, axis=0)
        scaled = x / xp.std(x, axis=0)
    assert both.layout == zeros.layout and both.device == x.device
    np.testing.assert_allclose(both.gather(), HOST.sum(axis=0))
    np.testing.assert_allclose(centred.gather(), HOST - HOST.mean(axis=0))
    np.testing.assert_allclose(scaled.gather(), HOST / HOST.std(axis=0))
    assert centred.layout == x.layout
    zeros += total  # in place into zeros' layout, again without a move
    np.testing.assert_allclose(zeros.gather(), HOST.sum(axis=0))


def test_operators_align_as_the_namespace_does_and_explain_shows_the_move():
    x = rows()
    cols = x.redistribute(Layout.slab(HOST.shape, 1, FOUR))
    plan = dlmg.explain(x, cols)
    assert plan.layout == x.layout and plan.moves_data
    assert [m.how for m in plan.moves] == ["as is", "redistribute"]
    assert plan.moves[1].plan is not None and "redistribute" in str(plan)
    np.testing.assert_array_equal((x + cols).gather(), 2 * HOST)
    np.testing.assert_array_equal(xp.add(x, cols).gather(), 2 * HOST)
    np.testing.assert_array_equal((cols * x).gather(), HOST * HOST)  # the first split operand leads
    assert (cols * x).layout == cols.layout
    small = xp.zeros(4, device=x.device, dtype=x.dtype)  # a slab of 4 values: made whole to broadcast
    assert [m.how for m in dlmg.explain(x, small).moves] == ["as is", "all-gather"]
    np.testing.assert_array_equal((x + small).gather(), HOST)


def test_strict_refuses_every_implicit_move_naming_the_explicit_one():
    x = rows()
    cols = x.redistribute(Layout.slab(HOST.shape, 1, FOUR))
    small = xp.ones(4, device=x.device, dtype=x.dtype)
    with dlmg.strict():
        assert dlmg.strict_enabled()
        for attempt in (lambda: x + cols, lambda: xp.add(x, cols), lambda: x * small,
                        lambda: xp.where(x > 0, x, cols)):
            with pytest.raises(LayoutMismatchError, match=r"strict.*redistribute"):
                attempt()
        with dlmg.strict(False):
            np.testing.assert_array_equal((x + cols).gather(), 2 * HOST)
    assert not dlmg.strict_enabled()
    np.testing.assert_array_equal((x * small).gather(), HOST)


def test_map_fragments_keeps_identical_layouts():
    x = rows()
    cols = x.redistribute(Layout.slab(HOST.shape, 1, FOUR))
    with pytest.raises(LayoutMismatchError, match="redistribute"):
        dlmg.map_fragments(lambda a, b: a + b, x, cols)
    with dlmg.strict(), pytest.raises(LayoutMismatchError):  # the namespace's functions: only when strict
        dlmg.add(x, cols)
    np.testing.assert_array_equal(dlmg.add(x, cols).gather(), 2 * HOST)


def test_replicated_operands_give_replicated_results_only_together():
    x = rows()
    a, b = xp.sum(x, axis=0), xp.max(x, axis=0)
    assert (a + b).layout.is_replicated  # every operand replicated the same way
    assert not (a + xp.zeros(4, device=x.device, dtype=x.dtype)).layout.is_replicated


def test_assignment_through_a_mask_of_another_framework():
    """A mask collected for an assignment lands in the framework of the tensor written."""
    x = rows("torch")
    mask = dlmg.scatter(HOST > 0, Layout.single(HOST.shape, "cpu:1"))  # NumPy, another layout: collected
    x[mask] = 0.0
    np.testing.assert_array_equal(x.gather(framework="numpy"), np.where(HOST > 0, 0.0, HOST))
    total = xp.sum(x)  # 0-d, replicated on x's devices (scipy.stats.pearsonr writes one so)
    total[total > -1e9] = xp.asarray([5.0], device=x.device)
    assert float(total) == 5.0
