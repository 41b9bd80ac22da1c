"""``einsum``, ``einsum_plan`` and the products built on them (``matmul``, ``tensordot``...).

Every function here reads its operands' layouts, plans (:mod:`.plan`: the
strategy per pairwise contraction, chosen by the cost model) and runs the plan
(:mod:`.run`). The result of a contraction over a split mode that both
operands split alike is a *pending sum* (``layout.partial == "sum"``): its
replicas are addends. One rule for every function here (and ``@``): the
result is the value -- a pending sum is resolved by the plan's last step
(:func:`~dlmg.ops._pending.spread_value_layout`: a reduce-scatter into slabs on
the addends' devices where each addend holds the whole result) -- unless the
caller asks for the pending sum with ``pending=True`` (or names a pending
``layout=``).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from ...distributed.state import current
from ...distributed.agree import describe, prepare
from ..._shapes import normalize_axes, normalize_axis
from ...errors import DtypeError
from ...layout import Layout
from .._batch import batch_key
from .._pending import spread_value_layout
from .._operands import classify_operand, is_framework_array
from ..dispatch import is_distributed, map_fragments
from .local import local_matmul
from .equation import parse
from .plan import EinsumPlan, plan_equation
from .run import delegation, run_delegated, run_plan

if TYPE_CHECKING:  # pragma: no cover
    from ...tensor import DistributedTensor

__all__ = ["einsum", "einsum_plan", "matmul", "matmul_operator", "tensordot", "vecdot", "dot", "inner", "outer"]


def _result_dtype(name: str, dtypes: Sequence[str]) -> str:
    first = dtypes[0]
    if all(d == first for d in dtypes):
        out = first
    else:
        try:
            out = str(np.result_type(*(np.dtype(d) for d in dtypes)))
        except TypeError as exc:
            raise DtypeError(f"{name}: operands of dtypes {list(dtypes)} have no common type; cast with astype "
                             "first") from exc
    if out == "bool":
        raise DtypeError(f"{name}: bool operands; cast with astype first")
    return out


def _check(name: str, operands: Sequence[Any]) -> list["DistributedTensor"]:
    out = []
    for i, x in enumerate(operands):
        if not is_distributed(x):
            raise TypeError(f"{name}: operand {i} must be a DistributedTensor, got {type(x).__name__}")
        out.append(x)
    return out


def _plan(name: str, subscripts: str, operands: Sequence[Any], layout: Layout | None,
          pending: bool = False) -> tuple[EinsumPlan, str, list]:
    tensors = _check(name, operands)
    engine = current()
    if engine is not None and any(t.layout.nprocesses > 1 for t in tensors):
        # every process plans alone from the layouts: agree first, so that a process that
        # fails or sees other layouts makes every process raise instead of computing apart
        description = describe(name, subscripts=subscripts, layouts=[t.layout for t in tensors],
                               dtypes=[t.dtype for t in tensors], layout=layout, pending=pending)
        return prepare(engine, description, lambda: _plan_here(name, subscripts, tensors, layout, pending))
    return _plan_here(name, subscripts, tensors, layout, pending)


def _plan_here(name: str, subscripts: str, tensors: list, layout: Layout | None,
               pending: bool = False) -> tuple[EinsumPlan, str, list]:
    eq = parse(subscripts, tuple(t.shape for t in tensors))
    dtype = _result_dtype(name, [t.dtype for t in tensors])
    if layout is not None:
        if not isinstance(layout, Layout):
            raise TypeError(f"{name}: layout must be a dlmg.Layout, got {type(layout).__name__}")
        shape = tuple(eq.extent(c) for c in eq.output)
        if layout.shape != shape:
            raise ValueError(f"{name}: layout has shape {layout.shape}; the result has shape {shape}")
    itemsize = int(np.dtype(dtype).itemsize) if dtype != "bfloat16" else 2
    plan = plan_equation(eq, tuple(t.layout for t in tensors), itemsize, layout)
    if layout is None and not pending and plan.out.partial is not None:  # the value, unless asked: resolved
        plan = plan_equation(eq, tuple(t.layout for t in tensors), itemsize, spread_value_layout(plan.out))
    found = delegation(tensors, plan.equation, dtype, plan.out)
    if found is not None:
        plan = replace(plan, delegated=found.call)
    return plan, dtype, tensors


def einsum_plan(subscripts: str, *operands: "DistributedTensor", layout: Layout | None = None,
                pending: bool = False) -> EinsumPlan:
    """What :func:`einsum` would do, step by step, without running it (``layout`` and
    ``pending`` as there).

    Returns
    -------
    EinsumPlan
        Printing it shows the strategy of each contraction, every move with
        its bytes (per process), and the local einsum calls and flops per
        device. ``plan.out`` is the result's layout; ``plan.moved`` all
        traffic together.

    Examples
    --------
    >>> print(dlmg.einsum_plan("ik,kj->ij", a, b))   # doctest: +SKIP
    """
    plan, _, _ = _plan("dlmg.einsum_plan", subscripts, operands, layout, pending)
    return plan


def einsum(subscripts: str, *operands: "DistributedTensor", out: "DistributedTensor | None" = None,
           layout: Layout | None = None, pending: bool = False) -> "DistributedTensor":
    """Einstein summation over distributed operands, in any layouts.

    Parameters
    ----------
    subscripts : str
        Any equation NumPy's ``einsum`` accepts: explicit (``"ik,kj->ij"``) or
        implicit output, repeated letters in one operand (traces, diagonals),
        ``...`` broadcasting.
    *operands : DistributedTensor
        Any layouts, frameworks and devices; several operands are contracted
        pairwise in the order ``opt_einsum.contract_path`` gives.
    out : DistributedTensor, optional
        Write the result into this tensor (its layout decides the result's).
    layout : Layout, optional
        The result's layout (a pending one, ``partial="sum"``, included); by
        default the one the cheapest strategy leaves, with a pending sum
        resolved: where every addend holds the whole result, reduce-scattered
        into slabs on the addends' devices (along the first mode with an element
        for each), otherwise into its split on its first replica's devices.
    pending : bool
        Leave the pending sum that the cheapest strategy leaves when a split
        contracted mode ends the computation (its replicas hold the addends;
        every read of its values resolves it, linear operations keep it): the
        one way, besides a pending ``layout``, to ask for one.

    Returns
    -------
    DistributedTensor
        The result (``out`` when given). Its fragments belong to the
        frameworks of the fragments that led each product.

    Raises
    ------
    ValueError
        For a malformed equation or extents that do not agree.
    DtypeError
        For bool operands or dtypes with no common type.
    FragmentError
        When a fragment's framework fails on its local product.

    See Also
    --------
    einsum_plan : the plan, printed before anything runs.
    """
    target = layout if out is None else out.layout
    if out is not None and not is_distributed(out):
        raise TypeError(f"dlmg.einsum: out must be a DistributedTensor, got {type(out).__name__}")
    plan, dtype, tensors = _plan("dlmg.einsum", subscripts, operands, target, pending)
    result = run_delegated(plan, tensors, dtype) if plan.delegated else None
    if result is None:
        result = run_plan(plan, tensors, dtype)
    if out is None:
        return result
    if out.dtype != result.dtype:
        raise DtypeError(f"dlmg.einsum: out has dtype {out.dtype}; the result has {result.dtype}")
    done = map_fragments(lambda xp, o, r: r, (out, result), name="dlmg.einsum (out=)", out=out)
    assert done is not None
    return done


def batch_local(x1: "DistributedTensor", x2: "DistributedTensor") -> bool:
    """Whether :func:`dlmg.ops.contract.local.local_matmul` (whole matrices in every fragment, batch modes
    split alike) applies as it is."""
    nd = x1.ndim
    if nd < 2 or nd != x2.ndim or x1.shape[:-2] != x2.shape[:-2] or x1.shape[-1] != x2.shape[-2]:
        return False
    if x1.layout.partial is not None or x2.layout.partial is not None:
        return False
    if any(x.layout.grid[m] != 1 for x in (x1, x2) for m in (nd - 2, nd - 1)):
        return False
    return bool(batch_key(x1.layout, nd - 2) == batch_key(x2.layout, nd - 2))


def matmul(x1: "DistributedTensor", x2: "DistributedTensor", /, *, pending: bool = False,
           layout: Layout | None = None) -> "DistributedTensor":
    """The matrix product with the standard's rules (1-D operands, broadcast batch modes),
    over any layouts; ``x1 @ x2`` is ``matmul(x1, x2)``.

    Parameters
    ----------
    x1, x2 : DistributedTensor
        At least one mode each; ``x1``'s last extent equals ``x2``'s second to last (its
        only one when ``x2`` is 1-D).
    pending : bool
        dlmg's extension: leave the pending sum that a split contracted mode gives
        (its replicas hold the addends; every read of its values resolves it).
    layout : Layout, optional
        dlmg's extension: the result's layout (a pending one included).

    Returns
    -------
    DistributedTensor
        Batch-local (each fragment's matrices multiplied where they lie) when every
        fragment holds whole matrices, else the plan of :func:`einsum`.

    Raises
    ------
    ValueError
        A 0-d operand, or inner extents that differ (the message names both shapes).
    """
    _check("dlmg.matmul", (x1, x2))
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"dlmg.matmul: operands must have at least one mode (use * for scalars), "
                         f"got shapes {x1.shape} and {x2.shape}")
    contracted = x2.shape[-2] if x2.ndim > 1 else x2.shape[0]
    if x1.shape[-1] != contracted:
        raise ValueError(f"dlmg.matmul: inner extents differ: {x1.shape} @ {x2.shape}")
    if layout is None and batch_local(x1, x2):  # every fragment holds whole matrices: the batch-local product
        return local_matmul(x1, x2)
    left = "...ij" if x1.ndim > 1 else "j"
    right = "...jk" if x2.ndim > 1 else "j"
    result = ("..." if max(x1.ndim, x2.ndim) > 2 or (x1.ndim > 1 and x2.ndim > 1) else "")
    result += ("i" if x1.ndim > 1 else "") + ("k" if x2.ndim > 1 else "")
    if "..." in result and "..." not in left + right:
        result = result.replace("...", "")
    return einsum(f"{left},{right}->{result}", x1, x2, pending=pending, layout=layout)


def matmul_operator(x1: Any, x2: Any, /) -> Any:
    """``x1 @ x2`` where one side is a tensor: :func:`matmul` (a value, never a pending sum), or
    ``NotImplemented`` where the other side is not a tensor, so that Python asks it. A
    framework's array of rank > 0 on either side is refused with dlmg's hint (scatter it first)."""
    other = x2 if is_distributed(x1) else x1
    if not is_distributed(other):
        if is_framework_array(other):
            classify_operand(other)  # raises TypeError naming dlmg.scatter
        return NotImplemented
    return matmul(x1, x2)


def tensordot(x1: "DistributedTensor", x2: "DistributedTensor", /, *, axes: int | tuple = 2,
              pending: bool = False, layout: Layout | None = None) -> "DistributedTensor":
    """Contract ``axes`` of ``x1`` with ``axes`` of ``x2`` (the array API's ``tensordot``;
    ``pending=True`` leaves a pending sum, ``layout`` chooses the result's layout, see
    :func:`einsum`)."""
    _check("dlmg.tensordot", (x1, x2))
    if isinstance(axes, int) or (hasattr(axes, "__index__") and not isinstance(axes, tuple)):
        n = operator.index(axes)
        if n < 0 or n > min(x1.ndim, x2.ndim):
            raise ValueError(f"dlmg.tensordot: axes = {n} is out of range for shapes {x1.shape} and {x2.shape}")
        a1, a2 = list(range(x1.ndim - n, x1.ndim)), list(range(n))
    else:
        if isinstance(axes, (str, bytes)) or not hasattr(axes, "__len__") or len(axes) != 2:
            raise ValueError(f"dlmg.tensordot: axes must be an int or two sequences of modes, got {axes!r}")
        a1 = list(normalize_axes(axes[0], x1.ndim, "dlmg.tensordot (the first operand's axes)"))
        a2 = list(normalize_axes(axes[1], x2.ndim, "dlmg.tensordot (the second operand's axes)"))
        if len(a1) != len(a2):
            raise ValueError(f"dlmg.tensordot: axes {axes!r} name {len(a1)} and {len(a2)} modes")
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    l1 = [next(letters) for _ in range(x1.ndim)]
    l2 = [next(letters) for _ in range(x2.ndim)]
    for i, j in zip(a1, a2):
        l2[j] = l1[i]
    out = [c for m, c in enumerate(l1) if m not in a1] + [c for m, c in enumerate(l2) if m not in a2]
    return einsum("".join(l1) + "," + "".join(l2) + "->" + "".join(out), x1, x2, pending=pending, layout=layout)


def vecdot(x1: "DistributedTensor", x2: "DistributedTensor", /, *, axis: int = -1,
           pending: bool = False, layout: Layout | None = None) -> "DistributedTensor":
    """``sum(conj(x1) * x2, axis)`` with broadcast batch modes (the array API's ``vecdot``;
    ``pending=True`` leaves a pending sum, ``layout`` chooses the result's layout, see
    :func:`einsum`)."""
    _check("dlmg.vecdot", (x1, x2))
    normalize_axis(axis, x1.ndim, "dlmg.vecdot (first operand)")
    normalize_axis(axis, x2.ndim, "dlmg.vecdot (second operand)")
    if x1.shape[axis] != x2.shape[axis]:
        raise ValueError(f"dlmg.vecdot: extents along axis {axis} differ: {x1.shape} and {x2.shape}")
    if axis % x1.ndim != x1.ndim - 1 or axis % x2.ndim != x2.ndim - 1:
        raise ValueError(f"dlmg.vecdot: axis = {axis} is not the last mode of both operands; only the last "
                         "mode is contracted here (move it there with permute_dims)")
    if x1.dtype.startswith("complex"):
        conj = map_fragments(lambda xp, a: xp.conj(a), (x1,), name="dlmg.vecdot (conj)")
        assert conj is not None
        x1 = conj
    return einsum("...z,...z->...", x1, x2, pending=pending, layout=layout)


def dot(a: "DistributedTensor", b: "DistributedTensor", /, *, pending: bool = False) -> "DistributedTensor":
    """NumPy's ``dot``: the sum over the last mode of ``a`` and the second-to-last of ``b``
    (``pending=True`` leaves a pending sum, see :func:`einsum`)."""
    _check("dlmg.dot", (a, b))
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b, pending=pending)
    return tensordot(a, b, axes=([-1], [max(b.ndim - 2, 0)]), pending=pending)


def inner(a: "DistributedTensor", b: "DistributedTensor", /, *, pending: bool = False) -> "DistributedTensor":
    """NumPy's ``inner``: the sum over the last modes of ``a`` and ``b`` (``pending=True``
    leaves a pending sum, see :func:`einsum`)."""
    _check("dlmg.inner", (a, b))
    return tensordot(a, b, axes=([-1], [-1]), pending=pending)


def outer(a: "DistributedTensor", b: "DistributedTensor", /, *, pending: bool = False) -> "DistributedTensor":
    """NumPy's ``outer`` of two vectors (higher ranks are flattened by NumPy; here they must be 1-D)."""
    _check("dlmg.outer", (a, b))
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dlmg.outer takes vectors (1-D), got shapes {a.shape} and {b.shape}")
    return einsum("i,j->ij", a, b, pending=pending)
