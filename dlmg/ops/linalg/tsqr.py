"""TSQR and what is built on it: ``qr`` (reduced and complete), ``svd``, ``svdvals``, ``pinv``.

Tall-skinny QR (Demmel, Grigori, Hoemmen and Langou 2012; Benson, Gleich and Demmel
2013; dask's ``array/linalg.py`` ``tsqr``): each fragment's framework computes the QR of
its rows, ``A_f = Q_f R_f``; the small ``n x n`` factors ``R_f`` are stacked into one
``(p n) x n`` matrix by a redistribution onto the first fragment's device (across
processes through the engine), where one QR ``[R_1; ...; R_p] = Q_s R`` gives ``R``; the
blocks of ``Q_s`` (with the small SVD or pseudo-inverse factors folded in) return to their
fragments by a second redistribution and ``Q_f Q_s[f]`` is the fragment's part of ``Q``,
in the input's layout. The tree has one level: what moves is ``p`` small factors each
way, whose size does not grow with ``m``. Short-fat matrices (``m < n``, split along
columns) take the same path on the transposed view. Other layouts of a single matrix are
redistributed first into slabs of the long mode over the same devices (a move, never a
gather).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import LayoutError
from ...layout import Layout
from .._executor import Executor, executor, fail, move_array
from ..dispatch import new_tensor
from ..shape import permute_dims
from .matrices import LOCAL, REAL_OF, WIDE, agreed, as_tall, batch_local, check_matrix, matrix_split, slabs_of_long_mode

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["tsqr", "qr", "qr_wide", "qr_complete", "svd_complete", "svd", "svdvals", "pinv"]


# --------------------------------------------------------------------------
# TSQR


class _Piece:
    """One local fragment's QR: its executor, ``Q_f`` and how many of ``Q_s``'s rows it takes."""

    __slots__ = ("ex", "q", "k")

    def __init__(self, ex: Executor, q: Any, k: int) -> None:
        self.ex, self.q, self.k = ex, q, k


class _ChunkedQ:
    """A fragment's ``Q_f = diag(Q_1, ..., Q_c) Q_2`` from a flat TSQR over its row chunks: ``buf``
    (``m_f x n``) holds each chunk's own ``Q_i`` in the chunk's rows, ``small`` is ``Q_2``
    (``c n x n``, the QR of the stacked chunk factors) and ``bounds`` the chunks' row spans."""

    __slots__ = ("buf", "small", "bounds")

    def __init__(self, buf: Any, small: Any, bounds: list[tuple[int, int]]) -> None:
        self.buf, self.small, self.bounds = buf, small, bounds


#: at most this many row chunks per fragment in the local QR (its new memory beyond ``Q_f``
#: is then one chunk's QR, an eighth of a copy of the fragment)
_CHUNKS = 8


def _chunk_rows(m: int, n: int) -> int:
    """Rows per chunk of an ``m x n`` fragment's local QR: at most :data:`_CHUNKS` chunks, each of
    at least ``2 n`` rows (so that every chunk's ``Q_i`` is ``rows x n``)."""
    return max(2 * n, -(-m // _CHUNKS), 1)


def _spans(m: int, chunk: int) -> list[tuple[int, int]]:
    """Row spans of ``chunk`` rows covering ``m``; a short last one joins the one before."""
    starts = list(range(0, m, chunk))
    if len(starts) > 1 and m - starts[-1] < chunk:
        starts.pop()
    return [(a, b) for a, b in zip(starts, starts[1:] + [m])]


def _r_only(xp: Any, a: Any, chunk: int) -> Any:
    """``R`` of ``a`` without forming its ``Q``: sequential TSQR over ``chunk`` rows at a time
    (``R = qr([R; next rows])``), so the new memory is one chunk, not a copy of ``a``."""
    r = None
    for start in range(0, a.shape[0], chunk):
        piece = a[start:start + chunk]
        if r is not None:
            piece = xp.concat([r, piece], axis=0)
        r = xp.linalg.qr(piece)[1]
    return r


def _chunked_qr(xp: Any, a: Any, spans: list[tuple[int, int]]) -> tuple[_ChunkedQ, Any]:
    """The flat TSQR of ``a``'s row chunks into one buffer written in place: each chunk's
    ``Q_i R_i``, ``Q_i`` stored in ``buf``'s rows of the chunk, then ``[R_1; ...; R_c] = Q_2 R``.
    The new memory is ``Q_f``'s buffer and one chunk's QR, not a copy of ``a`` beside ``Q_f``."""
    buf = xp.empty(a.shape, dtype=a.dtype, device=a.device)
    rs = []
    for start, stop in spans:
        q, r = xp.linalg.qr(a[start:stop])
        buf[start:stop] = q
        rs.append(r)
        del q
    small, r = xp.linalg.qr(xp.concat(rs, axis=0))
    return _ChunkedQ(buf, small, spans), r


def _chunked_apply(xp: Any, q: _ChunkedQ, wf: Any) -> Any:
    """``Q_f W_f = diag(Q_i) (Q_2 W_f)`` (``W_f``: ``n x n``) written over ``Q_f``'s buffer, chunk
    by chunk: the result is the buffer, the new memory one chunk's product."""
    n = wf.shape[0]
    folded = xp.matmul(q.small, wf)
    for c, (start, stop) in enumerate(q.bounds):
        q.buf[start:stop] = xp.matmul(q.buf[start:stop], folded[c * n:(c + 1) * n])
    return q.buf


def _explicit_q(xp: Any, q: _ChunkedQ) -> Any:
    """``Q_f`` itself, formed in its buffer (``Q_i Q_2[i]`` chunk by chunk)."""
    return _chunked_apply(xp, q, xp.eye(q.small.shape[1], dtype=q.small.dtype, device=q.small.device))


def _local_qr(xp: Any, a: Any, n: int, want_q: bool = True, in_place: bool = False) -> tuple[Any, Any]:
    """``Q_f`` (``m_f x min(m_f, n)``; ``None`` unless ``want_q``) and ``R_f`` padded with zero
    rows to ``n x n``. ``R`` alone comes from a chunk of rows at a time; with ``in_place`` (the
    framework's arrays can be written) and rows for two chunks, ``Q_f`` is a :class:`_ChunkedQ`."""
    m = a.shape[0]
    if m == 0:  # an empty fragment: no rows of Q, a zero R
        return a[:, :0], xp.matmul(xp.matrix_transpose(a), a)
    chunk = _chunk_rows(m, n)
    if not want_q:
        q, r = None, _r_only(xp, a, chunk)
    elif in_place and m >= 2 * chunk:
        q, r = _chunked_qr(xp, a, _spans(m, chunk))
    else:
        q, r = xp.linalg.qr(a)
    short = n - r.shape[0]
    if short > 0:
        r = xp.concat([r, xp.zeros_like(xp.broadcast_to(r[:1], (short, n)))], axis=0)
    return q, r


def tsqr(
    name: str,
    x: "DistributedTensor",
    small: Callable[..., tuple[Any, ...]],
    smalls: Sequence[tuple[tuple[int, ...], str]],
    width: int | None,
    apply: Callable[[Any, Any, Any, int], Any] | None = None,
    out_layout: Layout | None = None,
) -> tuple["DistributedTensor | None", tuple["DistributedTensor", ...]]:
    """TSQR of a tall matrix split along rows (see the module), with a small step on the stacked factors.

    Parameters
    ----------
    name : str
        The operation, for error messages.
    x : DistributedTensor
        2-D, ``m >= n``, only the row mode split (replicas: replica 0 is read).
    small : callable
        ``small(xp, S)`` on the stacked ``(p n) x n`` factors, on the first fragment's device:
        returns ``(W, *results)``, ``W`` of shape ``(p n) x width`` (or ``None`` when ``width``
        is ``None``) and the small results of ``smalls``.
    smalls : sequence of (shape, dtype)
        The small results, each returned as one fragment on the first fragment's device.
    width : int or None
        The columns of ``W``; ``None``: no distributed result (``Q_f`` are dropped).
    apply : callable, optional
        ``apply(xp, Q_f, W_f, f)`` makes fragment ``f`` of the distributed result (default ``Q_f W_f``).
    out_layout : Layout, optional
        The distributed result's layout (default: ``x``'s, ``width`` columns, no replicas).

    Returns
    -------
    (DistributedTensor or None, tuple of DistributedTensor)
        The distributed result and the small results.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    rows = [lay.fragment(i).shape[0] for i in range(p)]
    # full fragments first: a padded block never supplies a pivot row of the stacked QR
    order = sorted(range(p), key=lambda i: (rows[i] < n, i))
    devices = [lay.devices[i] for i in order]
    ranks = [lay.ranks[i] for i in order]
    stacked = Layout((p * n, n), block=(n, n), grid=(p, 1), devices=devices, ranks=ranks)
    keep_q = width is not None
    blocks, pieces = _local_factors(name, x, order, rows, keep_q)
    home_dev, home_rank = devices[0], ranks[0]
    gathered = new_tensor(blocks, stacked, x.dtype).redistribute(Layout.single((p * n, n), home_dev, ranks=home_rank))
    del blocks
    home = gathered.fragments[0]

    def on_home() -> tuple[Any, ...]:
        if not home.is_local:
            return (None,) * (1 + len(smalls))
        ex = executor(home.framework, home.device)
        try:
            return ex.run(small, home.array)
        except Exception as exc:
            raise fail(f"{name} (the stacked factors)", 0, ex, exc) from exc

    outs = agreed(name, on_home, stacked=(p * n, n))
    results = tuple(
        new_tensor([o], Layout.single(shape, home_dev, ranks=home_rank), dtype)
        for o, (shape, dtype) in zip(outs[1:], smalls)
    )
    if not keep_q:
        return None, results
    assert width is not None
    w_single = Layout.single((p * n, width), home_dev, ranks=home_rank)
    w_stacked = Layout((p * n, width), block=(n, max(width, 1)), grid=(p, 1), devices=devices, ranks=ranks)
    w = new_tensor([outs[0]], w_single, x.dtype).redistribute(w_stacked)
    if out_layout is None:
        out_layout = Layout((m, width), block=(lay.block[0], max(width, 1)), grid=(p, 1),
                            devices=lay.devices[:p], ranks=lay.ranks[:p])
    arrays = _applied(name, pieces, order, w, out_layout.nfragments, apply, width == n)
    return new_tensor(arrays, out_layout, x.dtype), results


def _local_factors(name: str, x: "DistributedTensor", order: list[int], rows: list[int],
                   keep_q: bool) -> tuple[list[Any], dict[int, _Piece]]:
    """TSQR's first step: each local fragment's ``R_f`` (padded to ``n x n``), in stacking
    ``order``, and its ``Q_f`` where ``keep_q``."""
    n = x.shape[1]
    pieces: dict[int, _Piece] = {}
    blocks: list[Any] = [None] * len(order)
    for j, i in enumerate(order):
        frag = x.fragments[i]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        # by row chunks in host memory only: a GPU runs the chunks' small QRs launch-bound (the
        # performance page has the figures), so there the local QR is one call beside its input
        chunked = ex.traits.mutable and frag.device.is_host
        try:
            q, r = ex.run(_local_qr, frag.array, n, keep_q, chunked)
        except Exception as exc:
            raise fail(f"{name} (local QR)", i, ex, exc) from exc
        blocks[j] = r
        if keep_q:
            pieces[j] = _Piece(ex, q, min(rows[i], n))
    return blocks, pieces


def _applied(name: str, pieces: dict[int, _Piece], order: list[int], w: "DistributedTensor", nfragments: int,
             apply: Callable[[Any, Any, Any, int], Any] | None, square: bool) -> list[Any]:
    """TSQR's last step: each fragment's part of the result, ``apply(Q_f, W_f)`` (default
    ``Q_f W_f``; written over a chunked ``Q_f``'s own buffer when ``W`` is square), each
    ``Q_f`` freed once used."""
    arrays: list[Any] = [None] * nfragments
    run = apply if apply is not None else (lambda xp, q, wf, _f: xp.matmul(q, wf))
    for j, piece in pieces.items():
        i = order[j]
        ex = piece.ex
        try:
            wf = move_array(w.fragments[j].array, ex)[: piece.k]
            q = piece.q
            if not isinstance(q, _ChunkedQ):
                arrays[i] = ex.run(run, q, wf, i)
            elif apply is None and square:  # Q_f W_f written over Q_f's buffer
                arrays[i] = ex.run(_chunked_apply, q, wf)
            else:
                arrays[i] = ex.run(run, ex.run(_explicit_q, q), wf, i)
            del q
        except Exception as exc:
            raise fail(f"{name} (applying Q)", i, ex, exc) from exc
        piece.q = None
    return arrays


# --------------------------------------------------------------------------
# the factorizations


def qr(x: "DistributedTensor", /, *, mode: str = "reduced") -> tuple["DistributedTensor", "DistributedTensor"]:
    """QR factorization ``x = Q R``: batch-local, or TSQR for a tall matrix split along rows.

    Parameters
    ----------
    x : DistributedTensor
        Matrices in the last two modes, whole in every fragment; or one tall
        (``m >= n``) matrix split in any way (redistributed into row slabs
        first when its columns are split).
    mode : {"reduced", "complete"}
        ``"complete"``: ``Q`` is ``m x m``, ``R`` ``m x n`` (for a split
        matrix both in its row distribution, :func:`qr_complete`).

    Returns
    -------
    (DistributedTensor, DistributedTensor)
        ``Q`` (``m x n``, ``x``'s row distribution, orthonormal columns) and
        ``R`` (``n x n``, upper triangular, one fragment on the first
        fragment's device).

    Raises
    ------
    LayoutError
        For split matrix modes with batch modes.

    Notes
    -----
    A short-fat (``m < n``) split matrix is factorised by :func:`qr_wide`:
    ``Q`` is ``m x m``, ``R`` (``m x n``) keeps the column distribution.
    """
    name = "dlmg.linalg.qr"
    x = check_matrix(name, x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"{name}: mode must be 'reduced' or 'complete', got {mode!r}")
    split = matrix_split(x)
    m, n = x.shape[-2:]
    if split == LOCAL:
        k = m if mode == "complete" else min(m, n)
        q, r = batch_local(name, x, lambda xp, a: tuple(xp.linalg.qr(a, mode=mode)),
                           [((m, k), x.dtype), ((k, n), x.dtype)])
        return q, r
    if x.ndim == 2 and m < n:
        return qr_wide(x)
    if x.ndim != 2:
        raise LayoutError(
            f"{name}: distributed QR is TSQR of one tall matrix (m >= n); got shape "
            f"{x.shape}, mode {mode!r}, layout {x.layout!r}. Make the matrices whole in every fragment "
            "first (redistribute) for the other cases"
        )
    if split is None:
        x = slabs_of_long_mode(x)
    if mode == "complete":
        return qr_complete(x)

    def small(xp: Any, s: Any) -> tuple[Any, Any]:
        qs, r = xp.linalg.qr(s)
        return qs, r

    got, (r,) = tsqr(name, x, small, [((n, n), x.dtype)], n)
    assert got is not None
    return got, r


def qr_wide(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor"]:
    """The QR ``x = Q R`` of one short-fat matrix (``m < n``), split in any way.

    For ``m < n`` write ``A = [A_1 A_2]`` with ``A_1`` the leading ``m x m``
    block: its QR ``A_1 = Q R_1`` gives ``R = Q^H A = [R_1  Q^H A_2]``, upper
    trapezoidal, and the reduced and complete factorizations are the same
    (``Q`` is ``m x m``). This is the order of LAPACK's ``xGEQRF`` for
    ``m < n`` (Golub & Van Loan, *Matrix Computations*, 4th ed., sec. 5.2):
    the first ``m`` Householder reflections are those of ``A_1`` alone.

    What moves: the matrix into column slabs over its replica-0 devices when
    it is split another way (one redistribution); ``A_1`` (``m x m``, whose
    size does not grow with the distributed extent ``n``) to the first
    fragment's device, where it is factorised; ``Q`` back to every fragment's
    device. Each fragment then computes its columns of ``R = Q^H A_f`` where
    it is, and the first ``m`` columns are made exactly upper triangular.
    ``R`` keeps the column-slab layout; ``Q`` is one fragment on the first
    fragment's device.
    """
    name = "dlmg.linalg.qr"
    m, n = x.shape
    if matrix_split(x) != WIDE or x.layout.nreplicas > 1:
        x = slabs_of_long_mode(x)
    lay = x.layout
    p = lay.ngrid
    devices, ranks = lay.devices[:p], lay.ranks[:p]
    lead = x[:, :m].redistribute(Layout.single((m, m), devices[0], ranks=ranks[0]))
    q, _ = qr(lead)
    q_all = q.redistribute(Layout.replicated((m, m), devices, ranks=ranks))
    arrays: list[Any] = [None] * p
    for i in range(p):
        frag = x.fragments[i]
        if not frag.is_local:
            continue
        ex = executor(frag.framework, frag.device)
        qf = move_array(q_all.fragments[i].array, ex)
        below = np.arange(m)[:, None] > lay.owned_indices(i, 1)[None, :]  # zero in R's leading block

        def columns(xp: Any, a: Any, qq: Any) -> Any:
            r = xp.matmul(xp.conj(xp.permute_dims(qq, (1, 0))), a)
            return xp.where(xp.asarray(below, device=a.device), xp.zeros_like(r), r)

        try:
            arrays[i] = ex.run(columns, frag.array, qf)
        except Exception as exc:
            raise fail(name, i, ex, exc) from exc
    return q, new_tensor(arrays, lay, x.dtype)


def _reflectors(xp: Any, q: Any) -> list[Any]:
    """Householder vectors ``v_j`` (unit norm, zero above row ``j``) with ``H_1 ... H_k [D; 0] = q``
    for ``q`` of orthonormal columns (``H_j = I - 2 v_j v_j^H``, ``D`` diagonal of unit modulus):
    LAPACK's ``xGEQRF`` on ``q`` (Golub & Van Loan, sec. 5.1), one column at a time. Each column,
    reflected by the earlier ones, has unit norm below its row, so no vector degenerates."""
    mf, kf = q.shape
    vs: list[Any] = []
    for j in range(kf):
        c = q[:, j]
        for v in vs:
            c = c - 2 * v * xp.sum(xp.conj(v) * c)
        below = c[j:]
        size = xp.abs(below[:1])
        phase = xp.where(size > 0, below[:1] / xp.where(size > 0, size, xp.ones_like(size)), xp.ones_like(below[:1]))
        v = xp.concat([xp.zeros((j,), dtype=q.dtype, device=q.device), below[:1] + phase * xp.linalg.vector_norm(below),
                       below[1:]])
        vs.append(v / xp.linalg.vector_norm(v))
    return vs


def _complement_columns(xp: Any, q: Any, start: int, stop: int, vs: list[Any]) -> Any:
    """Columns ``start:stop`` (``start >= k``) of ``H_1 ... H_k``: orthonormal, orthogonal to ``q``'s."""
    mf = q.shape[0]
    e = xp.eye(mf, stop - start, k=-start, dtype=q.dtype, device=q.device)
    for v in reversed(vs):
        e = e - 2 * v[:, None] * xp.matmul(xp.conj(v)[None, :], e)
    return e


def _complete_rows(xp: Any, q: Any, wf: Any, m: int, offset: int, mutable: bool) -> Any:
    """Fragment rows of the complete ``Q``: ``Q_f W_f`` in the first columns, an orthonormal
    complement of ``Q_f``'s columns (the trailing columns of ``Q_f``'s Householder product,
    made a panel of columns at a time, never ``m_f x m_f`` at once) at ``offset``, zeros
    elsewhere; written into one new array where the framework's arrays can be written, else
    assembled by concatenation."""
    mf, kf = q.shape
    vs = _reflectors(xp, q)
    width = max(kf, 64)
    spans = [(a, min(a + width, mf)) for a in range(kf, mf, width)]
    if mutable:
        out = xp.zeros((mf, m), dtype=q.dtype, device=q.device)
        for a, b in spans:
            out[:, offset + a - kf: offset + b - kf] = _complement_columns(xp, q, a, b, vs)
        out[:, : wf.shape[1]] = xp.matmul(q, wf)
        return out
    parts = [xp.matmul(q, wf)]
    if mf > kf:
        parts.append(xp.zeros((mf, offset - wf.shape[1]), dtype=q.dtype, device=q.device))
        parts += [_complement_columns(xp, q, a, b, vs) for a, b in spans]
    end = sum(part.shape[1] for part in parts)
    parts.append(xp.zeros((mf, m - end), dtype=q.dtype, device=q.device))
    return xp.concat(parts, axis=1)


def _tsqr_complete(name: str, x: "DistributedTensor", with_svd: bool) -> tuple["DistributedTensor",
                                                                                 tuple["DistributedTensor", ...]]:
    """The complete ``Q`` (``m x m``) of a tall matrix split along rows, from TSQR, and the small results.

    Each fragment's QR ``A_f = Q_f R_f`` (``Q_f``: ``m_f x k_f``, ``k_f = min(m_f, n)``) and the
    complete QR of the stacked ``R_f`` (``K = sum k_f`` rows), ``[R_1; ...; R_p] = Q_s R_s``,
    give ``Q = diag(Q_f) [E Q_s | 0] + diag(Q_f^perp) F``: fragment ``f``'s rows of ``Q`` are
    ``Q_f Q_s[f]`` in the first ``K`` columns and the orthonormal complement ``Q_f^perp`` of
    ``Q_f``'s columns (``m_f - k_f`` of them, from a local complete QR of ``Q_f``) in a column
    span of its own after them. ``with_svd``: the SVD ``R = U_R S V^H`` of the small ``R``
    (``n x n``, ``K >= n``) is folded into the first ``n`` columns, ``Q diag(U_R, I)``, and the
    small results are ``S`` and ``V^H``; else the small result is ``R``.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    rows = [lay.fragment(i).shape[0] for i in range(p)]
    kept = [min(r, n) for r in rows]
    total = sum(kept)
    offsets, start = [], total
    for r, k in zip(rows, kept):
        offsets.append(start)
        start += r - k
    order = sorted(range(p), key=lambda i: (rows[i] < n, i))  # tsqr's stacking order
    valid = np.concatenate([np.arange(kept[i]) + n * j for j, i in enumerate(order)]) if total else \
        np.zeros(0, dtype=np.int64)
    mapping = np.full(p * n, total, dtype=np.int64)
    mapping[valid] = np.arange(total)

    def small(xp: Any, s: Any) -> tuple[Any, ...]:
        qs, r = xp.linalg.qr(xp.take(s, xp.asarray(valid, device=s.device), axis=0), mode="complete")
        extra: tuple[Any, ...] = (r[:n],)
        if with_svd:
            u, sv, vh = xp.linalg.svd(r[:n], full_matrices=False)
            qs = xp.concat([xp.matmul(qs[:, :n], u), qs[:, n:]], axis=1)
            extra = (sv, vh)
        padded = xp.concat([qs, xp.zeros((1, total), dtype=qs.dtype, device=qs.device)], axis=0)
        return (xp.take(padded, xp.asarray(mapping, device=s.device), axis=0), *extra)

    smalls = [((n,), REAL_OF.get(x.dtype, x.dtype)), ((n, n), x.dtype)] if with_svd else [((n, n), x.dtype)]
    out_layout = Layout((m, m), block=(lay.block[0], max(m, 1)), grid=(p, 1), devices=lay.devices[:p],
                        ranks=lay.ranks[:p])
    mutable = [executor(f.framework, f.device).traits.mutable if f.is_local else False for f in x.fragments]
    q, results = tsqr(name, x, small, smalls, total,
                      lambda xp, qf, wf, f: _complete_rows(xp, qf, wf, m, offsets[f], mutable[f]), out_layout)
    assert q is not None
    return q, results


def qr_complete(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor"]:
    """The complete QR ``x = Q R`` (``Q`` is ``m x m``) of a tall matrix split along rows, from TSQR.

    ``Q`` as :func:`_tsqr_complete` makes it. What moves is TSQR's (the small factors, ``K x K``
    on the way back); ``Q`` and ``R`` (``m x n``, zero below row ``n``) keep ``x``'s row
    distribution, and each fragment makes its rows of them where it is.
    """
    lay = x.layout
    m, n = x.shape
    p = lay.ngrid
    q, (r_small,) = _tsqr_complete("dlmg.linalg.qr", x, False)
    dense = Layout((m, n), block=(lay.block[0], max(n, 1)), grid=(p, 1), devices=lay.devices[:p],
                   ranks=lay.ranks[:p])
    r_all = r_small.redistribute(Layout.replicated((n, n), lay.devices[:p], ranks=lay.ranks[:p]))
    arrays: list[Any] = [None] * p
    for i in range(p):
        frag = r_all.fragments[i]
        if not frag.is_local:
            continue
        idx = lay.owned_indices(i, 0)
        top = idx[idx < n]
        ex = executor(frag.framework, frag.device)
        arrays[i] = ex.run(lambda xp, a: xp.concat([xp.take(a, xp.asarray(top, device=a.device), axis=0),
                                                    xp.zeros((idx.size - top.size, n), dtype=a.dtype,
                                                             device=a.device)], axis=0), frag.array)
    return q, new_tensor(arrays, dense, x.dtype)


def svd_complete(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor", "DistributedTensor"]:
    """The full SVD ``x = U diag(S) Vh`` (``full_matrices=True``) of one split matrix, from the complete TSQR.

    For a tall matrix (``m >= n``) the complete ``Q`` of TSQR and the SVD
    ``R = U_R S V^H`` of its small ``R`` give ``x = Q [R; 0] = (Q diag(U_R, I)) [S; 0] V^H``, so
    ``U = Q diag(U_R, I)`` (``m x m``; ``U_R`` folded into the stacked factors on the first
    fragment's device, nothing else moves than TSQR's small factors) keeps ``x``'s row
    distribution; ``S`` and ``Vh`` (``n x n``) are one fragment on the first fragment's
    device. A short-fat matrix goes through its transpose: ``Vh`` (``n x n``) keeps the
    column distribution and ``U`` (``m x m``) is small. Other splits are redistributed into
    slabs of the long mode first.
    """
    name = "dlmg.linalg.svd"
    x = check_matrix(name, x)
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = as_tall(x)
    u, (sv, vh) = _tsqr_complete(name, t, True)
    if transposed:  # x = t^T = (U' S V'h)^T = V'h^T S U'^T
        return permute_dims(vh, (1, 0)), sv, permute_dims(u, (1, 0))
    return u, sv, vh


def svd(x: "DistributedTensor", /) -> tuple["DistributedTensor", "DistributedTensor", "DistributedTensor"]:
    """Thin SVD ``x = U diag(S) Vh`` (``full_matrices=False``): batch-local, or the SVD of TSQR's ``R``.

    For a tall matrix split along rows ``U = Q (Q_s U_R)`` keeps ``x``'s row
    distribution, ``S`` and ``Vh`` are small; for a short-fat matrix split
    along columns ``Vh`` keeps the column distribution (a transposed view of
    the TSQR factor of ``x^T``) and ``U`` is small.
    """
    name = "dlmg.linalg.svd"
    x = check_matrix(name, x)
    m, n = x.shape[-2:]
    k = min(m, n)
    real = REAL_OF.get(x.dtype, x.dtype)
    if matrix_split(x) == LOCAL:
        left, values, right = batch_local(name, x, lambda xp, a: tuple(xp.linalg.svd(a, full_matrices=False)),
                                          [((m, k), x.dtype), ((k,), real), ((k, n), x.dtype)])
        return left, values, right
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = as_tall(x)

    def small(xp: Any, s: Any) -> tuple[Any, Any, Any]:
        qs, r = xp.linalg.qr(s)
        u, sv, vh = xp.linalg.svd(r, full_matrices=False)
        return xp.matmul(qs, u), sv, vh

    u, (sv, vh) = tsqr(name, t, small, [((k,), real), ((k, k), x.dtype)], k)
    assert u is not None
    if transposed:  # x = t^T = (U' S V'h)^T = V'h^T S U'^T
        return permute_dims(vh, (1, 0)), sv, permute_dims(u, (1, 0))
    return u, sv, vh


def svdvals(x: "DistributedTensor", /) -> "DistributedTensor":
    """The singular values, descending: batch-local, or those of TSQR's ``R`` (no ``Q`` is formed)."""
    name = "dlmg.linalg.svdvals"
    x = check_matrix(name, x)
    m, n = x.shape[-2:]
    real = REAL_OF.get(x.dtype, x.dtype)
    if matrix_split(x) == LOCAL:
        (s,) = batch_local(name, x, lambda xp, a: (xp.linalg.svdvals(a),), [((min(m, n),), real)])
        return s
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, _ = as_tall(x)
    k = min(m, n)

    def small(xp: Any, s: Any) -> tuple[None, Any]:
        _, r = xp.linalg.qr(s)
        return None, xp.linalg.svdvals(r)

    _, (sv,) = tsqr(name, t, small, [((k,), real)], None)
    return sv


def _cutoff(xp: Any, s: Any, rtol: float | None, m: int, n: int) -> Any:
    """The singular values above ``rtol * max(s)`` (the array API's default ``rtol``: ``max(m, n) eps``)."""
    if rtol is None:
        rtol = max(m, n) * float(xp.finfo(s.dtype).eps)
    return s > rtol * xp.max(s) if s.shape[-1] else s > 0


def pinv(x: "DistributedTensor", /, *, rtol: float | None = None) -> "DistributedTensor":
    """The Moore-Penrose pseudo-inverse: batch-local, or ``V S^+ U^H`` from TSQR's ``R``.

    For a tall matrix split along rows the result (``n x m``) is split along
    columns as ``x`` is along rows; each fragment computes
    ``(Q_f W_f)^H`` with ``W = Q_s U_R S^+ Vh`` folded on the first fragment's
    device. A short-fat matrix goes through its transpose.
    """
    name = "dlmg.linalg.pinv"
    x = check_matrix(name, x)
    m, n = x.shape[-2:]
    if matrix_split(x) == LOCAL:
        def local(xp: Any, a: Any) -> tuple[Any]:
            return (xp.linalg.pinv(a) if rtol is None else xp.linalg.pinv(a, rtol=rtol),)

        (out,) = batch_local(name, x, local, [((n, m), x.dtype)])
        return out
    if x.ndim != 2:
        raise _batch_split(name, x)
    t, transposed = as_tall(x)
    tm, tn = t.shape
    complex_ = x.dtype in REAL_OF

    def small(xp: Any, s: Any) -> tuple[Any]:
        qs, r = xp.linalg.qr(s)
        u, sv, vh = xp.linalg.svd(r, full_matrices=False)
        keep = _cutoff(xp, sv, rtol, tm, tn)
        inv = xp.where(keep, 1 / xp.where(keep, sv, xp.ones_like(sv)), xp.zeros_like(sv))
        return (xp.matmul(xp.matmul(qs, u) * xp.astype(inv, u.dtype)[None, :], vh),)

    def apply(xp: Any, q: Any, wf: Any, _f: int) -> Any:
        left, right = xp.matrix_transpose(wf), xp.matrix_transpose(q)
        if complex_:
            left, right = xp.conj(left), xp.conj(right)
        return xp.matmul(left, right)

    lay = t.layout
    p = lay.ngrid
    out_layout = Layout((tn, tm), block=(max(tn, 1), lay.block[0]), grid=(1, p), devices=lay.devices[:p],
                        ranks=lay.ranks[:p])
    got, _ = tsqr(name, t, small, [], tn, apply, out_layout)
    assert got is not None
    if transposed:  # pinv(x) = pinv(x^T)^T
        return permute_dims(got, (1, 0))
    return got


def _batch_split(name: str, x: "DistributedTensor") -> LayoutError:
    return LayoutError(
        f"{name}: with batch modes, the matrix modes must be whole in every fragment; got shape {x.shape}, "
        f"layout {x.layout!r}. Redistribute them whole, or take one matrix at a time"
    )
