"""DLPack metadata that no memory can hold is refused at import, never followed.

Every case builds the managed tensor field by field (``_capsule_structs``)
over a real 64-element buffer and changes one field to a value no honest
producer writes. The reader must raise :class:`dlmg.DLPackError` naming the
field and value, call the deleter exactly once and touch nothing else; what
used to crash the process (a gather through a ``byte_offset`` of ``2**63``)
runs in a subprocess, so a crash fails the test instead of ending the run.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import dlmg
from dlmg.adapters import memory_range
from dlmg.dlpack import bounds
from dlmg.errors import DLPackError

from _capsule_structs import Producer

HERE = Path(__file__).resolve().parent
TOP = bounds.ADDRESS_LIMIT


BAD = [
    ({"byte_offset": 2**63}, r"byte_offset=9223372036854775808"),
    ({"byte_offset": 2**64 - 8}, r"byte_offset=18446744073709551608"),
    ({"shape": (8,), "strides": (2**62,)}, r"strides\[0\]=4611686018427387904"),
    ({"shape": (8,), "strides": (-(2**62),)}, r"strides\[0\]=-4611686018427387904"),
    ({"ndim": 4, "shape": (2**20,) * 4, "strides": (0,) * 4}, r"shape=\(1048576, 1048576, 1048576, 1048576\)"),
    ({"shape": (2**61,), "strides": (1,)}, r"shape=\(2305843009213693952,\).*2\*\*63"),
    ({"ndim": 2, "shape": (2**31, 2**31), "strides": (2**31, 1)}, r"shape=.*2\*\*63 or more"),
    ({"ndim": 2, "shape": (3, 3), "strides": (2**60, 2**60)}, r"strides\[0\]=1152921504606846976"),
    ({"data": 4096, "shape": (8,), "strides": (-1000,)}, r"data \+ byte_offset=0x1000.*below address 0"),
    ({"data": TOP - 16, "shape": (8,), "strides": (1,)}, r"data \+ byte_offset=.*past the host address space"),
    ({"data": TOP - 16, "device_type": 2, "shape": (8,), "strides": (1,)}, r"past the address space"),
    ({"versioned": False, "byte_offset": 2**63}, r"byte_offset=9223372036854775808"),
]


@pytest.mark.parametrize("fields, message", BAD)
def test_impossible_metadata_is_refused_and_deleted_once(fields, message):
    producer = Producer(**fields)
    with pytest.raises(DLPackError, match=message) as excinfo:
        dlmg.dlpack.inspect(producer)
    assert isinstance(excinfo.value, BufferError)
    assert "no memory can hold" in str(excinfo.value)
    assert producer.deleted == 1 and producer.exports == 1
    assert not any(producer.memory)  # nothing written into the buffer


def test_raw_capsule_with_impossible_offset_is_consumed_once():
    producer = Producer(byte_offset=2**63)
    capsule = producer.capsule()
    with pytest.raises(DLPackError, match="byte_offset"):
        dlmg.dlpack.inspect(capsule)
    assert producer.deleted == 1
    with pytest.raises(DLPackError, match="already consumed"):
        dlmg.dlpack.inspect(capsule)
    assert producer.deleted == 1


@pytest.mark.skipif(bounds.host_address_limit() == bounds.ADDRESS_LIMIT, reason="needs an x86-64 host (bit 63 of user addresses clear)")
def test_host_memory_past_user_space_is_refused():
    producer = Producer(data=2**63 - 8, shape=(2,), strides=(1,))
    with pytest.raises(DLPackError, match=r"past the host address space \(limit 0x8000000000000000\)"):
        dlmg.dlpack.inspect(producer)
    # the same address on a device is plausible: device pointers need not be user addresses
    info = dlmg.dlpack.inspect(Producer(data=2**63 - 8, shape=(1,), strides=(1,), device_type=2))
    assert info.ptr == 2**63 - 8


@pytest.mark.parametrize(
    "fields",
    [
        {"shape": (8,), "strides": (1,)},
        {"shape": (4,), "strides": (16,)},  # the last element is the buffer's last
        {"shape": (8,), "strides": (-1,), "byte_offset": 7 * 8},  # backwards, from the last element
        {"ndim": 2, "shape": (0, 2**62), "strides": (2**62, 2**62)},  # empty: addresses nothing
        {"ndim": 3, "shape": (2, 0, 5), "strides": (0, 0, 0), "data": None},
        {"shape": (2**20,), "strides": (0,)},  # a broadcast of one element
    ],
)
def test_honest_edges_are_accepted(fields):
    producer = Producer(**fields)
    info = dlmg.dlpack.inspect(producer)
    assert info.shape == tuple(fields["shape"][: fields.get("ndim", 1)])
    assert producer.deleted == 1


def test_backward_view_reads_the_right_elements():
    producer = Producer(shape=(8,), strides=(-1,), byte_offset=7 * 8)
    for i in range(8):
        producer.memory[i] = i
    dt = dlmg.from_fragments([producer], dlmg.Layout.slab((8,), 0, ["cpu"]))
    assert dt.gather("numpy").tolist() == [7, 6, 5, 4, 3, 2, 1, 0]


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("fields", [{"byte_offset": 2**63}, {"strides": (2**62,)}])
def test_framework_imports_refuse_before_the_framework_sees_it(framework, fields):
    producer = Producer(**fields)
    with pytest.raises(DLPackError, match="no memory can hold"):
        dlmg.get_adapter(framework).from_dlpack(producer)
    assert producer.deleted == producer.exports


@pytest.mark.parametrize(
    "fields",
    [{"byte_offset": 2**63}, {"strides": (2**62,)}, {"ndim": 2, "shape": (2**31, 2**31), "strides": (2**31, 1)}],
)
def test_from_fragments_refuses(fields):
    producer = Producer(**fields)
    shape = fields.get("shape", (8,))
    with pytest.raises(DLPackError, match="no memory can hold"):
        dlmg.from_fragments([producer], dlmg.Layout.slab(shape, 0, ["cpu"]))
    assert producer.deleted == producer.exports


_GATHER = """
import sys
sys.path.insert(0, {here!r})
import dlmg
from _capsule_structs import Producer
producer = Producer(byte_offset=2**63)
try:
    dt = dlmg.from_fragments([producer], dlmg.Layout.slab((8,), 0, ["cpu"]))
    dt.gather("numpy")
except dlmg.DLPackError as exc:
    print("refused:", exc)
    sys.exit(0 if producer.deleted == producer.exports else 3)
print("accepted")
sys.exit(2)
"""


def test_gather_through_an_impossible_offset_does_not_crash():
    code = textwrap.dedent(_GATHER.format(here=str(HERE)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    assert "refused:" in proc.stdout and "byte_offset=9223372036854775808" in proc.stdout


def test_strided_extent():
    assert bounds.strided_extent((3, 4), (4, 1)) == (0, 11)
    assert bounds.strided_extent((3, 4), (-4, 1)) == (-8, 3)
    assert bounds.strided_extent((1,), (2**70,)) == (0, 0)


def test_real_arrays_still_pass():
    a = np.arange(24.0).reshape(2, 3, 4)[:, ::-1, ::2]
    info = dlmg.dlpack.inspect(a)
    assert info.shape == (2, 3, 2) and info.strides == (12, -4, 2)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("pointer, error", [(2**64 - 8, DLPackError), (2**70, dlmg.FragmentError)])
def test_from_pointers_refuses_impossible_addresses(framework, pointer, error):
    with pytest.raises(error, match="address space|no memory can hold"):
        dlmg.from_pointers(dlmg.Layout((8,), devices=["cpu"]), [pointer], "float64", framework=framework)


from hypothesis import given, strategies as st  # noqa: E402 - the property tests below only


@given(st.integers(0, 40), st.integers(0, 12), st.integers(0, 40), st.integers(0, 12))
def test_byte_ranges_meet_exactly_when_they_share_a_byte(a, n, b, m):
    first, second = (a, a + n), (b, b + m)
    shared = bool(set(range(a, a + n)) & set(range(b, b + m)))
    assert bounds.ranges_meet(first, second) == shared == bounds.ranges_meet(second, first)
    assert not bounds.ranges_meet(None, second) and not bounds.ranges_meet(first, None)


@given(st.lists(st.tuples(st.integers(1, 4), st.sampled_from([-3, -2, -1, 1, 2, 3])), min_size=1, max_size=3),
       st.sampled_from(["uint8", "int16", "float32", "float64"]))
def test_an_arrays_memory_range_is_its_byte_bounds(modes, dtype):
    # the byte range compared for aliasing across frameworks: NumPy views with
    # gaps and negative steps, against NumPy's own byte_bounds
    from numpy.lib.array_utils import byte_bounds

    from dlmg.registry import get_adapter

    shape = tuple(n for n, _ in modes)
    base = np.zeros(tuple(n * abs(step) for n, step in modes), dtype=dtype)
    view = base[tuple(slice(None, None, step) for _, step in modes)]
    assert memory_range(get_adapter("numpy"), view) == byte_bounds(view)
    assert view.shape == shape
