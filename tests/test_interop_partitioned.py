"""The ``__partitioned__`` protocol: produced by dlmg, consumed from dlmg and from
dictionaries written the way the protocol's draft shows them."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import dlmg
from dlmg import Layout, LayoutError
from dlmg.interop.partitioned import from_partitioned


def _ptr(array) -> int:
    return dlmg.adapter_for(array).data_ptr(array)


LAYOUTS = {
    "slab": Layout.slab((12, 5), 0, ["cpu"] * 4),
    "slab-uneven": Layout.slab((10, 5), 1, ["cpu"] * 2),
    "cyclic": Layout((7, 6), block=(1, 6), grid=(3, 1), devices=["cpu"] * 3),
    "block-cyclic": Layout((9, 7), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4),
    "replicated": Layout.replicated((5, 4), ["cpu"] * 3),
    "block-cyclic-replicated": Layout((8, 6), block=(2, 2), grid=(2, 1), devices=["cpu"] * 4),
    "scalar": Layout.single((), "cpu"),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
def test_round_trip_numpy(name):
    lay = LAYOUTS[name]
    x = np.arange(max(lay.size, 1), dtype=np.float32)[: lay.size].reshape(lay.shape)
    dt = dlmg.scatter(x, lay)
    d = dt.__partitioned__
    assert d["shape"] == lay.shape and d["partition_tiling"] == lay.nblocks
    assert sorted(d["locals"]) == sorted(d["partitions"])
    back = from_partitioned(dt)
    assert back.layout == lay
    assert [f.array is g.array for f, g in zip(back.fragments, dt.fragments)] == [True] * lay.nfragments
    np.testing.assert_array_equal(back.gather(), x)
    np.testing.assert_array_equal(from_partitioned(pickle.loads(pickle.dumps(d))).gather(), x)


def test_partition_data_are_views_of_the_fragments():
    lay = LAYOUTS["block-cyclic"]
    dt = dlmg.scatter(np.arange(63.0).reshape(9, 7), lay)
    d = dt.__partitioned__
    assert d["partition_tiling"] == (5, 3)
    for pos, part in d["partitions"].items():
        (f,) = part["fragments"]
        frag = dt.fragments[f]
        local = part["base_start"]
        expect = _ptr(frag.array) + 8 * sum(i * s for i, s in zip(local, frag.layout.strides))
        assert _ptr(part["data"]) == expect
        assert part["location"] == [(0, (1, 0))]
        assert part["start"] == (2 * pos[0], 3 * pos[1])
    part = d["partitions"][(4, 2)]
    assert part["shape"] == (1, 1) and part["data"][0, 0] == 62.0
    part["data"][0, 0] = -1.0  # writes reach the fragment
    assert dt[8, 6] == -1.0


def test_padded_fragments_come_back_block_by_block():
    """Blocks apart in memory: no fragment is one array, so every block comes back as its
    own fragment, a view of the same memory."""
    lay = Layout((6,), block=(2,), grid=(2,), devices=["cpu"] * 2, element_strides=(1,), block_strides=(3,))
    memory = [np.arange(10.0) for _ in range(2)]
    dt = dlmg.from_pointers(lay, [m.ctypes.data for m in memory], "float64", owner=memory)
    d = dt.__partitioned__
    assert "base" not in d["partitions"][(0,)]
    back = from_partitioned(d)
    assert back.layout.grid == (3,) and back.layout.block == (2,)
    assert [_ptr(f.array) for f in back.fragments] == [
        memory[0].ctypes.data, memory[1].ctypes.data, memory[0].ctypes.data + 3 * 8
    ]
    np.testing.assert_array_equal(back.gather(), dt.gather())


def test_replicas_are_listed_as_locations():
    lay = Layout.replicated((4,), ["cuda:0", "cuda:1"]).with_devices(["cpu"] * 2)
    dt = dlmg.scatter(np.arange(4.0), lay)
    part = dt.__partitioned__["partitions"][(0,)]
    assert part["location"] == [(0, (1, 0)), (0, (1, 0))]
    assert part["fragments"] == [0, 1]
    assert [_ptr(v) for v in part["replicas"]] == [_ptr(f.array) for f in dt.fragments]


def test_round_trip_torch_and_jax_devices():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    if len(jax.devices("cpu")) < 4:
        pytest.skip("needs 4 JAX CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")
    lay = Layout((8, 6), block=(2, 3), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    x = np.arange(48, dtype=np.float32).reshape(8, 6)
    for framework in ("jax", "torch"):
        dt = dlmg.scatter(x, lay, framework=framework)
        back = from_partitioned(dt)
        assert back.layout == lay and back.frameworks == (framework,)
        assert [_ptr(f.array) for f in back.fragments] == [_ptr(f.array) for f in dt.fragments]
        np.testing.assert_array_equal(np.asarray(back.gather(framework="numpy")), x)
    assert torch is not None


# -- dictionaries written by hand -----------------------------------------------------------
# Heat, the protocol's one released producer, does not install beside this project's
# PyTorch: its release for Python 3.11 (1.8.0) requires torch<2.11.1 and the next (1.9.0)
# Python 3.12. These dictionaries follow the examples of the protocol's draft instead.


def _spec_example_1d(location):
    """The draft's first example (64 elements, 4 blocked partitions) as an SPMD dictionary."""
    parts = {}
    for i in range(4):
        parts[(i,)] = {
            "start": (16 * i,),
            "shape": (16,),
            "data": np.arange(16 * i, 16 * i + 16, dtype=np.int64),
            "location": location(i),
        }
    return {"shape": (64,), "partition_tiling": (4,), "partitions": parts, "get": lambda x: x,
            "locals": [(i,) for i in range(4)]}


def test_spec_blocked_example_on_one_host_keeps_every_partition():
    """All four partitions on rank 0's host: one owner, but four separate arrays. Without a
    copy each stays its own fragment; copy=True joins them into one."""
    d = _spec_example_1d(lambda i: [0])
    dt = from_partitioned(d)
    assert dt.layout.grid == (4,) and dt.layout.block == (16,)
    assert [f.array is d["partitions"][(i,)]["data"] for i, f in enumerate(dt.fragments)] == [True] * 4
    np.testing.assert_array_equal(dt.gather(), np.arange(64))
    joined = from_partitioned(d, copy=True)
    assert joined.layout.grid == (1,) and joined.layout.nfragments == 1
    np.testing.assert_array_equal(joined.gather(), np.arange(64))


def test_spec_row_block_cyclic_example_two_ranks():
    """The draft's third example: 8x8, four row blocks dealt to ranks 0 and 1; this process is
    rank 0 and holds blocks 0 and 2 (rank 1's are None)."""
    parts = {}
    for i in range(4):
        mine = i % 2 == 0
        parts[(i, 0)] = {
            "start": (2 * i, 0),
            "shape": (2, 8),
            "data": np.full((2, 8), float(i)) if mine else None,
            "location": [i % 2],
        }
    d = {"shape": (8, 8), "partition_tiling": (4, 1), "partitions": parts,
         "get": lambda x: x, "locals": [(0, 0), (2, 0)]}
    dt = from_partitioned(d)
    assert dt.layout.shape == (8, 8) and dt.layout.block == (2, 8) and dt.layout.grid == (4, 1)
    assert [f.rank for f in dt.fragments] == [0, 1, 0, 1]
    assert dt.fragments[2].array is parts[(2, 0)]["data"]
    assert not dt.fragments[1].is_local


def test_block_cyclic_over_devices_is_recovered_and_joined_on_request():
    """Blocks dealt round robin to two JAX CPU devices, each block its own array: the owners'
    period gives grid 2; joining the blocks of a device into its fragment is a copy."""
    jax = pytest.importorskip("jax")
    if len(jax.devices("cpu")) < 2:
        pytest.skip("needs 2 JAX CPU devices")
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    parts = {}
    for i in range(3):
        dev = jax.devices("cpu")[i % 2]
        parts[(i, 0)] = {
            "start": (2 * i, 0), "shape": (2, 4),
            "data": jax.device_put(x[2 * i:2 * i + 2], dev),
            "location": [(0, (1, dev.id))],
        }
    d = {"shape": (6, 4), "partition_tiling": (3, 1), "partitions": parts, "get": lambda x: x,
         "locals": list(parts)}
    fine = from_partitioned(d)
    assert fine.layout.grid == (3, 1)
    assert [str(dv) for dv in fine.layout.devices] == ["cpu:0", "cpu:1", "cpu:0"]
    joined = from_partitioned(d, copy=True)
    assert joined.layout.grid == (2, 1) and joined.layout.block == (2, 4)
    assert joined.layout.fragments[0].shape == (4, 4)
    np.testing.assert_array_equal(np.asarray(joined.gather(framework="numpy")), x)


def test_heat_style_dictionary_in_one_process():
    """The shape of Heat's dictionary (split along mode 0, torch data, ``[rank]`` locations,
    extra dtype/device keys) for a one-process run."""
    torch = pytest.importorskip("torch")
    t = torch.arange(27 * 6, dtype=torch.int32).reshape(27, 3, 2)
    d = {
        "shape": (27, 3, 2),
        "partition_tiling": (1, 1, 1),
        "partitions": {(0, 0, 0): {"start": (0, 0, 0), "shape": (27, 3, 2), "data": t, "location": [0],
                                   "dtype": torch.int32, "device": "cpu"}},
        "locals": [(0, 0, 0)],
        "get": lambda x: x,
    }
    dt = from_partitioned(d)
    assert dt.fragments[0].array is t and dt.dtype == "int32"
    assert dt.layout == Layout.single((27, 3, 2), "cpu")


def test_irregular_tiling_needs_copy():
    x = np.arange(8.0)
    parts = {(0,): {"start": (0,), "shape": (2,), "data": x[:2].copy(), "location": [0]},
             (1,): {"start": (2,), "shape": (3,), "data": x[2:5].copy(), "location": [0]},
             (2,): {"start": (5,), "shape": (3,), "data": x[5:].copy(), "location": [0]}}
    d = {"shape": (8,), "partition_tiling": (3,), "partitions": parts, "get": lambda x: x, "locals": list(parts)}
    with pytest.raises(LayoutError, match=r"mode 0: sizes \[2, 3, 3\].*copy=True"):
        from_partitioned(d)
    dt = from_partitioned(d, copy=True)
    assert dt.layout.block == (3,) and dt.layout.grid == (3,)
    np.testing.assert_array_equal(dt.gather(), x)


def test_trailing_empty_partitions_fit_a_slab():
    """5 rows over 4 processes the torch.chunk way (2, 2, 1, 0): a slab layout; Heat's
    balanced way (2, 1, 1, 1) has no common block size."""
    def rows(sizes):
        parts, at = {}, 0
        for i, n in enumerate(sizes):
            parts[(i, 0)] = {"start": (at, 0), "shape": (n, 3), "data": np.full((n, 3), float(i)),
                             "location": [0]}
            at += n
        return {"shape": (5, 3), "partition_tiling": (4, 1), "partitions": parts, "get": lambda x: x,
                "locals": list(parts)}

    dt = from_partitioned(rows([2, 2, 1, 0]))
    assert dt.layout.block == (2, 3) and dt.layout.grid == (4, 1)
    assert [f.shape for f in dt.fragments] == [(2, 3), (2, 3), (1, 3), (0, 3)]
    with pytest.raises(LayoutError, match=r"sizes \[2, 1, 1, 1\]"):
        from_partitioned(rows([2, 1, 1, 1]))
    np.testing.assert_array_equal(from_partitioned(rows([2, 1, 1, 1]), copy=True).gather()[:, 0], [0, 0, 1, 2, 3])


def test_empty_tensor():
    dt = dlmg.zeros(layout=Layout.slab((0, 3), 1, ["cpu"] * 3), dtype="float32")
    d = dt.__partitioned__
    assert d["partition_tiling"] == (0, 3) and d["partitions"] == {}
    back = from_partitioned(d)
    assert back.shape == (0, 3) and back.dtype == "float32"


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.pop("partitions"), "has no 'partitions'"),
        (lambda d: d["partitions"].pop((1,)), r"missing \[\(1,\)\]"),
        (lambda d: d["partitions"][(1,)].update(location=["10.0.0.2"]), "names no process rank"),
        (lambda d: d["partitions"][(1,)].update(start=(17,)), "partition 1 starts at 17, expected 16"),
        (lambda d: d.update(shape=(65,)), "cover 64 of 65"),
        (lambda d: d["partitions"][(2,)].update(location=[0, 1]), "2 locations, others 1"),
        (lambda d: d.update(partition_tiling=(4, 1)), "partition_tiling = .* 2 entries, expected 1"),
    ],
)
def test_bad_dictionaries(mutate, match):
    d = _spec_example_1d(lambda i: [0])
    mutate(d)
    with pytest.raises(LayoutError, match=match):
        from_partitioned(d)


def test_not_a_producer():
    with pytest.raises(TypeError, match="__partitioned__"):
        from_partitioned(np.zeros(3))


def test_an_unpickled_dictionary_of_jax_arrays_names_the_device_and_moves_with_copy():
    """JAX unpickles arrays onto its default device whatever the partition's location says:
    without copy the refusal names both devices and the call that works; with copy=True
    the data moves to the located devices."""
    pytest.importorskip("jax")
    devices = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    full = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    x = dlmg.scatter(full, dlmg.Layout.slab((8, 4), 0, devices), framework="jax")
    revived = pickle.loads(pickle.dumps(x.__partitioned__))
    with pytest.raises(dlmg.LayoutError, match=r"lies on cpu:0, but its location names cpu:1.*copy=True"):
        dlmg.from_partitioned(revived)
    y = dlmg.from_partitioned(revived, copy=True)
    assert [str(d) for d in y.devices] == devices
    np.testing.assert_array_equal(y.gather(framework="numpy"), full)
