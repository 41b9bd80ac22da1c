"""The contract checks of what every adapter must answer (:class:`dlmg.adapters.Adapter`)."""

from __future__ import annotations

from typing import Any

from dlmg.adapters import (
    PROTOCOL_QUESTIONS,
    AdapterCore,
    ProtocolHook,
    Traits,
    available,
    carries,
    holds_dtype,
    in_use,
    loose_traits,
)
from dlmg.adapters.capabilities import CompiledElementwise, exporter_of
from dlmg.device import Device
from dlmg.dtypes import NAMES, info
from dlmg.registry import BUILTIN_PROTOCOLS, adapter_for, adapter_names

from ._context import ContractContext, expected, is_capsule

__all__ = ["CORE_CHECKS"]


def check_identity(ctx: ContractContext) -> None:
    """name/modules/package are set, the facts are one :class:`~dlmg.adapters.Traits`
    record and none is stated beside it; ``owns`` recognises the adapter's arrays and
    nothing else."""
    a = ctx.adapter
    assert isinstance(a.name, str) and a.name, "adapter.name must be a non-empty string"
    assert isinstance(a.package, str) and a.package, "adapter.package must name the framework module"
    assert isinstance(a.install_hint, str), "adapter.install_hint must be a string"
    assert isinstance(a.traits, Traits), f"adapter.traits must be a dlmg.adapters.Traits, got {a.traits!r}"
    loose = loose_traits(a)
    assert not loose, f"{a.name} states {sorted(loose)} outside its traits record (declare traits = Traits(...))"
    core: object = a  # (the check below would narrow ``a`` to the protocol for what follows)
    assert isinstance(core, AdapterCore), f"{a.name} does not answer the required part of the contract (AdapterCore)"
    x = ctx.array((2, 3))
    assert a.owns(x), f"{a.name}.owns() does not recognise its own array {type(x)}"
    for other in (None, 1.5, [1, 2], "text", object()):
        assert not a.owns(other), f"{a.name}.owns({other!r}) must be False"
    assert available(a), f"available({a.name}) is False although arrays could be made"


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
    export = exporter_of(a, x)  # what a fragment keeps: called with whatever a consumer passes
    for kwargs in ({}, {"max_version": (1, 0)}, {"stream": None, "max_version": (1, 0)}):
        cap = export(**kwargs)
        assert is_capsule(cap), f"the kept export(**{kwargs}) gives {cap!r}, not a DLPack capsule"
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
        assert not a.traits.can_view, "an adapter with traits.can_view must support as_strided"
        ctx.notes.append(f"{a.name}: no strided views")
        return
    itemsize = info(a.dtype_of(x)).itemsize
    assert a.data_ptr(v) == a.data_ptr(x) + 7 * itemsize, "as_strided offset is not in elements"
    assert a.strides_of(v) == (1, 6), f"as_strided strides {a.strides_of(v)}"
    want = expected((4, 6), "float32").reshape(-1)
    want = np.lib.stride_tricks.as_strided(want[7:], (3, 2), (4, 24))
    assert np.array_equal(ctx.values(v), want), f"as_strided values {ctx.values(v)} != {want}"
    t = a.as_strided(x, (6, 4), (1, 6))
    assert a.data_ptr(t) == a.data_ptr(x), "as_strided without offset must start at the first element"


def check_copy_into(ctx: ContractContext) -> None:
    """copy_into writes through a view into the base array (``traits.can_view``), into
    a whole array (other mutable frameworks), else raises."""
    import numpy as np

    a = ctx.adapter
    dst = a.full((3, 4), 0, "float32", ctx.device)
    src = ctx.array((2, 4))
    traits = a.traits
    if traits.mutable and not traits.can_view:
        a.copy_into(dst, ctx.array((3, 4)))
        ctx.assert_values(dst, (3, 4), "float32", "copy_into a whole array")
        return
    if not traits.mutable:
        try:
            a.copy_into(dst, ctx.array((3, 4)))
        except (NotImplementedError, TypeError, ValueError):
            return
        raise AssertionError("copy_into of an immutable framework must raise")
    view = a.as_strided(dst, (2, 4), (4, 1), offset=4)
    a.copy_into(view, src)
    got = ctx.values(dst)
    want = np.zeros((3, 4), np.float32)
    want[1:] = expected((2, 4), "float32")
    assert np.array_equal(got, want), f"copy_into through a view gave\n{got}"


def check_namespace(ctx: ContractContext) -> None:
    """namespace() is an array-API namespace that works on the adapter's arrays."""
    xp = ctx.adapter.namespace()
    for name in ("asarray", "sum", "reshape", "astype", "matmul", "arange"):
        assert hasattr(xp, name), f"namespace has no {name}"
    x = ctx.array((3,))
    assert float(ctx.values(xp.sum(x))) == 3.0, "namespace sum of [0, 1, 2]"


def check_synchronize(ctx: ContractContext) -> None:
    """synchronize(device), synchronize() and synchronize_array return; in_use(adapter) after use."""
    a = ctx.adapter
    x = ctx.array((3,))
    a.synchronize(ctx.device)
    a.synchronize()
    a.synchronize_array(x)
    assert in_use(a), f"in_use({a.name}) is False although its arrays exist"


def check_readonly(ctx: ContractContext) -> None:
    """is_readonly is a bool; False exactly for new arrays of mutable frameworks (``traits.mutable``)."""
    a = ctx.adapter
    x = ctx.array((3,))
    ro = a.is_readonly(x)
    assert isinstance(ro, bool), "is_readonly must return a bool"
    assert ro == (not a.traits.mutable), f"is_readonly of a new array is {ro}, traits.mutable is {a.traits.mutable}"


def check_memory_sharing(ctx: ContractContext) -> None:
    """shares_memory tells an array, and views of it, from a copy (immutable frameworks:
    never); accumulate_dtype names a dtype for every exercised sum and product."""
    a = ctx.adapter
    x = ctx.array((4, 3))
    copy = a.from_dlpack(x, copy=True)
    assert a.shares_memory(x, copy) is False, "shares_memory of an array and its copy must be False"
    if a.traits.mutable:
        assert a.shares_memory(x, x) is True, "shares_memory of an array and itself must be True"
        if a.traits.can_view:
            view = a.as_strided(x, (3, 4), (1, 3))
            assert a.shares_memory(x, view), "shares_memory of an array and a view of it must be True"
    else:
        assert a.shares_memory(x, x) is False, "arrays nobody can write share nothing that matters"
    for dtype in ctx.dtypes:
        for op in ("sum", "prod"):
            acc = a.accumulate_dtype(dtype, op)
            assert acc in NAMES, f"accumulate_dtype({dtype!r}, {op!r}) gives {acc!r}, not a dlmg dtype"


def check_traits(ctx: ContractContext) -> None:
    """The traits are bools that agree with each other, with what the adapter does and
    with the capabilities it declares; dlpack_dtypes agrees with ``carries``."""
    a = ctx.adapter
    traits = a.traits
    assert isinstance(traits, Traits), f"adapter.traits must be a dlmg.adapters.Traits, got {traits!r}"
    for flag in ("mutable", "can_view", "stream_ordered", "orders_across_devices", "synchronizes_device",
                 "distinct_host_devices", "done_on_return", "host_only", "batches_elementwise", "batches_operators"):
        value = getattr(traits, flag)
        assert isinstance(value, bool), f"traits.{flag} must be a bool, got {value!r}"
    x = ctx.array((2,))
    if traits.host_only:  # wrapping then asks no array its device: device_of must always answer the host
        assert ctx.device.is_host and a.device_of(x) == Device("cpu", 0), (
            f"traits.host_only, but an array made on {ctx.device} lies on {a.device_of(x)}, not cpu:0"
        )
    assert traits.mutable or not traits.can_view, "traits.can_view needs mutable (views are written in place)"
    assert traits.stream_ordered or not traits.orders_across_devices, "traits.orders_across_devices needs stream_ordered"
    assert traits.batches_elementwise or not traits.batches_operators, "traits.batches_operators needs batches_elementwise"
    assert isinstance(a, CompiledElementwise) or not traits.batches_elementwise, (
        "traits.batches_elementwise needs the CompiledElementwise capability (a compiler to batch with)"
    )
    kinds = traits.dlpack_dtypes
    assert kinds is None or (isinstance(kinds, frozenset) and kinds <= set(NAMES)), (
        f"dlpack_dtypes must be None or a frozenset of dlmg dtype names, got {kinds!r}"
    )
    for dtype in ctx.dtypes:
        assert carries(a, dtype) == (kinds is None or dtype in kinds), f"carries({dtype!r}) disagrees with dlpack_dtypes"
        assert isinstance(holds_dtype(a, dtype), bool), "holds_dtype must return a bool"
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
    (what the array says);
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
    p = a.producer(x)
    assert hasattr(p, "__dlpack__"), "producer must give a DLPack producer"
    y = a.from_dlpack(p, copy=False)
    assert a.data_ptr(y) == a.data_ptr(x), "from_dlpack(producer(x), copy=False) moved the data"
    assert a.tracks_gradients([x]) is False, "tracks_gradients of a new array must be False"


def check_ascontiguous(ctx: ContractContext) -> None:
    """ascontiguous gives C strides and the same values (of a strided view where there are views)."""
    import numpy as np

    a = ctx.adapter
    x = ctx.array((4, 6))
    src, want = x, expected((4, 6), "float32")
    if a.traits.can_view:
        src = a.as_strided(x, (6, 4), (1, 6))
        want = want.T
    c = a.ascontiguous(src)
    assert a.strides_of(c) == (a.shape_of(c)[1], 1), f"ascontiguous strides {a.strides_of(c)}"
    assert np.array_equal(ctx.values(c), want), "ascontiguous changed the values"


def check_landing(ctx: ContractContext) -> None:
    """landing_device answers a device the adapter holds arrays on for its own devices;
    ``traits.protocols`` declares protocols the tensor carries, each asking a question dlmg answers."""
    a = ctx.adapter
    assert a.landing_device(ctx.device) == ctx.device, (
        f"landing_device({ctx.device}) must be {ctx.device} itself: the adapter supports it"
    )
    for other in (Device("cpu", 0), Device("cuda", 0)):
        got = a.landing_device(other)
        assert isinstance(got, Device), f"landing_device({other}) must return a Device, got {got!r}"
    protocols = a.traits.protocols
    assert isinstance(protocols, tuple), f"traits.protocols must be a tuple of ProtocolHook, got {protocols!r}"
    for hook in protocols:
        assert isinstance(hook, ProtocolHook), f"traits.protocols holds {hook!r}, not a ProtocolHook"
        assert hook.name in BUILTIN_PROTOCOLS, (
            f"protocol {hook.name!r} is no protocol DistributedTensor carries ({sorted(BUILTIN_PROTOCOLS)})"
        )
        assert hook.asks in PROTOCOL_QUESTIONS, f"{hook.name} asks {hook.asks!r}, not one of {sorted(PROTOCOL_QUESTIONS)}"


def check_index_assign(ctx: ContractContext) -> None:
    """index and assign mean NumPy's basic indexing, negative steps and new axes included;
    assign writes in place (``None`` returned) or, for immutable frameworks, returns the new array."""
    import numpy as np

    a = ctx.adapter
    x = ctx.array((4, 6))
    want = expected((4, 6), "float32")
    for key in [(slice(3, None, -2), slice(1, 5, 2), Ellipsis), (None, 2, slice(None, None, -1), Ellipsis),
                (slice(0, 0), slice(5, 0, -3), Ellipsis), (1, 4, Ellipsis)]:
        got = a.index(x, key)
        assert np.array_equal(ctx.values(got), want[key]), f"{a.name}.index(x, {key!r}) differs from NumPy's"
    value = ctx.array((2, 3))
    key = (slice(3, None, -2), slice(5, None, -2), Ellipsis)
    new = a.assign(x, key, value)
    assert (new is None) == a.traits.mutable, (
        f"{a.name}.assign must return None exactly when the framework is mutable (traits.mutable)"
    )
    written = want.copy()
    written[key] = expected((2, 3), "float32")
    assert np.array_equal(ctx.values(x if new is None else new), written), (
        f"{a.name}.assign(x, {key!r}, value) differs from NumPy's"
    )


#: The checks of what every adapter answers, by name, in the order they run.
CORE_CHECKS: dict[str, Any] = {
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
    "traits": check_traits,
    "native": check_native,
    "describe_all": check_describe_all,
    "ascontiguous": check_ascontiguous,
    "landing": check_landing,
    "index_assign": check_index_assign,
}
