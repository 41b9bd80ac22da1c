"""The adapter contract: checks every dlmg adapter must pass.

A third-party adapter package runs the same suite as dlmg's own adapters,
either in one call::

    from dlmg.testing import check_adapter
    check_adapter(MyAdapter(), device=Device("cpu", 0))

or as pytest tests, one per check, by subclassing :class:`AdapterContract`::

    class TestMyAdapter(AdapterContract):
        adapter = MyAdapter()
        device = Device("cpu", 0)

Each check takes a :class:`ContractContext` and raises ``AssertionError``
naming what broke. The checks use only the adapter's own methods, plus NumPy
to compare values on the host; arrays with values are made through the
adapter's array-API namespace (``arange``/``reshape``/``astype``) unless a
``make_array`` is given.

This module imports no framework at import time (NumPy is imported inside the
checks).
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any, Callable

from dlmg.device import Device, as_device
from dlmg.dtypes import canonical, info
from dlmg.registry import adapter_for, adapter_names
from dlmg.dtypes import NAMES
from dlmg.registry import get_adapter

__all__ = [
    "AdapterContract",
    "CHECKS",
    "ContractContext",
    "DEFAULT_DTYPES",
    "check_adapter",
    "host_values",
    "is_capsule",
]

#: The element types the contract exercises by default.
DEFAULT_DTYPES: tuple[str, ...] = (
    "bool", "int8", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64", "complex64",
)
#: What ``numpy.from_dlpack`` takes (values are compared in NumPy on the host).
_NUMPY_DLPACK = frozenset(
    ["bool", "float16", "float32", "float64", "complex64", "complex128"]
    + [f"{k}int{b}" for k in ("", "u") for b in (8, 16, 32, 64)]
)


def is_capsule(obj: Any) -> bool:
    """Whether ``obj`` is a DLPack capsule (``"dltensor"`` or ``"dltensor_versioned"``)."""
    if type(obj).__name__ != "PyCapsule":
        return False
    import ctypes

    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype = ctypes.c_char_p
    get_name.argtypes = [ctypes.py_object]
    return get_name(obj) in (b"dltensor", b"dltensor_versioned")


def host_values(adapter: Any, array: Any) -> Any:
    """The values of ``array`` as a NumPy array (a copy where needed), for comparisons.

    bfloat16 and other types NumPy cannot take through DLPack are cast to
    float32 (through the adapter's namespace) first; arrays off the host go
    through ``adapter.to_device(array, cpu)``, ``array.get()`` or ``array.cpu()``.
    """
    import numpy as np

    if not hasattr(array, "__dlpack__"):  # a NumPy scalar from a reduction
        return np.array(array, copy=True)
    dtype = adapter.dtype_of(array)
    if dtype not in _NUMPY_DLPACK:
        xp = adapter.namespace()
        array = xp.astype(array, xp.float32)
    if not adapter.device_of(array).is_host:
        try:
            array = adapter.to_device(array, Device("cpu", 0))
        except Exception:
            for name in ("get", "cpu"):
                method = getattr(array, name, None)
                if method is not None:
                    array = method()
                    break
    return np.array(np.from_dlpack(array), copy=True)


def _expected(shape: tuple[int, ...], dtype: str) -> Any:
    import numpy as np

    n = math.prod(shape)
    values = np.arange(n, dtype=np.int64).reshape(shape)
    if dtype == "bool":
        return (values % 2).astype(bool)
    return (values % 100).astype(np.float32 if dtype not in _NUMPY_DLPACK else dtype)


def _default_make_array(adapter: Any, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
    """``arange(n) % 100`` (``% 2`` for bool) of ``shape`` and ``dtype`` on ``device``."""
    xp = adapter.namespace()
    n = math.prod(shape)
    base = xp.arange(n) % (2 if dtype == "bool" else 100)
    base = xp.reshape(base, tuple(shape))
    target = getattr(xp, dtype, None)
    if target is None:
        target = adapter.native_dtype(dtype)
    out = xp.astype(base, target)
    return adapter.to_device(out, device)


@dataclass
class ContractContext:
    """What a contract check gets.

    Attributes
    ----------
    adapter : Adapter
        The adapter under test.
    device : Device
        A device the adapter supports, where arrays are made.
    dtypes : tuple of str
        Element types to exercise (those the framework supports).
    make_array : callable
        ``make_array(adapter, shape, dtype, device)`` -> an array whose values
        equal ``arange(n) % 100`` (``% 2`` for bool) reshaped to ``shape``.
    to_numpy : callable
        ``to_numpy(adapter, array)`` -> a NumPy copy of the values.
    """

    adapter: Any
    device: Device
    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    make_array: Callable[..., Any] = _default_make_array
    to_numpy: Callable[..., Any] = host_values
    notes: list[str] = field(default_factory=list)

    def array(self, shape: tuple[int, ...], dtype: str = "float32") -> Any:
        """An array with known values (see :attr:`make_array`)."""
        return self.make_array(self.adapter, tuple(shape), dtype, self.device)

    def values(self, array: Any) -> Any:
        """NumPy copy of ``array``'s values."""
        return self.to_numpy(self.adapter, array)

    def assert_values(self, array: Any, shape: tuple[int, ...], dtype: str, what: str) -> None:
        """Assert ``array`` holds :func:`_expected` values of ``shape``/``dtype``."""
        import numpy as np

        got = self.values(array)
        want = _expected(tuple(shape), dtype)
        assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
        assert np.array_equal(got.astype(want.dtype), want), f"{what}: values differ:\n{got}\n!=\n{want}"


# -- the checks ---------------------------------------------------------------
def check_identity(ctx: ContractContext) -> None:
    """name/modules/package are set; ``owns`` recognises the adapter's arrays and nothing else."""
    a = ctx.adapter
    assert isinstance(a.name, str) and a.name, "adapter.name must be a non-empty string"
    assert isinstance(a.package, str) and a.package, "adapter.package must name the framework module"
    assert isinstance(a.install_hint, str), "adapter.install_hint must be a string"
    assert isinstance(a.mutable, bool), "adapter.mutable must be a bool"
    x = ctx.array((2, 3))
    assert a.owns(x), f"{a.name}.owns() does not recognise its own array {type(x)}"
    for other in (None, 1.5, [1, 2], "text", object()):
        assert not a.owns(other), f"{a.name}.owns({other!r}) must be False"
    assert a.available(), f"{a.name}.available() is False although arrays could be made"


def check_registry(ctx: ContractContext) -> None:
    """When the adapter is registered, ``adapter_for`` finds it for its arrays by type module."""
    a = ctx.adapter
    if a.name not in adapter_names():
        ctx.notes.append(f"{a.name} is not registered; registry lookup not checked")
        return
    x = ctx.array((2,))
    assert adapter_for(x).name == a.name, f"adapter_for() gives {adapter_for(x).name!r} for a {a.name} array"


def check_describe(ctx: ContractContext) -> None:
    """shape_of, dtype_of, device_of, strides_of (C order for new arrays), data_ptr."""
    a = ctx.adapter
    x = ctx.array((2, 3, 4))
    assert a.shape_of(x) == (2, 3, 4), f"shape_of gives {a.shape_of(x)}"
    assert a.dtype_of(x) == "float32", f"dtype_of gives {a.dtype_of(x)!r}, want 'float32'"
    dev = a.device_of(x)
    assert isinstance(dev, Device), f"device_of must return a dlmg Device, got {dev!r}"
    assert dev == ctx.device or (dev.kind == ctx.device.kind == "cpu"), f"device_of gives {dev}, made on {ctx.device}"
    assert a.strides_of(x) == (12, 4, 1), f"strides_of gives {a.strides_of(x)}, want element strides (12, 4, 1)"
    ptr = a.data_ptr(x)
    assert isinstance(ptr, int) and ptr != 0, f"data_ptr gives {ptr!r}"
    assert a.supports(ctx.device), f"supports({ctx.device}) is False although arrays were made there"
    ctx.assert_values(x, (2, 3, 4), "float32", "make_array")


def check_allocation(ctx: ContractContext) -> None:
    """empty and full give arrays of the right shape, dtype, device and values, for every dtype."""
    import numpy as np

    a = ctx.adapter
    for dtype in ctx.dtypes:
        e = a.empty((3, 2), dtype, ctx.device)
        assert a.shape_of(e) == (3, 2) and a.dtype_of(e) == dtype, f"empty((3,2), {dtype}) gives {a.shape_of(e)} {a.dtype_of(e)}"
        f = a.full((2, 5), 1, dtype, ctx.device)
        assert a.dtype_of(f) == dtype, f"full(..., {dtype}) gives dtype {a.dtype_of(f)}"
        d = a.device_of(f)
        assert d == ctx.device or (d.kind == ctx.device.kind == "cpu"), f"full on {ctx.device} lands on {d}"
        got = ctx.values(f)
        assert got.shape == (2, 5) and np.all(got == 1), f"full(..., 1, {dtype}) holds {got}"
    z = a.empty((0, 3), "float32", ctx.device)
    assert a.shape_of(z) == (0, 3), "empty of a zero-size shape"
    s = a.full((), 7, "int32", ctx.device)
    assert a.shape_of(s) == () and int(ctx.values(s)) == 7, "full of a 0-d shape"


def check_dlpack_roundtrip(ctx: ContractContext) -> None:
    """export, and the exporter a fragment keeps, give DLPack capsules; from_dlpack of its own
    array is zero-copy; copy=True copies."""
    a = ctx.adapter
    for dtype in ctx.dtypes:
        x = ctx.array((3, 4), dtype)
        try:
            cap = a.export(x)
        except TypeError as exc:  # a dtype the framework cannot export (NumPy bfloat16)
            assert "dlpack" in str(exc).lower() or dtype in str(exc), f"export of {dtype}: unclear error {exc}"
            continue
        assert is_capsule(cap), f"export of {dtype} gives {cap!r}, not a DLPack capsule"
        del cap
        y = a.from_dlpack(x, copy=False)
        assert a.data_ptr(y) == a.data_ptr(x), f"from_dlpack(copy=False) of its own {dtype} array moved the data"
        ctx.assert_values(y, (3, 4), dtype, f"from_dlpack {dtype}")
        z = a.from_dlpack(x, copy=True)
        assert a.data_ptr(z) != a.data_ptr(x), f"from_dlpack(copy=True) of a {dtype} array did not copy"
        ctx.assert_values(z, (3, 4), dtype, f"from_dlpack copy {dtype}")
    x = ctx.array((3, 4))
    export = a.exporter(x)  # what a fragment keeps: called with whatever a consumer passes
    for kwargs in ({}, {"max_version": (1, 0)}, {"stream": None, "max_version": (1, 0)}):
        cap = export(**kwargs)
        assert is_capsule(cap), f"exporter(x)(**{kwargs}) gives {cap!r}, not a DLPack capsule"
        del cap
    try:
        a.from_dlpack(ctx.array((2,)), copy="yes")
    except (ValueError, TypeError):
        pass
    else:
        raise AssertionError("from_dlpack(copy='yes') must raise ValueError")


def check_to_device(ctx: ContractContext) -> None:
    """to_device onto the array's own device gives the same memory."""
    a = ctx.adapter
    x = ctx.array((4,))
    y = a.to_device(x, a.device_of(x))
    assert a.data_ptr(y) == a.data_ptr(x), "to_device onto the same device copied"


def check_as_strided(ctx: ContractContext) -> None:
    """as_strided views the same memory with element strides and an element offset
    (or raises NotImplementedError for frameworks without views)."""
    import numpy as np

    a = ctx.adapter
    x = ctx.array((4, 6))
    try:
        v = a.as_strided(x, (3, 2), (1, 6), offset=7)
    except NotImplementedError:
        assert not a.can_view, "an adapter with can_view must support as_strided"
        ctx.notes.append(f"{a.name}: no strided views")
        return
    itemsize = info(a.dtype_of(x)).itemsize
    assert a.data_ptr(v) == a.data_ptr(x) + 7 * itemsize, "as_strided offset is not in elements"
    assert a.strides_of(v) == (1, 6), f"as_strided strides {a.strides_of(v)}"
    want = _expected((4, 6), "float32").reshape(-1)
    want = np.lib.stride_tricks.as_strided(want[7:], (3, 2), (4, 24))
    assert np.array_equal(ctx.values(v), want), f"as_strided values {ctx.values(v)} != {want}"
    t = a.as_strided(x, (6, 4), (1, 6))
    assert a.data_ptr(t) == a.data_ptr(x), "as_strided without offset must start at the first element"


def check_copy_into(ctx: ContractContext) -> None:
    """copy_into writes through a view into the base array (``can_view``), into
    a whole array (other mutable frameworks), else raises."""
    import numpy as np

    a = ctx.adapter
    dst = a.full((3, 4), 0, "float32", ctx.device)
    src = ctx.array((2, 4))
    if a.mutable and not a.can_view:
        a.copy_into(dst, ctx.array((3, 4)))
        ctx.assert_values(dst, (3, 4), "float32", "copy_into a whole array")
        return
    if not a.mutable:
        try:
            a.copy_into(dst, ctx.array((3, 4)))
        except (NotImplementedError, TypeError, ValueError):
            return
        raise AssertionError("copy_into of an immutable framework must raise")
    view = a.as_strided(dst, (2, 4), (4, 1), offset=4)
    a.copy_into(view, src)
    got = ctx.values(dst)
    want = np.zeros((3, 4), np.float32)
    want[1:] = _expected((2, 4), "float32")
    assert np.array_equal(got, want), f"copy_into through a view gave\n{got}"


def check_copy_many(ctx: ContractContext) -> None:
    """copy_many writes each piece through its view, and concatenate_into writes
    pieces one after another along their first axis into a C-contiguous view:
    1-D pieces, and 2-D strided ones (frameworks with views)."""
    import numpy as np

    a = ctx.adapter
    if not a.can_view:  # nothing to copy into (check_as_strided notes it)
        return
    src = ctx.array((3, 4))
    want = _expected((3, 4), "float32")
    dst = a.full((3, 4), 0, "float32", ctx.device)
    rows = [a.as_strided(dst, (4,), (1,), 8), a.as_strided(dst, (2, 2), (4, 1), 1)]
    a.copy_many(rows, [a.as_strided(src, (4,), (1,), 8), a.as_strided(src, (2, 2), (4, 1), 1)])
    expected = np.zeros((3, 4), np.float32)
    expected[2] = want[2]
    expected[:2, 1:3] = want[:2, 1:3]
    assert np.array_equal(ctx.values(dst), expected), f"copy_many gave\n{ctx.values(dst)}"
    dst = a.full((3, 4), 0, "float32", ctx.device)
    pieces = [a.as_strided(src, (5,), (1,), 0), a.as_strided(src, (6,), (1,), 5)]
    a.concatenate_into(a.as_strided(dst, (11,), (1,), 1), pieces)
    flat = np.zeros(12, np.float32)
    flat[1:] = want.reshape(-1)[:11]
    assert np.array_equal(ctx.values(dst).reshape(-1), flat), f"concatenate_into gave\n{ctx.values(dst)}"
    # 2-D strided pieces (columns of rows) stacked along their first axis into a 4 x 2 block
    dst = a.full((3, 4), 0, "float32", ctx.device)
    pieces = [a.as_strided(src, (3, 2), (4, 1), 1), a.as_strided(src, (1, 2), (4, 1), 8)]
    a.concatenate_into(a.as_strided(dst, (4, 2), (2, 1), 2), pieces)
    flat = np.zeros(12, np.float32)
    flat[2:10] = np.concatenate([want[:, 1:3], want[2:, :2]]).reshape(-1)
    assert np.array_equal(ctx.values(dst).reshape(-1), flat), f"concatenate_into of 2-D pieces gave\n{ctx.values(dst)}"


def check_assemble(ctx: ContractContext) -> None:
    """assemble, split, compose, decompose and retile, where the framework offers them, make
    the arrays asked for on the device asked for (``None`` means dlmg's copies do it
    instead)."""
    import numpy as np

    a = ctx.adapter
    first, second = ctx.array((3, 4)), ctx.array((2, 5))
    flat_first, flat_second = _expected((3, 4), "float32").reshape(-1), _expected((2, 5), "float32").reshape(-1)
    whole = a.assemble([(first, 2, 7), (second, 0, 5)], (3, 4), ctx.device)
    if whole is not None:
        assert a.shape_of(whole) == (3, 4) and a.device_of(whole) == ctx.device, "assemble: shape or device"
        want = np.concatenate([flat_first[2:9], flat_second[:5]]).reshape(3, 4)
        assert np.array_equal(ctx.values(whole), want), f"assemble gave\n{ctx.values(whole)}"
    parts = a.split(first, [(0, 4, (2, 2)), (4, 8, (8,)), (12, 0, (0, 3))])
    if parts is not None:
        shapes = [a.shape_of(p) for p in parts]
        assert shapes == [(2, 2), (8,), (0, 3)], f"split gave shapes {shapes}"
        assert all(a.device_of(p) == ctx.device for p in parts), "split: device"
        assert np.array_equal(ctx.values(parts[0]), flat_first[:4].reshape(2, 2)), "split: first piece"
        assert np.array_equal(ctx.values(parts[1]), flat_first[4:12]), "split: second piece"
    # two (2, 3) arrays stacked, as (2, 2, 3) -> (2, 2, 3) transposed (1, 0, 2) -> (4, 3)
    blocks = [ctx.array((2, 3)), a.full((2, 3), 1, "float32", ctx.device)]
    whole = a.compose(blocks, (2, 2, 3), (1, 0, 2), (4, 3), ctx.device)
    one = _expected((2, 3), "float32")
    woven = np.stack([one, np.ones((2, 3), np.float32)]).transpose(1, 0, 2).reshape(4, 3)
    if whole is not None:
        assert a.shape_of(whole) == (4, 3) and a.device_of(whole) == ctx.device, "compose: shape or device"
        assert np.array_equal(ctx.values(whole), woven), f"compose gave\n{ctx.values(whole)}"
        back = a.decompose(whole, (2, 2, 3), (1, 0, 2), 2, (2, 3))
        assert back is not None, "decompose: refused what compose made"
        assert np.array_equal(ctx.values(back[0]), one) and np.array_equal(ctx.values(back[1]), np.ones((2, 3))), \
            "decompose did not undo compose"
    # retile: target 0 is, side by side, columns 1-2 of first (3 x 4) rows 0-1 and row 1,
    # columns 3-4 of second (2 x 5) seen as 2 x 1 ... as (2, 2) beside (2, 1); target 1
    # is elements 6-9 of second, flat
    left = ("slice", 0, (3, 4), (0, 1), (2, 2), (2, 2))
    right = ("slice", 1, (10,), (2,), (2,), (2, 1))
    targets = (((2, 3), ("concat", 1, (left, right))), ((4,), ("slice", 1, (10,), (6,), (4,), (4,))))
    made = a.retile([first, second], targets, ctx.device)
    if made is not None:
        two_d = _expected((3, 4), "float32")
        wants = [np.concatenate([two_d[0:2, 1:3], flat_second[2:4].reshape(2, 1)], axis=1), flat_second[6:10]]
        assert len(made) == 2, f"retile made {len(made)} arrays for 2 targets"
        for got, want in zip(made, wants):
            assert a.shape_of(got) == want.shape and a.device_of(got) == ctx.device, "retile: shape or device"
            assert np.array_equal(ctx.values(got), want), f"retile gave\n{ctx.values(got)}\nnot\n{want}"


def check_namespace(ctx: ContractContext) -> None:
    """namespace() is an array-API namespace that works on the adapter's arrays."""
    xp = ctx.adapter.namespace()
    for name in ("asarray", "sum", "reshape", "astype", "matmul", "arange"):
        assert hasattr(xp, name), f"namespace has no {name}"
    x = ctx.array((3,))
    assert float(ctx.values(xp.sum(x))) == 3.0, "namespace sum of [0, 1, 2]"


def check_synchronize(ctx: ContractContext) -> None:
    """synchronize(device), synchronize() and synchronize_array return; in_use() after use."""
    a = ctx.adapter
    x = ctx.array((3,))
    a.synchronize(ctx.device)
    a.synchronize()
    a.synchronize_array(x)
    assert a.in_use(), f"{a.name}.in_use() is False although its arrays exist"


def check_readonly(ctx: ContractContext) -> None:
    """is_readonly is a bool; False for new arrays of mutable frameworks."""
    a = ctx.adapter
    x = ctx.array((3,))
    ro = a.is_readonly(x)
    assert isinstance(ro, bool), "is_readonly must return a bool"
    assert ro == (not a.mutable), f"is_readonly of a new array is {ro}, mutable is {a.mutable}"


def check_memory_sharing(ctx: ContractContext) -> None:
    """shares_memory tells an array, and views of it, from a copy (immutable frameworks:
    never); accumulate_dtype names a dtype for every exercised sum and product."""
    a = ctx.adapter
    x = ctx.array((4, 3))
    copy = a.from_dlpack(x, copy=True)
    assert a.shares_memory(x, copy) is False, "shares_memory of an array and its copy must be False"
    if a.mutable:
        assert a.shares_memory(x, x) is True, "shares_memory of an array and itself must be True"
        if a.can_view:
            view = a.as_strided(x, (3, 4), (1, 3))
            assert a.shares_memory(x, view), "shares_memory of an array and a view of it must be True"
    else:
        assert a.shares_memory(x, x) is False, "arrays nobody can write share nothing that matters"
    for dtype in ctx.dtypes:
        for op in ("sum", "prod"):
            acc = a.accumulate_dtype(dtype, op)
            assert acc in NAMES, f"accumulate_dtype({dtype!r}, {op!r}) gives {acc!r}, not a dlmg dtype"


def check_capabilities(ctx: ContractContext) -> None:
    """The capability flags are bools that agree with each other and with dlpack_dtypes."""
    a = ctx.adapter
    flags = {
        "mutable": a.mutable,
        "can_view": a.can_view,
        "stream_ordered": a.stream_ordered,
        "orders_across_devices": a.orders_across_devices,
        "synchronizes_device": a.synchronizes_device,
        "distinct_host_devices": a.distinct_host_devices,
        "done_on_return": a.done_on_return,
    }
    for flag, value in flags.items():
        assert isinstance(value, bool), f"adapter.{flag} must be a bool, got {value!r}"
    assert a.mutable or not a.can_view, "can_view needs mutable (views are written in place)"
    assert a.stream_ordered or not a.orders_across_devices, "orders_across_devices needs stream_ordered"
    kinds = a.dlpack_dtypes
    assert kinds is None or (isinstance(kinds, frozenset) and kinds <= set(NAMES)), (
        f"dlpack_dtypes must be None or a frozenset of dlmg dtype names, got {kinds!r}"
    )
    for dtype in ctx.dtypes:
        assert a.carries(dtype) == (kinds is None or dtype in kinds), f"carries({dtype!r}) disagrees with dlpack_dtypes"
        assert isinstance(a.holds_dtype(dtype), bool), "holds_dtype must return a bool"
        a.check_dtype(dtype)  # the exercised dtypes are ones the framework holds
    assert a.from_scalar(object()) is None, "from_scalar of a foreign object must be None"


def check_native(ctx: ContractContext) -> None:
    """native_dtype names every exercised dtype; native_device/device_from_native agree;
    device_context is None or a factory of a context manager."""
    a = ctx.adapter
    xp = a.namespace()
    x = ctx.array((2,), "int32")
    for dtype in ctx.dtypes:
        y = xp.astype(x, a.native_dtype(dtype))
        assert a.dtype_of(y) == dtype, f"astype to native_dtype({dtype!r}) gives {a.dtype_of(y)!r}"
    native = a.native_device(ctx.device)
    if native is not None:
        back = a.device_from_native(native)
        assert back == ctx.device or (back is not None and back.is_host and ctx.device.is_host), (
            f"device_from_native(native_device({ctx.device})) gives {back}"
        )
    assert a.device_from_native(object()) is None, "device_from_native of a foreign object must be None"
    context = a.device_context(ctx.device)
    if context is not None:
        for _ in range(2):  # entered twice: the second time its device may be current already
            with context():
                z = a.full((2,), 1, "float32", ctx.device)
            assert a.shape_of(z) == (2,), "allocation inside device_context"
            assert a.device_of(z) == ctx.device, f"allocation inside device_context lands on {a.device_of(z)}"


def check_describe_all(ctx: ContractContext) -> None:
    """describe agrees with the single questions; dlpack_device is the memory's DLPack device
    (what the array says, and what dlpack_device_on declares for its device, if anything);
    producer hands over the same memory; tracks_gradients is False for new arrays."""
    a = ctx.adapter
    x = ctx.array((2, 3))
    d = a.describe(x)
    want = (a.device_of(x), a.dtype_of(x), a.shape_of(x), a.strides_of(x), a.data_ptr(x), a.is_readonly(x))
    assert (d.device, d.dtype, d.shape, d.strides, d.ptr, d.readonly) == want, f"describe gives {d}, want {want}"
    pair = a.dlpack_device(x)
    assert isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(v, int) for v in pair), (
        f"dlpack_device must be a pair of ints, got {pair!r}"
    )
    own = getattr(x, "__dlpack_device__", None)
    if own is not None:  # what the array itself says, asked each time
        assert pair == tuple(int(v) for v in own()), f"dlpack_device {pair} is not the array's {own()}"
        assert a.dlpack_device(x) == pair, "dlpack_device answers differently when asked again"
    here = Device.from_dlpack(*pair)
    assert here == d.device or (here.is_host and d.device.is_host), f"dlpack_device {pair} is not {d.device}"
    declared = a.dlpack_device_on(d.device)
    assert declared is None or declared == pair, (
        f"dlpack_device_on({d.device}) declares {declared!r}, but the array reports {pair}"
    )
    p = a.producer(x)
    assert hasattr(p, "__dlpack__"), "producer must give a DLPack producer"
    y = a.from_dlpack(p, copy=False)
    assert a.data_ptr(y) == a.data_ptr(x), "from_dlpack(producer(x), copy=False) moved the data"
    assert a.tracks_gradients(x) is False, "tracks_gradients of a new array must be False"


def check_ascontiguous(ctx: ContractContext) -> None:
    """ascontiguous gives C strides and the same values (of a strided view where there are views)."""
    import numpy as np

    a = ctx.adapter
    x = ctx.array((4, 6))
    src, want = x, _expected((4, 6), "float32")
    if a.can_view:
        src = a.as_strided(x, (6, 4), (1, 6))
        want = want.T
    c = a.ascontiguous(src)
    assert a.strides_of(c) == (a.shape_of(c)[1], 1), f"ascontiguous strides {a.strides_of(c)}"
    assert np.array_equal(ctx.values(c), want), "ascontiguous changed the values"


#: Every contract check by name, in the order they run.
def check_landing(ctx: ContractContext) -> None:
    """landing_device answers a device the adapter holds arrays on for its own devices;
    tensor_protocols maps dunder names to callables."""
    a = ctx.adapter
    assert a.landing_device(ctx.device) == ctx.device, (
        f"landing_device({ctx.device}) must be {ctx.device} itself: the adapter supports it"
    )
    for other in (Device("cpu", 0), Device("cuda", 0)):
        got = a.landing_device(other)
        assert isinstance(got, Device), f"landing_device({other}) must return a Device, got {got!r}"
    protocols = a.tensor_protocols
    assert isinstance(protocols, dict), f"tensor_protocols must be a dict, got {protocols!r}"
    for name, method in protocols.items():
        assert name.startswith("__") and name.endswith("__"), f"tensor_protocols key {name!r} is no protocol name"
        assert callable(method) or isinstance(method, (classmethod, staticmethod)), f"{name} is not callable"


def importer_agrees(adapter: Any, source: Any, array: Any, dtype: str, device: Device) -> str:
    """Check that ``adapter.importer(source, dtype, shape)`` gives, for ``array`` on
    ``device``, what ``adapter.from_dlpack(array, device=device)`` gives.

    Where the importer answers: the same dtype and shape, the same values, and
    zero-copy exactly where ``from_dlpack`` is. Where ``from_dlpack`` refuses, the
    importer must decline (``None``) or raise, so that ``to()`` reaches the clear
    error. Returns what happened: ``"agrees"``, ``"declined"`` (no importer, or
    it returned ``None`` or raised) or ``"refused"`` (``from_dlpack`` refused).

    Raises
    ------
    AssertionError
        Where the two disagree.
    """
    import numpy as np

    take_in = adapter.importer(source, dtype, source.shape_of(array))
    try:
        expected = adapter.from_dlpack(array, device=device)
    except Exception:  # a refusal of the full import: the importer must not take it either
        if take_in is not None:
            try:
                got = take_in(array, device)
            except Exception:
                return "refused"
            assert got is None, f"importer took in a {dtype} array that from_dlpack refuses"
        return "refused"
    if take_in is None:
        return "declined"
    try:
        got = take_in(array, device)
    except Exception:  # the consumer's own refusal: to() then asks from_dlpack
        return "declined"
    if got is None:
        return "declined"
    adapter.synchronize_array(got)
    assert adapter.dtype_of(got) == adapter.dtype_of(expected) == dtype, (
        f"importer gives {adapter.dtype_of(got)}, from_dlpack {adapter.dtype_of(expected)}, for {dtype}"
    )
    assert adapter.shape_of(got) == adapter.shape_of(expected), (
        f"importer gives shape {adapter.shape_of(got)}, from_dlpack {adapter.shape_of(expected)}"
    )
    assert adapter.device_of(got) == adapter.device_of(expected), "importer and from_dlpack differ on the device"
    if math.prod(adapter.shape_of(got)):  # zero-size arrays may carry any pointer
        ptr = source.data_ptr(array)
        assert (adapter.data_ptr(got) == ptr) == (adapter.data_ptr(expected) == ptr), (
            f"importer and from_dlpack differ on copying a {dtype} array"
        )
    assert np.array_equal(host_values(adapter, got), host_values(adapter, expected)), "importer gave other values"
    return "agrees"


def check_importer(ctx: ContractContext) -> None:
    """importer, where the adapter offers one for NumPy arrays on the host, gives what
    from_dlpack gives (see :func:`importer_agrees`)."""
    a = ctx.adapter
    if ctx.device.kind != "cpu" or a.name == "numpy":
        ctx.notes.append(f"importer not checked: it is checked with NumPy arrays on the host, not on {ctx.device}")
        return
    source = get_adapter("numpy")
    for dtype in ctx.dtypes:
        if dtype in _NUMPY_DLPACK:
            importer_agrees(a, source, _expected((3, 4), dtype), dtype, ctx.device)


CHECKS: dict[str, Callable[[ContractContext], None]] = {
    "identity": check_identity,
    "registry": check_registry,
    "describe": check_describe,
    "allocation": check_allocation,
    "dlpack_roundtrip": check_dlpack_roundtrip,
    "to_device": check_to_device,
    "as_strided": check_as_strided,
    "copy_into": check_copy_into,
    "namespace": check_namespace,
    "synchronize": check_synchronize,
    "readonly": check_readonly,
    "memory_sharing": check_memory_sharing,
    "capabilities": check_capabilities,
    "native": check_native,
    "describe_all": check_describe_all,
    "ascontiguous": check_ascontiguous,
    "copy_many": check_copy_many,
    "assemble": check_assemble,
    "landing": check_landing,
    "importer": check_importer,
}


def check_adapter(
    adapter: Any,
    make_array: Callable[..., Any] | None = None,
    *,
    device: Any = "cpu",
    dtypes: tuple[str, ...] | None = None,
    to_numpy: Callable[..., Any] | None = None,
    skip: tuple[str, ...] = (),
) -> list[str]:
    """Run every contract check on ``adapter``.

    Parameters
    ----------
    adapter : Adapter or str
        The adapter (or a registered framework name).
    make_array : callable, optional
        ``make_array(adapter, shape, dtype, device)``; defaults to one built on
        the adapter's namespace.
    device : Device or str
        Where to make arrays.
    dtypes : tuple of str, optional
        Element types to exercise (default :data:`DEFAULT_DTYPES`).
    to_numpy : callable, optional
        ``to_numpy(adapter, array)``; default :func:`host_values`.
    skip : tuple of str
        Names of checks (keys of :data:`CHECKS`) to leave out.

    Returns
    -------
    list of str
        Notes from the checks (what was not applicable).

    Raises
    ------
    AssertionError
        At the first failing check, prefixed with its name.
    """
    ctx = ContractContext(
        adapter=get_adapter(adapter),
        device=as_device(device),
        dtypes=tuple(canonical(d) for d in dtypes) if dtypes else DEFAULT_DTYPES,
        make_array=make_array or _default_make_array,
        to_numpy=to_numpy or host_values,
    )
    for name, check in CHECKS.items():
        if name in skip:
            continue
        try:
            check(ctx)
        except AssertionError as exc:
            raise AssertionError(f"adapter contract check {name!r} failed for {ctx.adapter.name!r}: {exc}") from exc
    return ctx.notes


class AdapterContract:
    """pytest base class: one test per contract check.

    Subclass it as ``Test...`` and set :attr:`adapter` (an instance or a
    registered name) and :attr:`device`; optionally :attr:`dtypes`,
    :meth:`make_array` and :meth:`to_numpy`.
    """

    adapter: Any = None
    device: Any = "cpu"
    dtypes: tuple[str, ...] = DEFAULT_DTYPES

    def make_array(self, adapter: Any, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """Override to make arrays another way (default: through the namespace)."""
        return _default_make_array(adapter, shape, dtype, device)

    def to_numpy(self, adapter: Any, array: Any) -> Any:
        """Override to read values another way (default :func:`host_values`)."""
        return host_values(adapter, array)

    def contract_context(self) -> ContractContext:
        """The context the checks run with."""
        return ContractContext(
            adapter=get_adapter(self.adapter),
            device=as_device(self.device),
            dtypes=tuple(self.dtypes),
            make_array=self.make_array,
            to_numpy=self.to_numpy,
        )


def _make_test(name: str) -> Callable[[AdapterContract], None]:
    def test(self: AdapterContract) -> None:
        CHECKS[name](self.contract_context())

    test.__name__ = f"test_{name}"
    test.__doc__ = CHECKS[name].__doc__
    return test


for _name in CHECKS:
    setattr(AdapterContract, f"test_{_name}", _make_test(_name))
del _name
