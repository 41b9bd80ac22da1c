"""CuPy kernels of dlmg's own: many contiguous copies in one launch, an operator over many arrays.

Both are compiled once per shape of their arguments (NVRTC) and kept: the
compiled kernels are the caches here, bounded and keyed on the values the
source is generated from.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

import numpy

from .._common import OPERATORS, pair_by_pair
from ._copies import current

# -- one kernel for many contiguous copies ------------------------------------------
#: Pieces per launch: each is three kernel arguments.
_PIECES_PER_LAUNCH = 32
#: Load and store type per width in bytes.
_WORDS = {16: "uint4", 8: "uint2", 4: "unsigned int", 2: "unsigned short", 1: "unsigned char"}
# 512 threads, 32 blocks per SM and piece between them: 0.965 of a device copy's rate for
# 8 pieces of 32 MiB on an H200, against 0.90 at 256 threads and 8 blocks (unrolling,
# __restrict__ and other counts measured between the two)
_THREADS = 512
_BLOCKS_PER_SM = 32


def _multiprocessors(cp: Any) -> int:
    """The current device's multiprocessor count."""
    return _multiprocessors_of(cp, cp.cuda.runtime.getDevice())


@lru_cache(maxsize=64)
def _multiprocessors_of(cp: Any, device: int) -> int:
    """Device ``device``'s multiprocessor count, asked once per device: reading a
    device's properties costs tens of microseconds, asked per launch."""
    return int(cp.cuda.runtime.getDeviceProperties(device)["multiProcessorCount"])


def _concatenation_source(pieces: int, width: int) -> str:
    """CUDA source of a kernel copying ``pieces`` contiguous ranges, one per ``blockIdx.y``,
    in words of ``width`` bytes (arguments: destination, source, count, per piece)."""
    word = _WORDS[width]
    params = ", ".join(f"{word}* d{i}, const {word}* s{i}, unsigned long long n{i}" for i in range(pieces))
    cases = " ".join(f"case {i}: dst = d{i}; src = s{i}; count = n{i}; break;" for i in range(pieces))
    return f"""extern "C" __global__ void dlmg_concatenate({params}) {{
    {word}* dst; const {word}* src; unsigned long long count;
    switch (blockIdx.y) {{ {cases} default: return; }}
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += step)
        dst[i] = src[i];
}}
"""


@lru_cache(maxsize=256)
def _concatenation_kernel(cp: Any, pieces: int, width: int) -> Any:
    """The compiled kernel for ``pieces`` ranges in words of ``width`` bytes, or ``None``
    where compiling fails (no CUDA compiler). A compiled kernel: kept per piece count
    and width (at most 32 x 5 of them), compiling one takes NVRTC milliseconds."""
    try:
        kernel = cp.RawKernel(_concatenation_source(pieces, width), "dlmg_concatenate")
        kernel.compile()
    except Exception:  # no NVRTC or no driver support: the memcpy path still works
        return None
    return kernel


def launch_concatenation(cp: Any, pieces: list[tuple[int, int, int]], stream: Any) -> bool:
    """Queue the copies ``(destination, source, bytes)`` on ``stream`` as kernels of
    up to :data:`_PIECES_PER_LAUNCH` pieces; ``False`` (nothing queued) without a compiler."""
    width = 16
    for to, source, nbytes in pieces:
        while (to | source | nbytes) % width:
            width //= 2
    sms = _multiprocessors(cp)
    launches = [pieces[i:i + _PIECES_PER_LAUNCH] for i in range(0, len(pieces), _PIECES_PER_LAUNCH)]
    kernels = [_concatenation_kernel(cp, len(group), width) for group in launches]
    if any(k is None for k in kernels):
        return False
    uint64 = numpy.uint64  # kernel arguments by value: addresses and counts of 8 bytes
    for kernel, group in zip(kernels, launches):
        words = max(nbytes for _, _, nbytes in group) // width
        blocks = min(-(-words // _THREADS), max(1, sms * _BLOCKS_PER_SM // len(group)))
        args: list[Any] = []
        for to, source, nbytes in group:
            args += (uint64(to), uint64(source), uint64(nbytes // width))
        kernel((blocks, len(group)), (_THREADS,), tuple(args), stream=stream)
    return True



# -- one kernel for an operator over many arrays ------------------------------------------
#: list_operator name -> (C operator, the Python operator pair by pair, its in-place form)
_LIST_SYMBOLS = {
    name: (symbol, *OPERATORS[name])
    for name, symbol in (("add", "+"), ("subtract", "-"), ("multiply", "*"), ("divide", "/"))
}
#: dtype name -> (C type, NumPy scalar type, the largest integer it holds exactly, its largest finite value)
_LIST_TYPES = {
    "float32": ("float", numpy.float32, 1 << 24, float(numpy.finfo(numpy.float32).max)),
    "float64": ("double", numpy.float64, 1 << 53, float(numpy.finfo(numpy.float64).max)),
}
#: Arrays per launch: each is four kernel arguments.
_ARRAYS_PER_LAUNCH = 32
_LIST_THREADS = 256


def _list_source(symbol: str, ctype: str, scalar: bool, count: int) -> str:
    """CUDA source of ``o = x <symbol> y`` for ``count`` arrays, one per ``blockIdx.y``
    (``y`` one scalar for all of them where ``scalar``)."""
    if scalar:
        params = ", ".join([f"const {ctype} y"] + [f"{ctype}* o{i}, const {ctype}* x{i}, unsigned long long n{i}"
                                                   for i in range(count)])
        cases = " ".join(f"case {i}: o = o{i}; x = x{i}; n = n{i}; break;" for i in range(count))
        declare, operand = f"{ctype}* o; const {ctype}* x;", "y"
    else:
        params = ", ".join(f"{ctype}* o{i}, const {ctype}* x{i}, const {ctype}* y{i}, unsigned long long n{i}"
                           for i in range(count))
        cases = " ".join(f"case {i}: o = o{i}; x = x{i}; y = y{i}; n = n{i}; break;" for i in range(count))
        declare, operand = f"{ctype}* o; const {ctype}* x; const {ctype}* y;", "y[i]"
    return f"""extern "C" __global__ void dlmg_list_operation({params}) {{
    {declare} unsigned long long n;
    switch (blockIdx.y) {{ {cases} default: return; }}
    const unsigned long long step = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        o[i] = x[i] {symbol} {operand};
}}
"""


@lru_cache(maxsize=512)
def _list_kernel(cp: Any, symbol: str, ctype: str, scalar: bool, count: int) -> Any:
    """The compiled kernel of :func:`_list_source`, or ``None`` where compiling fails. A
    compiled kernel: kept per operator, type, operand kind and array count (at most
    4 x 2 x 2 x 32), compiling one takes NVRTC milliseconds."""
    try:
        kernel = cp.RawKernel(_list_source(symbol, ctype, scalar, count), "dlmg_list_operation")
        kernel.compile()
    except Exception:  # no NVRTC or no driver support: the operators pair by pair still work
        return None
    return kernel


def _exact_scalar(value: Any, scalar_type: Any, limit: int, largest: float) -> Any:
    """``value`` as the dtype's scalar when it holds it exactly (then computing in the
    dtype equals computing in double and rounding once), else ``None``."""
    kind = type(value)
    if kind is bool or (kind is int and -limit <= value <= limit):
        return scalar_type(value)
    if kind is float:
        if value != value:  # NaN stays NaN
            return scalar_type(value)
        if -largest <= value <= largest:
            cast = scalar_type(value)
            if float(cast) == value:
                return cast
    return None


def _list_operation(cp: Any, op: tuple[str, Any, Any], in_place: bool, xs: list[Any], ys: Any) -> Any:
    """``xs[i] <op> ys[i]`` (or ``<op> ys`` for a scalar) for every ``i``: one kernel
    per :data:`_ARRAYS_PER_LAUNCH` arrays where they qualify (see
    :meth:`CupyAdapter.list_operator`), CuPy's operator pair by pair otherwise.
    In place: written into ``xs``, returns ``None``."""
    symbol, pairwise, inplace = op
    launch = _list_launch(cp, symbol, in_place, xs, ys)
    if launch is not None:
        return None if in_place else launch
    return pair_by_pair(inplace if in_place else pairwise, in_place, xs, ys)


def _list_launch(cp: Any, symbol: str, in_place: bool, xs: list[Any], ys: Any) -> list[Any] | None:
    """The kernels of :func:`_list_operation` queued, with the results (``xs`` in
    place); ``None`` (nothing queued) where the arrays do not qualify."""
    if not xs:
        return None
    first = xs[0]
    dtype = first.dtype
    kind = _LIST_TYPES.get(dtype.name)
    if kind is None:
        return None
    ctype, scalar_type, limit, largest = kind
    scalar = not isinstance(ys, list)
    value = None
    if scalar:
        value = _exact_scalar(ys, scalar_type, limit, largest)
        if value is None:
            return None
    device = first.data.device_id
    for x in xs:
        if x.dtype != dtype or not x.flags.c_contiguous or x.data.device_id != device:
            return None
    if not scalar:
        for x, y in zip(xs, ys):
            if y.dtype != dtype or y.shape != x.shape or not y.flags.c_contiguous or y.data.device_id != device:
                return None
    work = [i for i, x in enumerate(xs) if x.size]
    groups = [work[i:i + _ARRAYS_PER_LAUNCH] for i in range(0, len(work), _ARRAYS_PER_LAUNCH)]
    kernels = [_list_kernel(cp, symbol, ctype, scalar, len(group)) for group in groups]
    if any(k is None for k in kernels):
        return None
    with current(cp, device):
        if in_place:
            outs = xs
        else:  # the results carved from one allocation: one call to CuPy's pool instead of one per array
            itemsize = dtype.itemsize
            whole = cp.empty(sum(x.size for x in xs), dtype)
            outs, at = [], whole.data
            for x in xs:
                outs.append(cp.ndarray(x.shape, dtype, at))
                at = at + x.size * itemsize
        _queue_lists(kernels, groups, xs, ys, outs, _multiprocessors(cp), value)
    return outs


def _queue_lists(kernels: list[Any], groups: list[list[int]], xs: list[Any], ys: Any, outs: list[Any], sms: int,
                 value: Any) -> None:
    """Launch ``kernels`` over ``groups`` of the arrays on the current device and stream
    (``value``: the scalar operand, ``None`` for lists)."""
    scalar = value is not None
    for kernel, group in zip(kernels, groups):
        most = max(xs[i].size for i in group)
        blocks = min(-(-most // _LIST_THREADS), max(1, sms * _BLOCKS_PER_SM // len(group)))
        # the arrays themselves and sizes as Python ints: CuPy converts those faster
        # than NumPy scalars, and the host's work per launch decides small lists
        args: list[Any] = [value] if scalar else []
        for i in group:
            x = xs[i]
            if scalar:
                args += (outs[i], x, x.size)
            else:
                args += (outs[i], x, ys[i], x.size)
        kernel((blocks, len(group)), (_LIST_THREADS,), tuple(args))


@lru_cache(maxsize=16)
def list_operator(cp: Any, name: str, in_place: bool) -> Any:
    """The call :meth:`CupyAdapter.list_operator` hands out for ``name``, made once per
    operator; ``None`` for operators without a kernel here."""
    op = _LIST_SYMBOLS.get(name)
    return None if op is None else partial(_list_operation, cp, op, in_place)
