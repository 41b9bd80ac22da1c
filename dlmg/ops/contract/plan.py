"""Planning a contraction: the steps, the strategy of each, what each moves and computes.

A plan is pure data over layouts, built before anything runs, and printable
(``print(dlmg.einsum_plan(...))``). Its steps, in order:

* :class:`Move` -- redistribute one operand (an alignment, a replication, the
  resolution of a pending sum) with the bytes it moves;
* :class:`Local` -- every owner contracts the fragments it holds (one einsum
  per output fragment, in the output fragment's framework); the output is a
  pending sum where a split contracted mode leaves it;
* :class:`Summa` -- a 2-D block-cyclic product, panel by panel.

Every pairwise contraction weighs the candidates (fragments already together,
move the second operand to the first's split, move the first to the second's,
SUMMA) by the cost model of :mod:`.cost` and keeps the cheapest.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from ...layout import Layout
from .cost import Traffic, held_bytes, seconds, traffic
from .phases import move_traffic, resolved_layout
from .equation import Equation, pairwise_order
from .layouts import Pairing, aligned, pair, whole_along
from .summa import Summa, summa_candidate

__all__ = ["Move", "Local", "Summa", "EinsumPlan", "plan_equation", "resolved_layout"]


@dataclass(frozen=True)
class Move:
    """Redistribute operand ``name`` (letters ``letters``) from ``src`` to ``dst``."""

    name: str
    letters: str
    src: Layout
    dst: Layout
    traffic: Traffic
    why: str

    def describe(self, itemsize: int) -> list[str]:
        t = self.traffic
        head = "resolve" if self.src.partial is not None else "move"
        lines = [f"{head} {self.name}[{self.letters}] ({self.why}): {t.nbytes} bytes between devices in "
                 f"{t.messages} pieces, {t.between_processes} of them between processes"]
        lines.append(f"    from {self.src!r}")
        lines.append(f"    to   {self.dst!r}")
        for rank, (r, s) in t.per_process().items():
            lines.append(f"    process {rank}: receives {r} bytes, sends {s} bytes")
        return lines


@dataclass(frozen=True)
class Local:
    """Contract ``lead`` (and ``follower``) fragment by fragment into ``out`` (no communication)."""

    lead: str
    follower: str | None
    subscripts: str
    pairing: Pairing
    out: str
    flops: tuple[tuple[str, int, int], ...]  # (device, local calls, flops)
    strategy: str

    def describe(self, itemsize: int) -> list[str]:
        names = self.lead if self.follower is None else f"{self.lead}, {self.follower}"
        lines = [f"{self.strategy}: {self.out} = einsum({self.subscripts!r}, {names}) fragment by fragment"]
        if self.pairing.pending:
            lines.append(f"    output pending sum over {', '.join(self.pairing.summed)} "
                         f"({self.pairing.out.nreplicas} addends per element)")
        for device, calls, flops in self.flops:
            lines.append(f"    {device}: {calls} local einsum call(s), {flops} flops")
        return lines


@dataclass(frozen=True)
class EinsumPlan:
    """What :func:`dlmg.einsum` will do, step by step, before it runs.

    Attributes
    ----------
    equation : str
        The equation as parsed (``...`` written out as letters).
    steps : tuple
        :class:`Move`, :class:`Local` and :class:`Summa` steps in order.
    out : Layout
        The result's layout (``partial="sum"``: a pending sum, resolved by ``redistribute``).
    itemsize : int
        Bytes per element of the computation's dtype.
    delegated : str or None
        The one framework call that runs the whole contraction instead of the
        steps, where every operand's fragments belong to a framework that
        compiles sharded programs and expresses every layout
        (:meth:`~dlmg.adapters.capabilities.Delegating.delegated_einsum`); ``None`` when
        the steps run.
    """

    equation: str
    steps: tuple
    out: Layout
    itemsize: int
    strategies: tuple[str, ...] = field(default=())
    delegated: str | None = None

    @property
    def strategy(self) -> str:
        """The strategies of the contractions, joined (``"local"``, ``"pending sum"``, ``"move x1"``, ``"summa"``)."""
        return " + ".join(self.strategies) if self.strategies else "local"

    @property
    def moved(self) -> Traffic:
        """Everything the plan moves, all steps together."""
        total = Traffic()
        for s in self.steps:
            if isinstance(s, (Move, Summa)):
                total = total + s.traffic
        return total

    def __str__(self) -> str:
        lines = [f"einsum {self.equation}: {self.strategy}"]
        if self.delegated is not None:
            lines.append(f"  runs as one call: {self.delegated} (its compiler chooses the collectives; "
                         "the steps below are what dlmg would run)")
        for i, s in enumerate(self.steps):
            body = s.describe(self.itemsize)
            lines.append(f"  {i + 1}. {body[0]}")
            lines.extend("  " + b for b in body[1:])
        lines.append(f"  result: {self.out!r}")
        return "\n".join(lines)

    __repr__ = __str__


def _flops(p: Pairing, lead: tuple[str, Layout], follower: tuple[str, Layout] | None,
           binary: bool) -> tuple[tuple[str, int, int], ...]:
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    letters, layout = lead
    for _, f, g in p.triples:
        ext = dict(zip(letters, layout.fragments[f].shape))
        if follower is not None and g is not None:
            for ch, n in zip(follower[0], follower[1].fragments[g].shape):
                ext.setdefault(ch, n)
        key = str(layout.devices[f]) + (f" (process {layout.ranks[f]})" if layout.nprocesses > 1 else "")
        per[key][0] += 1
        per[key][1] += (2 if binary else 1) * math.prod(ext.values())
    return tuple((d, c, n) for d, (c, n) in per.items())


def _local(lead_op: tuple[str, str, Layout], follower_op: tuple[str, str, Layout] | None, out_letters: str,
           out_name: str, p: Pairing, moved: str | None = None) -> Local:
    lname, lletters, llayout = lead_op
    follower = None if follower_op is None else (follower_op[1], follower_op[2])
    subs = lletters + ("" if follower_op is None else "," + follower_op[1]) + "->" + out_letters
    if moved:
        strategy = f"move {moved}"
    elif p.pending:
        strategy = "pending sum"
    else:
        strategy = "local"
    return Local(lname, None if follower_op is None else follower_op[0], subs, p, out_name,
                 _flops(p, (lletters, llayout), follower, follower_op is not None), strategy)


def _max_flops(step: Local) -> int:
    return max((n for _, _, n in step.flops), default=0)


def _choose(x: tuple[str, str, Layout], y: tuple[str, str, Layout], out_letters: str, out_name: str,
            extents: tuple, itemsize: int) -> tuple[list, Layout, str]:
    """The cheapest way to contract ``x`` with ``y``: steps, the output layout, the strategy."""
    options: list[tuple[float, int, list, Layout, str]] = []
    for lead, follower in ((x, y), (y, x)):
        p = pair((lead[1], lead[2]), (follower[1], follower[2]), out_letters, extents)
        if p is not None:
            step = _local(lead, follower, out_letters, out_name, p)
            options.append((seconds(Traffic(), _max_flops(step)), 0, [step], p.out, step.strategy))
    for rank_, (lead, follower) in enumerate(((x, y), (y, x))):
        target = aligned((lead[1], lead[2]), follower[1], extents)
        moved = move_traffic(follower[2], target, itemsize)
        p = pair((lead[1], lead[2]), (follower[1], target), out_letters, extents)
        assert p is not None  # aligned() builds exactly the layout pair() accepts
        step = _local(lead, (follower[0], follower[1], target), out_letters, out_name, p, moved=follower[0])
        move = Move(follower[0], follower[1], follower[2], target, moved, f"to meet {lead[0]}'s fragments")
        held = held_bytes(target, itemsize)
        options.append((seconds(moved, _max_flops(step), held), 1 + rank_, [move, step], p.out, step.strategy))
    for a, b in ((x, y), (y, x)):
        s = summa_candidate(a, b, out_letters, out_name, extents, itemsize)
        if s is not None:
            options.append((seconds(s.traffic, s.max_flops, s.held), 3, [s], s.out, "summa"))
    options.sort(key=lambda o: (o[0], o[1]))
    _, _, steps, out, strategy = options[0]
    return steps, out, strategy


@lru_cache(maxsize=256)  # layouts and equations are values; a training loop repeats them
def plan_equation(eq: Equation, layouts: tuple[Layout, ...], itemsize: int,
                  target: Layout | None = None) -> EinsumPlan:
    """The plan of ``eq`` over operands of ``layouts`` (see :class:`EinsumPlan`)."""
    extents = eq.extents
    steps: list = []
    strategies: list[str] = []
    ops: list[tuple[str, str, Layout]] = []
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"t{counter[0]}"

    for i, (letters, layout) in enumerate(zip(eq.inputs, layouts)):
        name = f"x{i}"
        if layout.partial not in (None, "sum"):
            dst = resolved_layout(layout)
            steps.append(Move(name, letters, layout, dst, move_traffic(layout, dst, itemsize), "a pending max/min first"))
            layout = dst
        others = "".join(t for j, t in enumerate(eq.inputs) if j != i) + eq.output
        keep = "".join(dict.fromkeys(c for c in letters if c in others))
        repeated = tuple(m for m, c in enumerate(letters) if letters.count(c) > 1)
        if len(layouts) == 1:
            keep = eq.output
        if repeated or keep != letters or len(layouts) == 1:
            split = tuple(m for m in repeated if layout.grid[m] > 1)
            if split:
                dst = whole_along(layout, split)
                steps.append(Move(name, letters, layout, dst, traffic(layout, dst, itemsize),
                                  "a diagonal needs its modes whole"))
                layout = dst
            p = pair((letters, layout), None, keep, extents)
            assert p is not None
            out_name = fresh()
            step = _local((name, letters, layout), None, keep, out_name, p)
            steps.append(step)
            strategies.append(step.strategy)
            name, letters, layout = out_name, keep, p.out
        ops.append((name, letters, layout))
    for i, j in pairwise_order(tuple(o[1] for o in ops), eq.output, extents):
        x, y = ops[i], ops[j]
        rest = [o for k, o in enumerate(ops) if k not in (i, j)]
        if rest:
            needed = "".join(o[1] for o in rest) + eq.output
            out_letters = "".join(dict.fromkeys(c for c in x[1] + y[1] if c in needed))
        else:
            out_letters = eq.output
        out_name = fresh()
        new_steps, out, strategy = _choose(x, y, out_letters, out_name, extents, itemsize)
        steps.extend(new_steps)
        strategies.append(strategy)
        ops = rest + [(out_name, out_letters, out)]
    (name, letters, layout), = ops
    if letters != eq.output:  # a transposition left (one operand whose letters were already right)
        p = pair((letters, layout), None, eq.output, extents)
        assert p is not None
        out_name = fresh()
        steps.append(_local((name, letters, layout), None, eq.output, out_name, p))
        name, letters, layout = out_name, eq.output, p.out
    if target is not None and target != layout:
        steps.append(Move(name, letters, layout, target, move_traffic(layout, target, itemsize), "the layout asked for"))
        layout = target
    return EinsumPlan(str(eq), tuple(steps), layout, itemsize, tuple(strategies))
