"""Operations on distributed tensors, fragment by fragment in each owner's framework.

* :mod:`.dispatch` -- the one execution path, framework hand-over and
  :func:`synchronize`;
* :mod:`.blockwise` -- :func:`map_fragments`: a user's function on each
  fragment (``apply`` is its deprecated name);
* :mod:`.pointwise` -- Python operators and the array API's elementwise
  functions;
* :mod:`.fused` -- :func:`fuse`: a user's elementwise function compiled per
  fragment by the owner's compiler (``jax.jit``, ``cupy.fuse``,
  ``torch.compile``);
* :mod:`.reductions` -- ``sum``, ``prod``, ``min``, ``max``, ``mean``,
  ``all``, ``any``, ``argmax``;
* :mod:`.linalg` and :mod:`.fft` -- batch-local ``matmul``, ``cholesky``
  and FFTs.

Importing this package attaches the operators and reduction methods to
:class:`~dlmg.DistributedTensor` (:func:`install`); it imports no framework.
"""

from __future__ import annotations

from typing import Any

from ..tensor import DistributedTensor
from . import blockwise, dispatch, fft, like, shape, statistics, fused, linalg, pointwise, reductions
from .blockwise import apply, map_fragments
from .dispatch import is_distributed, synchronize, synchronize_tensor
from .fused import FusedFunction, fuse
from .linalg import cholesky, matmul
from .pointwise import *  # noqa: F403  (the elementwise functions)
from .pointwise import __all__ as _pointwise_all
from .reductions import all, any, argmax, max, mean, min, prod, sum  # noqa: A004
from .like import allclose, around, empty_like, full_like, isclose, ones_like, round, zeros_like  # noqa: A004
from .shape import permute_dims, reshape, transpose
from .statistics import argmin, cumsum, std, var

__all__ = [
    "map_fragments",
    "apply",
    "fuse",
    "FusedFunction",
    "synchronize",
    "matmul",
    "cholesky",
    "sum",
    "prod",
    "min",
    "max",
    "mean",
    "all",
    "any",
    "argmax",
    "argmin",
    "var",
    "std",
    "cumsum",
    "permute_dims",
    "transpose",
    "reshape",
    "empty_like",
    "zeros_like",
    "ones_like",
    "full_like",
    "isclose",
    "allclose",
    "around",
    "install",
] + [n for n in _pointwise_all if n not in ("OPERATORS", "install")]


def _synchronize_method(self: Any) -> Any:
    """Wait until all queued work producing this tensor's local fragments is done; returns the tensor."""
    synchronize_tensor(self)
    return self


def _matmul_method(self: Any, other: Any) -> Any:
    if not is_distributed(other):
        return NotImplemented
    return matmul(self, other)


def _rmatmul_method(self: Any, other: Any) -> Any:
    if not is_distributed(other):
        return NotImplemented
    return matmul(other, self)


def install(cls: Any = None) -> None:  # type: ignore[no-redef]  # replaces pointwise.install
    """Attach operators, elementwise and reduction methods, ``@`` and
    ``synchronize`` to :class:`~dlmg.DistributedTensor` (or ``cls``)."""
    if cls is None:
        cls = DistributedTensor
    pointwise.install(cls)
    reductions.install(cls)
    statistics.install(cls)
    shape.install(cls)
    like.install(cls)
    cls.register_method("__matmul__", _matmul_method)
    cls.register_method("__rmatmul__", _rmatmul_method)
    cls.register_method("synchronize", _synchronize_method)


install()  # type: ignore[call-arg]
