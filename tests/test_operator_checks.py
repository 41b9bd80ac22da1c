"""An operator checks its operands once, in dispatch's collect step, whichever path runs it.

The checks (pending sums, fragments against their layouts, layouts and broadcasting)
run before any fragment is read: on the per-fragment path (mixed frameworks), on the
list path (torch only), when a temporary's memory is reused (``a * b + c``) and when
an operand is broadcast. Each operand's fragments are checked exactly once per
operator, and a fragment that changed shape is refused on every path, a reused
temporary's too. Results carry the placement they would be found to have.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg.errors import FragmentError, LayoutError, LayoutMismatchError
from dlmg.ops import dispatch
from dlmg.ops._placement import Placement

torch = pytest.importorskip("torch")

LAYOUT = dlmg.Layout.slab((8, 4), 0, ["cpu"] * 4)


def _tensor(kind: str, value: float) -> tuple[list, dlmg.DistributedTensor]:
    if kind == "torch":
        arrays = [torch.full((2, 4), value) for _ in range(4)]
    else:  # two NumPy fragments, two torch fragments: the per-fragment path
        arrays = [np.full((2, 4), value, np.float32) for _ in range(2)] + [torch.full((2, 4), value) for _ in range(2)]
    return arrays, dlmg.from_fragments(arrays, LAYOUT)


@pytest.fixture
def checks(monkeypatch):
    """The fragment tuples that dispatch checks against their layouts, in order."""
    seen: list = []
    verify = dispatch.check_fragments

    def counting(fragments, kept):
        seen.append(fragments)
        return verify(fragments, kept)

    monkeypatch.setattr(dispatch, "check_fragments", counting)
    return seen


@pytest.mark.parametrize("kind", ["torch", "mixed"])
def test_each_operand_is_checked_once_per_operator(kind, checks):
    _, a = _tensor(kind, 1.0)
    _, b = _tensor(kind, 2.0)
    _, c = _tensor(kind, 3.0)
    a * b + c  # first: plans and placements found
    checks.clear()
    product = a * b
    assert [f is a.fragments or f is b.fragments for f in checks] == [True, True]
    checks.clear()
    out = product + c  # product is named here: no reuse of its memory
    assert len(checks) == 2 and checks[0] is product.fragments and checks[1] is c.fragments
    checks.clear()
    out = a * b + c  # the temporary's memory is reused
    assert len(checks) == 4
    np.testing.assert_allclose(np.asarray(out.gather(framework="numpy")), np.full((8, 4), 5.0))


@pytest.mark.parametrize("kind", ["torch", "mixed"])
@pytest.mark.parametrize("expression", ["a * b", "a * b + c", "c + a * 2", "a + row"])
def test_a_fragment_that_changed_shape_is_refused_on_every_path(kind, expression):
    arrays, a = _tensor(kind, 1.0)
    _, b = _tensor(kind, 2.0)
    _, c = _tensor(kind, 3.0)
    row = dlmg.from_fragments([torch.ones(4)], dlmg.Layout((4,), devices=["cpu"]))
    scope = {"a": a, "b": b, "c": c, "row": row}
    eval(expression, scope)  # plans and placements found first
    arrays[3].resize_(3, 4)  # torch: the last fragment changes shape under dlmg
    with pytest.raises(FragmentError, match="changed under dlmg"):
        eval(expression, scope)


def test_layouts_and_pending_sums_are_still_checked():
    _, a = _tensor("torch", 1.0)
    other = dlmg.from_fragments([torch.ones(8, 1) for _ in range(4)], dlmg.Layout.slab((8, 4), 1, ["cpu"] * 4))
    with dlmg.strict(), pytest.raises(LayoutMismatchError, match="operator \\*"):
        a * other
    pending = dlmg.from_fragments([torch.ones(8, 4), torch.ones(8, 4)],
                                  dlmg.Layout((8, 4), devices=["cpu", "cpu"], partial="sum"))
    np.testing.assert_array_equal((pending * pending).gather(framework="numpy"), np.full((8, 4), 4.0))
    with pytest.raises(LayoutError, match="pending sum"):
        pending *= pending


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_a_temporary_changed_while_held_elsewhere_is_refused(kind):
    # the reuse of a temporary's memory (refcount: nobody holds it now) skips no check:
    # it may have been held, and changed, before it was handed back as a temporary
    arrays = [np.full((2, 4), 1.0, np.float32) for _ in range(4)]
    if kind == "torch":
        arrays = [torch.from_numpy(x) for x in arrays]
    a, b, c = (dlmg.from_fragments([x * k for x in arrays], LAYOUT) for k in (1, 2, 3))
    held = {"t": a * b}
    changed = held["t"].fragments[2].array
    if kind == "torch":
        changed.resize_(4, 2)
    else:
        changed.shape = (4, 2)
    with pytest.raises(FragmentError, match="fragment 2 .*changed under dlmg"):
        held.pop("t") + c


def _jax_tensor(value: float) -> dlmg.DistributedTensor:
    jax = pytest.importorskip("jax")
    devices = jax.devices("cpu")[:4]
    layout = dlmg.Layout.slab((8, 4), 0, [f"cpu:{d.id}" for d in devices])
    return dlmg.from_fragments([jax.device_put(np.full((2, 4), value, np.float32), d) for d in devices], layout)


@pytest.mark.parametrize("kind", ["torch", "numpy", "mixed", "jax"])
def test_a_result_carries_the_placement_it_would_find(kind):
    # results are built with their placement in one pass: it must be the one found afresh
    if kind == "jax":
        a, b = _jax_tensor(1.0), _jax_tensor(2.0)
    elif kind == "numpy":
        a, b = (dlmg.from_fragments([np.full((2, 4), v, np.float32) for _ in range(4)], LAYOUT) for v in (1, 2))
    else:
        (_, a), (_, b) = _tensor(kind, 1.0), _tensor(kind, 2.0)
    for result in (a * b, a + 1.5, a * b + b):
        kept, found = result._placement, Placement(result)
        assert kept is not None and kept.fragments is result.fragments
        for field in ("indices", "frameworks", "mutable", "dense", "rank", "shapes", "foreign"):
            assert getattr(kept, field) == getattr(found, field), field
        assert [e is f for e, f in zip(kept.executors, found.executors)] == [True] * len(found.executors)
        assert [x is y for x, y in zip(kept.arrays, found.arrays)] == [True] * len(found.arrays)
        assert len(kept.arrays) == len(found.arrays)
