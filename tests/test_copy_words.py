"""The word a strided copy moves elements in (``copy_word``): every side must read
as whole words at word-aligned addresses, and the word is the widest that does.
Checked against NumPy views of random strided slices of one buffer, whose copy in
words must equal the copy element by element; the GPU paths that use it are in
``test_gpu_copies.py``."""

from __future__ import annotations

import numpy as np
import pytest

from dlmg.adapters._common import copy_word

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_UINTS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _fits(word: int, shape: tuple[int, ...], itemsize: int, sides: list[tuple[int, tuple[int, ...]]]) -> bool:
    """The rule stated independently: contiguous last mode a whole number of words
    long, word-aligned addresses and other strides."""
    return all(
        strides[-1] == itemsize and (shape[-1] * itemsize) % word == 0 and address % word == 0
        and all(s % word == 0 for s in strides[:-1])
        for address, strides in sides
    )


@st.composite
def _strided_view(draw, buffer: np.ndarray, ndim: int, shape: tuple[int, ...]):
    """A view of ``buffer`` (its ``ndim`` modes) of ``shape``: a start and a step per mode,
    the last mode contiguous or not."""
    index = []
    for axis in range(ndim):
        room = buffer.shape[axis]
        step = draw(st.integers(1, max(1, (room - 1) // max(1, shape[axis] - 1))) if shape[axis] > 1 else st.just(1))
        start = draw(st.integers(0, room - 1 - (shape[axis] - 1) * step))
        index.append(slice(start, start + (shape[axis] - 1) * step + 1, step))
    return buffer[tuple(index)]


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_copy_word_reads_both_sides_as_whole_words_and_is_the_widest(data):
    itemsize = data.draw(st.sampled_from([1, 2, 4, 8]))
    widest = data.draw(st.sampled_from([8, 16]))
    ndim = data.draw(st.integers(1, 3))
    shape = tuple(data.draw(st.integers(1, 12)) for _ in range(ndim))
    dtype = _UINTS[itemsize]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    room = tuple(3 * n + 5 for n in shape)
    src_buffer = rng.integers(0, 200, size=room).astype(dtype)
    dst_buffer = np.zeros(room, dtype)
    src = data.draw(_strided_view(src_buffer, ndim, shape))
    dst = data.draw(_strided_view(dst_buffer, ndim, shape))
    sides = [(a.ctypes.data, a.strides) for a in (dst, src)]
    word = copy_word(shape, itemsize, widest, *sides)

    assert itemsize <= word <= max(itemsize, widest) and word & (word - 1) == 0
    if word > itemsize:
        assert _fits(word, shape, itemsize, sides)
        if word <= 8:  # NumPy has unsigned words up to 8 bytes
            before = dst_buffer.copy()
            dst.view(_UINTS[word])[...] = src.view(_UINTS[word])
            np.testing.assert_array_equal(dst, src)
            outside = np.ones(dst_buffer.size, bool)
            outside[_flat_positions(dst, dst_buffer)] = False
            np.testing.assert_array_equal(dst_buffer.ravel()[outside], before.ravel()[outside])  # only the view written
    wider = 2 * word
    if wider <= widest:
        assert not _fits(wider, shape, itemsize, sides)


def _flat_positions(view: np.ndarray, buffer: np.ndarray) -> np.ndarray:
    """Flat indices into ``buffer`` of every element of ``view``."""
    offset = (view.ctypes.data - buffer.ctypes.data) // buffer.itemsize
    steps = [s // buffer.itemsize for s in view.strides]
    grids = np.meshgrid(*[np.arange(n) * step for n, step in zip(view.shape, steps)], indexing="ij")
    return (offset + sum(grids)).ravel()


@pytest.mark.parametrize(
    "shape, itemsize, sides, word",
    [
        ((4, 6), 4, [(1024, (96, 4)), (2048, (24, 4))], 8),  # 24-byte rows: 8-byte words, not 16
        ((4, 8), 4, [(1024, (96, 4)), (2048, (32, 4))], 16),
        ((4, 8), 4, [(1028, (96, 4)), (2048, (32, 4))], 4),  # an address 4 bytes into a word
        ((4, 8), 4, [(1024, (36, 4)), (2048, (32, 4))], 4),  # a row pitch of 36 bytes
        ((4, 8), 4, [(1024, (4, 16)), (2048, (32, 4))], 4),  # a strided last mode
        ((1, 8), 2, [(1024, (2, 2)), (2048, (16, 2))], 2),  # extent 1, stride 2 bytes: a wider view refuses it
        ((0, 8), 4, [(1024, (32, 4)), (2048, (32, 4))], 4),  # empty
        ((), 4, [(1024, ()), (2048, ())], 4),  # 0-d
        ((4, 8), 16, [(1024, (256, 16)), (2048, (128, 16))], 16),  # elements of a word already
    ],
    ids=["24-byte-rows", "16-byte-words", "unaligned-address", "odd-pitch", "strided-last-mode", "extent-1-stride",
         "empty", "0-d", "wide-elements"],
)
def test_copy_word_cases(shape, itemsize, sides, word):
    assert copy_word(shape, itemsize, 16, *sides) == word


_DTYPES = ["bool", "uint8", "float16", "float32", "complex64", "float64", "complex128"]


@settings(max_examples=60, deadline=None)
@given(
    dtype=st.sampled_from(_DTYPES),
    columns=st.integers(1, 70),
    rows=st.sampled_from([3000, 20000]),
    step=st.integers(1, 3),
    start=st.integers(0, 3),
    direction=st.sampled_from(["into", "out of"]),
)
def test_numpy_strided_copies_of_whole_rows_write_the_view_and_only_it(dtype, columns, rows, step, start, direction):
    # large strided copies through the NumPy adapter move each row as one element
    # where the rows allow it (64 KiB and more for rows of at most 64 bytes, 1 MiB for
    # longer ones); whichever way, the view gets the source and nothing else changes
    from dlmg.registry import get_adapter

    rng = np.random.default_rng(columns * 7 + rows)
    width = columns + 5
    buffer = (rng.integers(0, 100, size=(rows * step, width)) % (2 if dtype == "bool" else 100)).astype(dtype)
    before = buffer.copy()
    values = (rng.integers(100, 200, size=(rows, columns)) % (2 if dtype == "bool" else 256)).astype(dtype)
    view = buffer[::step, start:start + columns]
    adapter = get_adapter("numpy")
    if direction == "into":
        adapter.copy_into(view, values)
        expected = before.copy()
        expected[::step, start:start + columns] = values
        np.testing.assert_array_equal(buffer, expected)
    else:
        out = np.zeros((rows, columns), dtype)
        adapter.copy_into(out, view)
        np.testing.assert_array_equal(out, before[::step, start:start + columns])
        np.testing.assert_array_equal(buffer, before)


def test_numpy_copies_take_whole_rows_only_where_they_pay():
    from dlmg.adapters.numpy import _as_rows

    big = np.zeros((4096, 64), np.float32)
    rows = np.ones((2048, 16), np.float32)
    dst, src = _as_rows(np, big[::2, :16], rows)  # 64-byte rows, 128 KiB: rows
    assert dst.dtype == src.dtype == np.dtype((np.void, 64)) and dst.shape == (2048, 1)
    assert np.shares_memory(dst, big) and np.shares_memory(src, rows)
    wide = np.ones((2048, 32), np.float32)
    assert _as_rows(np, big[::2, :32], wide)[0].dtype == np.float32  # 128-byte rows under 1 MiB: elements
    assert _as_rows(np, big[:, ::2], np.ones((4096, 32), np.float32))[0].dtype == np.float32  # strided last mode
    assert _as_rows(np, big[::2, :16], rows.astype(np.float64))[0].dtype == np.float32  # dtypes differ
    assert _as_rows(np, big[:, :1], np.ones((4096, 1), np.float32))[0].dtype == np.float32  # one-element rows
    assert _as_rows(np, big[:2048], np.ones((2048, 64), np.float32))[0].dtype == np.float32  # both contiguous
