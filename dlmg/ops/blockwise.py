"""A user function run on each fragment: :func:`map_fragments` (Dask's ``map_blocks`` habit).

The function sees **one fragment at a time** and never the whole tensor. For
elementwise functions (``lambda a: a * 2 + 1``) that makes no difference; for
anything that looks at more than one element (``t - t.mean()``, a sort, a
cumulative sum) the answer is per fragment and changes with the layout. Use
dlmg's own functions for whole-tensor semantics (``x - dlmg.mean(x)``).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import FragmentError
from .dispatch import check_same_layout, is_distributed, new_tensor
from .dispatch import map_fragments as _run

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["map_fragments", "apply", "shielded"]


def shielded(operands: tuple[Any, ...]) -> tuple[Any, ...]:
    """``operands`` with every tensor whose memory is read-only, in a framework that cannot
    refuse writes itself, replaced by a copy of it.

    A torch view of JAX memory (or of a read-only NumPy array, or of a DLPack tensor
    marked ``READ_ONLY``) is writable as far as torch knows; a function of the user's
    that writes into its argument in place (``a.mul_(2)``) would change memory that must
    not change. Such operands reach user functions as copies, as the docs of
    :func:`map_fragments` and :func:`dlmg.fuse` say; every other operand is passed as it is.
    """
    out = list(operands)
    for k, op in enumerate(operands):
        if not is_distributed(op):
            continue
        exposed = {f.index for f in op.fragments if f.is_local and f.inherits_readonly and f.adapter.traits.mutable
                   and not f.adapter.is_readonly(f.array)}
        if not exposed:
            continue
        arrays = [(f.adapter.namespace().asarray(f.array, copy=True) if f.index in exposed else f.array)
                  if f.is_local else None for f in op.fragments]
        out[k] = new_tensor(arrays, op.layout, op.dtype)
    return tuple(out)


def map_fragments(
    fn: Callable[..., Any],
    *operands: Any,
    out: "DistributedTensor | None" = None,
    namespace: bool = False,
) -> "DistributedTensor":
    """Call ``fn`` on each fragment's array, in the fragment's framework, on its device.

    ``fn`` receives the arrays of **one fragment** of each operand, never the
    whole tensor, and must return an array of that fragment's shape; the
    results become the fragments of a tensor of the same layout. An
    elementwise ``fn`` gives the same answer whatever the layout. Anything
    else -- ``lambda t: t - t.mean()`` subtracts each *fragment's* mean -- gives
    a per-fragment answer that changes with the layout; use dlmg's functions
    for whole-tensor semantics (``x - dlmg.mean(x)``).

    Parameters
    ----------
    fn : callable
        Called once per local fragment as ``fn(*arrays)``, or
        ``fn(xp, *arrays)`` with ``namespace=True`` (``xp``: the array-API
        namespace of the fragment's framework, so one ``fn`` serves every
        framework).
    *operands : DistributedTensor, scalar or 0-d array
        At least one distributed tensor; all of them share one layout. The
        first one's fragments decide the framework and device of each
        fragment's work; fragments of other operands that belong to another
        framework are handed over zero-copy through DLPack. Python scalars are
        passed as they are; 0-d arrays are converted to each fragment's
        framework and device.
    out : DistributedTensor, optional
        A tensor of the same layout to write the results into (in place for
        NumPy, torch and CuPy fragments; JAX fragments are replaced by new
        arrays). Results are cast to ``out``'s dtype.
    namespace : bool
        Pass the array-API namespace as the first argument of ``fn``.

    Returns
    -------
    DistributedTensor
        A new tensor of the operands' layout, or ``out``.

    Raises
    ------
    LayoutMismatchError
        When the distributed operands' (or ``out``'s) layouts differ.
    FragmentError
        When ``fn`` fails on a fragment, or returns an array of another shape
        than the fragment's; the message names the fragment, its device and
        framework, and the original error is chained.

    Notes
    -----
    The work is queued asynchronously where the framework allows it (CUDA
    streams, JAX dispatch); call :func:`dlmg.synchronize` or
    ``tensor.synchronize()`` before timing or reading the memory otherwise.

    A fragment whose memory is read-only in a framework that cannot refuse writes (a
    torch view of JAX memory, of a read-only NumPy array or of a DLPack tensor marked
    ``READ_ONLY``) reaches ``fn`` as a copy, so that an in-place write in ``fn`` cannot
    change the source.

    Examples
    --------
    >>> y = dlmg.map_fragments(lambda a, b: a * b + 1, x, x)                # doctest: +SKIP
    >>> y = dlmg.map_fragments(lambda xp, a: xp.tanh(a), x, namespace=True)  # doctest: +SKIP
    """
    if namespace:
        per_fragment = fn
    else:
        def per_fragment(xp: Any, *arrays: Any) -> Any:
            return fn(*arrays)

    name = f"map_fragments({getattr(fn, '__name__', 'fn')})"
    if out is not None:
        lead = next((op for op in operands if is_distributed(op)), None)
        if lead is None:
            raise TypeError(f"{name} needs at least one distributed tensor operand")
        check_same_layout(name, lead, out)
    result = _run(per_fragment, shielded(operands), name=name, out=out)
    assert result is not None
    if out is None:
        _check_shapes(result, name)
    return result


def _check_shapes(result: "DistributedTensor", name: str) -> None:
    for frag in result.fragments:
        if frag.is_local:
            shape = tuple(frag.array.shape)
            if shape != frag.layout.shape:
                raise FragmentError(
                    f"{name} returned an array of shape {shape} for fragment {frag.index}, whose "
                    f"shape is {frag.layout.shape}; the function must return an array of its "
                    "fragment's shape (the results are the fragments of a tensor of the same layout)"
                )


def apply(
    fn: Callable[..., Any],
    *operands: Any,
    out: "DistributedTensor | None" = None,
    namespace: bool = False,
) -> "DistributedTensor":
    """Deprecated name of :func:`map_fragments` (which says what it does: one fragment at a time).

    Warns
    -----
    DeprecationWarning
        Always; the behaviour is :func:`map_fragments`'s.
    """
    warnings.warn(
        "dlmg.apply is now dlmg.map_fragments (fn runs on one fragment at a time, as Dask's map_blocks); "
        "the name apply will go away",
        DeprecationWarning,
        stacklevel=2,
    )
    return map_fragments(fn, *operands, out=out, namespace=namespace)
