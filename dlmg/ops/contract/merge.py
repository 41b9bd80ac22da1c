"""Fewer, larger local products: the fragments of a local step that share a device, joined.

A local step runs one einsum per output fragment. When several lead fragments
sit on one device and differ only along one mode that the follower does not
hold and the output keeps (row slabs of ``A`` times a replicated ``B``), their
products all read the same follower fragment: joining the lead fragments
along that mode and running one einsum computes the same numbers in one call,
whose output fragments are then slices of one result. A BLAS gets larger
panels that way: 8 row slabs of a 1024 x 1024 float32 ``A`` times a
replicated ``B`` took about 1.5 times one ``numpy.matmul`` as 8 products and
about 1.03 times as one product of the joined slabs (a loaded 2-core machine,
one run, alternating). The join copies the lead's fragments of that device once
(``n * n`` bytes against the product's ``n ** 3`` flops).

This module is layout math only: which output fragments join, along which modes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from ...layout import Layout
from .layouts import Pairing

__all__ = ["Join", "joins"]


@dataclass(frozen=True)
class Join:
    """Output fragments made by one einsum on one device.

    Attributes
    ----------
    triples : tuple of (int, int, int)
        ``(output fragment, lead fragment, follower fragment)`` in the order
        their lead fragments are joined.
    lead_axis : int
        The lead's mode the fragments are joined along.
    out_axis : int
        The output's mode the result is cut along, in the same order.
    """

    triples: tuple[tuple[int, int, int], ...]
    lead_axis: int
    out_axis: int


# A plan's local step asks once per call with the same value; a program runs a few equations on a
# few layouts (each answer is a few hundred bytes), so 256 is plenty.
@lru_cache(maxsize=256)
def joins(subscripts: str, lead: Layout, follower: Layout, pairing: Pairing) -> tuple[tuple[Join, ...], frozenset[int]]:
    """The joins of a local step and the output fragments they make (the others run alone).

    Joins exist only when the step has a follower, the lead is split along
    exactly one mode whose letter the output keeps (first) and the follower
    lacks, the follower is whole in every fragment (so any of its fragments on
    the device serves every joined product), nothing is pending, and a device
    holds two lead fragments or more.
    """
    inputs, _, out_letters = subscripts.partition("->")
    letters = inputs.split(",")
    if len(letters) != 2 or lead.partial is not None or pairing.pending or follower.partial is not None \
            or any(g > 1 for g in follower.grid):
        return (), frozenset()
    lead_letters, follower_letters = letters
    split = [m for m, g in enumerate(lead.grid) if g > 1]
    if len(split) != 1:
        return (), frozenset()
    ch = lead_letters[split[0]]
    if lead_letters.count(ch) != 1 or ch in follower_letters or out_letters[:1] != ch:
        return (), frozenset()
    by_place: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)
    for o, f, g in pairing.triples:
        if g is None:
            return (), frozenset()
        by_place[(lead.devices[f], lead.ranks[f])].append((o, f, g))
    found = tuple(Join(tuple(sorted(t, key=lambda x: x[1])), split[0], 0)
                  for t in by_place.values() if len(t) > 1)
    return found, frozenset(o for j in found for o, _, _ in j.triples)
