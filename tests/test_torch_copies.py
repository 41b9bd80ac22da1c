"""torch copies of pieces that tile one contiguous range run as one kernel
(``torch.cat`` into the range, ``torch.split_with_sizes_copy`` out of it);
anything else is refused and copied pair by pair."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
def test_torch_copies_that_tile_one_range_run_as_one_kernel(device):
    # gather-like (consecutive destinations), scatter-like (consecutive sources),
    # and pieces that do not tile one range in order (copied pair by pair)
    torch = pytest.importorskip("torch")
    from dlmg.adapters.torch._copies import _one_kernel

    big = torch.arange(4 * 6 * 5, dtype=torch.float32, device=device).reshape(4, 6, 5)
    parts = [big[i].clone() for i in range(4)]
    out = torch.zeros_like(big)
    assert _one_kernel(torch, [out[i] for i in range(4)], parts)
    assert torch.equal(out, big)
    back = [torch.zeros_like(p) for p in parts]
    assert _one_kernel(torch, back, [big[i] for i in range(4)])
    assert all(torch.equal(b, big[i]) for i, b in enumerate(back))
    out.zero_()
    assert _one_kernel(torch, [out[i] for i in range(4)], [big[i] for i in range(4)])  # range into range
    assert torch.equal(out, big)
    out.zero_()  # sources not one range (the last is elsewhere): torch.cat into the range
    assert _one_kernel(torch, [out[i] for i in range(4)], [big[0], big[1], big[2], parts[0]])
    assert torch.equal(out[:3], big[:3]) and torch.equal(out[3], big[0])
    out.zero_()
    assert not _one_kernel(torch, [out[1], out[0]], parts[:2])  # out of order
    assert not _one_kernel(torch, [out[0], out[2]], parts[:2])  # a gap
    assert not _one_kernel(torch, [out[0, :, :2], out[1, :, :2]], [p[:, :2] for p in parts[:2]])  # strided
    assert not _one_kernel(torch, [out[0], out[1]], [parts[0], parts[1].double()])  # dtypes differ
    assert torch.count_nonzero(out) == 0


_DTYPES = ["uint8", "uint16", "uint32", "uint64", "int32", "float16", "bool", "complex64"]


def _pieces(dtype: str, device: str, count: int):
    """torch, the adapter, the torch dtype and ``count`` pieces of 6 elements (0s and 1s)."""
    torch = pytest.importorskip("torch")
    from dlmg.registry import get_adapter

    torch_dtype = getattr(torch, dtype, None)
    if torch_dtype is None:
        pytest.skip(f"this torch has no {dtype}")
    pieces = [(torch.arange(6 * k + 1, 6 * k + 7, device=device) % 2).to(torch_dtype) for k in range(count)]
    return torch, get_adapter("torch"), torch_dtype, pieces


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", _DTYPES)
def test_torch_copy_many_copies_every_dtype(device, dtype):
    # small separate pieces take torch's batched copy where it has the dtype
    # (it has no unsigned 16/32/64-bit one), pair by pair where it has not
    for _ in range(2):  # the second time after any refusal was remembered
        torch, adapter, torch_dtype, src = _pieces(dtype, device, 5)
        dst = [torch.zeros(6, dtype=torch_dtype, device=device) for _ in range(5)]
        adapter.copy_many(dst[::-1], src[::-1])  # not one range: no single kernel
        assert all(torch.equal(d, s) for d, s in zip(dst, src))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("dtype", _DTYPES)
def test_torch_concatenation_into_a_view_takes_every_dtype(device, dtype):
    # torch.cat into a view of a larger buffer; pieces of another dtype go the
    # default way (a view and a copy each, which converts)
    torch, adapter, torch_dtype, pieces = _pieces(dtype, device, 3)
    buffer = torch.zeros(20, dtype=torch_dtype, device=device)
    adapter.concatenate_into(buffer[1:19], pieces)
    assert torch.equal(buffer[1:19], torch.cat(pieces)) and not buffer[0] and not buffer[19]
    buffer.zero_()
    other = torch.complex128 if torch_dtype.is_complex else torch.float64
    adapter.concatenate_into(buffer[:18], [pieces[0], pieces[1].to(other), pieces[2]])
    assert torch.equal(buffer[:18], torch.cat(pieces))


def test_torch_strided_copies_view_both_sides_as_wider_words_where_they_can():
    # the CUDA copy paths call these on pieces of 1 MiB and more; the views are the
    # same on the CPU, so their choices are checked here and their use on the GPU
    torch = pytest.importorskip("torch")
    from dlmg.adapters.torch._copies import _as_words, _cat_as_words

    big = torch.arange(64 * 40, dtype=torch.float32).reshape(64, 40)
    out = torch.zeros(32, 16)
    dst, src = _as_words(torch, out, big[::2, 8:24])
    assert dst.dtype == src.dtype == torch.int64 and dst.data_ptr() == out.data_ptr()
    dst.copy_(src)
    assert torch.equal(out, big[::2, 8:24])
    assert _as_words(torch, out[:, :15], big[::2, 8:23])[0].dtype == torch.float32  # 60-byte rows
    assert _as_words(torch, out, big[::2, 9:25])[1].dtype == torch.float32  # a source 4 bytes off a word
    assert _as_words(torch, out, big[:32, :16].contiguous())[0].dtype == torch.float32  # both contiguous: a memcpy
    wide = big.double()
    assert _as_words(torch, out.double(), wide[::2, 8:24])[0].dtype == torch.float64  # 8-byte elements already
    # torch will not view a negative-bit (or conjugate) tensor as another dtype: copied as it
    # is, and the same geometry keeps its words for the next plain pair
    fresh = torch.arange(64 * 48, dtype=torch.float32).reshape(64, 48)
    negated = torch._neg_view(fresh[::2, 8:24]) if hasattr(torch, "_neg_view") else fresh.conj()
    if negated.is_neg():
        dst, src = _as_words(torch, out, negated)
        assert src is negated and dst is out
        dst.copy_(src)
        assert torch.equal(out, -fresh[::2, 8:24])
        assert _as_words(torch, out, fresh[::2, 8:24])[0].dtype == torch.int64
    # bands of rows into one block: every piece must allow the word
    block = torch.zeros(64, 16)
    pieces = [big[:32, 8:24], big[32:, 8:24]]
    dst, srcs = _cat_as_words(torch, block, pieces)
    assert dst.dtype == torch.int64 and all(s.dtype == torch.int64 for s in srcs)
    torch.cat(srcs, out=dst)
    assert torch.equal(block, big[:, 8:24])
    assert _cat_as_words(torch, block, [big[:32, 8:24], big[32:, 9:25]])[0].dtype == torch.float32
