"""Reading an einsum equation: operands' letters, the output, extents and the order.

NumPy's grammar (explicit and implicit output, repeated letters, ``...``
broadcasting) is parsed by :mod:`opt_einsum`'s parser, the one NumPy's own
path search shares; the pairwise order comes from ``opt_einsum.contract_path``.
Everything here works on shapes: no tensor, no framework.

After parsing, every letter is one of ``a-zA-Z`` (what every framework's einsum
accepts). An operand mode of extent 1 that broadcasts against a longer one
gets a letter of its own, summed away before the contraction (a sum over one
element is the element), so that every letter has one extent throughout.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache

import opt_einsum
from opt_einsum import parser

__all__ = ["Equation", "parse", "pairwise_order", "LETTERS"]

#: The letters every framework's einsum accepts.
LETTERS = string.ascii_letters


@dataclass(frozen=True)
class Equation:
    """A parsed einsum: one letter string per operand, the output letters, every letter's extent."""

    inputs: tuple[str, ...]
    output: str
    extents: tuple[tuple[str, int], ...]

    def extent(self, letter: str) -> int:
        """The extent of ``letter``."""
        return dict(self.extents)[letter]

    def __str__(self) -> str:
        return ",".join(self.inputs) + "->" + self.output


def _relettered(inputs: list[str], output: str) -> tuple[list[str], str]:
    """The same equation written with ``a-zA-Z`` only (opt_einsum writes ``...`` as other symbols)."""
    seen: dict[str, str] = {}
    for term in [*inputs, output]:
        for ch in term:
            if ch not in seen:
                if len(seen) == len(LETTERS):
                    raise ValueError(f"dlmg.einsum: the equation uses more than {len(LETTERS)} distinct modes")
                seen[ch] = ch if ch in LETTERS and ch not in seen.values() else ""
    free = iter(c for c in LETTERS if c not in seen.values())
    mapping = {ch: (to or next(free)) for ch, to in seen.items()}
    return ["".join(mapping[c] for c in t) for t in inputs], "".join(mapping[c] for c in output)


@lru_cache(maxsize=512)  # the same few equations and shapes recur in a model's loop
def parse(subscripts: str, shapes: tuple[tuple[int, ...], ...]) -> Equation:
    """Parse ``subscripts`` for operands of ``shapes``.

    Raises
    ------
    ValueError
        For a malformed equation, a term whose letter count differs from its
        operand's rank, or extents that neither agree nor broadcast.
    """
    if not isinstance(subscripts, str):
        raise TypeError(f"dlmg.einsum: subscripts must be a str, got {type(subscripts).__name__}")
    if not shapes:
        raise ValueError("dlmg.einsum needs at least one operand")
    try:
        ins, out, _ = parser.parse_einsum_input((subscripts, *shapes), shapes=True)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise ValueError(f"dlmg.einsum: cannot read {subscripts!r} for operands of shapes {list(shapes)}: {exc}") from exc
    inputs, output = _relettered(ins.split(","), out)
    if len(inputs) != len(shapes):
        raise ValueError(f"dlmg.einsum: {subscripts!r} names {len(inputs)} operands, {len(shapes)} given")
    extents: dict[str, int] = {}
    for term, shape in zip(inputs, shapes):
        if len(term) != len(shape):
            raise ValueError(f"dlmg.einsum: term {term!r} of {subscripts!r} has {len(term)} modes, its operand "
                             f"has shape {shape}")
        for ch, n in zip(term, shape):
            known = extents.get(ch)
            if known is None or known == 1:
                extents[ch] = n
            elif n not in (1, known):
                raise ValueError(f"dlmg.einsum: mode {ch!r} of {subscripts!r} has extents {known} and {n}, "
                                 "which neither agree nor broadcast")
    for ch in output:
        if ch not in extents:
            raise ValueError(f"dlmg.einsum: output mode {ch!r} of {subscripts!r} is in no operand")
    # a mode of extent 1 that broadcasts gets a letter of its own, summed away alone
    used = set(extents)
    spare = iter(c for c in LETTERS if c not in used)
    rewritten = []
    for term, shape in zip(inputs, shapes):
        letters = []
        for ch, n in zip(term, shape):
            if n == 1 and extents[ch] != 1:
                try:
                    fresh = next(spare)
                except StopIteration:
                    raise ValueError(f"dlmg.einsum: {subscripts!r} uses too many modes to broadcast") from None
                extents[fresh] = 1
                letters.append(fresh)
            else:
                letters.append(ch)
        rewritten.append("".join(letters))
    return Equation(tuple(rewritten), output, tuple(sorted(extents.items())))


@lru_cache(maxsize=512)  # opt_einsum's search costs milliseconds; equations recur
def pairwise_order(terms: tuple[str, ...], output: str, extents: tuple[tuple[str, int], ...]) -> tuple[tuple[int, int], ...]:
    """The pairs to contract, in order, as ``opt_einsum.contract_path`` gives them
    (positions in the list of remaining operands; each result goes last)."""
    if len(terms) < 2:
        return ()
    sizes = dict(extents)
    shapes = [tuple(sizes[c] for c in t) for t in terms]
    path, _ = opt_einsum.contract_path(",".join(terms) + "->" + output, *shapes, shapes=True, optimize="auto")
    pairs = []
    for step in path:
        if len(step) != 2:  # pragma: no cover - "auto" contracts pairwise
            raise AssertionError(f"opt_einsum returned a {len(step)}-operand step")
        pairs.append((int(step[0]), int(step[1])))
    return tuple(pairs)
