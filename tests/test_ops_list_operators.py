"""Arithmetic operators on torch fragments run as one list operation per device
(``Adapter.list_operator``: torch's ``_foreach_*``). Results, dtypes and errors
equal torch's operators applied fragment by fragment; what the lists cannot
cover (gradients, padded fragments, other frameworks, 0-d arrays) keeps the
per-fragment path."""

from __future__ import annotations

import operator

import numpy as np
import pytest

import dlmg
from dlmg.ops import pointwise
from dlmg.ops._lists import on_lists

from _ops_support import compare_operator, same_outcome

torch = pytest.importorskip("torch")

DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)]
DTYPES = ["bool", "uint8", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64"]
OPERATORS = ["add", "sub", "mul", "truediv", "pow"]


def fragments(dtype: str, device: str, seed: int, n: int = 4) -> list:
    rng = np.random.default_rng(seed)
    values = torch.from_numpy(rng.integers(1, 5, size=(n * 3, 5)))
    return [p.to(getattr(torch, dtype)).to(device) for p in values.split(3)]


def wrap(frags: list, device: str):
    layout = dlmg.Layout.slab((3 * len(frags), 5), axis=0, devices=[device] * len(frags))
    return dlmg.from_fragments(frags, layout)


def same(got, want) -> None:
    def arrays(g, w):
        assert g.dtype == w.dtype and g.device == w.device
        assert torch.equal(g.cpu(), w.cpu()), (g, w)

    same_outcome(got, want, arrays)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", OPERATORS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_operators_equal_torch_fragment_by_fragment(device, name, dtype):
    op = getattr(operator, name)
    a, b = wrap(fragments(dtype, device, 1), device), wrap(fragments(dtype, device, 2), device)
    c = wrap(fragments("float32", device, 3), device)
    compare_operator(op, a, b, c, same)


@pytest.mark.parametrize("device", DEVICES)
def test_list_operations_run_and_results_are_new_memory(device):
    fa, fb = fragments("float32", device, 1), fragments("float32", device, 2)
    a, b = wrap(fa, device), wrap(fb, device)
    out = on_lists("multiply", a, b, False, "operator *")
    assert out is not None
    pointers = {x.data_ptr() for x in fa + fb}
    assert all(f.array.data_ptr() not in pointers for f in out.fragments)
    assert on_lists("add", a, 2.0, False, "operator +") is not None
    assert all(torch.equal(x, y) for x, y in zip(fa, fragments("float32", device, 1)))  # operands unchanged


@pytest.mark.parametrize("device", DEVICES)
def test_temporaries_are_written_in_place_through_the_lists(device):
    fa, fb, fc = (fragments("float32", device, s) for s in (1, 2, 3))
    a, b, c = (wrap(f, device) for f in (fa, fb, fc))
    before = pointwise.ELIDED[0]
    y = a * b + c - 1.5  # the temporary a * b takes + c and - 1.5 in its memory
    assert pointwise.ELIDED[0] == before + 2
    for got, x, w, z in zip(y.fragments, fa, fb, fc):
        assert torch.equal(got.array, x * w + z - 1.5)


def test_what_the_lists_do_not_cover_keeps_the_per_fragment_path():
    fa, fb = fragments("float32", "cpu", 1), fragments("float32", "cpu", 2)
    a, b = wrap(fa, "cpu"), wrap(fb, "cpu")
    assert on_lists("add", a, np.float32(2), False, "operator +") is None  # not a Python scalar
    assert on_lists("floor_divide", a, b, False, "operator //") is None  # no such list operation
    grad = wrap([x.clone().requires_grad_() for x in fa], "cpu")
    assert on_lists("add", grad, b, False, "operator +") is None
    summed = grad + b  # autograd records the per-fragment operators
    assert all(f.array.grad_fn is not None for f in summed.fragments)
    mixed = dlmg.from_fragments([fa[0].numpy(), fa[1], fa[2], fa[3]], a.layout)
    assert on_lists("add", mixed, 1, False, "operator +") is None
    np.testing.assert_array_equal((mixed + 1).gather(framework="numpy"), torch.cat(fa).numpy() + 1)
    numpy_b = dlmg.from_fragments([x.numpy() for x in fb], a.layout)
    assert on_lists("add", a, numpy_b, False, "operator +") is None  # operands of two frameworks
    np.testing.assert_array_equal((a + numpy_b).gather(framework="numpy"), (torch.cat(fa) + torch.cat(fb)).numpy())


def test_padded_fragments_keep_the_per_fragment_path():
    # blocks apart in memory: the fragments are padded memory, not arrays
    layout = dlmg.Layout((10, 7), block=(3, 2), grid=(2, 2), devices=["cpu"] * 4,
                         element_strides=(4, 1), block_strides=(16, 6))
    x = np.arange(70, dtype=np.float32).reshape(10, 7)
    t = dlmg.scatter(torch.from_numpy(x), layout)
    assert all(f.is_padded for f in t.fragments)
    assert on_lists("add", t, 1, False, "operator +") is None
    with pytest.raises(dlmg.FragmentError, match="padded blocks"):  # the per-fragment path says why
        t + 1


def test_an_in_place_refusal_names_a_fragment():
    # in place there is nothing to fall back on: the refusal is raised, naming the fragment
    a = wrap(fragments("int32", "cpu", 1), "cpu")
    b = wrap(fragments("float32", "cpu", 2), "cpu")
    before = [f.array.clone() for f in a.fragments]
    with pytest.raises(dlmg.FragmentError, match="operator \\+.*fragment 0"):
        on_lists("add", a, b, True, "operator +")  # float results cannot be written into int32
    assert all(torch.equal(f.array, x) for f, x in zip(a.fragments, before))


def test_a_temporary_meeting_another_layout_is_refused():
    # fragments of the same shapes in another distribution: the layouts differ,
    # whether the left operand is a temporary (written in place) or not
    a = dlmg.from_fragments([torch.full((3, 5), float(k)) for k in range(4)], dlmg.Layout.slab((12, 5), 0, ["cpu"] * 4))
    cyclic = dlmg.Layout((12, 5), block=(1, 5), grid=(4, 1), devices=["cpu"] * 4)
    b = dlmg.scatter(torch.arange(60.0).reshape(12, 5), cyclic)
    assert on_lists("add", a, b, True, "operator +") is None
    with pytest.raises(dlmg.LayoutMismatchError):
        (a * 1.0) + b
    with pytest.raises(dlmg.LayoutMismatchError):
        a + b
