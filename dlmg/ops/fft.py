"""Distributed FFTs: slab and pencil transforms with all-to-all transposes.

Each transform runs in the framework of each fragment (its array-API ``fft``
extension through array-api-compat: ``numpy.fft``, ``torch.fft``,
``jax.numpy.fft``, ``cupy.fft``), on the fragment's device, over the modes
the fragment holds whole. A transformed mode that is split (grid > 1) is made
whole first by one *transpose*: a redistribution that moves the split onto
another mode (one all-to-all, :meth:`~dlmg.DistributedTensor.redistribute`,
in one process or across processes alike). That is the slab (1-D grid) and
pencil (2-D grid) decomposition of FFTW-MPI (Frigo and Johnson 2005),
heFFTe (Ayala et al. 2020), mpi4py-fft's ``PFFT`` (Dalcin, Mortensen and
Keyes 2019) and cuFFTMp: transform the local modes, transpose, transform the
rest.

The result is laid out like the input (the default, as the array API
standard's functions do: one more all-to-all where a transpose happened) or,
with ``transposed_out=True``, left in the layout of the last transform step
(FFTW-MPI's ``FFTW_MPI_TRANSPOSED_OUT``), which saves that all-to-all; an
inverse transform takes either layout.

A 1-D tensor split along its only mode has no other mode to take the split:
:func:`fft`/:func:`ifft` run the four-step (Bailey 1990) decomposition
``n = n1 * n2`` instead (two all-to-alls, twiddle factors in between, and a
third one back to the input's layout unless ``transposed_out``), or Bluestein's
chirp-z transform (Bluestein 1970) through three of those where ``n`` has no
square factor up to the grid; the real transforms of such a tensor go through
them as complex transforms.

Memory: every step keeps one intermediate besides its input, each the size of
a process's share of the operand or the result; nothing is ever whole on one
device unless it already was.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import LayoutError
from ..construct import empty
from ..layout import Layout
from ._dtypes import FLOAT, INEXACT, require
from ._executor import fail
from ._pending import settled
from .dispatch import executor, is_distributed, map_fragments, new_tensor

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = [
    "fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft",
    "fftshift", "ifftshift", "fftfreq", "transposed_layout", "result_layout",
]

_NORMS = (None, "backward", "ortho", "forward")
_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_COMPLEX = {"float16": "complex64", "float32": "complex64", "float64": "complex128",
            "complex64": "complex64", "complex128": "complex128"}
_REAL = {"complex64": "float32", "complex128": "float64"}


# --------------------------------------------------------------------------
# layouts of the steps (pure functions of layouts)


def transposed_layout(layout: Layout, whole: int, split: int) -> Layout:
    """``layout`` with mode ``whole`` made whole and its grid moved onto mode ``split``.

    Mode ``split`` is cut into ``grid[whole] * grid[split]`` even slabs; the
    devices, processes and replicas stay as they are. Redistributing to it is
    the transpose of a slab or pencil FFT: one all-to-all.
    """
    shape = layout.shape
    block, grid = list(layout.block), list(layout.grid)
    g = grid[whole] * grid[split]
    block[whole], grid[whole] = max(shape[whole], 1), 1
    block[split], grid[split] = max(-(-shape[split] // g), 1), g
    return Layout(shape, block=block, grid=grid, devices=layout.devices, ranks=layout.ranks)


def result_layout(layout: Layout, extents: dict[int, int]) -> Layout:
    """``layout`` (dense, no pending sum) with the modes of ``extents`` resized.

    A whole mode stays whole; a split mode keeps its grid: a slab (at most one
    block per grid coordinate) stays a slab of the new extent, a block-cyclic
    mode keeps its block size (so a halved mode of ``rfft`` has half the
    blocks).
    """
    shape, block = list(layout.shape), list(layout.block)
    for m, e in extents.items():
        g = layout.grid[m]
        if e == shape[m]:
            continue
        if g == 1:
            block[m] = max(e, 1)
        elif -(-shape[m] // block[m]) <= g:
            block[m] = max(-(-e // g), 1)
        shape[m] = e
    return Layout(shape, block=block, grid=layout.grid, devices=layout.devices, ranks=layout.ranks)


def _split_target(layout: Layout, mode: int, todo: Sequence[int]) -> int | None:
    """The mode that takes ``mode``'s split in a transpose: preferably a whole mode not
    transformed later and long enough for every grid coordinate, else the longest other."""
    g = layout.grid[mode]
    best: tuple | None = None
    found = None
    for t in range(layout.ndim):
        if t == mode:
            continue
        total = g * layout.grid[t]
        key = (layout.shape[t] >= total, t not in todo, layout.grid[t] == 1, layout.shape[t])
        if best is None or key > best:
            best, found = key, t
    return found


# --------------------------------------------------------------------------
# argument checks


def _name(kind: str) -> str:
    return f"dlmg.fft.{kind}"


def _operand(kind: str, x: Any) -> "DistributedTensor":
    if not is_distributed(x):
        raise TypeError(f"{_name(kind)} takes a DistributedTensor, got {type(x).__name__}")
    if x.ndim == 0:
        raise ValueError(f"{_name(kind)} needs a tensor of rank >= 1")
    if kind in ("rfft", "rfftn", "ihfft"):
        require(_name(kind), (x.dtype,), FLOAT, f"{kind} takes real floating input; cast with astype first, or use fft")
    else:
        require(_name(kind), (x.dtype,), INEXACT, "cast to a floating type with astype first")
    return settled(x)


def _norm(kind: str, norm: Any) -> str:
    if norm not in _NORMS:
        raise ValueError(f"{_name(kind)}: norm must be 'backward', 'ortho', 'forward' or None, got {norm!r}")
    return norm or "backward"


def _axis(kind: str, axis: Any, ndim: int, what: str = "axis") -> int:
    try:
        axis = operator.index(axis)
    except TypeError:
        raise TypeError(f"{_name(kind)}: {what} must be an int, got {axis!r}") from None
    if not -ndim <= axis < ndim:
        raise ValueError(f"{_name(kind)}: {what} {axis} is out of bounds for a tensor of {ndim} modes")
    return axis % ndim


def _length(kind: str, n: Any, what: str = "n") -> int | None:
    if n is None:
        return None
    n = operator.index(n)
    if n < 1:
        raise ValueError(f"{_name(kind)}: {what} must be a positive int, got {n}")
    return n


def _axes_and_sizes(kind: str, x: "DistributedTensor", s: Any, axes: Any) -> tuple[list[int], list[int | None]]:
    """The standard's ``s``/``axes`` pair as mode numbers and lengths (``None``: unchanged)."""
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    elif isinstance(axes, int):
        axes = [axes]
    modes = [_axis(kind, a, x.ndim, "axes entry") for a in axes]
    if len(set(modes)) != len(modes):
        raise ValueError(f"{_name(kind)}: axes must not repeat a mode, got {tuple(axes)}")
    if s is None:
        return modes, [None] * len(modes)
    if isinstance(s, int):
        s = [s]
    if len(s) != len(modes):
        raise ValueError(f"{_name(kind)}: s has {len(s)} entries but axes {len(modes)}: {tuple(s)} and {tuple(axes)}")
    return modes, [None if operator.index(n) == -1 else _length(kind, n, "every entry of s") for n in s]


# --------------------------------------------------------------------------
# per-fragment work


def _local(x: "DistributedTensor", kind: str, axes: Sequence[int], sizes: Sequence[int | None], norm: str,
           out_extents: Sequence[int], out_dtype: str) -> "DistributedTensor":
    """The framework's ``kind`` (``fftn``, ``rfftn``... or a 1-D one) over modes ``axes``, whole
    in every fragment, fragment by fragment (nothing moves)."""
    extents = dict(zip(axes, out_extents))
    out_layout = Layout(
        tuple(extents.get(m, n) for m, n in enumerate(x.shape)),
        block=tuple(max(extents[m], 1) if m in extents else b for m, b in enumerate(x.layout.block)),
        grid=x.layout.grid, devices=x.layout.devices, ranks=x.layout.ranks,
    )
    one = len(axes) == 1
    axes_t, sizes_t = tuple(axes), tuple(sizes)

    def per_fragment(xp: Any, a: Any) -> Any:
        if 0 in a.shape:  # nothing to transform (some FFT libraries fail on empty batches)
            import array_api_compat

            shape = list(a.shape)
            for m, e in extents.items():
                shape[m] = e
            return xp.zeros(tuple(shape), dtype=getattr(xp, out_dtype), device=array_api_compat.device(a))
        if kind == "ihfft":  # by its definition, as NumPy's: some frameworks give a lazily conjugated view
            return xp.conj(xp.fft.rfft(a, n=sizes_t[0], axis=axes_t[0], norm=_SWAPPED[norm]))
        if one:
            return getattr(xp.fft, kind)(a, n=sizes_t[0], axis=axes_t[0], norm=norm)
        s = None if all(n is None for n in sizes_t) else tuple(
            a.shape[m] if n is None else n for m, n in zip(axes_t, sizes_t))
        return getattr(xp.fft, kind + "n")(a, s=s, axes=axes_t, norm=norm)

    out = map_fragments(per_fragment, (x,), name=_name(kind), out_layout=out_layout)
    assert out is not None
    return out


def _each_fragment(x: "DistributedTensor", layout: Layout, fn: Callable[..., Any], what: str,
                  dtype: str | None = None, order: Sequence[int] | None = None) -> "DistributedTensor":
    """A tensor of ``layout`` whose fragment ``i`` is ``fn(xp, array, f)`` of ``x``'s local
    fragment ``f = order[i]`` (``i`` by default), run in that fragment's framework and device."""
    arrays: list[Any] = [None] * layout.nfragments
    for i in range(layout.nfragments):
        f = i if order is None else order[i]
        frag = x.fragments[f]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        try:
            arrays[i] = ex.run(fn, frag.array, f)
        except Exception as exc:
            raise fail(what, f, ex, exc) from exc
    return new_tensor(arrays, layout, dtype)


# --------------------------------------------------------------------------
# the transform loop: local modes, transpose, the rest


def _transform(x: "DistributedTensor", kind: str, axes: list[int], sizes: list[int | None], norm: str,
               transposed_out: bool) -> "DistributedTensor":
    """``kind`` ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft") over ``axes`` (for the real
    kinds the last of them is the real mode) by slab/pencil transposes."""
    start = x.layout
    real = kind in ("rfft", "irfft", "hfft", "ihfft")
    last = axes[-1]
    m = x.shape[last]
    if kind in ("irfft", "hfft"):
        last_out = sizes[-1] if sizes[-1] is not None else 2 * (m - 1)
        if last_out < 1:
            raise ValueError(f"{_name(kind)}: the output length {last_out} (from an input extent of {m}) is not "
                             "positive; pass n")
    else:
        length = sizes[-1] if sizes[-1] is not None else m
        if length < 1:
            raise ValueError(f"{_name(kind)}: cannot transform an empty mode (extent {m}) without n")
        last_out = length // 2 + 1 if kind in ("rfft", "ihfft") else length
    out_extents = {a: (x.shape[a] if n is None else n) for a, n in zip(axes, sizes)}
    out_extents[last] = last_out
    complex_dtype = _COMPLEX.get(x.dtype, "complex64")
    final_dtype = _REAL[complex_dtype] if kind in ("irfft", "hfft") else complex_dtype
    if x.ndim == 1 and start.grid[0] > 1:
        return _one_dimensional(x, kind, sizes[0], norm, transposed_out, out_extents[0], final_dtype)
    inverse = kind in ("ifft", "irfft", "hfft")
    c2c = "ifft" if inverse else "fft"
    size_of = dict(zip(axes, sizes))
    split = [a for a in axes if start.grid[a] > 1]
    if kind in ("fft", "ifft") and x.dtype in _REAL.values() and len(split) == 1 and not transposed_out:
        return _real_first(x, c2c, axes, size_of, norm, out_extents, complex_dtype)
    cur = x
    # the real mode comes first for a forward real transform, last for an inverse one
    todo = list(axes)
    if real and kind in ("rfft", "ihfft"):
        cur = _whole(cur, last, todo)
        local = [a for a in todo if cur.layout.grid[a] == 1 and a != last] + [last]
        cur = _local(cur, "rfft" if kind == "rfft" else "ihfft", local if kind == "rfft" else [last],
                     [size_of[a] for a in (local if kind == "rfft" else [last])], norm,
                     [out_extents[a] for a in (local if kind == "rfft" else [last])], complex_dtype)
        todo = [a for a in todo if a not in (local if kind == "rfft" else [last])]
    elif real:
        todo.remove(last)
    while todo:
        local = [a for a in todo if cur.layout.grid[a] == 1]
        if local:
            if real and len(local) == len(todo) and cur.layout.grid[last] == 1 and kind == "irfft":
                # everything left is local: one irfftn call
                modes = local + [last]
                cur = _local(cur, "irfft", modes, [size_of[a] for a in local] + [last_out], norm,
                             [out_extents[a] for a in modes], final_dtype)
                todo, real = [], False  # the real mode is done too
                break
            cur = _local(cur, c2c, local, [size_of[a] for a in local], norm,
                         [out_extents[a] for a in local], complex_dtype)
            todo = [a for a in todo if a not in local]
            continue
        cur = _whole(cur, todo[0], todo + [last] if real and inverse else todo)  # (its real mode comes last)
    if real and inverse:
        cur = _whole(cur, last, [last])
        cur = _local(cur, kind, [last], [last_out], norm, [last_out], final_dtype)
    if transposed_out:
        return cur
    target = result_layout(start, out_extents)
    return cur if cur.layout.same_distribution(target) else cur.redistribute(target)


def _real_first(x: "DistributedTensor", kind: str, axes: list[int], size_of: dict[int, int | None], norm: str,
                out_extents: dict[int, int], complex_dtype: str) -> "DistributedTensor":
    """A complex transform of real ``x`` whose one split transformed mode is made whole while the
    data is still real (half the bytes), and the complex result moved back to ``x``'s layout
    by the second transpose, after which the modes it made whole are transformed there."""
    start = x.layout
    (mode,) = [a for a in axes if start.grid[a] > 1]
    cur = _whole(x, mode, axes)
    first = [a for a in axes if cur.layout.grid[a] == 1]
    cur = _local(cur, kind, first, [size_of[a] for a in first], norm, [out_extents[a] for a in first],
                 complex_dtype)
    rest = [a for a in axes if a not in first]
    cur = cur.redistribute(result_layout(start, {a: out_extents[a] for a in first}))
    if rest:  # whole again in ``x``'s layout
        cur = _local(cur, kind, rest, [size_of[a] for a in rest], norm, [out_extents[a] for a in rest],
                     complex_dtype)
    return cur


def _whole(x: "DistributedTensor", mode: int, todo: Sequence[int]) -> "DistributedTensor":
    """``x`` with ``mode`` whole in every fragment: itself, or after one transpose."""
    if x.layout.grid[mode] == 1:
        return x
    target = _split_target(x.layout, mode, todo)
    assert target is not None  # (rank 1 takes the four-step path)
    return x.redistribute(transposed_layout(x.layout, mode, target))


# --------------------------------------------------------------------------
# one split mode and nothing else: the four-step decomposition


def _factors(n: int, g: int) -> tuple[int, int, int] | None:
    """``(n1, n2, p)``: ``n = n1 * n2`` with ``p`` dividing both, ``p <= g`` as large as
    possible, then ``n1`` and ``n2`` as close as possible (``None`` when only ``p = 1``)."""
    for p in range(g, 1, -1):
        if n % (p * p):
            continue
        best = None
        for n1 in range(p, n + 1, p):
            if n % n1 or (n // n1) % p:
                continue
            key = abs(math.log(n1) - math.log(n // n1))
            if best is None or key < best[0]:
                best = (key, n1)
            if n1 * n1 > n:
                break
        if best is not None:
            return best[1], n // best[1], p
    return None


def _one_dimensional(x: "DistributedTensor", kind: str, n: int | None, norm: str, transposed_out: bool,
                     out_extent: int, out_dtype: str) -> "DistributedTensor":
    """A transform of a 1-D tensor split along its mode, by four-step FFTs (Bailey 1990)."""
    start = x.layout
    m = x.shape[0]
    length = n if n is not None else (2 * (m - 1) if kind in ("irfft", "hfft") else m)
    if kind in ("rfft", "ihfft"):
        xc = _resized(x, length)
        spectrum = _four_step(xc, "fft", norm if kind == "rfft" else _SWAPPED[norm], length, transposed_out)
        if kind == "ihfft":
            spectrum = _conj(spectrum)
        out = _resized(spectrum, out_extent)
    else:
        if kind in ("irfft", "hfft"):
            # the half spectrum padded (or cut) to ``length``, DC and Nyquist halved: the real
            # part of twice its inverse transform is ``irfft`` (the Hermitian half adds the conjugate)
            half = _halved_ends(_resized(x, length), length, min(m, length // 2 + 1))
            if kind == "hfft":
                half = _conj(half)
            spectrum = _four_step(half, "ifft", norm if kind == "irfft" else _SWAPPED[norm], length, transposed_out)
            out = _twice_real(spectrum)
        else:
            out = _four_step(_resized(x, length), kind, norm, length, transposed_out)
    if transposed_out:
        return out
    target = result_layout(start, {0: out_extent})
    return out if out.layout.same_distribution(target) else out.redistribute(target)


def _four_step(x: "DistributedTensor", kind: str, norm: str, n: int, transposed_out: bool) -> "DistributedTensor":
    """The c2c ``kind`` of a 1-D tensor of extent ``n``, by the four-step decomposition.

    With ``n = n1 * n2``, ``j = n2 r + c`` and ``k = k1 + n1 k2``, the signal is the
    ``(n1, n2)`` matrix ``x[n2 r + c]``, whose rows a slab of the signal holds (a view of
    each piece). A transpose (one all-to-all) makes its columns whole; each fragment
    transforms along ``r`` and multiplies by ``w_n^(c k1)``; a transpose back makes rows
    whole; the transforms along ``c`` leave ``X[k1 + n1 k2]`` in rows ``k1`` -- a
    block-cyclic layout of the spectrum (block ``n1 / p``, after a local transpose), which
    ``transposed_out`` keeps. Otherwise a third transpose and a local one give slabs of
    the spectrum.
    """
    layout = x.layout
    g = layout.grid[0]
    found = _factors(n, g)
    cdtype = _COMPLEX.get(x.dtype, "complex64")
    if found is None:  # no square factor up to the grid (a prime extent, say)
        return _bluestein(x, kind, norm, n)
    n1, n2, p = found
    devices, ranks = layout.devices[:p], layout.ranks[:p]
    b1, b2 = n1 // p, n2 // p
    slab = Layout((n,), block=(b1 * n2,), grid=(p,), devices=devices, ranks=ranks)
    rows = Layout((n1, n2), block=(b1, n2), grid=(p, 1), devices=devices, ranks=ranks)
    cols = Layout((n1, n2), block=(n1, b2), grid=(1, p), devices=devices, ranks=ranks)
    y = x if x.layout.same_distribution(slab) else x.redistribute(slab)
    matrix = _each_fragment(y, rows, lambda xp, a, f: xp.reshape(a, (b1, n2)), "viewing the signal as a matrix")
    del y
    matrix = matrix.redistribute(cols)
    sign = -1.0 if kind == "fft" else 1.0

    def first(xp: Any, a: Any, f: int) -> Any:
        return _twiddled(xp, getattr(xp.fft, kind)(a, axis=0, norm=norm), f * b2, n, sign)

    matrix = _each_fragment(matrix, cols, first, f"{_name(kind)} (four-step, first transforms)", cdtype)
    matrix = matrix.redistribute(rows)
    matrix = _each_fragment(matrix, rows, lambda xp, a, f: getattr(xp.fft, kind)(a, axis=1, norm=norm),
                           f"{_name(kind)} (four-step, second transforms)", cdtype)
    flat = lambda xp, a, f: xp.reshape(xp.permute_dims(a, (1, 0)), (-1,))  # noqa: E731
    if transposed_out:
        spectrum = Layout((n,), block=(b1,), grid=(p,), devices=devices, ranks=ranks)
        return _each_fragment(matrix, spectrum, flat, f"{_name(kind)} (four-step, local transpose)", cdtype)
    matrix = matrix.redistribute(cols)
    spectrum = Layout((n,), block=(b2 * n1,), grid=(p,), devices=devices, ranks=ranks)
    return _each_fragment(matrix, spectrum, flat, f"{_name(kind)} (four-step, local transpose)", cdtype)


def _bluestein(x: "DistributedTensor", kind: str, norm: str, n: int) -> "DistributedTensor":
    """The c2c ``kind`` of a 1-D tensor of any extent ``n`` by Bluestein's chirp-z algorithm.

    With ``w[j] = exp(s i pi j^2 / n)`` (``s = -1`` forward, ``+1`` inverse),
    ``X[k] = w[k] sum_j (x[j] w[j]) conj(w)[k - j]``: a circular convolution of length
    ``M >= 2 n - 1``, chosen as ``g^2 2^e`` for the grid ``g`` so that its three FFTs take
    the four-step path. The chirps are computed by each fragment for its own elements; the
    result comes back in slabs of ``n`` over the same ``g`` pieces.
    """
    layout = x.layout
    g = layout.grid[0]
    big = g * g
    while big < 2 * n - 1:
        big *= 2
    sign = -1.0 if kind == "fft" else 1.0
    cdtype = _COMPLEX.get(x.dtype, "complex64")
    devices, ranks = layout.devices[:g], layout.ranks[:g]
    slab = Layout((big,), block=(big // g,), grid=(g,), devices=devices, ranks=ranks)
    owned = [slab.owned_indices(f, 0) for f in range(g)]

    def chirp(indices: Any, direction: float, mirrored: bool) -> Any:
        import numpy as np

        j = np.where(indices < n, indices, big - indices if mirrored else indices)
        phase = np.exp(direction * 1j * np.pi * ((j * j) % (2 * n)) / n)
        return np.where((indices < n) | (mirrored & (big - indices < n)), phase, 0).astype(cdtype)

    def on(xp: Any, a: Any, host: Any) -> Any:
        import array_api_compat

        return xp.asarray(host, device=array_api_compat.device(a))

    padded = _resized(x, big).redistribute(slab)
    a = _each_fragment(padded, slab, lambda xp, v, f: xp.astype(v, getattr(xp, cdtype)) * on(xp, v, chirp(
        owned[f], sign, False)), "chirp-z (chirped signal)", cdtype)
    b = _each_fragment(padded, slab, lambda xp, v, f: on(xp, v, chirp(owned[f], -sign, True)),
                      "chirp-z (chirp)", cdtype)
    del padded
    spectra = map_fragments(lambda xp, u, v: u * v, (_four_step(a, "fft", "backward", big, True),
                                                      _four_step(b, "fft", "backward", big, True)), name="chirp-z")
    del a, b
    assert spectra is not None
    conv = _resized(_four_step(spectra, "ifft", "backward", big, False), n)
    scale = {"backward": 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[norm if sign < 0 else _SWAPPED[norm]]
    out_layout = conv.layout
    kept = [out_layout.owned_indices(f, 0) for f in range(out_layout.nfragments)]
    out = _each_fragment(conv, out_layout, lambda xp, v, f: v * on(xp, v, chirp(kept[f], sign, False) * scale),
                        "chirp-z (result)", cdtype)
    return out.redistribute(Layout((n,), block=(max(-(-n // g), 1),), grid=(g,), devices=devices, ranks=ranks))


def _twiddled(xp: Any, t: Any, j0: int, n: int, sign: float) -> Any:
    """``t[k2, j]`` times ``exp(sign 2 pi i k2 (j0 + j) / n)``, a band of rows at a time
    (in place where the framework allows), so that no temporary outgrows a fraction of ``t``."""
    import array_api_compat

    device = array_api_compat.device(t)
    rows, cols = t.shape
    real = xp.float32 if t.dtype == xp.complex64 else xp.float64
    band = max(1, (rows + 7) // 8)
    j = xp.arange(j0, j0 + cols, device=device)
    mutable = not array_api_compat.is_jax_array(t)
    parts = []
    for r0 in range(0, rows, band):
        r1 = min(rows, r0 + band)
        k = xp.arange(r0, r1, device=device)
        theta = xp.astype((k[:, None] * j[None, :]) % n, real) * (sign * 2.0 * math.pi / n)
        w = xp.astype(xp.cos(theta), t.dtype) + xp.astype(xp.sin(theta), t.dtype) * 1j
        del theta
        if mutable:
            t[r0:r1, :] *= w
        else:
            parts.append(t[r0:r1, :] * w)
    return t if mutable else xp.concat(parts, axis=0)


def _resized(x: "DistributedTensor", extent: int) -> "DistributedTensor":
    """A 1-D tensor cut or zero-padded to ``extent`` with the same block and grid: each fragment
    keeps a prefix of its elements, or gains zeros at its end (nothing moves)."""
    if extent == x.shape[0]:
        return x
    layout = Layout((extent,), block=x.layout.block, grid=x.layout.grid, devices=x.layout.devices,
                    ranks=x.layout.ranks)
    shapes = [f.shape[0] for f in layout.fragments]

    def fn(xp: Any, a: Any, f: int) -> Any:
        import array_api_compat

        want, have = shapes[f], a.shape[0]
        if want <= have:
            return xp.asarray(a[:want], copy=True)
        pad = xp.zeros((want - have,), dtype=a.dtype, device=array_api_compat.device(a))
        return xp.concat([a, pad])

    return _each_fragment(x, layout, fn, "resizing the transformed mode", x.dtype)


def _halved_ends(x: "DistributedTensor", n: int, kept: int) -> "DistributedTensor":
    """``x`` (a half spectrum padded to ``n``) with its DC term and, for even ``n``, its Nyquist
    term halved, and everything from index ``kept`` on zero."""
    layout = x.layout
    cdtype = _COMPLEX.get(x.dtype, "complex64")
    owned = [layout.owned_indices(f, 0) for f in range(layout.nfragments)]

    def fn(xp: Any, a: Any, f: int) -> Any:
        import array_api_compat

        import numpy as np

        idx = owned[f]
        scale = np.where(idx < kept, 1.0, 0.0)
        scale[idx == 0] = 0.5
        if n % 2 == 0:
            scale[idx == n // 2] = 0.5
        a = xp.astype(a, getattr(xp, cdtype)) if a.dtype != getattr(xp, cdtype) else a
        factor = xp.asarray(scale.astype(np.float32 if cdtype == "complex64" else np.float64),
                            device=array_api_compat.device(a))
        return a * factor

    return _each_fragment(x, layout, fn, "halving the DC and Nyquist terms", cdtype)


def _conj(x: "DistributedTensor") -> "DistributedTensor":
    out = map_fragments(lambda xp, a: xp.conj(a), (x,), name="conj")
    assert out is not None
    return out


def _twice_real(x: "DistributedTensor") -> "DistributedTensor":
    out = map_fragments(lambda xp, a: xp.real(a) * 2, (x,), name="real part")
    assert out is not None
    return out


# --------------------------------------------------------------------------
# shifts: distributed rolls


def _shift(x: "DistributedTensor", axes: Any, inverse: bool) -> "DistributedTensor":
    kind = "ifftshift" if inverse else "fftshift"
    if not is_distributed(x):
        raise TypeError(f"{_name(kind)} takes a DistributedTensor, got {type(x).__name__}")
    x = settled(x)
    if axes is None:
        modes = list(range(x.ndim))
    else:
        modes = [_axis(kind, a, x.ndim, "axes entry") for a in ([axes] if isinstance(axes, int) else axes)]
    shifts: dict[int, int] = {}
    for mode in modes:  # a repeated mode shifts twice, as NumPy's roll does
        n = x.shape[mode]
        if n:
            shifts[mode] = (shifts.get(mode, 0) + (-(n // 2) if inverse else n // 2)) % n
    shifts = {m: s for m, s in shifts.items() if s}
    start = x.layout.dense
    cur = x
    while shifts:
        local = {m: s for m, s in shifts.items() if cur.layout.grid[m] == 1}
        if local:  # every whole mode at once, where it lies
            modes_t, by = tuple(local), tuple(local.values())
            out = map_fragments(lambda xp, a: xp.roll(a, shift=by, axis=modes_t), (cur,), name=_name(kind))
            assert out is not None
            cur = out
            shifts = {m: s for m, s in shifts.items() if m not in local}
            continue
        mode = next(iter(shifts))
        cur = _roll_split(cur, mode, shifts.pop(mode))
    if cur is x:  # nothing to shift: still a new tensor, as every namespace function returns
        out = map_fragments(lambda xp, a: xp.asarray(a, copy=True), (cur,), name=_name(kind))
        assert out is not None
        cur = out
    return cur if cur.layout.same_distribution(start) else cur.redistribute(start)


def _aligned_block(n: int, shift: int, g: int) -> int | None:
    """The largest block ``b`` dividing ``n`` and ``shift`` with ``n / b`` blocks a multiple of
    ``g`` (a roll by ``shift`` then moves whole fragments), or ``None``."""
    step = math.gcd(n, shift)
    for b in range(step, 0, -1):
        if step % b == 0 and (n // b) % g == 0:
            return b
    return None


def _roll_split(x: "DistributedTensor", mode: int, shift: int) -> "DistributedTensor":
    """``x`` rolled by ``shift`` along the split ``mode``: a redistribution with a shift.

    In a layout of block ``b`` dividing ``n`` and ``shift`` with ``n / b`` a multiple of the
    grid ``g``, block ``J`` lands on block ``J + shift / b``: every fragment's blocks go, as
    a whole and locally rolled, to the fragment ``shift / b`` grid coordinates further on,
    so the roll is a renumbering of the fragments plus one redistribution (a second one when
    the input must first be cut into such blocks). Where no such block exists the mode is
    made whole by a transpose and rolled locally; a 1-D tensor has no other mode and is cut
    into fewer pieces instead (a grid dividing ``n``: one piece when ``n`` is prime).
    """
    layout = x.layout
    n, g = layout.shape[mode], layout.grid[mode]
    b = _aligned_block(n, shift, g)
    devices, ranks = layout.devices, layout.ranks
    if b is None and x.ndim == 1:
        # fewer pieces: the largest grid dividing ``n`` (one, whole on one device, for a prime ``n``)
        g = max(p for p in range(1, g + 1) if n % p == 0)
        devices, ranks = layout.devices[:g], layout.ranks[:g]
        b = _aligned_block(n, shift, g)
    if b is None:
        target = _split_target(layout, mode, [mode])
        assert target is not None
        moved = x.redistribute(transposed_layout(layout, mode, target))
        out = map_fragments(lambda xp, a: xp.roll(a, shift=shift, axis=mode), (moved,), name="roll")
        assert out is not None
        return out
    block, grid = list(layout.block), list(layout.grid)
    block[mode], grid[mode] = b, g
    cut = Layout(layout.shape, block=block, grid=grid, devices=devices, ranks=ranks)
    if not x.layout.same_distribution(cut):
        x = x.redistribute(cut)
    k = shift // b
    nb = n // b
    local_blocks = nb // g
    order = [0] * cut.nfragments
    moved_devices, moved_ranks = list(cut.devices), list(cut.ranks)
    for f in range(cut.nfragments):
        coords, replica = cut.coords_of(f)
        c = coords[mode]
        moved_to = list(coords)
        moved_to[mode] = (c + k) % g
        f2 = cut.fragment_index(moved_to, replica)
        order[f2] = f
        moved_devices[f2], moved_ranks[f2] = cut.devices[f], cut.ranks[f]
    renumbered = Layout(cut.shape, block=cut.block, grid=cut.grid, devices=moved_devices, ranks=moved_ranks)

    def rolled(xp: Any, a: Any, f: int) -> Any:
        q = ((cut.coords_of(f)[0][mode] + k) // g) % max(local_blocks, 1)
        return xp.roll(a, shift=q * b, axis=mode) if q else xp.asarray(a, copy=True)

    return _each_fragment(x, renumbered, rolled, "roll (renumbering blocks)", x.dtype, order)


# --------------------------------------------------------------------------
# sample frequencies, created in a layout


def fftfreq(n: int, /, *, d: float = 1.0, dtype: str, layout: Layout, framework: str,
            real: bool = False) -> "DistributedTensor":
    """The sample frequencies of an ``n``-point transform (``real``: of :func:`rfft`), each
    fragment computing its own elements on its device (nothing moves).

    ``layout`` is 1-D of extent ``n`` (``n // 2 + 1`` when ``real``)."""
    import numpy as np

    extent = n // 2 + 1 if real else n
    if layout.shape != (extent,):
        raise LayoutError(f"fftfreq: the layout's shape must be ({extent},), got {layout.shape}")
    owned = [layout.owned_indices(f, 0) for f in range(layout.nfragments)]

    def fill(xp: Any, a: Any, f: int) -> Any:
        import array_api_compat

        idx = owned[f]
        values = idx if real else np.where(idx < (n + 1) // 2, idx, idx - n)
        return xp.asarray((values / (d * n)).astype(dtype), device=array_api_compat.device(a))

    return _each_fragment(empty(layout, dtype, framework), layout, fill, "fftfreq", dtype)


# --------------------------------------------------------------------------
# the public transforms (the standard's signatures, plus ``transposed_out``)


def _one(kind: str, x: Any, n: Any, axis: Any, norm: Any, transposed_out: bool) -> "DistributedTensor":
    x = _operand(kind, x)
    return _transform(x, kind, [_axis(kind, axis, x.ndim)], [_length(kind, n)], _norm(kind, norm),
                      bool(transposed_out))


def _many(kind: str, x: Any, s: Any, axes: Any, norm: Any, transposed_out: bool) -> "DistributedTensor":
    x = _operand(kind + "n", x)
    modes, sizes = _axes_and_sizes(kind + "n", x, s, axes)
    norm = _norm(kind + "n", norm)
    if not modes:  # no axes: a complex copy, as NumPy's fftn with axes=()
        want = _COMPLEX.get(x.dtype, "complex64")
        out = map_fragments(lambda xp, a: xp.astype(a, getattr(xp, want), copy=True), (x,), name=_name(kind + "n"))
        assert out is not None
        return out
    return _transform(x, kind, modes, sizes, norm, bool(transposed_out))


def fft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
        transposed_out: bool = False) -> "DistributedTensor":
    return _one("fft", x, n, axis, norm, transposed_out)


def ifft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
         transposed_out: bool = False) -> "DistributedTensor":
    return _one("ifft", x, n, axis, norm, transposed_out)


def rfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
         transposed_out: bool = False) -> "DistributedTensor":
    return _one("rfft", x, n, axis, norm, transposed_out)


def irfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
          transposed_out: bool = False) -> "DistributedTensor":
    return _one("irfft", x, n, axis, norm, transposed_out)


def hfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
         transposed_out: bool = False) -> "DistributedTensor":
    return _one("hfft", x, n, axis, norm, transposed_out)


def ihfft(x: "DistributedTensor", /, *, n: int | None = None, axis: int = -1, norm: str | None = "backward",
          transposed_out: bool = False) -> "DistributedTensor":
    return _one("ihfft", x, n, axis, norm, transposed_out)


def fftn(x: "DistributedTensor", /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = "backward", transposed_out: bool = False) -> "DistributedTensor":
    return _many("fft", x, s, axes, norm, transposed_out)


def ifftn(x: "DistributedTensor", /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = "backward", transposed_out: bool = False) -> "DistributedTensor":
    return _many("ifft", x, s, axes, norm, transposed_out)


def rfftn(x: "DistributedTensor", /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = "backward", transposed_out: bool = False) -> "DistributedTensor":
    return _many("rfft", x, s, axes, norm, transposed_out)


def irfftn(x: "DistributedTensor", /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = "backward", transposed_out: bool = False) -> "DistributedTensor":
    return _many("irfft", x, s, axes, norm, transposed_out)


def fftshift(x: "DistributedTensor", /, *, axes: int | Sequence[int] | None = None) -> "DistributedTensor":
    """The zero-frequency term moved to the middle of ``axes`` (every mode by default): a roll
    by ``n // 2`` along each.

    Along a whole mode each fragment rolls its own data; along a split mode the roll is a
    renumbering of fragments and one redistribution, or where the blocks do not line up a
    transpose making the mode whole. The result has ``x``'s layout.
    """
    return _shift(x, axes, False)


def ifftshift(x: "DistributedTensor", /, *, axes: int | Sequence[int] | None = None) -> "DistributedTensor":
    """The inverse of :func:`fftshift` (a roll by ``-(n // 2)``), laid out as ``x``."""
    return _shift(x, axes, True)


_PARAMETERS_ONE = """
    Parameters
    ----------
    x : DistributedTensor
        {dtypes} Any layout: a split ``axis`` is made whole by one transpose (an all-to-all
        moving the split onto another mode); a 1-D tensor split along its mode takes the
        four-step path.
    n : int, optional
        Length of the transform along ``axis`` (the input is cut or zero-padded), as in the
        array API standard. {n_default}
    axis : int
        The transformed mode (negative values count from the end).
    norm : {{"backward", "ortho", "forward"}}
        Normalisation, as in the array API standard (``None`` is "backward").
    transposed_out : bool
        ``False`` (the default): the result is laid out like ``x`` (see
        :func:`dlmg.ops.fft.result_layout`), one more all-to-all where a transpose happened. ``True``: the
        result stays in the layout of the last step, as FFTW-MPI's ``TRANSPOSED_OUT``.

    Returns
    -------
    DistributedTensor
        {returns}

    Raises
    ------
    DtypeError
        For input types the transform does not take.
    """

_PARAMETERS_MANY = """
    Parameters
    ----------
    x : DistributedTensor
        {dtypes} Any layout: split transformed modes are made whole by transposes (slab and
        pencil decompositions: the local modes are transformed first, then one all-to-all
        per split mode moves its split onto a mode already transformed or not transformed).
    s : sequence of int, optional
        Lengths of the transforms along ``axes`` (``-1``: unchanged), as in the standard.
    axes : sequence of int, optional
        The transformed modes (every mode by default; the last ``len(s)`` when only ``s``
        is given).
    norm : {{"backward", "ortho", "forward"}}
        Normalisation, as in the array API standard.
    transposed_out : bool
        As for :func:`fft`: ``True`` leaves the result in the layout of the last step.

    Returns
    -------
    DistributedTensor
        {returns}
    """


def _describe(fn: Callable[..., Any], what: str, template: str, **fields: str) -> None:
    fn.__doc__ = what + "\n" + template.format(**fields)


_describe(fft, "One-dimensional discrete Fourier transform along ``axis``.", _PARAMETERS_ONE,
          dtypes="Real or complex floating values (complex results).", n_default="",
          returns="The transform; the extent of ``axis`` is ``n`` (default: unchanged).")
_describe(ifft, "One-dimensional inverse discrete Fourier transform along ``axis``.", _PARAMETERS_ONE,
          dtypes="Real or complex floating values (complex results).", n_default="",
          returns="The inverse transform; the extent of ``axis`` is ``n`` (default: unchanged).")
_describe(rfft, "One-dimensional discrete Fourier transform of real input (the half spectrum).",
          _PARAMETERS_ONE, dtypes="Real floating values.", n_default="Default: the extent of ``axis``.",
          returns="The half spectrum: ``axis`` has extent ``n // 2 + 1``.")
_describe(irfft, "Inverse of :func:`rfft`: real values from a half spectrum.", _PARAMETERS_ONE,
          dtypes="Real or complex floating values, the half spectrum.",
          n_default="Default ``2 * (m - 1)`` for an input extent ``m``.",
          returns="Real values; ``axis`` has extent ``n``.")
_describe(hfft, "Discrete Fourier transform of a signal with Hermitian symmetry (given as its first half).",
          _PARAMETERS_ONE, dtypes="Real or complex floating values.",
          n_default="Default ``2 * (m - 1)`` for an input extent ``m``.",
          returns="Real values; ``axis`` has extent ``n``.")
_describe(ihfft, "Inverse of :func:`hfft`: the half spectrum of real input.", _PARAMETERS_ONE,
          dtypes="Real floating values.", n_default="Default: the extent of ``axis``.",
          returns="The half spectrum: ``axis`` has extent ``n // 2 + 1``.")
_describe(fftn, "N-dimensional discrete Fourier transform over ``axes``.", _PARAMETERS_MANY,
          dtypes="Real or complex floating values (complex results).",
          returns="The transform, with the extents of ``s``.")
_describe(ifftn, "N-dimensional inverse discrete Fourier transform over ``axes``.", _PARAMETERS_MANY,
          dtypes="Real or complex floating values (complex results).",
          returns="The inverse transform, with the extents of ``s``.")
_describe(rfftn, "N-dimensional discrete Fourier transform of real input; the last of ``axes`` is halved.",
          _PARAMETERS_MANY, dtypes="Real floating values.",
          returns="The half spectrum: the last of ``axes`` has extent ``s[-1] // 2 + 1``.")
_describe(irfftn, "Inverse of :func:`rfftn`: real values from a half spectrum.", _PARAMETERS_MANY,
          dtypes="Real or complex floating values, the half spectrum along the last of ``axes``.",
          returns="Real values; the last of ``axes`` has extent ``s[-1]``, by default ``2 * (m - 1)``.")
