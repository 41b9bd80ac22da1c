"""The array API's creation functions, laid out by the default layout policy.

Every function takes the standard's arguments (a shape, ``dtype=``,
``device=``) and lays the new tensor out as :func:`~dlmg.default_layout`
says. ``device=`` overrides the policy's devices: a :class:`~dlmg.Device`
(or ``"cpu:1"``) gives one fragment there, a tensor's ``.device`` of several
devices (a :class:`~dlmg.device.Placement`) one piece per device along mode 0.

Values that are computed (``arange``, ``linspace``, ``eye``, Python lists)
are made on the host with NumPy and scattered into the layout (a copy into
each fragment's framework and device); constant fills are allocated in place.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

from ..construct import empty as _empty, from_fragments, full as _full, scatter
from ..device import Placement, as_device
from ..distributed import state as process_state
from ..dtypes import canonical
from ..errors import CopyRequiredError, DtypeError
from ..layout import Layout
from ..ops._operands import is_distributed
from ..ops.dispatch import new_tensor
from ..ops.like import empty_like as _empty_like, full_like as _full_like
from ..ops.pointwise import astype as _astype
from ..registry import adapter_for
from ._policy import get_default_layout, layout_for

__all__ = [
    "asarray", "arange", "linspace", "zeros", "ones", "empty", "full", "eye", "zeros_like", "ones_like",
    "empty_like", "full_like", "meshgrid", "tril", "triu", "from_dlpack", "layout_of", "default_float",
    "default_int", "from_host",
]


def default_float(framework: str | None = None) -> str:
    """The default real floating dtype of new tensors: float64, or float32 for JAX without x64."""
    if (framework or get_default_layout().framework) == "jax" and not _jax_x64():
        return "float32"
    return "float64"


def default_int(framework: str | None = None) -> str:
    """The default integer dtype of new tensors: int64, or int32 for JAX without x64."""
    return "int32" if default_float(framework) == "float32" else "int64"


def _jax_x64() -> bool:
    import jax

    return bool(jax.config.read("jax_enable_x64"))


def _shape(shape: Any) -> tuple[int, ...]:
    if isinstance(shape, (tuple, list)):
        return tuple(operator.index(n) for n in shape)
    return (operator.index(shape),)


def layout_of(shape: Sequence[int], device: Any = None) -> Layout:
    """The layout of a new tensor of ``shape``: the policy's, or one ``device=`` asks for."""
    shape = tuple(shape)
    if device is None:
        return layout_for(shape)
    if isinstance(device, Placement):
        if len(device.devices) == 1:
            return Layout.single(shape, device.devices[0], ranks=device.ranks[:1] or None)
        if not shape:  # one value: a copy on every device, so it is on all of them
            return Layout.replicated(shape, device.devices, ranks=device.ranks or None)
        return Layout.slab(shape, 0, device.devices, ranks=device.ranks or None)
    return Layout.single(shape, as_device(device))


def _framework() -> str:
    return get_default_layout().framework


def from_host(host: Any, device: Any = None, framework: str | None = None) -> Any:
    """A NumPy array spread into the policy's layout of its shape (a copy)."""
    layout = layout_of(host.shape, device)
    return spread_host_array(host, layout, framework or _framework())


def spread_host_array(array: Any, layout: Layout, framework: str) -> Any:
    """``array`` (the same on every process: creation is deterministic) scattered into ``layout``:
    across processes rank 0's copy is the one spread."""
    if process_state.current() is not None and process_state.world_size() > 1:
        return scatter(array if process_state.rank() == 0 else None, layout, framework=framework, root=0)
    return scatter(array, layout, framework=framework)


def _numpy_dtype(name: str) -> Any:
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, name))


def asarray(obj: Any, /, *, dtype: Any = None, device: Any = None, copy: bool | None = None) -> Any:
    """A distributed tensor of ``obj``: a tensor, an array of any framework, a Python
    scalar or nested sequence, or a DLPack producer.

    A tensor comes back as it is (``copy=True``: a copy; ``dtype``: converted).
    An array of a framework is wrapped without a copy when the policy lays the
    tensor out as one fragment on the array's device and no conversion is
    asked for; otherwise it is scattered (a copy), which ``copy=False`` refuses.
    """
    import numpy as np

    want = None if dtype is None else canonical(dtype)
    if is_distributed(obj):
        out = obj
        if want is not None and want != obj.dtype:
            if copy is False:
                raise CopyRequiredError(f"asarray: converting {obj.dtype} to {want} needs a copy (copy=False)")
            return _astype(obj, want)
        if device is not None and obj.device != device and layout_of(obj.shape, device) != obj.layout.dense:
            if copy is False:
                raise CopyRequiredError("asarray: moving the tensor to another device needs a copy (copy=False)")
            out = obj.redistribute(layout_of(obj.shape, device))  # may keep a fragment already in place
        if copy:
            return _astype(out, out.dtype, copy=True)
        return out
    if hasattr(obj, "__dlpack__") and hasattr(obj, "shape"):
        return _from_array(obj, want, device, copy)
    if copy is False:
        raise CopyRequiredError("asarray: a Python scalar or sequence is always copied (copy=False)")
    host = _host_from_python(_scalars_of(obj), want, np)
    return from_host(host, device)


def _scalars_of(obj: Any) -> Any:
    """Nested sequences with 0-d tensors in them (``[[a[i, j] for j ...] for i ...]``) as Python values."""
    if isinstance(obj, (list, tuple)):
        return [_scalars_of(o) for o in obj]
    if is_distributed(obj):
        if obj.ndim:
            raise TypeError(f"asarray: a sequence holds a tensor of shape {obj.shape}; stack tensors with xp.stack")
        return obj.item()
    return obj


def _host_from_python(obj: Any, want: str | None, np: Any) -> Any:
    if want is not None:
        return np.asarray(obj, dtype=_numpy_dtype(want))
    host = np.asarray(obj)
    if host.dtype.kind == "f" and host.dtype != np.float64:
        return host
    if host.dtype.kind in "iu" and not _all_python(obj, (int,)):
        return host
    if host.dtype.kind == "f":
        return host.astype(default_float())
    if host.dtype.kind in "iu":
        return host.astype(default_int())
    if host.dtype.kind == "c" and default_float() == "float32":
        return host.astype(np.complex64)
    if host.dtype.kind not in "biufc":
        raise DtypeError(f"asarray: {type(obj).__name__} of {host.dtype} is not an array of numbers")
    return host


def _all_python(obj: Any, types: tuple[type, ...]) -> bool:
    if isinstance(obj, (list, tuple)):
        return all(_all_python(o, types) for o in obj)
    return isinstance(obj, types)


def _from_array(array: Any, want: str | None, device: Any, copy: bool | None) -> Any:
    adapter = adapter_for(array)
    shape = tuple(array.shape)
    layout = layout_of(shape, device)
    name = adapter.dtype_of(array)
    same_place = layout.nfragments == 1 and layout.devices[0] == adapter.device_of(array)
    if same_place and not copy and (want is None or want == name):
        return from_fragments([array], layout)
    if copy is False:
        raise CopyRequiredError(
            f"asarray: laying a {adapter.name} array of shape {shape} out as {layout!r} needs a copy (copy=False)"
        )
    out = spread_host_array(array, layout, adapter.name)
    return out if want is None or want == name else _astype(out, want)


def _placed(name: str, shape: Any, device: Any, layout: Layout | None) -> Layout:
    """The layout of a new tensor of ``shape``: ``layout`` when given (dlmg's extension), else
    the one ``device`` asks for, else the policy's."""
    if isinstance(shape, Layout):
        raise TypeError(
            f"dlmg.{name} takes the shape first, as the array API says; pass a layout as the keyword: "
            f"dlmg.{name}(layout=layout)"
        )
    if layout is None:
        if shape is None:
            raise TypeError(f"dlmg.{name}: give the shape (or layout=)")
        return layout_of(_shape(shape), device)
    if not isinstance(layout, Layout):
        raise TypeError(f"dlmg.{name}: layout must be a dlmg.Layout, got {type(layout).__name__}")
    if device is not None:
        raise ValueError(f"dlmg.{name}: give device= or layout=, not both (a layout names its devices)")
    if shape is not None and tuple(layout.shape) != _shape(shape):
        raise ValueError(f"dlmg.{name}: shape {_shape(shape)} differs from the layout's shape {tuple(layout.shape)}")
    return layout


def zeros(shape: Any = None, *, dtype: Any = None, device: Any = None, layout: Layout | None = None,
          framework: str | None = None) -> Any:
    """Zeros of ``shape`` (the default float dtype: float64, float32 for JAX without x64).

    Parameters
    ----------
    shape : int or tuple of int
        The standard's argument; may be left out when ``layout`` is given.
    dtype : str or any framework's dtype, optional
    device : Device or str, optional
        One fragment on that device, or a slab over the devices of a tensor's
        ``.device`` (a :class:`~dlmg.device.Placement`); by default
        the layout policy's (:func:`dlmg.default_layout`).
    layout : Layout, optional
        dlmg's extension: exactly this layout (of ``shape``), instead of ``device``:
        ``dlmg.zeros(layout=dlmg.Layout.slab((8, 4), 0, ["cpu:0", "cpu:1"]))``.
    framework : str, optional
        dlmg's extension: the fragments' framework (``"numpy"``, ``"torch"``,
        ``"jax"``, ``"cupy"``); by default the policy's.

    Raises
    ------
    TypeError
        When a :class:`~dlmg.Layout` is passed as the shape (pass ``layout=``).
    """
    return _filled("zeros", shape, 0, dtype or default_float(framework), device, layout, framework)


def ones(shape: Any = None, *, dtype: Any = None, device: Any = None, layout: Layout | None = None,
         framework: str | None = None) -> Any:
    """Ones of ``shape`` (arguments as :func:`zeros`)."""
    return _filled("ones", shape, 1, dtype or default_float(framework), device, layout, framework)


def empty(shape: Any = None, *, dtype: Any = None, device: Any = None, layout: Layout | None = None,
          framework: str | None = None) -> Any:
    """An uninitialised tensor of ``shape`` (arguments as :func:`zeros`; JAX fragments are zeros)."""
    placed = _placed("empty", shape, device, layout)
    framework = framework or _framework()
    return _empty(placed, dtype or default_float(framework), framework=framework)


def full(shape: Any = None, fill_value: Any = None, *, dtype: Any = None, device: Any = None, layout: Layout | None = None,
         framework: str | None = None) -> Any:
    """``fill_value`` everywhere; the dtype follows ``fill_value`` (bool, int64, float64, complex128),
    other arguments as :func:`zeros` (``dlmg.full(layout=layout, fill_value=2.0)``).

    Raises
    ------
    TypeError
        When ``fill_value`` is ``None`` or not a number.
    DtypeRangeError
        When ``dtype`` cannot represent ``fill_value`` (``300`` for int8).
    """
    return _filled("full", shape, fill_value, dtype, device, layout, framework)


def _filled(name: str, shape: Any, fill_value: Any, dtype: Any, device: Any, layout: Layout | None,
            framework: str | None) -> Any:
    """:func:`full`'s work, errors naming the public function ``name``."""
    if is_distributed(fill_value):
        fill_value = fill_value.item()
    framework = framework or _framework()
    if dtype is None:
        if isinstance(fill_value, bool):
            dtype = "bool"
        elif isinstance(fill_value, int):
            dtype = default_int(framework)
        elif isinstance(fill_value, float):
            dtype = default_float(framework)
        elif isinstance(fill_value, complex):
            dtype = "complex64" if default_float(framework) == "float32" else "complex128"
    placed = _placed(name, shape, device, layout)
    if dtype is None:  # not a Python number: the allocation names what is wrong with it
        return _full(placed, fill_value, default_float(framework), framework=framework)
    dtype = canonical(dtype)
    if dtype.kind == "b" and fill_value is not None:
        fill_value = bool(fill_value)
    return _full(placed, fill_value, dtype, framework=framework)


def empty_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    """An uninitialised tensor of ``x``'s shape, dtype and layout."""
    if device is None:
        return _like(x, dtype, None)
    return empty(x.shape, dtype=dtype or x.dtype, device=device)


def zeros_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    """Zeros of ``x``'s shape, dtype and layout."""
    return full_like(x, 0, dtype=dtype, device=device)


def ones_like(x: Any, /, *, dtype: Any = None, device: Any = None) -> Any:
    """Ones of ``x``'s shape, dtype and layout."""
    return full_like(x, 1, dtype=dtype, device=device)


def full_like(x: Any, /, fill_value: Any, *, dtype: Any = None, device: Any = None) -> Any:
    """``fill_value`` in ``x``'s shape, dtype and layout."""
    name = canonical(dtype) if dtype is not None else x.dtype
    if name.kind == "b":
        fill_value = bool(fill_value)
    if device is None:
        return _like(x, name, fill_value)
    return full(x.shape, fill_value, dtype=name, device=device)


def _like(x: Any, dtype: Any, fill: Any) -> Any:
    return _empty_like(x, dtype=dtype) if fill is None else _full_like(x, fill, dtype=dtype)


def arange(start: Any, /, stop: Any = None, step: Any = 1, *, dtype: Any = None, device: Any = None) -> Any:
    """Evenly spaced values in ``[start, stop)`` (NumPy's rules for the count)."""
    import numpy as np

    if stop is None:
        start, stop = 0, start
    if dtype is None:
        dtype = default_int() if all(isinstance(v, int) for v in (start, stop, step)) else default_float()
    name = canonical(dtype)
    count = max(0, math.ceil((stop - start) / step))
    host = (np.arange(count, dtype=np.float64 if name.kind == "f" else None) * step + start).astype(
        _numpy_dtype(name))
    return from_host(host, device)


def linspace(start: Any, stop: Any, /, num: int, *, dtype: Any = None, device: Any = None,
             endpoint: bool = True) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop``."""
    import numpy as np

    if dtype is None:
        complex_ = any(isinstance(v, complex) for v in (start, stop))
        dtype = ("complex64" if default_float() == "float32" else "complex128") if complex_ else default_float()
    name = canonical(dtype)
    host = np.linspace(start, stop, num, endpoint=endpoint, dtype=_numpy_dtype(name))
    return from_host(host, device)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None, device: Any = None) -> Any:
    """Ones on the ``k``-th diagonal, zeros elsewhere."""
    import numpy as np

    name = canonical(dtype or default_float())
    host = np.eye(n_rows, n_cols, k=k, dtype=_numpy_dtype(name))
    return from_host(host, device)


def meshgrid(*arrays: Any, indexing: str = "xy") -> list[Any]:
    """Coordinate tensors of the 1-D tensors ``arrays`` (``"xy"`` or ``"ij"`` indexing)."""
    import numpy as np

    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    hosts = [a.gather(framework="numpy") for a in arrays]
    device = arrays[0].device if arrays else None
    return [from_host(np.ascontiguousarray(g), device) for g in np.meshgrid(*hosts, indexing=indexing)]  # type: ignore[call-overload]


def _triangle(x: Any, k: int, lower: bool) -> Any:
    import numpy as np

    from array_api_compat import device as compat_device  # (dlmg imports without array-api-compat)

    k = operator.index(k)
    if x.ndim < 2:
        raise ValueError(f"{'tril' if lower else 'triu'} needs a tensor of at least 2 modes, got shape {x.shape}")
    layout = x.layout.dense
    arrays: list[Any] = []
    for frag in x.fragments:
        if not frag.is_local:
            arrays.append(None)
            continue
        geometry = layout.fragments[frag.index]
        rows, cols = geometry.owned_indices(x.ndim - 2), geometry.owned_indices(x.ndim - 1)
        offset = cols[None, :] - rows[:, None]
        keep = offset <= k if lower else offset >= k
        xp = frag.adapter.namespace()
        a = frag.array
        mask = xp.asarray(np.ascontiguousarray(keep), device=compat_device(a))
        arrays.append(xp.where(mask, a, xp.zeros_like(a)))
    return new_tensor(arrays, layout, x.dtype)


def tril(x: Any, /, *, k: int = 0) -> Any:
    """The lower triangle of the last two modes (above the ``k``-th diagonal set to zero)."""
    return _triangle(x, k, True)


def triu(x: Any, /, *, k: int = 0) -> Any:
    """The upper triangle of the last two modes (below the ``k``-th diagonal set to zero)."""
    return _triangle(x, k, False)


def from_dlpack(x: Any, /, *, device: Any = None, copy: bool | None = None) -> Any:
    """A tensor of one fragment from any DLPack producer, without a copy where possible."""
    if is_distributed(x):
        return asarray(x, device=device, copy=copy)
    if not hasattr(x, "__dlpack__"):
        raise TypeError(f"from_dlpack: {type(x).__name__} has no __dlpack__")
    return _from_array(x, None, device, copy)

