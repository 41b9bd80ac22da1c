"""SUMMA: a matrix product of two operands on one 2-D block-cyclic grid, panel by panel.

``A`` splits ``i`` over ``pr`` grid rows and ``k`` over ``pc`` grid columns,
``B`` splits ``k`` over ``pr`` and ``j`` over ``pc``, and the device at grid
position ``(a, b)`` holds ``A``'s block row ``a``, column ``b`` and ``B``'s
block row ``a``, column ``b`` (ScaLAPACK's ``p?gemm`` setting, and DTensor's
``Shard(0), Shard(1)`` on a 2-D mesh). For every block ``t`` of ``k`` in turn,
the owners of ``A``'s block column ``t`` send it along their grid rows, the
owners of ``B``'s block row ``t`` send it along their grid columns, and every
device adds the product of the two panels it now holds to its block of ``C``
(split as ``A`` along ``i`` and as ``B`` along ``j``). No device ever holds
more of ``A`` or ``B`` than its own blocks and one panel of each.

Each panel move is a :meth:`~dlmg.DistributedTensor.redistribute` of a panel
tensor (views of the owners' fragments) into a layout with one replica per
grid column (row), so it runs in one process or across processes alike.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ...fragment import process_rank
from ...layout import Layout
from ..dispatch import executor, move_array, new_tensor
from .._executor import fail
from .cost import Traffic, held_bytes, traffic

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["Summa", "summa_candidate", "run_summa"]


@dataclass(frozen=True)
class Summa:
    """A SUMMA step: ``out = einsum(subscripts, a, b)`` panel by panel over the ``k`` blocks."""

    a: str
    b: str
    a_letters: str
    b_letters: str
    out_letters: str
    out_name: str
    k: str
    a_layout: Layout
    b_layout: Layout
    out: Layout
    traffic: Traffic
    flops: tuple[tuple[str, int, int], ...]
    itemsize: int

    @property
    def strategy(self) -> str:
        return "summa"

    @property
    def steps(self) -> int:
        m = self.a_letters.index(self.k)
        return -(-self.a_layout.shape[m] // self.a_layout.block[m])

    @property
    def held(self) -> int:
        """The most bytes of panels one device holds at a time (one of each operand)."""
        a_src, a_dst, b_src, b_dst, *_ = _panels(self, 0)
        return held_bytes(a_dst, self.itemsize) + held_bytes(b_dst, self.itemsize)

    @property
    def max_flops(self) -> int:
        return max((n for _, _, n in self.flops), default=0)

    @property
    def subscripts(self) -> str:
        return f"{self.a_letters},{self.b_letters}->{self.out_letters}"

    def describe(self, itemsize: int) -> list[str]:
        t = self.traffic
        m = self.a_letters.index(self.k)
        pr, pc = self.out.grid[self.out_letters.index(_other(self.a_letters, self.a_layout, self.k))], \
            self.a_layout.grid[m]
        lines = [f"summa: {self.out_name} = einsum({self.subscripts!r}, {self.a}, {self.b}) on a {pr} x {pc} grid, "
                 f"{self.steps} panel steps over {self.k}"]
        lines.append(f"    panels of {self.a} broadcast along grid rows, of {self.b} along grid columns: "
                     f"{t.nbytes} bytes between devices in {t.messages} pieces, {t.between_processes} of them "
                     "between processes")
        for rank, (r, s) in t.per_process().items():
            lines.append(f"    process {rank}: receives {r} bytes, sends {s} bytes")
        for device, calls, flops in self.flops:
            lines.append(f"    {device}: {calls} local einsum call(s), {flops} flops")
        return lines


def _other(letters: str, layout: Layout, k: str) -> str:
    return next(c for m, c in enumerate(letters) if layout.grid[m] > 1 and c != k)


def _place(layout: Layout, letters: str, where: dict[str, int]) -> tuple[Any, int]:
    coords = tuple(where.get(c, 0) if layout.grid[m] > 1 else 0 for m, c in enumerate(letters))
    f = layout.fragment_index(coords)
    return layout.devices[f], layout.ranks[f]


def _panel_layouts(letters: str, layout: Layout, k: str, width: int, owners: list[tuple[Any, int]],
                   copies: list[list[tuple[Any, int]]]) -> tuple[Layout, Layout]:
    """The panel of ``k``-extent ``width`` on ``owners`` (one per cell of the other split letter),
    and the same panel with one replica per entry of ``copies``."""
    m = letters.index(k)
    shape = tuple(width if q == m else n for q, n in enumerate(layout.shape))
    block = tuple(max(width, 1) if q == m else b for q, b in enumerate(layout.block))
    grid = tuple(1 if q == m else g for q, g in enumerate(layout.grid))
    src = Layout(shape, block=block, grid=grid, devices=[d for d, _ in owners], ranks=[r for _, r in owners])
    flat = [p for rep in copies for p in rep]
    dst = Layout(shape, block=block, grid=grid, devices=[d for d, _ in flat], ranks=[r for _, r in flat])
    return src, dst


@dataclass(frozen=True)
class _Geometry:
    pr: int
    pc: int
    i: str
    j: str
    grid: tuple[tuple[tuple[Any, int], ...], ...]  # grid[a][b] = (device, rank)


def _geometry(al: str, aL: Layout, bl: str, bL: Layout, k: str) -> _Geometry:
    i, j = _other(al, aL, k), _other(bl, bL, k)
    pr, pc = aL.grid[al.index(i)], aL.grid[al.index(k)]
    grid = tuple(tuple(_place(aL, al, {i: a, k: b}) for b in range(pc)) for a in range(pr))
    return _Geometry(pr, pc, i, j, grid)


def _panels(s: Summa, t: int) -> tuple[Layout, Layout, Layout, Layout, int, int, int]:
    """Step ``t``'s panel layouts (A's source and broadcast, B's), the width and the local
    offsets of block ``t`` in A's and B's owning fragments."""
    return _panels_of(s.a_letters, s.a_layout, s.b_letters, s.b_layout, s.k, t)


@lru_cache(maxsize=4096)  # one entry per panel step of a plan; a loop repeats the plan
def _panels_of(al: str, aL: Layout, bl: str, bL: Layout, k: str, t: int) -> tuple:
    g = _geometry(al, aL, bl, bL, k)
    m = al.index(k)
    bk, K = aL.block[m], aL.shape[m]
    width = min(bk, K - t * bk)
    a_src, a_dst = _panel_layouts(al, aL, k, width, [g.grid[a][t % g.pc] for a in range(g.pr)],
                                  [[g.grid[a][b] for a in range(g.pr)] for b in range(g.pc)])
    b_src, b_dst = _panel_layouts(bl, bL, k, width, [g.grid[t % g.pr][b] for b in range(g.pc)],
                                  [[g.grid[a][b] for b in range(g.pc)] for a in range(g.pr)])
    return a_src, a_dst, b_src, b_dst, width, (t // g.pc) * bk, (t // g.pr) * bk


def summa_candidate(x: tuple[str, str, Layout], y: tuple[str, str, Layout], out_letters: str, out_name: str,
                    extents: tuple, itemsize: int) -> Summa | None:
    """A SUMMA step for ``x`` and ``y`` when they sit on one 2-D block-cyclic grid (else ``None``)."""
    (an, al, aL), (bn, bl, bL) = x, y
    if any(L.nreplicas != 1 or L.partial is not None for L in (aL, bL)):
        return None
    a_split = [c for m, c in enumerate(al) if aL.grid[m] > 1]
    b_split = [c for m, c in enumerate(bl) if bL.grid[m] > 1]
    if len(a_split) != 2 or len(b_split) != 2:
        return None
    shared = [c for c in a_split if c in b_split]
    if len(shared) != 1 or shared[0] in out_letters:
        return None
    k = shared[0]
    i, j = _other(al, aL, k), _other(bl, bL, k)
    if i in bl or j in al or i not in out_letters or j not in out_letters:
        return None
    mk_a, mk_b = al.index(k), bl.index(k)
    pr, pc = aL.grid[al.index(i)], aL.grid[mk_a]
    if bL.grid[mk_b] != pr or bL.grid[bl.index(j)] != pc or aL.block[mk_a] != bL.block[mk_b]:
        return None
    if aL.shape[mk_a] == 0 or pr < 2 or pc < 2:
        return None
    g = _geometry(al, aL, bl, bL, k)
    for a in range(pr):
        for b in range(pc):
            if _place(bL, bl, {k: a, j: b}) != g.grid[a][b]:
                return None
    return _build(an, al, aL, bn, bl, bL, out_letters, out_name, k, dict(extents), itemsize, g)


def _build(an: str, al: str, aL: Layout, bn: str, bl: str, bL: Layout, out_letters: str, out_name: str, k: str,
           sizes: dict[str, int], itemsize: int, g: _Geometry) -> Summa:
    shape, block, grid = [], [], []
    for c in out_letters:
        shape.append(sizes[c])
        if c == g.i:
            block.append(aL.block[al.index(c)])
            grid.append(g.pr)
        elif c == g.j:
            block.append(bL.block[bl.index(c)])
            grid.append(g.pc)
        else:
            block.append(max(sizes[c], 1))
            grid.append(1)
    places = []
    for cell in range(math.prod(grid)):
        coords, rest = {}, cell
        for c, n in zip(out_letters, grid):
            coords[c] = rest % n
            rest //= n
        places.append(g.grid[coords.get(g.i, 0)][coords.get(g.j, 0)])
    out = Layout(tuple(shape), block=block, grid=grid, devices=[d for d, _ in places], ranks=[r for _, r in places])
    m = al.index(k)
    steps = -(-aL.shape[m] // aL.block[m])
    moved = Traffic()
    for t in range(steps):
        a_src, a_dst, b_src, b_dst, *_ = _panels_of(al, aL, bl, bL, k, t)
        moved = moved + traffic(a_src, a_dst, itemsize) + traffic(b_src, b_dst, itemsize)
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for f in out.fragments:
        local = dict(zip(out_letters, f.shape))
        others = math.prod(n for c, n in sizes.items() if (c in al or c in bl) and c not in local)
        key = str(f.device) + (f" (process {out.ranks[f.index]})" if out.nprocesses > 1 else "")
        per[key][0] += steps
        per[key][1] += 2 * math.prod(local.values()) * others
    flops = tuple((d, c, n) for d, (c, n) in per.items())
    return Summa(an, bn, al, bl, out_letters, out_name, k, aL, bL, out, moved, flops, itemsize)


def _panel_tensor(x: "DistributedTensor", letters: str, k: str, src: Layout, owner_col: int, offset: int,
                  width: int) -> "DistributedTensor":
    """The owners' slices ``[offset, offset + width)`` along ``k`` as a tensor of ``src`` (views)."""
    m = letters.index(k)
    arrays: list[Any] = [None] * src.nfragments
    for cell in range(src.nfragments):
        coords = [0] * x.ndim
        rest = cell
        for q in range(x.ndim):
            if q != m and x.layout.grid[q] > 1:
                coords[q] = rest % x.layout.grid[q]
                rest //= x.layout.grid[q]
        coords[m] = owner_col
        frag = x.fragments[x.layout.fragment_index(coords)]
        if frag.is_local:
            index = tuple(slice(offset, offset + width) if q == m else slice(None) for q in range(x.ndim))
            arrays[cell] = frag.array[index]
    return new_tensor(arrays, src, x.dtype)


def run_summa(step: Summa, a: "DistributedTensor", b: "DistributedTensor", dtype: str,
              subscripts: str) -> "DistributedTensor":
    """Run ``step``: for each block of ``k``, move the two panels, then multiply-add on every device."""
    g = _geometry(step.a_letters, step.a_layout, step.b_letters, step.b_layout, step.k)
    out = step.out
    cells = []  # (output fragment, a, b) for the local output fragments
    me = process_rank()
    for f in out.fragments:
        if out.ranks[f.index] == me:
            coords = dict(zip(step.out_letters, f.coords))
            cells.append((f.index, coords.get(g.i, 0), coords.get(g.j, 0)))
    acc: list[Any] = [None] * out.nfragments
    for t in range(step.steps):
        a_src, a_dst, b_src, b_dst, width, a_off, b_off = _panels(step, t)
        pa = _panel_tensor(a, step.a_letters, step.k, a_src, t % g.pc, a_off, width).redistribute(a_dst)
        pb = _panel_tensor(b, step.b_letters, step.k, b_src, t % g.pr, b_off, width).redistribute(b_dst)
        for o, ra, cb in cells:
            fa = pa.fragments[ra + g.pr * cb]
            fb = pb.fragments[cb + g.pc * ra]
            ex = executor(fa.framework, fa.device)
            try:
                x = fa.array if pa.dtype == dtype else ex.xp.astype(fa.array, ex.dtype(dtype))
                y = fb.array if fb.framework == ex.framework else move_array(fb.array, ex, fb.adapter)
                y = y if pb.dtype == dtype else ex.xp.astype(y, ex.dtype(dtype))
                prod = ex.run(lambda xp, p, q: ex.adapter.einsum(subscripts, p, q), x, y)
                acc[o] = prod if acc[o] is None else ex.run(lambda xp, p, q: p + q, acc[o], prod)
            except Exception as exc:
                raise fail(f"dlmg.einsum (SUMMA step {t}, {subscripts!r})", o, ex, exc) from exc
    return new_tensor(acc, out, dtype)
