"""CuPy's copies: the copy engine where both sides allow it, strided copies in wider words."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy

from .._common import ALREADY_CURRENT, copy_word

#: cudaMemcpyDeviceToDevice
DEVICE_TO_DEVICE = 3


def _rows(array: Any) -> tuple[int, int, int] | None:
    """``(rows, row bytes, pitch)`` of an array that is rows of contiguous elements at a
    pitch (a 2-D array whose last mode is contiguous) or one contiguous row; else None."""
    item = array.itemsize
    if array.ndim == 2 and array.strides[1] == item and array.strides[0] >= array.shape[1] * item:
        return array.shape[0], array.shape[1] * item, array.strides[0]
    if array.flags.c_contiguous:
        return 1, array.nbytes, array.nbytes
    return None


#: The widest word strided copies move elements in, and its dtype per width: CuPy's
#: elementwise copy moves the same bytes faster the wider its elements, and in the
#: widest words it beats the 2-D memcpy of pitched rows.
_COPY_WORD = 16
_WORD_DTYPES = {8: numpy.dtype(numpy.int64), 16: numpy.dtype(numpy.complex128)}
#: Copies from this size on take the words; smaller ones cost more on the host than on the device.
WORDS_FROM = 1 << 20


@lru_cache(maxsize=4096)
def _word_of(dtype: Any, shape: tuple[int, ...], dst_strides: tuple[int, ...], src_strides: tuple[int, ...],
             dst_address: int, src_address: int) -> Any:
    """The word :func:`in_words` copies a pair in: its dtype, ``True`` for the elements'
    own, ``False`` for no assignment in words; from the dtype, shape, byte strides and
    the addresses modulo the word. Asked per piece per call: a plan's copies repeat the
    same geometry, and working it out costs more host time than the lookup
    (the same copy_word question costs torch 10.6 us anew against 0.14 us remembered on the 2-core CPU; not measured for CuPy here)."""
    item = dtype.itemsize
    word = copy_word(shape, item, _COPY_WORD, (dst_address, dst_strides), (src_address, src_strides))
    return False if word < 8 else True if word == item else _WORD_DTYPES[word]


def in_words(dst: Any, src: Any) -> bool:
    """Queue ``dst[...] = src`` (same dtype and shape, one device) as CuPy's assignment
    in words of 8 or 16 bytes where both sides allow one (see
    :func:`~dlmg.adapters._common.copy_word`); whether it did."""
    word = _word_of(dst.dtype, dst.shape, dst.strides, src.strides, dst.data.ptr % _COPY_WORD,
                    src.data.ptr % _COPY_WORD)
    if word is False:
        return False
    if word is not True:
        dst, src = dst.view(word), src.view(word)
    dst[...] = src
    return True


def copy_engine(cp: Any, dst: Any, src: Any, stream: int) -> bool:
    """Queue ``dst[...] = src`` as one (2-D) memcpy when both sides allow it; whether it did."""
    if dst.size == 0:
        return True
    if dst.dtype != src.dtype or dst.shape != src.shape or dst.device.id != src.device.id:
        return False
    d, s = _rows(dst), _rows(src)
    if d is None or s is None:
        return False
    if d[0] == 1 and s[0] == 1:  # both contiguous
        cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, dst.nbytes, DEVICE_TO_DEVICE, stream)
        return True
    if d[1] != s[1] or d[0] != s[0]:
        return False
    cp.cuda.runtime.memcpy2DAsync(dst.data.ptr, d[2], src.data.ptr, s[2], d[1], d[0], DEVICE_TO_DEVICE, stream)
    return True


def current(cp: Any, index: int) -> Any:
    """A context making CUDA device ``index`` current: nothing to enter when it is already
    (asking costs 0.14 us on an H200, entering and leaving the device's context 0.82)."""
    return ALREADY_CURRENT if cp.cuda.runtime.getDevice() == index else cp.cuda.Device(index)
