"""torch's copies among its own tensors: batched, as one kernel, in wider words.

The :class:`~dlmg.adapters.capabilities.BulkCopies` side of the torch adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from .._common import copy_word, is_c_contiguous

#: Pieces below this size are copied in one batched launch; larger ones one by one.
BATCHED_COPY_BYTES = 1 << 20



def _consecutive(tensors: Sequence[Any]) -> bool:
    """Whether C-contiguous tensors lie one right after another in the storage of the
    first, in order (so that one view of that storage covers them all). Pointers
    are compared first: the storage is asked for once, not per tensor."""
    first = tensors[0]
    end = first.data_ptr()
    for t in tensors:
        if not t.is_contiguous() or t.data_ptr() != end:
            return False
        end += t.numel() * t.element_size()
    storage = first.untyped_storage()
    return end <= storage.data_ptr() + storage.nbytes()


#: The widest word strided CUDA copies move elements in: torch's copy kernel moves a
#: strided gather faster as 8-byte words than as 4-byte elements, and 16-byte words
#: gained nothing steady over 8-byte ones.
_COPY_WORD = 8
def _as_words(torch: Any, dst: Any, src: Any) -> tuple[Any, Any]:
    """``dst`` and ``src`` (same shape) viewed as integers of up to
    :data:`_COPY_WORD` bytes where both allow a word wider than their element
    (see :func:`~dlmg.adapters._common.copy_word`); themselves otherwise.
    torch refuses to view a conjugate or negative-bit tensor as another dtype;
    such a pair is copied as it is."""
    dtype = dst.dtype
    if src.dtype is not dtype:
        return dst, src
    word = _word_of(torch, dtype, dst.element_size(), tuple(dst.shape), tuple(src.shape), dst.stride(),
                    src.stride(), dst.data_ptr() % _COPY_WORD, src.data_ptr() % _COPY_WORD)
    if word is False:
        return dst, src
    try:
        return dst.view(word), src.view(word)
    except RuntimeError:  # a conjugate or negative-bit view, or a storage offset apart from the address
        return dst, src


@lru_cache(maxsize=4096)
def _word_of(torch: Any, dtype: Any, size: int, shape: tuple[int, ...], src_shape: tuple[int, ...],
             dst_strides: tuple[int, ...], src_strides: tuple[int, ...], dst_address: int,
             src_address: int) -> Any:
    """The integer dtype :func:`_as_words` views a pair as, or ``False``: from the
    dtype, shapes, strides and the addresses modulo the word.

    Remembered: a plan's copies repeat the same geometry every call, and the
    host time per piece is what keeps a scatter ahead of the device (working it
    out costs 10.6 us a pair, the remembered answer 0.14 us, on the 2-core CPU).
    """
    if (size >= _COPY_WORD or src_shape != shape
            or (is_c_contiguous(shape, dst_strides) and is_c_contiguous(shape, src_strides))):
        return False
    word = copy_word(shape, size, _COPY_WORD,
                     (dst_address, [s * size for s in dst_strides]),
                     (src_address, [s * size for s in src_strides]))
    return False if word == size else _word_dtype(torch, word)


def _cat_as_words(torch: Any, dst: Any, srcs: Sequence[Any]) -> tuple[Any, Sequence[Any]]:
    """``dst`` and the pieces concatenated into it viewed as one word type where all
    allow a word wider than their element and some piece is strided (see
    :func:`_as_words`); themselves otherwise."""
    size = dst.element_size()
    if size >= _COPY_WORD or all(s.is_contiguous() for s in srcs):
        return dst, srcs
    word = _COPY_WORD
    for a in (dst, *srcs):
        word = min(word, copy_word(a.shape, size, word, (a.data_ptr(), [s * size for s in a.stride()])))
        if word == size:
            return dst, srcs
    dtype = _word_dtype(torch, word)
    try:
        return dst.view(dtype), [s.view(dtype) for s in srcs]
    except RuntimeError:  # as in _as_words
        return dst, srcs

def _word_dtype(torch: Any, word: int) -> Any:
    """torch's integer dtype of ``word`` bytes."""
    return getattr(torch, f"int{8 * word}")


def _one_kernel(torch: Any, dsts: Sequence[Any], srcs: Sequence[Any]) -> bool:
    """Copy pieces that tile one contiguous range as a single kernel: consecutive
    pieces into consecutive pieces are one copy of the whole range, a gather of
    contiguous pieces into consecutive parts of one buffer is ``torch.cat`` into
    that range, the reverse is ``torch.split_with_sizes_copy`` (measured on an
    H200: 8 pieces of 32 MiB in one kernel run at the rate of one 256 MiB copy,
    pair by pair they leave gaps between the copies). Returns whether it copied."""
    dtype = dsts[0].dtype
    for d, s in zip(dsts, srcs):
        if d.dtype != dtype or s.dtype != dtype or d.shape != s.shape:
            return False
    into, out_of = _consecutive(dsts), _consecutive(srcs)
    if into and out_of:  # one range into another (pieces of one storage are on its device)
        total = sum(d.numel() for d in dsts)
        dsts[0].as_strided((total,), (1,)).copy_(srcs[0].as_strided((total,), (1,)))
        return True
    if not (into or out_of):
        return False
    device = dsts[0].device
    if not all(d.device == device and s.device == device for d, s in zip(dsts, srcs)):
        return False
    sizes = [d.numel() for d in dsts]
    if into and all(s.is_contiguous() for s in srcs):
        whole = dsts[0].as_strided((sum(sizes),), (1,))
        torch.cat([s.view(-1) for s in srcs], out=whole)
        return True
    split = getattr(torch, "split_with_sizes_copy", None)
    if out_of and split is not None and all(d.is_contiguous() for d in dsts):
        whole = srcs[0].as_strided((sum(sizes),), (1,))
        split(whole, sizes, dim=0, out=[d.view(-1) for d in dsts])
        return True
    return False


def copy_into(torch: Any, dst: Any, src: Any) -> None:
    """``dst.copy_(src)``; a large strided copy on CUDA in wider words (see :func:`_as_words`)."""
    if dst.is_cuda and src.is_cuda and dst.nbytes >= BATCHED_COPY_BYTES:
        dst, src = _as_words(torch, dst, src)
    dst.copy_(src)


@lru_cache(maxsize=64)
def _foreach_copies(torch: Any, dtype: Any, device: Any) -> bool:
    """Whether ``torch._foreach_copy_`` takes tensors of ``dtype`` on ``device``: torch
    refuses some dtypes before queuing anything (uint32 on CUDA: "not implemented"),
    so one element is copied to find out, once per dtype and device (a refused batch
    would otherwise be tried, and refused, on every call)."""
    try:
        torch._foreach_copy_([torch.empty(1, dtype=dtype, device=device)], [torch.zeros(1, dtype=dtype, device=device)])
    except (NotImplementedError, RuntimeError):
        return False
    return True


def copy_many(torch: Any, dsts: Any, srcs: Any) -> None:
    """Several copies on one CUDA device with as few launches as torch allows:
    pieces that tile one contiguous range in order as one kernel (see
    :func:`_one_kernel`), many small pieces as one ``torch._foreach_copy_``;
    :func:`copy_into` pair by pair elsewhere and for other large pieces, where each
    contiguous copy is a ``cudaMemcpyAsync`` (measured on an H200: 8 pieces of
    32 MiB take 153 us pair by pair, 164 us batched, 133 us as one kernel,
    129 us as one 256 MiB copy) and each strided one moves 8-byte words
    where it can (see :func:`_as_words`)."""
    if len(dsts) > 1 and dsts[0].is_cuda:
        if _one_kernel(torch, dsts, srcs):
            return
        device, dtype = dsts[0].device, dsts[0].dtype
        if (hasattr(torch, "_foreach_copy_") and dsts[0].nbytes < BATCHED_COPY_BYTES
                and all(d.device == device and s.device == device and d.dtype == dtype and s.dtype == dtype
                        for d, s in zip(dsts, srcs))
                and _foreach_copies(torch, dtype, device)):
            try:
                torch._foreach_copy_(list(dsts), list(srcs))
                return
            except (NotImplementedError, RuntimeError):  # refused before queuing: pair by pair below
                pass
    for dst, src in zip(dsts, srcs):
        copy_into(torch, dst, src)


def concatenate_into(torch: Any, dst: Any, srcs: Sequence[Any]) -> bool:
    """``torch.cat(srcs, out=dst)``: one kernel for all the pieces, strided or not,
    where they share ``dst``'s dtype and device; whether it did. Strided pieces of
    a large CUDA ``dst`` go as 8-byte words where every piece allows it (see
    :func:`_as_words`): row slabs to column slabs of 8192 x 8192 float32 on an
    H200 took 207 us instead of 226 us."""
    device, dtype = dst.device, dst.dtype
    if len(srcs) > 1 and all(s.device == device and s.dtype == dtype for s in srcs):
        if dst.is_cuda and dst.dim() > 1 and dst.nbytes >= BATCHED_COPY_BYTES:
            dst, srcs = _cat_as_words(torch, dst, srcs)
        try:
            torch.cat(list(srcs), out=dst)
            return True
        except (NotImplementedError, RuntimeError):  # a dtype without the kernel: refused before queuing
            pass
    return False
