"""The Python Array API standard (2024.12) for distributed tensors.

``dt.__array_namespace__()`` returns this module, so code written against the
standard (``xp = array_namespace(x)``; ``xp.sum(x ** 2)``) runs on dlmg
tensors. How each group of functions runs:

* elementwise functions and reductions run fragment by fragment in each
  fragment's framework (:mod:`dlmg.ops`), with the standard's broadcasting;
* creation functions lay new tensors out by the default layout policy
  (:func:`dlmg.default_layout`);
* indexing, ``permute_dims``, ``reshape`` and ``broadcast_to`` give views where
  the fragments allow; ``expand_dims``, ``squeeze``, ``moveaxis``, ``unstack``,
  ``concat``, ``stack``, ``flip``, ``roll``, ``repeat`` and ``tile`` keep their
  operands distributed (:mod:`dlmg.ops.manipulation`);
* ``matmul``, ``tensordot``, ``vecdot`` and ``linalg.outer`` are dlmg's
  contractions (:mod:`dlmg.ops.contract`), over any layouts;
* the ``fft`` extension transforms distributed tensors where they lie, with
  all-to-all transposes for split modes (:mod:`dlmg.array_api.fft`);
* scans, sorting, ``searchsorted``, the ``unique_*`` functions and ``nonzero`` run
  dlmg's distributed algorithms (:mod:`dlmg.array_api._sorting`);
* the ``linalg`` extension runs dlmg's distributed algorithms (TSQR, blocked
  factorizations, Jacobi ``eigh``), batch-locally where every fragment holds
  whole matrices (:mod:`dlmg.array_api.linalg`).

No function collects distributed operands onto one fragment;
:func:`collect` and :func:`settle` (:mod:`dlmg.array_api._collect`) remain for
code that wants an operand whole on one device and a result laid out again.

``docs/array-api.md`` lists which functions take which path, the
conformance-suite command and result, and what is left out.
"""

from __future__ import annotations

import math

from . import _data_types, _elementwise
from ._collect import collect, settle
from ._creation import (
    arange, asarray, empty, empty_like, eye, from_dlpack, full, full_like, linspace, meshgrid, ones, ones_like,
    tril, triu, zeros, zeros_like,
)
from ._data_types import (
    bool, can_cast, complex64, complex128, finfo, float32, float64, iinfo, int8, int16, int32, int64, isdtype,
    result_type, uint8, uint16, uint32, uint64,
)
from ._elementwise import *  # noqa: F403  (the elementwise functions)
from ._indexing import take, take_along_axis
from ._info import __array_namespace_info__
from ._manipulation import (
    astype, broadcast_arrays, broadcast_to, concat, expand_dims, flip, matrix_transpose, moveaxis, permute_dims, repeat,
    reshape, roll, squeeze, stack, tile, unstack,
)
from ._products import matmul, tensordot, vecdot
from ._sorting import (
    argsort, cumulative_prod, cumulative_sum, diff, nonzero, searchsorted, sort, unique_all, unique_counts,
    unique_inverse, unique_values,
)
from ._policy import LayoutPolicy, default_layout, get_default_layout, layout_for, set_default_layout
from ._statistics import all, any, argmax, argmin, count_nonzero, max, mean, min, prod, std, sum, var

__array_api_version__ = "2024.12"

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None

from . import fft, linalg  # noqa: E402
from ._nan import (  # noqa: E402  (NumPy's NaN-ignoring functions, beyond the standard)
    nancumprod, nancumsum, nanmax, nanmean, nanmin, nanprod, nanstd, nansum, nanvar,
)
from ._pad import pad  # noqa: E402

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "e", "inf", "nan", "pi", "newaxis",
    "default_layout", "set_default_layout", "get_default_layout", "layout_for", "LayoutPolicy",
    "astype", "broadcast_arrays", "broadcast_to", "matmul", "matrix_transpose", "permute_dims", "reshape",
    "concat", "expand_dims", "flip", "moveaxis", "repeat", "roll", "squeeze", "stack", "tile", "unstack",
    "tensordot", "vecdot",
    "take", "take_along_axis",
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace", "meshgrid",
    "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
    "complex64", "complex128", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
    "all", "any", "argmax", "argmin", "count_nonzero", "max", "mean", "min", "prod", "std", "sum", "var",
    "fft", "linalg",
    "argsort", "cumulative_prod", "cumulative_sum", "diff", "nonzero", "searchsorted", "sort", "unique_all",
    "unique_counts", "unique_inverse", "unique_values",
    *_elementwise.__all__,
    # beyond the standard: what array libraries call on NumPy-like namespaces
    "nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd", "nancumsum", "nancumprod", "pad",
]
