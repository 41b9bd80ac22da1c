"""Every producer x consumer x dtype x view on the CPU, through dlmg's adapters.

Producers: NumPy, torch and JAX arrays, and dlmg's own
:class:`~dlmg.dlpack.DLPackExporter` over host memory. Consumers: the NumPy,
torch and JAX adapters' ``from_dlpack(x, copy=False)``.

Each cell either proves zero-copy -- the consumer's data pointer equals the
producer's AND the values are the expected ones -- or expects the specific
error of the :data:`RULES` table below (the same table as the "Framework
pairs" section of ``docs/dlpack.md``). No cell is skipped: a framework that is
not installed fails loudly here, as the matrix is the point of this file.

* Zero-size arrays may carry any data pointer, so there only shapes (and the
  empty values) are compared.
* A consumer of its own framework gets the very same array back (no DLPack
  round trip); such cells are zero-copy trivially and still checked.
* JAX has no views: its "transposed", "strided", "offset" and "flipped"
  producers are fresh compact arrays made by JAX's own slicing, which is what
  a JAX user hands over; they come through zero-copy.
* Host buffers are 64-byte aligned here (as torch and JAX allocate them), so
  the only unaligned cell is the "offset" view of small element types.
* Cells that touch JAX with a 64-bit type run twice, with ``jax_enable_x64``
  off and on.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

import pytest

np = pytest.importorskip("numpy")
torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")

from dlmg import get_adapter  # noqa: E402
from dlmg.errors import CopyRequiredError, DtypeError  # noqa: E402
from dlmg.testing import host_values, importer_agrees  # noqa: E402

try:
    from dlmg.dlpack import DLPackExporter
except ImportError:  # pragma: no cover - dlmg.dlpack is part of dlmg
    DLPackExporter = None

PRODUCERS = ("numpy", "torch", "jax", "exporter")
CONSUMERS = ("numpy", "torch", "jax")
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
)
WIDE = frozenset({"int64", "float64", "complex128"})  # (uint64 is not in the matrix)
KINDS = ("0-d", "zero-size", "contiguous", "transposed", "strided", "offset", "flipped")
ALIGN = 64


class Rule(NamedTuple):
    """An expected error: its class, a pattern its message matches, and why."""

    error: type
    match: str
    why: str


#: The documented errors, in the order the adapters check them.
RULES: dict[str, Rule] = {
    "jax-x64-producer": Rule(DtypeError, "jax_enable_x64", "JAX cannot hold 64-bit types with x64 off (dlmg refuses to narrow)"),
    "torch-no-negative-strides": Rule(ValueError, "step must be greater than zero", "torch cannot make a negative-stride view"),
    "numpy-bfloat16": Rule(DtypeError, "ml_dtypes", "NumPy cannot export or import bfloat16 through DLPack"),
    "jax-x64-consumer": Rule(DtypeError, "jax_enable_x64", "JAX would narrow a 64-bit type with x64 off"),
    "jax-non-compact": Rule(CopyRequiredError, "non-compact strides", "JAX imports only compact (dense or transposed) strides"),
    "jax-unaligned": Rule(CopyRequiredError, "64-byte aligned", "JAX copies host buffers not 64-byte aligned"),
    "torch-negative-strides": Rule(CopyRequiredError, "negative strides", "torch cannot represent negative strides"),
}


def expected_rule(producer: str, consumer: str, dtype: str, kind: str, x64: bool) -> str | None:
    """The name of the rule a cell must raise under, or None for a zero-copy cell."""
    wide_off = dtype in WIDE and not x64
    if producer == "jax" and wide_off:
        return "jax-x64-producer"
    if producer == "torch" and kind == "flipped":
        return "torch-no-negative-strides"
    if producer == consumer:
        return None
    if dtype == "bfloat16" and "numpy" in (producer, consumer):
        return "numpy-bfloat16"
    if consumer == "jax":
        if wide_off:
            return "jax-x64-consumer"
        if producer != "jax" and kind in ("strided", "flipped"):
            return "jax-non-compact"
        if producer != "jax" and kind == "offset" and (_ROW * _itemsize(dtype)) % ALIGN:
            return "jax-unaligned"
    if consumer == "torch" and kind == "flipped" and producer in ("numpy", "exporter"):
        return "torch-negative-strides"
    return None


# -- building the producers cheaply -------------------------------------------------
_ROW = 8  # elements per row of the 2-d bases; "offset" drops one row
_BASE_SHAPES = {
    "0-d": (), "zero-size": (0, 3), "contiguous": (2, 3, 4), "transposed": (2, 3, 4),
    "strided": (4, _ROW), "offset": (4, _ROW), "flipped": (4, _ROW),
}


def _itemsize(dtype: str) -> int:
    return 2 if dtype == "bfloat16" else np.dtype(dtype).itemsize


def _np_dtype(dtype: str) -> Any:
    return np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)


def reference(dtype: str, shape: tuple[int, ...]) -> Any:
    """Known values: bool alternate, ints/floats count (mod 100), complex have an imaginary part."""
    n = int(np.prod(shape))
    v = np.arange(n).reshape(shape) % 100
    if dtype == "bool":
        return (v % 2).astype(bool)
    if dtype.startswith("complex"):
        return (v - 1j * (v + 1)).astype(dtype)
    return v.astype(np.float32 if dtype == "bfloat16" else dtype)


def view(x: Any, kind: str, lib: str) -> Any:
    """The ``kind`` view of ``x`` made by its own framework."""
    if kind == "transposed":
        return x.permute(2, 0, 1) if lib == "torch" else x.transpose(2, 0, 1)
    if kind == "strided":
        return x[:, ::2]
    if kind == "offset":
        return x[1:]
    if kind == "flipped":
        return x[::-1]  # torch raises: it has no negative strides
    return x


def aligned_numpy(values: Any, dtype: str) -> Any:
    """``values`` cast to ``dtype`` in a fresh 64-byte aligned NumPy buffer."""
    dt = _np_dtype(dtype)
    nbytes = max(values.size, 1) * dt.itemsize
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = (-raw.ctypes.data) % ALIGN
    out = raw[start:start + values.size * dt.itemsize].view(dt).reshape(values.shape)
    out[...] = values.astype(dt)
    return out


def make_producer(producer: str, dtype: str, kind: str) -> tuple[Any, int, Any]:
    """(the producer, the address of its first element, its expected values)."""
    ref = reference(dtype, _BASE_SHAPES[kind])
    want = view(ref, kind, "numpy")
    if producer in ("numpy", "exporter"):
        base = aligned_numpy(ref, dtype)
        x = view(base, kind, "numpy")
        ptr = x.__array_interface__["data"][0]
        if producer == "exporter":
            strides = tuple(s // x.itemsize for s in x.strides)
            x = DLPackExporter(ptr, x.shape, dtype, "cpu", strides=strides, owner=base)
        return x, ptr, want
    if producer == "torch":
        t = torch.from_numpy(np.array(ref, order="C")).clone()  # torch's own (aligned) memory
        if dtype == "bfloat16":
            t = t.to(torch.bfloat16)
        x = view(t, kind, "torch")
        return x, x.data_ptr(), want
    a = get_adapter("jax")
    a.check_dtype(dtype)  # dlmg refuses what JAX would narrow
    cpu = jax.devices("cpu")[0]  # with a GPU present JAX's default device is the GPU
    x = view(jnp.asarray(ref, dtype=jnp.dtype(dtype), device=cpu), kind, "jax")
    return x, x.unsafe_buffer_pointer(), want


# -- the cells ------------------------------------------------------------------------
def _cells():
    for p in PRODUCERS:
        for c in CONSUMERS:
            for d in DTYPES:
                for k in KINDS:
                    x64s = (False, True) if d in WIDE and "jax" in (p, c) else (None,)
                    for x64 in x64s:
                        suffix = "" if x64 is None else ("-x64" if x64 else "-nox64")
                        # JAX cells (first-call dispatch and compiles) run outside the fast loop
                        marks = [pytest.mark.slow] if "jax" in (p, c) else []
                        yield pytest.param(p, c, d, k, x64, id=f"{p}->{c}-{d}-{k}{suffix}", marks=marks)


@pytest.fixture
def jax_x64(request):
    """Set ``jax_enable_x64`` for one cell (when it matters) and restore it."""
    wanted = request.node.callspec.params["x64"]
    before = bool(jax.config.jax_enable_x64)
    if wanted is not None and wanted != before:
        jax.config.update("jax_enable_x64", wanted)
    try:
        yield before if wanted is None else wanted
    finally:
        if bool(jax.config.jax_enable_x64) != before:
            jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize(("producer", "consumer", "dtype", "kind", "x64"), list(_cells()))
def test_cell(producer, consumer, dtype, kind, x64, jax_x64):
    if producer == "exporter" and DLPackExporter is None:
        pytest.fail("dlmg.dlpack.DLPackExporter is missing")
    rule_name = expected_rule(producer, consumer, dtype, kind, jax_x64)
    adapter = get_adapter(consumer)
    if rule_name is not None:
        rule = RULES[rule_name]
        with pytest.raises(rule.error, match=re.escape(rule.match) if " " not in rule.match else rule.match):
            x, _, _ = make_producer(producer, dtype, kind)
            adapter.from_dlpack(x, copy=False)
        return
    x, ptr, want = make_producer(producer, dtype, kind)
    out = adapter.from_dlpack(x, copy=False)
    assert adapter.shape_of(out) == want.shape
    assert adapter.dtype_of(out) == dtype
    if want.size:  # zero-size arrays may carry any pointer
        assert adapter.data_ptr(out) == ptr, "not zero-copy"
    got = host_values(adapter, out)
    assert got.shape == want.shape
    assert np.array_equal(got, want.astype(got.dtype)), f"values differ:\n{got}\n!=\n{want}"


def test_rules_table_is_used():
    """Every documented rule is hit by at least one cell (the table has no dead rows)."""
    hit = {
        expected_rule(p, c, d, k, x64)
        for p in PRODUCERS for c in CONSUMERS for d in DTYPES for k in KINDS for x64 in (False, True)
    }
    assert set(RULES) <= hit


# -- read-only producers and copy=True ------------------------------------------------
def _readonly_producer(kind: str) -> tuple[Any, int, Any]:
    base = aligned_numpy(reference("float32", (4, _ROW)), "float32")
    ptr = base.ctypes.data
    want = base.copy()
    base.flags.writeable = False
    if kind == "numpy":
        return base, ptr, want
    return DLPackExporter(ptr, base.shape, "float32", "cpu", owner=base, readonly=True), ptr, want


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("producer", ["numpy", "exporter"])
def test_read_only_producers(producer, consumer):
    """NumPy keeps read-only memory read-only; torch takes it in writable (it has
    no read-only tensors: dlmg records the producer's flag instead); JAX asks for
    legacy capsules, which cannot say read-only, so the producer refuses and
    only a copy gets the data into JAX."""
    adapter = get_adapter(consumer)
    x, ptr, want = _readonly_producer(producer)
    if consumer == "jax":
        with pytest.raises(CopyRequiredError, match="read-only"):
            adapter.from_dlpack(x, copy=False)
        out = adapter.from_dlpack(x)
        assert adapter.data_ptr(out) != ptr
    else:
        out = adapter.from_dlpack(x, copy=False)
        assert adapter.data_ptr(out) == ptr
        assert adapter.is_readonly(out) is (consumer == "numpy")
    assert np.array_equal(host_values(adapter, out), want)


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_copy_true_copies(producer, consumer):
    """copy=True always gives new memory with the same values (JAX's own
    from_dlpack(copy=True) does not copy host memory; dlmg's does)."""
    adapter = get_adapter(consumer)
    x, ptr, want = make_producer(producer, "float32", "transposed")
    out = adapter.from_dlpack(x, copy=True)
    assert adapter.data_ptr(out) != ptr
    assert np.array_equal(host_values(adapter, out), want)


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("kind", ["strided", "offset", "flipped"])
def test_copy_none_falls_back_to_a_copy(kind, consumer):
    """Where a zero-copy import is impossible (JAX: non-compact or unaligned;
    torch: negative strides), copy=None gives a correct copy instead of an error."""
    adapter = get_adapter(consumer)
    x, ptr, want = make_producer("numpy", "int8", kind)
    out = adapter.from_dlpack(x)
    assert np.array_equal(host_values(adapter, out), want)


# -- the importer that to() uses agrees with from_dlpack ---------------------------------
def _importer_cells():
    for cell in _cells():
        producer, consumer = cell.values[0], cell.values[1]
        if producer != consumer and producer != "exporter":
            yield cell


@pytest.mark.parametrize(("producer", "consumer", "dtype", "kind", "x64"), list(_importer_cells()))
def test_importer_agrees_with_from_dlpack(producer, consumer, dtype, kind, x64, jax_x64):
    """``to()`` imports a tensor's fragments through the target adapter's
    ``importer``, which checks once what holds for all of them. Wherever it
    answers, it gives what ``from_dlpack(x)`` gives: the same dtype, shape and
    values, zero-copy exactly where ``from_dlpack`` is. Where ``from_dlpack``
    refuses, the importer declines (``None``) or raises, so that ``to()``
    reaches ``from_dlpack`` and its clear error."""
    try:
        x, _, _ = make_producer(producer, dtype, kind)
    except (DtypeError, ValueError):  # no such array: 64-bit JAX with x64 off, torch's negative steps
        return
    source, adapter = get_adapter(producer), get_adapter(consumer)
    outcome = importer_agrees(adapter, source, x, dtype, source.device_of(x))
    if outcome == "declined":  # only an array the consumer cannot take as it is, never a whole pair
        assert kind in ("strided", "flipped"), f"the importer declined a {kind} array"
        assert adapter.importer(source, dtype, source.shape_of(x)) is not None


@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("producer", ["numpy", "torch", "jax"])
def test_importer_covers_the_plain_pairs(producer, consumer):
    """Between different frameworks on the host, float32 fragments of a plain
    tensor have an importer, and it takes a compact array in without a copy."""
    if producer == consumer:
        assert get_adapter(consumer).importer(get_adapter(producer), "float32", (4, _ROW)) is None
        return
    x, ptr, want = make_producer(producer, "float32", "contiguous")
    source, adapter = get_adapter(producer), get_adapter(consumer)
    take_in = adapter.importer(source, "float32", source.shape_of(x))
    assert take_in is not None
    got = take_in(x, source.device_of(x))
    assert adapter.data_ptr(got) == ptr
    assert np.array_equal(host_values(adapter, got), want)


def test_importer_declines_what_holds_for_the_whole_tensor():
    """The dtype and the size are checked once, for the whole tensor: NumPy cannot
    carry bfloat16, JAX narrows int64 while x64 is off, torch cannot hold a shape
    whose running product of extents passes int64, and producers of no known
    framework are described one by one."""
    numpy_, torch_, jax_ = (get_adapter(n) for n in ("numpy", "torch", "jax"))
    assert numpy_.importer(torch_, "bfloat16", (4,)) is None
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", False)
    try:
        assert jax_.importer(torch_, "int64", (4,)) is None
    finally:
        jax.config.update("jax_enable_x64", before)
    assert torch_.importer(numpy_, "float32", (2**62, 2**62, 0)) is None
    assert torch_.importer(get_adapter("dlpack"), "float32", (4,)) is None
