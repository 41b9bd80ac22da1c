"""The standard's ``linalg`` extension, and ``dlmg.linalg``: one set of functions.

Distributed operands stay distributed (``dlmg.ops.linalg`` has the algorithms):

* ``qr`` (reduced), ``svd`` (``full_matrices=False``), ``svdvals``, ``pinv``,
  ``matrix_rank`` and :func:`lstsq`: whole matrices in every fragment run
  batch-locally; one tall matrix split along rows (or short-fat split along
  columns, through its transpose) runs by TSQR; other splits of one matrix are
  redistributed into slabs of the long mode first;
* ``vector_norm``, ``matrix_norm``: the namespace's elementwise functions and
  reductions (``2``, ``-2`` and ``"nuc"`` through ``svdvals``);
* ``diagonal`` (each fragment its owned entries, one pending sum) and
  ``trace`` (its sum); ``cross`` fragment by fragment with the product mode
  whole, operands of different shapes broadcast and aligned as the elementwise
  functions align them; ``matrix_power`` (``n >= 1``) by repeated squaring with the
  distributed ``matmul``; ``matmul``, ``tensordot``, ``vecdot``, ``outer`` are dlmg's
  contractions; ``matrix_transpose`` is a view;
* ``cholesky``, ``det``, ``slogdet``, ``inv``, ``solve``, ``eigh``,
  ``eigvalsh``: batch-local when every fragment holds whole matrices; one
  split matrix: blocked Cholesky, blocked LU (``det``, ``slogdet``) and
  blocked Gauss-Jordan (``solve``, ``inv``) on its grid, one-sided block
  Jacobi (``eigh``, ``eigvalsh``) in column blocks over its fragments;
* ``qr(mode="complete")`` of a tall split matrix from TSQR's factors, ``Q``
  (``m x m``) and ``R`` in its row distribution; ``svd(full_matrices=True)`` of
  a split non-square matrix from the same complete ``Q``;
* ``matrix_power`` with ``n == 0`` (the identity, made by each fragment) and
  ``n < 0`` (powers of the distributed :func:`inv`);
* stacked matrices (batch modes) with a matrix mode split: the algorithm for one split
  matrix on each batch entry (a view), the results stacked where they lie
  (``dlmg.ops.linalg.stack_entries``; a split batch mode is first folded into the rows'
  grid by ``dlmg.ops.linalg.batch_whole``).

Nothing is collected onto one fragment:

* operands that hold no elements give results made directly on the lead operand's devices
  and processes (zeros, ones for ``det`` and ``slogdet``'s sign, identities for a complete
  ``Q`` or a full ``U``/``Vh``, as NumPy's), nothing moved;
* integer and bool matrices in ``det``, ``slogdet``, ``inv``, ``solve``, ``eigh`` and
  ``eigvalsh`` are cast fragment by fragment to the default floating dtype of their framework
  (float64, float32 for JAX without 64-bit types), as ``numpy.linalg`` casts them to float64; ``qr``,
  ``svd``, ``cholesky`` and ``pinv`` refuse them (a ``DtypeError``);
* ``solve`` of operands of two dtypes casts both, fragment by fragment, to the type the
  standard's promotion gives (:func:`dlmg.array_api.result_type`);
* ``solve`` with a right-hand side of other batch modes than ``x1``'s (whole matrices in
  every fragment) broadcasts them and lays the right-hand side out as ``x1``'s batch; one
  split matrix ``x1`` solves stacked right-hand sides as the columns of one ``M x (B K)``
  right-hand side;
* ``pinv`` with ``rtol`` a tensor computes ``V S^+ U^H`` from :func:`svd` with the
  namespace's elementwise functions.

Small results (``R``, ``S``, ``Vh``; the ``n x n`` factors whose size does not
grow with the distributed extent) are laid out by the default layout policy.
"""

from __future__ import annotations

import itertools
import math
import operator
from typing import Any, NamedTuple

from ..ops import contract as _contract, jacobi as _jacobi, linalg as _la
from ..ops._batch import batch_key, suggest_whole
from ..ops._dtypes import INEXACT, require
from ..ops.broadcast import align, result_shape
from ..errors import DtypeError, LayoutError
from ..ops.dispatch import map_fragments
from ..ops.contract.pending import settled
from ..ops._operands import is_distributed
from ._elementwise import abs as abs_of, conj, divide, greater, multiply, not_equal, pow as pow_of, sqrt, where
from ._creation import asarray, default_float, full, layout_of
from ._data_types import finfo, result_type
from ._manipulation import astype, broadcast_to, expand_dims, matrix_transpose, permute_dims, reshape
from ._policy import get_default_layout
from ._products import matmul, outer, tensordot, vecdot
from ._statistics import max as _max, min as _min, sum as _sum

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "lstsq", "matmul", "matrix_norm",
    "matrix_power", "matrix_rank", "matrix_transpose", "outer", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "tensordot", "trace", "vecdot", "vector_norm",
]


class QRResult(NamedTuple):
    """``Q`` and ``R`` of :func:`qr`."""

    Q: Any
    R: Any


class SVDResult(NamedTuple):
    """``U``, ``S`` and ``Vh`` of :func:`svd`."""

    U: Any
    S: Any
    Vh: Any


def _operand(name: str, x: Any) -> Any:
    if not is_distributed(x):
        raise TypeError(f"dlmg.linalg.{name} takes a DistributedTensor, got {type(x).__name__}")
    return settled(x)


def _matrices(name: str, x: Any, square: bool = False) -> None:
    """Refuse ``x`` unless its last two modes are matrices (square ones when ``square``)."""
    if x.ndim < 2 or (square and x.shape[-1] != x.shape[-2]):
        kind = "square matrices" if square else "matrices"
        raise ValueError(f"dlmg.linalg.{name} needs {kind} in the last two modes, got shape {x.shape}")


def _inexact(name: str, x: Any) -> None:
    """Refuse bool and integer matrices where the factorization takes floating ones only."""
    require(f"dlmg.linalg.{name}", (x.dtype,), INEXACT, "cast to a floating type with astype first")


def _framework(x: Any) -> str:
    """The framework of ``x``'s first local fragment (the policy's when this process holds none)."""
    return x.frameworks[0] if x.frameworks else get_default_layout().framework


def _floating(x: Any, dtype: str | None = None) -> Any:
    """``x`` cast fragment by fragment (nothing moves) to ``dtype``, or to the default floating
    dtype of its framework when ``dtype`` (or ``x``'s) is bool or integer, as ``numpy.linalg``
    casts them to float64."""
    dtype = dtype or x.dtype
    if dtype not in _INEXACT:
        dtype = default_float(_framework(x))
    return x if x.dtype == dtype else astype(x, dtype)


def _made(x: Any, shape: tuple[int, ...], dtype: str, fill: float = 0) -> Any:
    """A result of ``shape`` made directly on ``x``'s devices and processes, in ``x``'s framework
    (the results of operands that hold no elements: nothing moves)."""
    return full(shape, fill, dtype=dtype, device=x.device, framework=_framework(x))


def _identities(x: Any, shape: tuple[int, ...], dtype: str) -> Any:
    """Identity matrices of ``shape`` (square last two modes) made on ``x``'s devices, each
    fragment its own entries (``dlmg.ops.linalg.identity_like``)."""
    return _la.identity_like(_made(x, shape, dtype))


def _local(x: Any) -> bool:
    return _la.matrix_split(x) == _la.LOCAL


def _placed(t: Any, x: Any) -> Any:
    """A small result (one fragment where it was computed) laid out on ``x``'s devices, as a
    new tensor made with ``device=x.device`` is: results keep their operands' device."""
    wanted = layout_of(t.shape, x.device)
    return t if t.layout.same_distribution(wanted) else t.redistribute(wanted)


def _small(x: Any, *results: Any) -> tuple[Any, ...]:
    """``results`` as they are when ``x`` was batch-local, else each small one placed by the policy."""
    if _local(x):
        return results
    return tuple(r if r.ndim == 2 and r.layout.ngrid > 1 else _placed(r, x) for r in results)


def _stacked(x: Any) -> bool:
    """Stacked matrices (batch modes present) with a matrix mode split, and some entries."""
    return x.ndim > 2 and not _local(x) and x.size > 0


def _per_matrix(name: str, fn: Any, *operands: Any) -> tuple[Any, ...]:
    """``fn`` (returning a tuple of tensors) on every batch entry of stacked split matrices, each
    entry one split matrix run by the distributed algorithm, the results stacked where they lie
    (``dlmg.ops.linalg.batch_whole``, ``dlmg.ops.linalg.stack_entries``). ``operands`` other than
    the first are indexed alike when they have its batch modes, else passed whole."""
    lead = _la.batch_whole(operands[0])
    batch = lead.shape[:-2]
    rest = [_la.batch_whole(o) if o.shape[:-2] == batch and o.ndim == lead.ndim else o for o in operands[1:]]
    entries = (fn(lead[b], *(o[b] if o.ndim == lead.ndim else o for o in rest))
               for b in itertools.product(*(range(e) for e in batch)))
    return _la.stack_entries(f"dlmg.linalg.{name}", entries, batch)


# --------------------------------------------------------------------------
# TSQR and what is built on it


def qr(x: Any, /, *, mode: str = "reduced") -> QRResult:
    """QR factorization: batch-local for whole matrices, TSQR for one tall matrix split along rows.

    ``Q`` keeps ``x``'s row distribution; in ``mode="reduced"`` ``R``
    (``n x n``) is laid out by the policy; in ``mode="complete"`` ``Q`` is
    ``m x m`` and ``R`` ``m x n``, both in ``x``'s row distribution
    (``dlmg.ops.linalg.qr_complete``). A short-fat (``m < n``) split matrix
    by ``dlmg.ops.linalg.qr_wide``: ``R`` keeps the column distribution, the
    ``m x m`` ``Q`` is laid out by the policy. Stacked split matrices run per
    batch entry (see the module). Matrices that hold no elements give NumPy's
    results made on ``x``'s devices (``Q`` the identity in ``mode="complete"``).
    """
    x = _operand("qr", x)
    _matrices("qr", x)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"dlmg.linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    _inexact("qr", x)
    *batch, m, n = x.shape
    if x.size == 0:
        if mode == "complete":
            return QRResult(_identities(x, (*batch, m, m), x.dtype), _made(x, x.shape, x.dtype))
        k = min(m, n)
        return QRResult(_made(x, (*batch, m, k), x.dtype), _made(x, (*batch, k, n), x.dtype))
    if _stacked(x):
        return QRResult(*_per_matrix("qr", lambda e: tuple(qr(e, mode=mode)), x))
    q, r = _la.qr(x, mode=mode)
    if _local(x):
        return QRResult(q, r)
    return QRResult(_placed(q, x), r) if m < n else QRResult(q, r if mode == "complete" else _placed(r, x))


def svd(x: Any, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U diag(S) Vh``.

    Batch-locally for whole matrices. For one split matrix by TSQR: with
    ``full_matrices=False`` (or a square matrix) from the reduced factors
    (``dlmg.ops.linalg.svd``), with ``full_matrices=True`` from the complete
    ``Q`` of TSQR, ``U = Q diag(U_R, I)`` (``dlmg.ops.linalg.svd_complete``).
    ``U`` keeps a tall matrix's row distribution, ``Vh`` a short-fat one's
    column distribution; the small factors are laid out by the policy. Matrices
    that hold no elements give NumPy's results made on ``x``'s devices (``U``
    and ``Vh`` identities where ``full_matrices`` makes them square).
    """
    x = _operand("svd", x)
    _matrices("svd", x)
    _inexact("svd", x)
    *batch, m, n = x.shape
    if x.size == 0:
        k, real = min(m, n), _la.REAL_OF.get(x.dtype, x.dtype)
        if full_matrices:
            return SVDResult(_identities(x, (*batch, m, m), x.dtype), _made(x, (*batch, k), real),
                             _identities(x, (*batch, n, n), x.dtype))
        return SVDResult(_made(x, (*batch, m, k), x.dtype), _made(x, (*batch, k), real),
                         _made(x, (*batch, k, n), x.dtype))
    if _stacked(x):
        return SVDResult(*_per_matrix("svd", lambda e: tuple(svd(e, full_matrices=full_matrices)), x))
    square = m == n
    if full_matrices and _local(x) and not square:
        u, s, vh = _la.batch_local("dlmg.linalg.svd", x, lambda xp, a: tuple(xp.linalg.svd(a)),
                                   [((m, m), x.dtype), ((min(m, n),), _la.REAL_OF.get(x.dtype, x.dtype)),
                                    ((n, n), x.dtype)])
        return SVDResult(u, s, vh)
    if full_matrices and not square:
        return SVDResult(*_small(x, *_la.svd_complete(x)))
    return SVDResult(*_small(x, *_la.svd(x)))


def svdvals(x: Any, /) -> Any:
    """The singular values, descending: batch-local, or from TSQR's ``R`` for one split matrix
    (laid out by the policy); zeros made on ``x``'s devices when ``x`` holds no elements."""
    x = _operand("svdvals", x)
    _matrices("svdvals", x)
    _inexact("svdvals", x)
    if x.size == 0:
        return _made(x, (*x.shape[:-2], min(x.shape[-2:])), _la.REAL_OF.get(x.dtype, x.dtype))
    if _stacked(x):
        return _per_matrix("svdvals", lambda e: (svdvals(e),), x)[0]
    s = _la.svdvals(x)
    return s if _local(x) else _placed(s, x)


def pinv(x: Any, /, *, rtol: float | Any | None = None) -> Any:
    """The pseudo-inverse: batch-local, or ``V S^+ U^H`` by TSQR for one split matrix, the result
    split along the mode ``x`` splits (columns for a tall ``x``).

    ``rtol`` a tensor (or a host array), broadcast against the batch modes: ``V S^+ U^H`` from
    :func:`svd` by the namespace's elementwise functions and ``matmul``. Zeros of the transposed
    shape made on ``x``'s devices when ``x`` holds no elements.
    """
    x = _operand("pinv", x)
    _matrices("pinv", x)
    _inexact("pinv", x)
    number = rtol is None or isinstance(rtol, (int, float))
    if _stacked(x) and not number:
        raise ValueError(f"dlmg.linalg.pinv of stacked split matrices takes rtol as a number, got "
                         f"{type(rtol).__name__}: make the matrices whole in every fragment first")
    if x.size == 0:
        return _made(x, (*x.shape[:-2], x.shape[-1], x.shape[-2]), x.dtype)
    if not number:
        return _pinv_tolerances(x, rtol)
    if _stacked(x):
        return _per_matrix("pinv", lambda e: (pinv(e, rtol=rtol),), x)[0]
    return _la.pinv(x, rtol=None if rtol is None else float(rtol))


def _pinv_tolerances(x: Any, rtol: Any) -> Any:
    """``V S^+ U^H`` with the cutoff ``rtol * max(S)``, ``rtol`` a tensor broadcast against the
    batch modes (singular values at or below it count as zero, as NumPy's ``pinv``)."""
    tol = rtol if is_distributed(rtol) else asarray(rtol, device=x.device)
    u, s, vh = svd(x, full_matrices=False)
    cutoff = multiply(_max(s, axis=-1, keepdims=True), expand_dims(tol, axis=-1))
    keep = greater(s, cutoff)
    inverse = where(keep, divide(1, where(keep, s, 1)), 0)
    v = matrix_transpose(conj(vh))
    return matmul(multiply(v, expand_dims(astype(inverse, v.dtype), axis=-2)), matrix_transpose(conj(u)))


def matrix_rank(x: Any, /, *, rtol: float | Any | None = None) -> Any:
    """The number of singular values above ``rtol * max(S)`` (default ``rtol``: ``max(m, n) eps``),
    from :func:`svdvals`."""
    x = _operand("matrix_rank", x)
    s = svdvals(x)
    if rtol is None:
        rtol = max(x.shape[-2:]) * finfo(s.dtype).eps
    if s.shape[-1] == 0:
        return _sum(greater(s, 0), axis=-1)
    tol = multiply(_max(s, axis=-1, keepdims=True), rtol)
    return _sum(greater(s, tol), axis=-1)


def lstsq(x1: Any, x2: Any, /, *, rtol: float | None = None) -> Any:
    """The least-squares solution of ``x1 @ X = x2`` (minimum norm): ``pinv(x1, rtol=rtol) @ x2``.

    Not in the standard; for a tall ``x1`` split along rows and ``x2`` split
    alike, the product contracts the split mode and resolves one small pending
    sum, so nothing of size ``m`` is ever whole.
    """
    return matmul(pinv(x1, rtol=rtol), _operand("lstsq", x2))


# --------------------------------------------------------------------------
# norms, diagonals, products


def _real_abs(x: Any) -> Any:
    return abs_of(x)


def vector_norm(x: Any, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False,
                ord: int | float = 2) -> Any:  # noqa: A002  (the standard's name)
    """The vector norm over ``axis`` (all modes by default), from elementwise functions and the
    namespace's reductions (distributed as they are)."""
    x = _operand("vector_norm", x)
    if x.dtype in ("bool",) or x.dtype.startswith(("int", "uint")):
        raise TypeError(f"vector_norm needs a floating or complex tensor, got {x.dtype}")
    a = _real_abs(x)
    if ord == math.inf:
        return _max(a, axis=axis, keepdims=keepdims)
    if ord == -math.inf:
        return _min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _sum(astype(not_equal(a, 0), a.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return _sum(a, axis=axis, keepdims=keepdims)
    if ord == 2:
        return sqrt(_sum(multiply(a, a), axis=axis, keepdims=keepdims))
    p = float(ord)
    return pow_of(_sum(pow_of(a, p), axis=axis, keepdims=keepdims), 1.0 / p)


def matrix_norm(x: Any, /, *, keepdims: bool = False, ord: int | float | str | None = "fro") -> Any:  # noqa: A002
    """The matrix norm of the last two modes: ``"fro"``, ``1``, ``-1``, ``inf``, ``-inf`` from
    reductions; ``2``, ``-2`` and ``"nuc"`` from :func:`svdvals`."""
    x = _operand("matrix_norm", x)
    if x.ndim < 2:
        raise ValueError(f"matrix_norm needs at least 2 modes, got shape {x.shape}")
    if ord is None:
        ord = "fro"  # noqa: A001
    a = _real_abs(x)
    if ord == "fro":
        out = sqrt(_sum(multiply(a, a), axis=(-2, -1)))
    elif ord in (1, -1):
        cols = _sum(a, axis=-2)
        out = _max(cols, axis=-1) if ord == 1 else _min(cols, axis=-1)
    elif ord in (math.inf, -math.inf):
        rows = _sum(a, axis=-1)
        out = _max(rows, axis=-1) if ord == math.inf else _min(rows, axis=-1)
    elif ord in (2, -2, "nuc"):
        s = svdvals(x)
        out = _max(s, axis=-1) if ord == 2 else _min(s, axis=-1) if ord == -2 else _sum(s, axis=-1)
    else:
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    if keepdims:
        out = reshape(out, x.shape[:-2] + (1, 1))
    return out


def diagonal(x: Any, /, *, offset: int = 0) -> Any:
    """The diagonals (``offset`` above the main one) of the last two modes, following the rows'
    distribution (``offset >= 0``) or the columns' (see ``dlmg.ops.linalg.diagonal``)."""
    return _la.diagonal(_operand("diagonal", x), offset=operator.index(offset))


def trace(x: Any, /, *, offset: int = 0, dtype: Any = None) -> Any:
    """The sums of the diagonals (``offset`` above the main one) of the last two modes, in the
    accumulation dtype of the namespace's ``sum``."""
    x = _operand("trace", x)
    if x.ndim < 2:
        raise ValueError(f"trace needs at least 2 modes, got shape {x.shape}")
    return _sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def cross(x1: Any, x2: Any, /, *, axis: int = -1) -> Any:
    """The cross product of 3-element vectors along ``axis`` (of the broadcast shape), fragment by
    fragment in each fragment's framework.

    The operands are broadcast against each other (their other modes) and aligned as the
    elementwise functions align them (:func:`dlmg.ops.broadcast.align`: views where the
    fragments allow, else the smaller operand moved); the product mode is made whole in every
    fragment first (a redistribution of the operand of the result's shape when it is split).
    Both operands must have extent 3 along ``axis``.
    """
    x1, x2 = _operand("cross", x1), _operand("cross", x2)
    if x1.ndim == 0 or x2.ndim == 0:
        raise ValueError(f"cross needs vectors of 3 elements, got shapes {x1.shape} and {x2.shape}")
    shape = result_shape(x1.shape, x2.shape)
    nd = len(shape)
    mode = operator.index(axis)
    if not -nd <= mode < nd:
        raise ValueError(f"cross: axis {axis} is out of range for the broadcast shape {shape}")
    mode %= nd
    for t in (x1, x2):
        own = mode - (nd - t.ndim)
        if own < 0 or t.shape[own] != 3:
            raise ValueError(f"cross: mode {mode} of the broadcast shape {shape} must have extent 3 in both "
                             f"operands, got shapes {x1.shape} and {x2.shape}")
    x1, x2 = (t.redistribute(suggest_whole(t.layout, (mode,))) if t.shape == shape and t.layout.grid[mode] != 1
              else t for t in (x1, x2))
    x1, x2 = align([x1, x2], "dlmg.linalg.cross", True)
    if x1.layout.grid[mode] != 1:  # both broadcast: their common layout splits the product mode
        whole = suggest_whole(x1.layout, (mode,))
        x1, x2 = x1.redistribute(whole), x2.redistribute(whole)
    return map_fragments(lambda xp, a, b: xp.linalg.cross(a, b, axis=mode), (x1, x2), name="dlmg.linalg.cross")


def matrix_power(x: Any, n: int, /) -> Any:
    """``x`` to the integer power ``n`` by repeated squaring with the distributed ``matmul``
    (:func:`dlmg.matmul`; a product that ends in a pending sum is resolved in its own split).

    ``n == 0``: identity matrices in ``x``'s layout, each fragment making its own entries
    (``dlmg.ops.linalg.identity_like``); ``n < 0``: the repeated squaring of :func:`inv`
    (distributed as it is; floating-point ``x`` only).
    """
    x = _operand("matrix_power", x)
    n = operator.index(n)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"matrix_power needs square matrices in the last two modes, got shape {x.shape}")
    if n == 0:
        return _la.identity_like(x)
    base = x
    if n < 0:
        require("dlmg.linalg.matrix_power", (x.dtype,), INEXACT,
                f"a negative power (n={n}) needs the inverse: cast to a floating type with astype first")
        base, n = inv(x), -n
    result = None
    while True:
        if n & 1:
            result = base if result is None else settled(_contract.matmul(result, base))
        n >>= 1
        if not n:
            break
        base = settled(_contract.matmul(base, base))
    return result if result is not x else astype(x, x.dtype, copy=True)


# --------------------------------------------------------------------------
# factorizations and solves: batch-local, on the grid, or per batch entry


def cholesky(x: Any, /, *, upper: bool = False) -> Any:
    """The Cholesky factor: batch-local when every fragment holds whole matrices, blocked
    right-looking Cholesky on the grid for one split matrix
    (``dlmg.ops.linalg.cholesky_grid``), per batch entry for stacked split matrices; zeros made
    on ``x``'s devices when ``x`` holds no elements."""
    x = _operand("cholesky", x)
    _matrices("cholesky", x, square=True)
    _inexact("cholesky", x)
    if x.size == 0:
        return _made(x, x.shape, x.dtype)
    if _stacked(x):
        return _per_matrix("cholesky", lambda e: (cholesky(e, upper=upper),), x)[0]
    return _la.cholesky(x, upper=upper)


def _batch_one(name: str, x: Any, tail: tuple[int, ...], dtype: str, fn: Any) -> Any:
    (out,) = _la.batch_local(f"dlmg.linalg.{name}", x, lambda xp, a: (fn(xp, a),), [(tail, dtype)])
    return out


def _square(name: str, x: Any) -> Any:
    """``x`` (square matrices, else a ``ValueError``) with bool and integer matrices cast to the
    default floating dtype of their framework (see ``_floating``)."""
    _matrices(name, x, square=True)
    return _floating(x)


_INEXACT = frozenset({"float16", "bfloat16", "float32", "float64", "complex64", "complex128"})


def det(x: Any, /) -> Any:
    """The determinants: batch-local for whole matrices in every fragment; for one split matrix
    from a blocked LU with partial pivoting on its grid (``dlmg.ops.linalg.slogdet_grid``);
    per batch entry for stacked split matrices. Bool and integer matrices are cast first (see the
    module); matrices that hold no elements have determinant 1, as in NumPy."""
    x = _square("det", _operand("det", x))
    if x.size == 0:
        return _made(x, x.shape[:-2], x.dtype, 1)
    if _stacked(x):
        return _per_matrix("det", lambda e: (det(e),), x)[0]
    if _local(x):
        return _batch_one("det", x, (), x.dtype, lambda xp, a: xp.linalg.det(a))
    sign, logabs = _la.slogdet_grid(x)
    # beyond the largest float the determinant is sign * inf, as NumPy's
    magnitude = math.exp(logabs) if logabs < math.log(finfo("float64").max) else math.inf
    return asarray(sign * magnitude if logabs != -math.inf else 0.0, dtype=x.dtype, device=x.device)


class SlogdetResult(NamedTuple):
    """``sign`` and ``logabsdet`` of :func:`slogdet`."""

    sign: Any
    logabsdet: Any


def slogdet(x: Any, /) -> SlogdetResult:
    """Sign and log-magnitude of the determinants: batch-local, or a blocked LU with partial
    pivoting for one split matrix (as :func:`det`), per batch entry for stacked split matrices;
    bool and integer matrices cast first, matrices that hold no elements sign 1 and log 0."""
    x = _square("slogdet", _operand("slogdet", x))
    real = _la.REAL_OF.get(x.dtype, x.dtype)
    if x.size == 0:
        return SlogdetResult(_made(x, x.shape[:-2], x.dtype, 1), _made(x, x.shape[:-2], real))
    if _stacked(x):
        return SlogdetResult(*_per_matrix("slogdet", lambda e: tuple(slogdet(e)), x))
    if _local(x):
        sign, logabs = _la.batch_local("dlmg.linalg.slogdet", x, lambda xp, a: tuple(xp.linalg.slogdet(a)),
                                       [((), x.dtype), ((), real)])
        return SlogdetResult(sign, logabs)
    sign, logabs = _la.slogdet_grid(x)
    return SlogdetResult(asarray(sign, dtype=x.dtype, device=x.device), asarray(logabs, dtype=real, device=x.device))


def inv(x: Any, /) -> Any:
    """The inverses: batch-local; for one split matrix blocked Gauss-Jordan elimination with
    partial pivoting on its grid (``dlmg.ops.linalg.inv_grid``), in its layout; split matrices
    stacked: per batch entry; bool and integer matrices cast first, zeros made on ``x``'s devices
    when ``x`` holds no elements."""
    x = _square("inv", _operand("inv", x))
    if x.size == 0:
        return _made(x, x.shape, x.dtype)
    if _stacked(x):
        return _per_matrix("inv", lambda e: (inv(e),), x)[0]
    if _local(x):
        return _batch_one("inv", x, x.shape[-2:], x.dtype, lambda xp, a: xp.linalg.inv(a))
    return _la.inv_grid(x)


def solve(x1: Any, x2: Any, /) -> Any:
    """The solutions of ``x1 @ X = x2``: batch-local when both hold whole matrices in every
    fragment with the same batch distribution; for one split square ``x1`` (and ``x2`` 1-D or
    2-D) blocked Gauss-Jordan elimination with partial pivoting on ``x1``'s grid
    (``dlmg.ops.linalg.solve_grid``), ``x2`` redistributed onto that grid first; stacked split
    ``x1``: per batch entry, ``x2`` of its batch shape or one vector (else a ``LayoutError``).

    Operands of two dtypes are cast fragment by fragment to the standard's promotion of them,
    bool and integer ones to the default floating dtype (see the module). A 1-D ``x2`` of
    ``M`` elements is one right-hand side for every matrix (the result has ``x1``'s shape less
    its last mode); other batch modes broadcast: whole matrices in every fragment by laying
    ``x2`` out as ``x1``'s batch, one split ``x1`` by taking the stacked right-hand sides as the
    columns of one. Operands that hold no elements give zeros made on ``x1``'s devices.
    """
    x1, x2 = _operand("solve", x1), _operand("solve", x2)
    _matrices("solve", x1, square=True)
    if x2.ndim == 0:
        raise ValueError(f"dlmg.linalg.solve needs x2 of 1 or more modes, got shape {x2.shape}")
    m = x1.shape[-1]
    vector = x2.ndim == 1
    if x2.shape[0 if vector else -2] != m:
        raise ValueError(f"dlmg.linalg.solve: x2 of shape {x2.shape} does not match x1 of shape {x1.shape} "
                         f"(its {'only' if vector else 'second-to-last'} mode must have {m} elements)")
    dtype = str(result_type(x1, x2))
    x1, x2 = _floating(x1, dtype), _floating(x2, dtype)
    if vector:
        shape = x1.shape[:-1]
    else:
        shape = (*result_shape(x1.shape[:-2], x2.shape[:-2]), m, x2.shape[-1])
    if x1.size == 0 or x2.size == 0:
        return _made(x1, shape, x1.dtype)
    if _stacked(x1):
        if not (x2.ndim == 1 or (x2.ndim == x1.ndim and x2.shape[:-2] == x1.shape[:-2])):
            raise LayoutError(
                f"dlmg.linalg.solve of stacked split matrices (x1 of shape {x1.shape}) takes x2 of the same batch "
                f"shape or one vector, got shape {x2.shape}: broadcast x2 to {x1.shape[:-1]} (+ columns) first"
            )
        return _per_matrix("solve", lambda e, r: (solve(e, r),), x1, x2)[0]
    if x1.ndim > 2 or _aligned(x1, x2):
        return _solve_batch(x1, x2, shape)
    if x2.ndim > 2:  # one matrix, stacked right-hand sides: the columns of one (M, B K) right-hand side
        nb = x2.ndim - 2
        columns = reshape(permute_dims(x2, (nb, *range(nb), nb + 1)), (m, math.prod(x2.shape[:-2]) * x2.shape[-1]))
        out = reshape(solve(x1, columns), (m, *x2.shape[:-2], x2.shape[-1]))
        return permute_dims(out, (*range(1, nb + 1), 0, nb + 1))
    rhs = x2 if x2.ndim == 2 else reshape(x2, (m, 1))
    want = _la.solve_layout(x1.layout, rhs.shape[1])
    if not rhs.layout.same_distribution(want):
        rhs = rhs.redistribute(want)
    out = _la.solve_grid(x1, rhs)
    return out if x2.ndim == 2 else reshape(out, (m,))


def _aligned(x1: Any, x2: Any) -> bool:
    """Whether ``x1`` and ``x2`` hold whole matrices in every fragment with the same batch
    distribution (each fragment solves its own systems)."""
    return (x2.ndim == x1.ndim and x1.shape[:-2] == x2.shape[:-2] and _local(x1) and _local(x2)
            and x1.layout.nfragments == x2.layout.nfragments
            and batch_key(x1.layout, x1.ndim - 2) == batch_key(x2.layout, x2.ndim - 2))


def _solve_batch(x1: Any, x2: Any, shape: tuple[int, ...]) -> Any:
    """``solve`` fragment by fragment for ``x1`` holding whole matrices in every fragment: ``x2``
    (a 1-D one as one column) broadcast to the batch of ``shape`` and laid out as ``x1``'s batch
    (``x1`` broadcast too where ``x2``'s batch modes are longer)."""
    vector = x2.ndim == 1
    rhs = reshape(x2, (x2.shape[0], 1)) if vector else x2
    batch = shape[:-1] if vector else shape[:-2]
    if x1.shape[:-2] != batch:
        x1 = broadcast_to(x1, (*batch, *x1.shape[-2:]))
        if not _local(x1):
            x1 = x1.redistribute(suggest_whole(x1.layout, (x1.ndim - 2, x1.ndim - 1)))
    if not _aligned(x1, rhs):
        if rhs.shape[:-2] != batch:
            rhs = broadcast_to(rhs, (*batch, *rhs.shape[-2:]))
        rhs = rhs.redistribute(_la.batch_local_layout(x1.layout, rhs.shape[-2:]))
    out = map_fragments(lambda xp, a, b: xp.linalg.solve(a, b), (x1, rhs), name="dlmg.linalg.solve",
                        out_layout=_la.batch_local_layout(x1.layout, rhs.shape[-2:]), check=False)
    return reshape(out, shape) if vector else out


class EighResult(NamedTuple):
    """``eigenvalues`` and ``eigenvectors`` of :func:`eigh`."""

    eigenvalues: Any
    eigenvectors: Any


#: the dtypes no framework's ``eigh`` takes (NumPy, torch and JAX refuse them)
_LOW_PRECISION = frozenset({"float16", "bfloat16"})


def _eigh_dtype(name: str, x: Any) -> None:
    """Refuse half-precision matrices before anything runs, as NumPy, torch and JAX do."""
    if x.dtype in _LOW_PRECISION:
        raise DtypeError(
            f"dlmg.linalg.{name} takes float32, float64, complex64 or complex128 matrices, got {x.dtype} "
            f"(NumPy's, torch's and JAX's {name} take no {x.dtype} either): compute in float32, "
            f"{name}(astype(x, 'float32')), and cast the result back with astype if needed"
        )


def eigh(x: Any, /) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices: batch-local when every
    fragment holds whole matrices; for one split matrix one-sided block Jacobi (Hestenes 1958)
    in Brent and Luk's parallel ordering (``dlmg.ops.jacobi.eigh_jacobi``), the eigenvectors in
    ``x``'s layout and the eigenvalues in slabs over its devices; stacked split matrices per batch
    entry. The split case reads both triangles (LAPACK reads one). float16 and bfloat16 are
    refused with a ``DtypeError`` before anything runs, as NumPy, torch and JAX refuse them;
    bool and integer matrices are cast first (see the module); matrices that hold no elements
    give zeros made on ``x``'s devices."""
    x = _operand("eigh", x)
    _eigh_dtype("eigh", x)
    x = _square("eigh", x)
    n, real = x.shape[-1], _la.REAL_OF.get(x.dtype, x.dtype)
    if x.size == 0:
        return EighResult(_made(x, x.shape[:-1], real), _made(x, x.shape, x.dtype))
    if _stacked(x):
        return EighResult(*_per_matrix("eigh", lambda e: tuple(eigh(e)), x))
    if _local(x):
        w, v = _la.batch_local("dlmg.linalg.eigh", x, lambda xp, a: tuple(xp.linalg.eigh(a)),
                               [((n,), real), ((n, n), x.dtype)])
        return EighResult(w, v)
    w, v = _jacobi.eigh_jacobi(x, float(matrix_norm(x)))
    return EighResult(w, v)


def eigvalsh(x: Any, /) -> Any:
    """Eigenvalues (ascending) of Hermitian matrices: batch-local, or one-sided block Jacobi for
    one split matrix (as :func:`eigh`, the eigenvectors not formed); stacked split matrices per
    batch entry; float16 and bfloat16 are refused, bool and integer matrices cast (as
    :func:`eigh`); zeros made on ``x``'s devices when ``x`` holds no elements."""
    x = _operand("eigvalsh", x)
    _eigh_dtype("eigvalsh", x)
    x = _square("eigvalsh", x)
    real = _la.REAL_OF.get(x.dtype, x.dtype)
    if x.size == 0:
        return _made(x, x.shape[:-1], real)
    if _stacked(x):
        return _per_matrix("eigvalsh", lambda e: (eigvalsh(e),), x)[0]
    if _local(x):
        return _batch_one("eigvalsh", x, (x.shape[-1],), real, lambda xp, a: xp.linalg.eigvalsh(a))
    return _jacobi.eigh_jacobi(x, float(matrix_norm(x)), vectors=False)[0]
