"""The contract checks of the capabilities an adapter declares (:mod:`dlmg.adapters.capabilities`).

Each check runs where the adapter declares its capability and passes otherwise;
:func:`check_declared` checks that a declared capability is implemented whole.
"""

from __future__ import annotations

import math
from typing import Any

from dlmg.adapters.capabilities import (
    CAPABILITIES, LIST_OPERATORS, BulkCopies, CompiledElementwise, Concat, Cut, Delegating, Delegation, ListOperators,
    QuickExport, QuickImport, Rearranging, Retiling, Slice, Span, concatenate, copy_pairs,
)
from dlmg.device import Device
from dlmg.layout import Layout
from dlmg.registry import get_adapter

from ._context import NUMPY_DLPACK, ContractContext, expected, host_values, is_capsule

__all__ = ["CAPABILITY_CHECKS", "importer_agrees"]


def check_declared(ctx: ContractContext) -> None:
    """Every capability the adapter declares is implemented: none of its methods is the
    interface's own (which raises ``NotImplementedError``)."""
    a = ctx.adapter
    for capability in CAPABILITIES:
        if not isinstance(a, capability):
            continue
        for name, member in vars(capability).items():
            if callable(member) and not name.startswith("_"):
                assert getattr(type(a), name) is not member, (
                    f"{a.name} declares {capability.__name__} but does not implement {name}"
                )


def check_bulk_copies(ctx: ContractContext) -> None:
    """BulkCopies (or, undeclared, the general way): copy_many writes each piece through
    its view, and concatenate_into writes pieces one after another along their first
    axis into a C-contiguous view: 1-D pieces, and 2-D strided ones (frameworks with views)."""
    import numpy as np

    a = ctx.adapter
    if not a.traits.can_view:  # nothing to copy into (check_as_strided notes it)
        return
    src = ctx.array((3, 4))
    want = expected((3, 4), "float32")
    dst = a.full((3, 4), 0, "float32", ctx.device)
    rows = [a.as_strided(dst, (4,), (1,), 8), a.as_strided(dst, (2, 2), (4, 1), 1)]
    copy_pairs(a, rows, [a.as_strided(src, (4,), (1,), 8), a.as_strided(src, (2, 2), (4, 1), 1)])
    written = np.zeros((3, 4), np.float32)
    written[2] = want[2]
    written[:2, 1:3] = want[:2, 1:3]
    assert np.array_equal(ctx.values(dst), written), f"copy_many gave\n{ctx.values(dst)}"
    dst = a.full((3, 4), 0, "float32", ctx.device)
    pieces = [a.as_strided(src, (5,), (1,), 0), a.as_strided(src, (6,), (1,), 5)]
    concatenate(a, a.as_strided(dst, (11,), (1,), 1), pieces)
    flat = np.zeros(12, np.float32)
    flat[1:] = want.reshape(-1)[:11]
    assert np.array_equal(ctx.values(dst).reshape(-1), flat), f"concatenate_into gave\n{ctx.values(dst)}"
    # 2-D strided pieces (columns of rows) stacked along their first axis into a 4 x 2 block
    dst = a.full((3, 4), 0, "float32", ctx.device)
    pieces = [a.as_strided(src, (3, 2), (4, 1), 1), a.as_strided(src, (1, 2), (4, 1), 8)]
    concatenate(a, a.as_strided(dst, (4, 2), (2, 1), 2), pieces)
    flat = np.zeros(12, np.float32)
    flat[2:10] = np.concatenate([want[:, 1:3], want[2:, :2]]).reshape(-1)
    assert np.array_equal(ctx.values(dst).reshape(-1), flat), f"concatenate_into of 2-D pieces gave\n{ctx.values(dst)}"


def check_rearranging(ctx: ContractContext) -> None:
    """Rearranging: assemble, split, compose, decompose and retile make the arrays asked
    for on the device asked for (``None`` means dlmg's copies do it instead)."""
    import numpy as np

    a = ctx.adapter
    if not isinstance(a, Rearranging):
        return
    first, second = ctx.array((3, 4)), ctx.array((2, 5))
    flat_first, flat_second = expected((3, 4), "float32").reshape(-1), expected((2, 5), "float32").reshape(-1)
    whole = a.assemble([Span(first, 2, 7), Span(second, 0, 5)], (3, 4), ctx.device)
    if whole is not None:
        assert a.shape_of(whole) == (3, 4) and a.device_of(whole) == ctx.device, "assemble: shape or device"
        want = np.concatenate([flat_first[2:9], flat_second[:5]]).reshape(3, 4)
        assert np.array_equal(ctx.values(whole), want), f"assemble gave\n{ctx.values(whole)}"
    parts = a.split(first, [Cut(0, 4, (2, 2)), Cut(4, 8, (8,)), Cut(12, 0, (0, 3))])
    if parts is not None:
        shapes = [a.shape_of(p) for p in parts]
        assert shapes == [(2, 2), (8,), (0, 3)], f"split gave shapes {shapes}"
        assert all(a.device_of(p) == ctx.device for p in parts), "split: device"
        assert np.array_equal(ctx.values(parts[0]), flat_first[:4].reshape(2, 2)), "split: first piece"
        assert np.array_equal(ctx.values(parts[1]), flat_first[4:12]), "split: second piece"
    # two (2, 3) arrays stacked, as (2, 2, 3) -> (2, 2, 3) transposed (1, 0, 2) -> (4, 3)
    blocks = [ctx.array((2, 3)), a.full((2, 3), 1, "float32", ctx.device)]
    whole = a.compose(blocks, (2, 2, 3), (1, 0, 2), (4, 3), ctx.device)
    one = expected((2, 3), "float32")
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
    left = Slice(0, (3, 4), (0, 1), (2, 2), (2, 2))
    right = Slice(1, (10,), (2,), (2,), (2, 1))
    targets = (Retiling((2, 3), Concat(1, (left, right))), Retiling((4,), Slice(1, (10,), (6,), (4,), (4,))))
    made = a.retile([first, second], targets, ctx.device)
    if made is not None:
        two_d = expected((3, 4), "float32")
        wants = [np.concatenate([two_d[0:2, 1:3], flat_second[2:4].reshape(2, 1)], axis=1), flat_second[6:10]]
        assert len(made) == 2, f"retile made {len(made)} arrays for 2 targets"
        for got, want in zip(made, wants):
            assert a.shape_of(got) == want.shape and a.device_of(got) == ctx.device, "retile: shape or device"
            assert np.array_equal(ctx.values(got), want), f"retile gave\n{ctx.values(got)}\nnot\n{want}"


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

    take_in = adapter.importer(source, dtype, source.shape_of(array)) if isinstance(adapter, QuickImport) else None
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


def check_quick_import(ctx: ContractContext) -> None:
    """QuickImport: importer, where the adapter offers one for NumPy arrays on the host,
    gives what from_dlpack gives (see :func:`importer_agrees`)."""
    a = ctx.adapter
    if not isinstance(a, QuickImport):
        return
    if ctx.device.kind != "cpu" or a.name == "numpy":
        ctx.notes.append(f"importer not checked: it is checked with NumPy arrays on the host, not on {ctx.device}")
        return
    source = get_adapter("numpy")
    for dtype in ctx.dtypes:
        if dtype in NUMPY_DLPACK:
            importer_agrees(a, source, expected((3, 4), dtype), dtype, ctx.device)



def check_quick_export(ctx: ContractContext) -> None:
    """QuickExport: the exporter a fragment keeps gives DLPack capsules for what consumers
    pass, sharing the array's memory."""
    import numpy as np

    a = ctx.adapter
    if not isinstance(a, QuickExport):
        return
    x = ctx.array((3, 4))
    export = a.exporter(x)
    for kwargs in ({}, {"max_version": (1, 0)}, {"stream": None, "max_version": (1, 0)}):
        cap = export(**kwargs)
        assert is_capsule(cap), f"exporter(x)(**{kwargs}) gives {cap!r}, not a DLPack capsule"
        del cap
    if a.device_of(x).is_host:
        class Producer:  # the kept export as a producer NumPy takes in
            def __dlpack__(self, **kwargs: Any) -> Any:
                return export(**kwargs)

            def __dlpack_device__(self) -> Any:
                return a.dlpack_device(x)

        got = np.from_dlpack(Producer())
        assert got.ctypes.data == a.data_ptr(x), "the kept export copied the array"
        assert np.array_equal(got, expected((3, 4), "float32")), "the kept export gave other values"


def check_carving(ctx: ContractContext) -> None:
    """BulkCopies: allocation_of a view carved out of a 1-D array names memory that holds
    the view (``None`` is allowed; a wrong answer reads the wrong memory)."""
    a = ctx.adapter
    if not isinstance(a, BulkCopies) or not a.traits.can_view:
        return
    whole = a.empty((24,), "float32", ctx.device)
    view = a.as_strided(whole, (2, 3), (3, 1), 5)
    found = a.allocation_of(view)
    if found is None:
        return
    base, offset = found
    itemsize = 4
    assert a.shape_of(base)[0] >= offset + 6 and len(a.shape_of(base)) == 1, (
        f"allocation_of gives a {a.shape_of(base)} array and offset {offset}, which cannot hold the view"
    )
    assert a.dtype_of(base) == "float32", f"allocation_of gives a {a.dtype_of(base)} array for a float32 view"
    assert a.data_ptr(base) + offset * itemsize == a.data_ptr(view), "allocation_of names another place in memory"


def check_list_operators(ctx: ContractContext) -> None:
    """ListOperators: every list operator gives what the operator gives pair by pair, for
    lists and for a Python scalar, and in place writes the left arrays."""
    import numpy as np

    a = ctx.adapter
    if not isinstance(a, ListOperators):
        return
    pairs = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.true_divide,
             "pow": np.power, "floor_divide": np.floor_divide, "remainder": np.remainder}
    shapes = ((3,), (2, 2))
    wants = [expected(shape, "float32") for shape in shapes]
    for name in LIST_OPERATORS:
        for in_place in (False, True):
            call = a.list_operator(name, in_place)
            if call is None:
                continue
            for other in ("list", "scalar"):
                xs = [a.from_dlpack(ctx.array(shape), copy=True) for shape in shapes]
                ys: Any = [a.full(shape, 2, "float32", ctx.device) for shape in shapes] if other == "list" else 2.0
                out = call(xs, ys)
                got = xs if in_place else out
                assert in_place or isinstance(out, (list, tuple)), f"list_operator({name!r}) returned {type(out)}"
                assert len(got) == len(shapes), f"list_operator({name!r}) gave {len(got)} arrays for {len(shapes)}"
                for result, want in zip(got, wants):
                    value = pairs[name](want, np.float32(2))
                    assert np.allclose(ctx.values(result), value), (
                        f"list_operator({name!r}, in_place={in_place}) with a {other} gave\n{ctx.values(result)}"
                    )


def check_compiled_elementwise(ctx: ContractContext) -> None:
    """CompiledElementwise: compile_elementwise gives a kernel and the compiler's name,
    and the kernel (run where ``ctx.run_compiled``) computes what the function computes;
    a kernel of a compiler that batches (``traits.batches_elementwise``) takes a list
    of arrays and gives the list of results."""
    import numpy as np

    a = ctx.adapter
    batches = a.traits.batches_elementwise
    if not isinstance(a, CompiledElementwise):
        return

    def twice_plus_one(xp: Any, v: Any) -> Any:
        return v * 2 + 1

    kernel, compiler = a.compile_elementwise(twice_plus_one, ctx.device)
    assert callable(kernel) and isinstance(compiler, str) and compiler, "compile_elementwise gives (kernel, name)"
    if ctx.run_compiled:
        got = ctx.values(kernel(ctx.array((2, 3))))
        assert np.array_equal(got, expected((2, 3), "float32") * 2 + 1), f"the compiled kernel gave\n{got}"
    if not batches:
        return

    def each_twice_plus_one(xp: Any, *vs: Any) -> list[Any]:
        return [v * 2 + 1 for v in vs]

    batch, compiler = a.compile_elementwise(each_twice_plus_one, ctx.device)
    assert callable(batch) and isinstance(compiler, str) and compiler, "compile_elementwise of a list gives (kernel, name)"
    if ctx.run_compiled:
        shapes = ((2, 3), (4,), (1, 2, 2))
        got = batch(*(ctx.array(shape) for shape in shapes))
        assert len(got) == len(shapes), f"traits.batches_elementwise, but a kernel over {len(shapes)} arrays gave {len(got)}"
        for shape, result in zip(shapes, got):
            value = ctx.values(result)
            assert np.array_equal(value, expected(shape, "float32") * 2 + 1), f"the batched kernel gave\n{value}"


def check_delegating(ctx: ContractContext) -> None:
    """Delegating: where the adapter takes a whole redistribution, it answers a
    :class:`Delegation` naming what runs, and ``run`` gives one array per target
    fragment, of its shape and device, with the values dlmg's plan would give; a
    move to the layout the arrays already have copies nothing (the same memory)."""
    import numpy as np

    a = ctx.adapter
    if not isinstance(a, Delegating):
        return
    d = ctx.device
    whole = expected((4, 6), "float32")
    cases = [  # (source, target, the source fragments' values)
        (Layout.single((4, 6), d), Layout.single((4, 6), d), [whole]),
        (Layout.slab((4, 6), 0, [d, d]), Layout.slab((4, 6), 1, [d, d]), [whole[:2], whole[2:]]),
    ]
    answered = 0
    for source, target, parts in cases:
        found = a.delegated_redistribution(source, target, "float32")
        if found is None:
            continue
        answered += 1
        assert isinstance(found, Delegation) and isinstance(found.call, str) and found.call, (
            f"delegated_redistribution gives {found!r}, not a Delegation naming what runs"
        )
        arrays = [a.from_dlpack(np.ascontiguousarray(p), device=d) for p in parts]
        made = found.run(arrays)
        if made is None:
            continue
        made = list(made)
        assert len(made) == target.nfragments, f"{found.call} gave {len(made)} arrays for {target.nfragments} fragments"
        for frag, array in zip(target.fragments, made):
            assert a.shape_of(array) == frag.shape and a.device_of(array) == frag.device, (
                f"{found.call}: fragment {frag.index} is {a.shape_of(array)} on {a.device_of(array)}, "
                f"not {frag.shape} on {frag.device}"
            )
            box = tuple(slice(r[0][0], r[-1][1]) for r in frag.ranges)
            assert np.array_equal(ctx.values(array), whole[box]), f"{found.call} gave other values for fragment {frag.index}"
        if source == target:
            assert a.data_ptr(made[0]) == a.data_ptr(arrays[0]), f"{found.call} copied a fragment that stays where it is"
    if not answered:
        ctx.notes.append(f"delegated_redistribution took none of the moves on {d}")


#: The checks of the capabilities, by name, in the order they run.
def check_delegated_einsum(ctx: ContractContext) -> None:
    """Delegating, einsum side: a pending result is never taken; where one fragment per
    operand on the context's device is taken, ``run`` gives the product's one fragment."""
    import numpy as np

    a = ctx.adapter
    if not isinstance(a, Delegating):
        return
    d = ctx.device
    la, lb, lc = (Layout.single(shape, d) for shape in ((2, 3), (3, 4), (2, 4)))
    pending = Layout((2, 4), devices=(d, d), partial="sum")
    assert a.delegated_einsum("ab,bc->ac", (la, lb), pending, "float32") is None, "a pending result was taken"
    found = a.delegated_einsum("ab,bc->ac", (la, lb), lc, "float32")
    if found is None:
        return
    assert isinstance(found, Delegation) and isinstance(found.call, str) and found.call, (
        f"delegated_einsum gives {found!r}, not a Delegation naming what runs"
    )
    made = found.run([ctx.array((2, 3)), ctx.array((3, 4))])
    if made is None:
        return
    made = list(made)
    assert len(made) == 1, f"{found.call} gave {len(made)} arrays for one fragment"
    want = expected((2, 3), "float32").astype(np.float64) @ expected((3, 4), "float32").astype(np.float64)
    assert np.allclose(ctx.values(made[0]), want), f"{found.call} gave\n{ctx.values(made[0])}"


CAPABILITY_CHECKS: dict[str, Any] = {
    "declared": check_declared,
    "copy_many": check_bulk_copies,
    "assemble": check_rearranging,
    "importer": check_quick_import,
    "quick_export": check_quick_export,
    "carving": check_carving,
    "list_operators": check_list_operators,
    "compiled_elementwise": check_compiled_elementwise,
    "delegating": check_delegating,
    "delegated_einsum": check_delegated_einsum,
}
