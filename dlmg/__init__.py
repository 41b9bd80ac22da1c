"""dlmg: distributed tensors whose pieces are any framework's arrays.

A :class:`DistributedTensor` keeps one array as fragments on several devices;
each fragment is a plain PyTorch, CuPy, JAX or NumPy array, exchanged through
DLPack with no copy. Importing dlmg imports none of those frameworks.
"""

from __future__ import annotations

import sys

from . import dtypes, errors
from .device import Device, as_device
from .errors import *  # noqa: F403  (the exception hierarchy is public API)
from .layout import Layout, FragmentLayout
from .registry import adapter_for, framework_of, get_adapter
from .tensor import DistributedTensor, Fragment
from .construct import from_fragments, from_pointers, scatter
from .plans import RedistributionPlan, plan_redistribution
from .movement import delegation, delegation_enabled
from .interop import (
    dcp_load, dcp_save, from_dtensor, from_jax, from_partitioned, layout_from_sharding, sharding_from_layout, to_dtensor, to_jax,
    to_sharding,
)
from .ops import *  # noqa: F403  (dlmg's own operations: map_fragments, fuse, einsum, strict, synchronize...)
from . import ops as _ops
from .io import load, save, saved_layout
from . import _printing, _protocols  # noqa: F401  (repr and str of tensors; the frameworks' protocols)
from . import array_api  # the Array API namespace; provides the array object's methods
# One function namespace: every function of dlmg.array_api is dlmg's function of that name
# (dlmg.add is dlmg.array_api.add), its extensions keyword-only; dlmg.fft and dlmg.linalg
# are its extensions.
from .array_api import *  # noqa: F403
from .array_api import fft, linalg
from .array_api._elementwise import (  # NumPy's names of the standard's elementwise functions
    absolute, arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, around, conjugate, invert, left_shift,
    mod, power, right_shift, true_divide,
)
from .array_api._data_types import bool  # noqa: A004  (the dtype objects, as in every array namespace)
from .dtypes import canonical as _canonical

bfloat16 = _canonical("bfloat16")
float16 = _canonical("float16")

_protocols.install(sys.modules[__name__])  # NumPy's protocols run dlmg's public functions

__version__ = "0.1.0"

#: The public names: what ``from dlmg import *`` gives and what the API reference documents.
#: Modules whose names start with ``_`` (``dlmg.movement``, ``dlmg.ops._executor``...) are
#: internal, as are names not listed here.
__all__ = [
    # tensors, layouts, devices
    "DistributedTensor", "Fragment", "Layout", "FragmentLayout", "Device", "as_device",
    # making tensors (empty, zeros, ones, full: with the namespace's functions below)
    "from_fragments", "from_pointers", "scatter",
    # moving data
    "RedistributionPlan", "plan_redistribution", "delegation", "delegation_enabled",
    # frameworks
    "get_adapter", "adapter_for", "framework_of",
    # other frameworks' distributed arrays
    "from_jax", "to_jax", "layout_from_sharding", "sharding_from_layout", "to_sharding",
    "from_dtensor", "to_dtensor", "from_partitioned", "dcp_save", "dcp_load",
    # saving and loading
    "save", "load", "saved_layout",
    # submodules
    "dtypes", "errors", "fft", "interop", "linalg", "registry",
    # the exception hierarchy
    *errors.__all__,
    # dlmg's own operations (map_fragments, fuse, einsum, strict, explain, synchronize...)
    *_ops.__all__,
    # the Array API namespace: its functions (elementwise, reductions, creation, matmul...),
    # the layout of new tensors, NumPy's NaN-ignoring reductions and pad; dtype objects
    # ("bool" is left out of star-imports: it would hide the builtin)
    "array_api",
    *(name for name in array_api.__all__ if name not in ("__array_api_version__", "__array_namespace_info__", "bool",
                                                          "fft", "linalg", "e", "inf", "nan", "pi", "newaxis")),
    "float16", "bfloat16",
    # NumPy's names of the standard's elementwise functions (np.absolute(dt) runs them)
    *array_api._elementwise.NUMPY_NAMES,
]
