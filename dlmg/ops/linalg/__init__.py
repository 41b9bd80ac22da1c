"""Linear algebra on distributed tensors: the batch-local maps, TSQR and what is built on it, and
the blocked factorizations on 2-D grids.

Three ways a matrix can be laid out, three ways to work on it:

* **whole matrices in every fragment** (the last two modes have grid 1; leading
  batch modes may be split any way): each fragment's framework factorises the
  matrices it holds, on its device, through its array-API namespace
  (:func:`batch_local`). Nothing moves.
* **tall-skinny, split along rows** (``m >= n``, only the row mode split, any
  blocks, several fragments per device, mixed frameworks): TSQR (Demmel,
  Grigori, Hoemmen and Langou 2012; Benson, Gleich and Demmel 2013; dask's
  ``array/linalg.py`` ``tsqr``), :func:`tsqr`. Each fragment's framework
  computes the QR of its rows, ``A_f = Q_f R_f``; the small ``n x n`` factors
  ``R_f`` are stacked into one ``(p n) x n`` matrix by a redistribution onto
  the first fragment's device (across processes through the engine), where one
  QR ``[R_1; ...; R_p] = Q_s R`` gives ``R``; the blocks of ``Q_s`` (with the
  small SVD or pseudo-inverse factors folded in) return to their fragments by
  a second redistribution and ``Q_f Q_s[f]`` is the fragment's part of ``Q``,
  in the input's layout. The tree has one level: what moves is ``p`` small
  factors each way, whose size does not grow with ``m``.
* **short-fat, split along columns** (``m < n``): the same on the transposed
  view, ``A^T = U' S V'^H`` giving ``A = (V'^H)^T S U'^T``.

Other layouts of a single matrix (both modes split, or the long mode whole and
the short one split) are redistributed first into slabs of the long mode over
the same devices; that is a move of the operand, never a gather.

The modules: :mod:`.matrices` (layouts of matrices, batch-local maps, stacked split
matrices, diagonals), :mod:`.tsqr` (TSQR, ``qr``, ``svd``, ``svdvals``, ``pinv``) and
:mod:`.grid` (Cholesky, LU and Gauss-Jordan on 2-D block-cyclic grids).
"""

from .grid import cholesky, cholesky_grid, inv_grid, slogdet_grid, solve_grid, solve_layout
from .matrices import (LOCAL, REAL_OF, TALL, WIDE, batch_local, batch_local_layout, batch_whole, diagonal,
                       identity_like, matrix_split, stack_entries)
from .tsqr import pinv, qr, qr_complete, qr_wide, svd, svd_complete, svdvals, tsqr

__all__ = [
    "cholesky", "batch_local", "matrix_split", "tsqr", "qr", "qr_wide", "svd", "svdvals", "pinv", "REAL_OF", "TALL",
    "WIDE", "LOCAL", "diagonal", "batch_local_layout", "cholesky_grid", "slogdet_grid", "solve_grid", "inv_grid",
    "solve_layout", "qr_complete", "svd_complete", "identity_like", "batch_whole", "stack_entries",
]
