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
from .construct import empty, from_fragments, from_pointers, full, ones, scatter, zeros
from .plans import RedistributionPlan, plan_redistribution
from .movement import delegation, delegation_enabled
from .interop import (
    dcp_load, dcp_save, from_dtensor, from_jax, from_partitioned, layout_from_sharding, sharding_from_layout, to_dtensor, to_jax,
    to_sharding,
)
from .ops import *  # noqa: F403  (apply, elementwise functions, reductions, matmul, synchronize)
from . import linalg, ops as _ops
from .io import load, save, saved_layout
from . import _printing, _protocols  # noqa: F401  (repr and str of tensors; the frameworks' protocols)
from . import array_api  # the Array API namespace; provides the array object's methods
from .array_api import fft  # one FFT namespace: dlmg.fft is dlmg.array_api.fft
from .array_api import default_layout, get_default_layout, set_default_layout
from .array_api import nancumprod, nancumsum, nanmax, nanmean, nanmin, nanprod, nanstd, nansum, nanvar, pad
from .array_api._data_types import (  # noqa: A004  (the dtype objects, as in every array namespace)
    bool, complex64, complex128, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
)
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
    # making tensors
    "from_fragments", "from_pointers", "empty", "zeros", "ones", "full", "scatter",
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
    # operations (elementwise, reductions, matmul, apply, synchronize...)
    *(name for name in _ops.__all__ if name != "install"),
    # the Array API namespace and the layout of new tensors
    "array_api", "default_layout", "get_default_layout", "set_default_layout",
    # NumPy's NaN-ignoring reductions (np.nanmean(dt) runs them)
    "nansum", "nanprod", "nanmean", "nanmax", "nanmin", "nanvar", "nanstd", "nancumsum", "nancumprod",
    # NumPy's pad (np.pad(dt, ...) and xarray's rolling run it)
    "pad",
    # dtype objects ("bool" is left out of star-imports: it would hide the builtin)
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16", "float32",
    "float64", "complex64", "complex128",
]
