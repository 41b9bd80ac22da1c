"""Eigenvalues and eigenvectors of one Hermitian matrix split across fragments, by one-sided block Jacobi.

The algorithm is Hestenes' one-sided Jacobi method (Hestenes 1958), on
column blocks, in the parallel (round-robin) ordering of Brent and Luk (1985),
as the block versions of the ScaLAPACK era run it (Bečka, Okša and Vajteršic,
"Dynamic ordering for a parallel block-Jacobi SVD algorithm", 2002):

* ``A`` is shifted to ``B = A + s I`` with ``s = 2 ||A||_F`` (at least twice
  its spectral radius), so that ``B`` is positive definite, its singular values
  are its eigenvalues ``lambda + s`` and lie within a factor of three of each
  other (the Gram matrices below are well conditioned);
* the columns of ``W = B`` are cut into ``2 P`` blocks (``P`` the matrix's
  fragments), two per fragment. ``B`` is Hermitian, so a row block of ``B`` is
  the conjugated transpose of the column block of the same indices: the
  working copy ``Y = W^H`` is held by rows, and a row-split matrix needs no
  transpose. ``Z = V^H`` (starting as the identity) is held alike;
* each round pairs every block with one other block (Brent and Luk's
  round-robin: block ``0`` stays, the others move one place round a ring); the
  fragment holding a pair ``(i, j)``, ``i < j``, forms their ``2b x 2b`` Gram
  matrix ``G = [Y_i; Y_j] [Y_i; Y_j]^H``, takes its eigenvectors ``U``
  (ascending), and rotates ``[Y_i; Y_j]`` and ``[Z_i; Z_j]`` by ``U^H`` (the
  smaller directions into block ``i``). Between rounds the blocks move to
  their next fragment by redistributions (each block to one neighbour;
  across processes through the engine), the first row of the ring before the
  second, so a fragment never holds more than three blocks of each;
* after a sweep (every pair once) the largest cosine between two columns and
  the largest inversion of order between paired columns are combined over
  all fragments (a pending ``max`` resolved through the engine); below
  ``4 n eps`` the columns of ``W`` are orthogonal and in ascending order of
  their norms, so ``W = V diag(lambda + s)``: the eigenvalues are
  ``v_k^H w_k - s`` (Rayleigh quotients, per block) and the eigenvectors
  ``V = Z^H``, redistributed into the input's layout.

What moves per round: each block of ``Y`` and ``Z`` to one neighbour
(``2 n^2 / P`` elements per fragment). Per fragment, memory holds its two
blocks of ``Y`` and of ``Z`` (its share of the operand and of the result), one
block received before the one it replaces is freed, and the ``2b x 2b``
Gram matrix; where the framework's arrays can be written (NumPy, PyTorch,
CuPy) the rotation is applied in place, a strip of ``b`` columns at a time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ..device import Device
from ..errors import DlmgError, DtypeError
from ..layout import Layout
from ._executor import Executor, executor, fail, move_array
from .dispatch import map_fragments, new_tensor
from .shape import permute_dims

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["eigh_jacobi", "ring_rounds", "JACOBI_DTYPES"]

#: the dtypes the distributed eigensolver takes (the frameworks' ``eigh`` of the small Gram matrices)
JACOBI_DTYPES = frozenset({"float32", "float64", "complex64", "complex128"})

_MAX_SWEEPS = 40


def ring_rounds(nblocks: int) -> list[list[tuple[int, int]]]:
    """Brent and Luk's round-robin ordering of ``nblocks`` (even) blocks: ``nblocks - 1`` rounds,
    each a list of ``nblocks / 2`` pairs ``(top, bottom)`` (pair ``k`` held by slot ``k``), every
    two blocks paired once.

    Players on a ring: player ``0`` stays, the others move one place per round. Player ``k``
    (``k < nblocks / 2``) is block ``k`` and player ``nblocks - 1 - k`` is block
    ``k + nblocks / 2``, so that round 0 places blocks ``k`` and ``k + P`` on slot ``k``: a
    row block-cyclic matrix with two blocks per fragment needs no move to start.
    """
    half = nblocks // 2
    block_of = [k if k < half else nblocks - 1 - k + half for k in range(nblocks)]
    ring = list(range(1, nblocks))
    rounds = []
    for r in range(nblocks - 1):
        order = [0] + ring[r:] + ring[:r]
        rounds.append([(block_of[order[k]], block_of[order[nblocks - 1 - k]]) for k in range(half)])
    return rounds


class _Slots:
    """Where the blocks live: ``P`` slots (the fragments of the input's replica 0), each on its device
    and process, with the executor of the local ones."""

    def __init__(self, x: "DistributedTensor") -> None:
        lay = x.layout
        self.count = lay.ngrid
        self.devices = [lay.devices[s] for s in range(self.count)]
        self.ranks = [lay.ranks[s] for s in range(self.count)]
        self.execs: dict[int, Executor] = {}
        self.anchor: dict[int, Any] = {}
        for s in range(self.count):
            frag = x.fragments[s]
            if frag.is_local:
                self.execs[s] = executor(frag.framework, frag.device)
                self.anchor[s] = frag.array

    def layout(self, n: int, cols: int, b: int, slot_of: list[int]) -> Layout:
        """Row blocks ``j`` (``b`` rows, ``cols`` columns) on the slots ``slot_of[j]``."""
        return Layout((n, cols), block=(b, max(cols, 1)), grid=(len(slot_of), 1),
                      devices=[self.devices[s] for s in slot_of], ranks=[self.ranks[s] for s in slot_of])

    def reduce_max(self, values: dict[int, float]) -> float:
        """The largest of every slot's value, the same on every process (a pending max over the
        slots, resolved by a redistribution)."""
        pending = Layout((1,), devices=self.devices, ranks=self.ranks, partial="max")
        arrays: list[Any] = [None] * self.count
        for s, ex in self.execs.items():
            v = values.get(s, 0.0)
            arrays[s] = ex.run(lambda xp, a: xp.full((1,), v, dtype=xp.abs(a[:0]).dtype, device=a.device),
                               self.anchor[s])
        out = new_tensor(arrays, pending).redistribute(pending.replace(partial=None))
        got = next(f.array for f in out.fragments if f.is_local)
        return float(np.asarray(move_array(got, executor("numpy", Device.parse("cpu"))))[0])


def _gram_step(xp: Any, ylo: Any, yhi: Any) -> tuple[Any, float]:
    """The eigenvectors ``U`` (ascending) of ``[ylo; yhi] [ylo; yhi]^H`` and how far the pair is
    from done: the largest cosine between two of its rows and the largest inversion of order
    between consecutive rows' squared norms (relative)."""
    def dot(a: Any, b: Any) -> Any:
        return xp.matmul(a, xp.conj(xp.matrix_transpose(b)))

    top = xp.concat([dot(ylo, ylo), dot(ylo, yhi)], axis=1)
    bottom = xp.concat([dot(yhi, ylo), dot(yhi, yhi)], axis=1)
    g = xp.concat([top, bottom], axis=0)
    k = g.shape[0]
    if k == 0:
        return g, 0.0
    d = xp.real(xp.linalg.diagonal(g)) if xp.isdtype(g.dtype, "complex floating") else xp.linalg.diagonal(g)
    scale = xp.sqrt(d[:, None] * d[None, :])
    off = xp.abs(g) / scale - xp.eye(k, dtype=d.dtype, device=d.device)
    measure = float(xp.max(off))
    if k > 1:
        measure = max(measure, float(xp.max((d[:-1] - d[1:]) / d[:-1])))
    _, u = xp.linalg.eigh(g)
    return u, measure


def _rotate(ex: Executor, u: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """``[lo; hi]`` multiplied by ``U^H``: in place, ``b`` columns at a time, where the framework's
    arrays can be written (and these two are not read-only views); else two new blocks."""
    xp = ex.xp
    uh = xp.conj(xp.matrix_transpose(u))
    bl = lo.shape[0]
    if not ex.adapter.mutable or ex.adapter.is_readonly(lo) or ex.adapter.is_readonly(hi):
        return (xp.matmul(uh[:bl, :bl], lo) + xp.matmul(uh[:bl, bl:], hi),
                xp.matmul(uh[bl:, :bl], lo) + xp.matmul(uh[bl:, bl:], hi))
    step = max(u.shape[0], 1)
    for c0 in range(0, lo.shape[1], step):
        c1 = c0 + step
        new = xp.matmul(uh, xp.concat([lo[:, c0:c1], hi[:, c0:c1]], axis=0))
        lo[:, c0:c1] = new[:bl]
        hi[:, c0:c1] = new[bl:]
    return lo, hi


def _start(x: "DistributedTensor", slots: _Slots, b: int, slot_of: list[int],
           s: float) -> tuple["DistributedTensor", "DistributedTensor"]:
    """``Y = A + s I`` and ``Z = I`` in row blocks of ``b`` on ``slot_of`` (own copies, written in place)."""
    n = x.shape[0]
    lay = slots.layout(n, n, b, slot_of)
    a = x.redistribute(lay)
    ys: list[Any] = [None] * len(slot_of)
    zs: list[Any] = [None] * len(slot_of)
    for j, slot in enumerate(slot_of):
        if slot not in slots.execs:
            continue
        ex = slots.execs[slot]
        rows = np.arange(j * b, min((j + 1) * b, n))
        eye = (rows[:, None] == np.arange(n)[None, :])

        def shifted(xp: Any, m: Any) -> tuple[Any, Any]:
            ident = xp.astype(xp.asarray(eye, device=m.device), m.dtype)
            return m + s * ident, ident

        ys[j], zs[j] = ex.run(shifted, move_array(a.fragments[j].array, ex))
    del a
    return new_tensor(ys, lay, x.dtype), new_tensor(zs, lay, x.dtype)


def _assignments(pairs: list[tuple[int, int]], nblocks: int) -> tuple[list[int], set[int]]:
    """The slot of every block in a round, and the blocks in the ring's first row."""
    slot_of = [0] * nblocks
    for k, (top, bottom) in enumerate(pairs):
        slot_of[top] = slot_of[bottom] = k
    return slot_of, {top for top, _ in pairs}


def _round(name: str, y: "DistributedTensor", z: "DistributedTensor", slots: _Slots,
           pairs: list[tuple[int, int]]) -> tuple["DistributedTensor", "DistributedTensor", float]:
    """One round: every local slot rotates its pair of blocks of ``y`` and ``z``."""
    ys = [f.array if f.is_local else None for f in y.fragments]
    zs = [f.array if f.is_local else None for f in z.fragments]
    worst = 0.0
    for k, (i, j) in enumerate(pairs):
        ex = slots.execs.get(k)
        if ex is None:
            continue
        lo, hi = min(i, j), max(i, j)
        try:
            ylo, yhi, zlo, zhi = (move_array(arrs[t], ex) for arrs in (ys, zs) for t in (lo, hi))
            u, measure = ex.run(_gram_step, ylo, yhi)
            ys[lo], ys[hi] = _rotate(ex, u, ylo, yhi)
            zs[lo], zs[hi] = _rotate(ex, u, zlo, zhi)
        except Exception as exc:
            raise fail(f"{name} (pair {lo}, {hi})", k, ex, exc) from exc
        worst = max(worst, measure) if not math.isnan(measure) else math.inf
    return new_tensor(ys, y.layout, y.dtype), new_tensor(zs, z.layout, z.dtype), worst


def _moved(t: "DistributedTensor", slots: _Slots, old: list[int], new: list[int], first: set[int]) -> \
        "DistributedTensor":
    """``t``'s blocks moved from slots ``old`` to ``new``: the ring's first row, then the second."""
    n, cols = t.shape
    b = t.layout.block[0]
    middle = [new[j] if j in first else old[j] for j in range(len(old))]
    for stage in (middle, new):
        lay = slots.layout(n, cols, b, stage)
        if not t.layout.same_distribution(lay):
            t = t.redistribute(lay)
    return t


def _finish(y: "DistributedTensor", z: "DistributedTensor", slots: _Slots, s: float,
            out_layout: Layout, vectors: bool) -> tuple["DistributedTensor", "DistributedTensor | None"]:
    """The eigenvalues ``v_k^H w_k - s`` (ascending, as the blocks are) and ``V = Z^H`` in ``out_layout``."""
    n = y.shape[0]
    real = {"complex64": "float32", "complex128": "float64"}.get(y.dtype, y.dtype)
    lay = y.layout
    vals: list[Any] = [None] * lay.nfragments
    for j, (fy, fz) in enumerate(zip(y.fragments, z.fragments)):
        if fy.is_local:
            ex = executor(fy.framework, fy.device)
            vals[j] = ex.run(lambda xp, a, c: xp.real(xp.sum(c * xp.conj(a), axis=1)) - s
                             if xp.isdtype(a.dtype, "complex floating") else xp.sum(c * a, axis=1) - s,
                             fy.array, move_array(fz.array, ex))
    vlay = Layout((n,), block=lay.block[:1], grid=lay.grid[:1], devices=lay.devices, ranks=lay.ranks)
    w = new_tensor(vals, vlay, real).redistribute(Layout.slab((n,), 0, slots.devices, ranks=slots.ranks))
    del y
    if not vectors:
        return w, None
    v = permute_dims(z, (1, 0))
    if z.dtype.startswith("complex"):
        v = map_fragments(lambda xp, a: xp.conj(a), (v,), name="dlmg.linalg.eigh")
    del z
    return w, v.redistribute(out_layout)


def eigh_jacobi(x: "DistributedTensor", norm: float, /, *, vectors: bool = True) -> \
        tuple["DistributedTensor", "DistributedTensor | None"]:
    """Eigenvalues (ascending) and eigenvectors of one Hermitian matrix split across fragments.

    One-sided block Jacobi (Hestenes 1958) in Brent and Luk's (1985) parallel
    ordering, on column blocks as Bečka, Okša and Vajteršic (2002) run it;
    see the module for the steps, what moves and the memory.

    Parameters
    ----------
    x : DistributedTensor
        One ``n x n`` Hermitian matrix (both triangles are read), split in any
        way over at least two fragments (replica 0 is read).
    norm : float
        Its Frobenius norm (the shift is twice it).
    vectors : bool
        Whether to form the eigenvectors.

    Returns
    -------
    (DistributedTensor, DistributedTensor or None)
        The eigenvalues (``n``, real dtype, in row slabs over ``x``'s devices)
        and the eigenvectors as columns (``x``'s layout without replicas).

    Raises
    ------
    DtypeError
        For dtypes other than float32, float64, complex64 and complex128.
    ValueError
        For non-finite entries.
    DlmgError
        When the sweeps do not converge (on every process).
    """
    name = "dlmg.linalg.eigh"
    if x.dtype not in JACOBI_DTYPES:
        raise DtypeError(f"{name} of a split matrix takes float32, float64, complex64 or complex128, got "
                         f"{x.dtype}; cast with astype first")
    if not math.isfinite(norm):
        raise ValueError(f"{name}: the matrix has non-finite entries (Frobenius norm {norm})")
    n = x.shape[0]
    lay = x.layout
    out_layout = Layout(x.shape, block=lay.block, grid=lay.grid, devices=lay.devices[: lay.ngrid],
                        ranks=lay.ranks[: lay.ngrid])
    slots = _Slots(x)
    nblocks = 2 * slots.count
    b = max(1, -(-n // nblocks))
    rounds = ring_rounds(nblocks)
    s = 2.0 * norm if norm > 0 else 1.0
    slot_of, _ = _assignments(rounds[0], nblocks)
    y, z = _start(x, slots, b, slot_of, s)
    eps = float(np.finfo(np.dtype({"complex64": "float32", "complex128": "float64"}.get(x.dtype, x.dtype))).eps)
    tol = 4 * n * eps
    for sweep in range(_MAX_SWEEPS):
        worst = 0.0
        for r, pairs in enumerate(rounds):
            new, first = _assignments(pairs, nblocks)
            y, z = _moved(y, slots, slot_of, new, first), _moved(z, slots, slot_of, new, first)
            slot_of = new
            y, z, measure = _round(name, y, z, slots, pairs)
            worst = max(worst, measure)
        if slots.reduce_max({k: worst for k in slots.execs}) <= tol:
            return _finish(y, z, slots, s, out_layout, vectors)
    raise DlmgError(f"{name}: one-sided Jacobi did not converge in {_MAX_SWEEPS} sweeps (n = {n}, "
                    f"{x.dtype}); the matrix may not be Hermitian")
