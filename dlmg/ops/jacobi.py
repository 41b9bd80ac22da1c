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
from ..errors import DlmgError, DtypeError, LayoutError
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
    """The eigenvectors ``U`` (ascending) of ``G = [ylo; yhi] [ylo; yhi]^H`` and how far the pair is
    from done: the largest cosine between two of its rows and the largest inversion of order
    between consecutive rows' squared norms (relative). ``G`` is built from its four quarters,
    the measure taken on them, so that no more than two ``G``-sized arrays live at once."""
    complex_ = xp.isdtype(ylo.dtype, "complex floating")

    def dot(a: Any, b: Any) -> Any:
        bt = xp.matrix_transpose(b)
        return xp.matmul(a, xp.conj(bt) if complex_ else bt)

    def diag(g: Any) -> Any:
        d = xp.linalg.diagonal(g)
        return xp.real(d) if complex_ else d

    def cosines(g: Any, left: Any, right: Any) -> Any:
        return xp.abs(g) * left[:, None] * right[None, :]

    gll, glh, ghh = dot(ylo, ylo), dot(ylo, yhi), dot(yhi, yhi)
    k = gll.shape[0] + ghh.shape[0]
    if k == 0:
        return xp.zeros((0, 0), dtype=ylo.dtype, device=ylo.device), 0.0
    d = xp.concat([diag(gll), diag(ghh)])
    r = 1 / xp.sqrt(d)
    bl = gll.shape[0]
    measure = 0.0
    for g, left, right in ((gll, r[:bl], r[:bl]), (ghh, r[bl:], r[bl:]), (glh, r[:bl], r[bl:])):
        if g.shape[0] and g.shape[1]:
            c = cosines(g, left, right)
            if g is not glh:
                c = c - xp.eye(c.shape[0], dtype=c.dtype, device=c.device)
            measure = max(measure, float(xp.max(c)))
            del c
    if k > 1:
        measure = max(measure, float(xp.max((d[:-1] - d[1:]) / d[:-1])))
    top = xp.concat([gll, glh], axis=1)
    del gll
    bottom = xp.concat([xp.conj(xp.matrix_transpose(glh)) if complex_ else xp.matrix_transpose(glh), ghh], axis=1)
    del glh, ghh
    g = xp.concat([top, bottom], axis=0)
    del top, bottom
    _, u = xp.linalg.eigh(g)
    return u, measure


def _rotate(ex: Executor, u: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """``[lo; hi]`` multiplied by ``U^H``: in place, a strip of about ``b / 2`` columns at a time, where
    the framework's arrays can be written; else two new blocks."""
    xp = ex.xp
    uh = xp.matrix_transpose(u)
    if xp.isdtype(u.dtype, "complex floating"):
        uh = xp.conj(uh)
    bl = lo.shape[0]
    if not ex.traits.mutable:
        return (xp.matmul(uh[:bl, :bl], lo) + xp.matmul(uh[:bl, bl:], hi),
                xp.matmul(uh[bl:, :bl], lo) + xp.matmul(uh[bl:, bl:], hi))
    step = max(u.shape[0] // 4, 1)
    for c0 in range(0, lo.shape[1], step):
        c1 = c0 + step
        new = xp.matmul(uh, xp.concat([lo[:, c0:c1], hi[:, c0:c1]], axis=0))
        lo[:, c0:c1] = new[:bl]
        hi[:, c0:c1] = new[bl:]
        del new
    return lo, hi


def _writable(ex: Executor, a: Any) -> Any:
    """``a``, or a copy of it where the framework writes in place but ``a`` is a read-only view (a
    block received from another process may be), so the rotation can be applied in place."""
    if ex.traits.mutable and ex.adapter.is_readonly(a):
        return ex.run(lambda xp, m: xp.asarray(m, copy=True), a)
    return a


def _start(x: "DistributedTensor", slots: _Slots, b: int, slot_of: list[int],
           s: float) -> tuple["DistributedTensor", "DistributedTensor"]:
    """``Y = A + s I`` and ``Z = I`` in row blocks of ``b`` on ``slot_of`` (own copies, written in
    place), block by block, each moved block of ``A`` freed once shifted."""
    n = x.shape[0]
    lay = slots.layout(n, n, b, slot_of)
    moved = [f.array if f.is_local else None for f in x.redistribute(lay).fragments]
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

        ys[j], zs[j] = ex.run(shifted, move_array(moved[j], ex))
        moved[j] = None
    return new_tensor(ys, lay, x.dtype), new_tensor(zs, lay, x.dtype)


def _assignments(pairs: list[tuple[int, int]], nblocks: int) -> tuple[list[int], set[int]]:
    """The slot of every block in a round, and the blocks in the ring's first row."""
    slot_of = [0] * nblocks
    for k, (top, bottom) in enumerate(pairs):
        slot_of[top] = slot_of[bottom] = k
    return slot_of, {top for top, _ in pairs}


def _round(name: str, state: dict[str, "DistributedTensor"], slots: _Slots, pairs: list[tuple[int, int]]) -> float:
    """One round: every local slot rotates its pair of blocks of ``Y`` and ``Z`` (``state``'s
    tensors, replaced); returns how far the slots' pairs were from done."""
    layouts = {key: (t.layout, t.dtype) for key, t in state.items()}
    # the tensors leave ``state``: a block copied to be written frees the received one at once
    arrays = {key: [f.array if f.is_local else None for f in state.pop(key).fragments] for key in layouts}
    worst = 0.0
    for k, (i, j) in enumerate(pairs):
        ex = slots.execs.get(k)
        if ex is None:
            continue
        lo, hi = min(i, j), max(i, j)
        try:
            for arrs in arrays.values():
                for t in (lo, hi):
                    arrs[t] = _writable(ex, move_array(arrs[t], ex))
            ys, zs = arrays["y"], arrays["z"]
            u, measure = ex.run(_gram_step, ys[lo], ys[hi])
            ys[lo], ys[hi] = _rotate(ex, u, ys[lo], ys[hi])
            zs[lo], zs[hi] = _rotate(ex, u, zs[lo], zs[hi])
        except Exception as exc:
            raise fail(f"{name} (pair {lo}, {hi})", k, ex, exc) from exc
        worst = max(worst, measure) if not math.isnan(measure) else math.inf
    for key, (lay, dtype) in layouts.items():
        state[key] = new_tensor(arrays[key], lay, dtype)
    return worst


def _stages(old: list[int], new: list[int], first: set[int], was_first: set[int]) -> list[list[int]]:
    """The blocks' slots after each stage of a move from ``old`` to ``new``: in each stage a slot
    sends at most one block and receives at most one (blocks entering the ring's first row first,
    then those leaving it, then the rest), so it never holds more than three."""
    moving = [j for j in range(len(old)) if old[j] != new[j]]
    moving.sort(key=lambda j: (0 if j in first else 1 if j in was_first else 2, j))
    stages, where = [], list(old)
    while moving:
        sent, got, later = set(), set(), []
        for j in moving:
            if where[j] in sent or new[j] in got:
                later.append(j)
                continue
            sent.add(where[j])
            got.add(new[j])
            where[j] = new[j]
        stages.append(list(where))
        moving = later
    return stages


def _moved(state: dict[str, "DistributedTensor"], slots: _Slots, stages: list[list[int]]) -> None:
    """``state``'s tensors' blocks moved through ``stages`` (see :func:`_stages`), one tensor at a
    time; each tensor replaced in ``state`` as soon as it moved, so that its previous blocks are freed."""
    for key in state:
        for stage in stages:
            t = state[key]
            n, cols = t.shape
            lay = slots.layout(n, cols, t.layout.block[0], stage)
            if not t.layout.same_distribution(lay):
                state[key] = t.redistribute(lay)
            del t


def _eigenvalues(state: dict[str, "DistributedTensor"], slots: _Slots, s: float) -> "DistributedTensor":
    """The eigenvalues ``v_k^H w_k - s`` (ascending, as the blocks are), in slabs over the slots;
    ``state`` is emptied (``Y`` freed)."""
    y, z = state["y"], state["z"]
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
    del y, z, vals
    state.clear()
    return w


def _vectors(state: dict[str, "DistributedTensor"], slots: _Slots, out_layout: Layout) -> "DistributedTensor":
    """``V = Z^H`` in ``out_layout`` (``Z`` taken out of ``state``).

    For a row-split ``out_layout`` one block of ``Z`` at a time: its ``b`` eigenvectors move as
    columns into the rows of ``out_layout`` and are written into each fragment's result, and the
    block is freed, so that the transpose never holds more than the result, what is left of ``Z``
    and one block in flight. Other layouts take one redistribution of ``Z^H``."""
    z = state.pop("z")
    conj = z.dtype.startswith("complex")
    if out_layout.grid[1] != 1:
        v: Any = permute_dims(z, (1, 0))
        del z
        if conj:
            v = map_fragments(lambda xp, a: xp.conj(a), (v,), name="dlmg.linalg.eigh")
        return v.redistribute(out_layout)
    n = z.shape[0]
    zlay, dtype = z.layout, z.dtype
    blocks = [f.array if f.is_local else None for f in z.fragments]
    del z
    g = out_layout.ngrid
    local = [f for f in range(g) if f in slots.execs]
    pieces: dict[int, list[Any]] = {f: [] for f in local}
    for j in range(zlay.ngrid):
        width = zlay.fragment(j).shape[0]
        if not width:
            continue
        one = new_tensor([blocks[j]], Layout.single((width, n), zlay.devices[j], ranks=zlay.ranks[j]), dtype)
        blocks[j] = None
        target = Layout((n, width), block=(out_layout.block[0], width), grid=(g, 1),
                        devices=out_layout.devices, ranks=out_layout.ranks)
        moved = permute_dims(one, (1, 0)).redistribute(target)
        del one
        for f in local:
            ex = slots.execs[f]
            piece = move_array(moved.fragments[f].array, ex)
            pieces[f].append(ex.run(lambda xp, a: xp.conj(a), piece) if conj else
                             ex.run(lambda xp, a: xp.asarray(a, copy=True), piece))
        del moved
    arrays: list[Any] = [None] * g
    for f in local:
        ex = slots.execs[f]
        arrays[f] = ex.run(lambda xp, *ps: xp.concat(ps, axis=1), *pieces.pop(f))
    return new_tensor(arrays, out_layout, dtype)


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
    LayoutError
        On a process that holds no fragment of replica 0.
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
    if not slots.execs:
        raise LayoutError(f"{name}: this process holds no fragment of replica 0 of {lay!r}; every process "
                          "must hold one (redistribute without replicas first)")
    nblocks = 2 * slots.count
    b = max(1, -(-n // nblocks))
    rounds = ring_rounds(nblocks)
    s = 2.0 * norm if norm > 0 else 1.0
    slot_of, was_first = _assignments(rounds[0], nblocks)
    state = dict(zip(("y", "z"), _start(x, slots, b, slot_of, s)))
    eps = float(np.finfo(np.dtype({"complex64": "float32", "complex128": "float64"}.get(x.dtype, x.dtype))).eps)
    tol = 4 * n * eps
    for _ in range(_MAX_SWEEPS):
        worst = 0.0
        for pairs in rounds:
            new, first = _assignments(pairs, nblocks)
            _moved(state, slots, _stages(slot_of, new, first, was_first))
            slot_of, was_first = new, first
            worst = max(worst, _round(name, state, slots, pairs))
        if slots.reduce_max({k: worst for k in slots.execs}) <= tol:
            zs = {"z": state["z"]} if vectors else {}
            w = _eigenvalues(state, slots, s)
            return w, (_vectors(zs, slots, out_layout) if vectors else None)
    raise DlmgError(f"{name}: one-sided Jacobi did not converge in {_MAX_SWEEPS} sweeps (n = {n}, "
                    f"{x.dtype}); the matrix may not be Hermitian")
