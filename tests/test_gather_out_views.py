"""Gathering into the same ``out=`` array again: the views dlmg keeps of a small
given array write where that array is now, never into another array of the same
shape, a view of it or memory it has left; large given arrays are not kept."""

from __future__ import annotations

import gc
import pickle
import weakref

import numpy as np
import pytest

import dlmg
from dlmg.movement.copies import GIVEN_VIEWS_MAX_BYTES


def _tensor(n: int, grid: tuple[int, int] = (4, 2), start: float = 0.0) -> dlmg.DistributedTensor:
    layout = dlmg.Layout((n, n), block=(-(-n // grid[0]), -(-n // grid[1])), grid=grid,
                         devices=["cpu"] * (grid[0] * grid[1]))
    return dlmg.scatter(np.arange(n * n, dtype=np.float32).reshape(n, n) + start, layout)


def _refill(dt: dlmg.DistributedTensor, value: float) -> np.ndarray:
    """Write ``value`` into every fragment in place; the whole tensor as it is now."""
    for frag in dt.fragments:
        np.asarray(frag.array)[...] = value
    return np.full(dt.shape, value, np.float32)


def test_gathers_into_one_out_follow_the_fragments():
    dt = _tensor(16)
    out = np.empty((16, 16), np.float32)
    dt.gather(out=out)
    np.testing.assert_array_equal(out, np.arange(256, dtype=np.float32).reshape(16, 16))
    expected = _refill(dt, 7.0)
    assert dt.gather(out=out) is out
    np.testing.assert_array_equal(out, expected)


def test_another_array_of_the_same_shape_gets_the_data_and_the_first_is_left_alone():
    dt = _tensor(16)
    first = np.zeros((16, 16), np.float32)
    dt.gather(out=first)
    kept = first.copy()
    second = np.zeros((16, 16), np.float32)
    expected = _refill(dt, 3.0)
    dt.gather(out=second)
    np.testing.assert_array_equal(second, expected)
    np.testing.assert_array_equal(first, kept)


@pytest.mark.parametrize("make_view", [lambda a: a[...], lambda a: a.view(), lambda a: a.T.T])
def test_a_view_of_the_out_array_is_written_through(make_view):
    dt = _tensor(16)
    out = np.zeros((16, 16), np.float32)
    dt.gather(out=out)
    expected = _refill(dt, 5.0)
    dt.gather(out=make_view(out))
    np.testing.assert_array_equal(out, expected)


def test_a_strided_out_after_a_contiguous_one_of_the_same_memory():
    dt = _tensor(8)
    whole = np.zeros((8, 16), np.float32)
    dt.gather(out=whole[:, :8])
    expected = _refill(dt, 2.0)
    dt.gather(out=whole[:, ::2])
    np.testing.assert_array_equal(whole[:, ::2], expected)
    assert not whole[:, 9::2].any()  # (columns neither gather writes)


def test_an_out_array_moved_to_other_memory_is_written_where_it_is_now():
    dt = _tensor(16)
    out = np.zeros((16, 16), np.float32)
    dt.gather(out=out)
    # grow it (NumPy moves it to a new allocation) and shrink it back to its shape
    out.resize((4096, 64), refcheck=False)
    out.resize((16, 16), refcheck=False)
    expected = _refill(dt, 9.0)
    dt.gather(out=out)
    np.testing.assert_array_equal(out, expected)


def test_a_large_out_array_is_not_kept_alive():
    n = 1024  # 4 MiB of float32
    assert n * n * 4 > GIVEN_VIEWS_MAX_BYTES
    dt = _tensor(n)
    out = np.empty((n, n), np.float32)
    dt.gather(out=out)
    dt.gather(out=out)
    gone = weakref.ref(out)
    del out
    gc.collect()
    assert gone() is None


def test_torch_out_set_onto_other_memory_is_written_there():
    torch = pytest.importorskip("torch", reason="needs PyTorch")
    dt = _tensor(16)
    out = torch.zeros((16, 16), dtype=torch.float32)
    dt.gather(out=out)
    old = out.view(16, 16)  # still the first memory after set_()
    before = out.data_ptr()
    out.set_(torch.zeros((16, 16), dtype=torch.float32))
    assert out.data_ptr() != before
    expected = _refill(dt, 4.0)
    dt.gather(out=out)
    np.testing.assert_array_equal(out.numpy(), expected)
    np.testing.assert_array_equal(old.numpy(), np.arange(256, dtype=np.float32).reshape(16, 16))


def test_a_plans_copies_into_a_destination_hash_and_compare_as_the_plain_tuple():
    src = dlmg.Layout((16, 16), block=(4, 8), grid=(4, 2), devices=["cpu"] * 8)
    dst = dlmg.Layout((16, 16), block=(8, 4), grid=(2, 4), devices=["cpu"] * 8)
    plan = dlmg.plan_redistribution(src, dst)
    for index in range(8):
        copies = plan.copies_into(index)
        plain = tuple(copies)
        assert copies and copies == plain and hash(copies) == hash(plain) == hash(copies)
        assert {plain: index}[copies] == index


def test_a_plans_copies_pickle_without_their_kept_hash():
    layout = dlmg.Layout((16, 16), block=(4, 8), grid=(4, 2), devices=["cpu"] * 8)
    copies = dlmg.plan_redistribution(layout, dlmg.Layout((16, 16), devices=["cpu"])).copies_into(0)
    hash(copies)
    again = pickle.loads(pickle.dumps(copies))
    assert type(again) is type(copies) and again == copies and not hasattr(again, "_hash")
