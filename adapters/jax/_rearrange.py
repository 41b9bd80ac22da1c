"""JAX's whole-array rearrangements and list operators: each one ``jax.jit`` call.

The :class:`~dlmg.adapters.capabilities.Rearranging` and
:class:`~dlmg.adapters.capabilities.ListOperators` sides of the JAX adapter. A
compiled call is kept per geometry (the records it is built from are hashable);
``jax.jit`` itself tells shapes and dtypes apart.
"""

from __future__ import annotations

import operator
from functools import lru_cache
from typing import Any, Callable

from ..capabilities import Concat, Cut, Retiling, Slice, Tiling

__all__ = ["assembler", "composer", "compiled_kinds", "decomposer", "forget_compiled", "list_operator",
           "retiler", "splitter"]

#: Compiled rearrangements kept per kind: a few geometries per layout. Compiling one
#: costs far more than running it, so each is compiled once and its call kept.
_KEPT = 256


@lru_cache(maxsize=_KEPT)
def assembler(spans: tuple[tuple[int, int], ...], shape: tuple[int, ...]) -> Callable[..., Any]:
    """One compiled concatenation of ``(start, size)`` ranges of C-ordered arrays, as ``shape``."""
    import jax
    import jax.numpy as jnp

    def assembled(*parts: Any) -> Any:
        flat = [p.reshape(-1)[start:start + size] for p, (start, size) in zip(parts, spans)]
        return jnp.concatenate(flat).reshape(shape)

    return jax.jit(assembled)  # type: ignore[no-any-return]


def assemble(pieces: Any, shape: tuple[int, ...]) -> Any:
    """:meth:`~dlmg.adapters.capabilities.Rearranging.assemble` of :class:`Span` pieces."""
    spans = tuple((p.start, p.size) for p in pieces)
    return assembler(spans, tuple(shape))(*[p.array for p in pieces])


@lru_cache(maxsize=_KEPT)
def splitter(cuts: tuple[Cut, ...]) -> Callable[..., Any]:
    """One compiled call cutting a C-ordered array into the :class:`Cut` pieces."""
    import jax

    def split(whole: Any) -> tuple[Any, ...]:
        flat = whole.reshape(-1)
        return tuple(flat[c.start:c.start + c.size].reshape(c.shape) for c in cuts)

    return jax.jit(split)  # type: ignore[no-any-return]


@lru_cache(maxsize=_KEPT)
def composer(stacked: tuple[int, ...], axes: tuple[int, ...], shape: tuple[int, ...]) -> Callable[..., Any]:
    """One compiled stack, transpose and reshape."""
    import jax
    import jax.numpy as jnp

    def composed(*parts: Any) -> Any:
        return jnp.stack(parts).reshape(stacked).transpose(axes).reshape(shape)

    return jax.jit(composed)  # type: ignore[no-any-return]


@lru_cache(maxsize=_KEPT)
def decomposer(shape: tuple[int, ...], axes: tuple[int, ...], count: int,
               part: tuple[int, ...]) -> Callable[..., Any]:
    """The inverse of :func:`composer` as one compiled call."""
    import jax

    def decomposed(whole: Any) -> tuple[Any, ...]:
        parts = whole.reshape(shape).transpose(axes).reshape((count, *part))
        return tuple(parts[i] for i in range(count))

    return jax.jit(decomposed)  # type: ignore[no-any-return]


def _made(jnp: Any, tiling: Tiling, sources: Any) -> Any:
    if isinstance(tiling, Slice):
        box = tuple(slice(s, s + e) for s, e in zip(tiling.starts, tiling.extents))
        return sources[tiling.source].reshape(tiling.dims)[box].reshape(tiling.box)
    assert isinstance(tiling, Concat)
    return jnp.concatenate([_made(jnp, child, sources) for child in tiling.children], axis=tiling.axis)


@lru_cache(maxsize=_KEPT)
def retiler(targets: tuple[Retiling, ...]) -> Callable[..., Any]:
    """One compiled call making every :class:`Retiling` target from slices of the sources."""
    import jax
    import jax.numpy as jnp

    def retiled(*sources: Any) -> list[Any]:
        return [_made(jnp, t.tiling, sources).reshape(t.shape) for t in targets]

    return jax.jit(retiled)  # type: ignore[no-any-return]


_KINDS = (("assemble", assembler), ("split", splitter), ("compose", composer), ("decompose", decomposer),
          ("retile", retiler))


def compiled_kinds() -> list[str]:
    """The kinds of rearrangement compiled so far (for tests: which way a move took)."""
    return [name for name, made in _KINDS if made.cache_info().currsize]


def forget_compiled() -> None:
    """Drop every kept compiled rearrangement."""
    for _, made in _KINDS:
        made.cache_clear()


#: Operators jax.jit compiles for list_operator (pow stays eager: a concrete integer
#: exponent takes lax.integer_pow there, a traced one the general power).
_LIST_FUNCTIONS = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
                   "divide": operator.truediv}


@lru_cache(maxsize=8)
def list_operator(name: str) -> Any:
    """The operator ``name`` over all the arrays of one device as one ``jax.jit`` call,
    made once per operator (compiling the three forms is what it saves); ``None``
    for operators left eager."""
    op = _LIST_FUNCTIONS.get(name)
    if op is None:
        return None
    import jax

    pair = jax.jit(op)
    pairs = jax.jit(lambda xs, ys: [op(x, y) for x, y in zip(xs, ys)])
    with_scalar = jax.jit(lambda xs, y: [op(x, y) for x in xs])

    def call(xs: list[Any], ys: Any) -> list[Any]:
        scalar = not isinstance(ys, list)
        if len(xs) == 1:
            return [pair(xs[0], ys if scalar else ys[0])]
        return (with_scalar if scalar else pairs)(xs, ys)  # type: ignore[no-any-return]

    return call
