"""Pairing dlmg's fragments with other libraries' pieces by device and by slices.

dlmg numbers fragments column-major over the device grid; a sharded
``jax.Array`` lists its shards in its mesh's order. On a (4, 2) mesh of JAX's
8 host devices the two orders differ, and the lookups pair them correctly.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


@pytest.fixture(scope="module")
def sharded():
    if len(jax.devices("cpu")) < 8:
        pytest.skip("needs XLA_FLAGS=--xla_force_host_platform_device_count=8 before JAX starts")
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    mesh = Mesh(np.array(jax.devices("cpu")[:8]).reshape(4, 2), ("x", "y"))
    host = np.arange(64, dtype=np.float32).reshape(8, 8)
    x = jax.device_put(host, NamedSharding(mesh, P("x", "y")))
    return x, dlmg.from_jax(x), host


def test_fragment_order_is_column_major_and_differs_from_shard_order(sharded):
    x, dt, _ = sharded
    assert dt.layout.grid == (4, 2)
    assert [str(f.device) for f in dt.fragments] == [f"cpu:{i}" for i in (0, 2, 4, 6, 1, 3, 5, 7)]
    shard_devices = [s.device.id for s in x.addressable_shards]
    assert shard_devices != [f.device.index for f in dt.fragments]


def test_fragment_for_a_shard_device_is_that_shard(sharded):
    x, dt, _ = sharded
    for shard in x.addressable_shards:
        frag = dt.fragment_for(shard.device)
        assert frag.device == dlmg.Device("cpu", shard.device.id)
        assert frag.array.unsafe_buffer_pointer() == shard.data.unsafe_buffer_pointer()
        assert dt.fragments_on(shard.device) == (frag,)


def test_fragment_at_a_shard_index_is_that_shard(sharded):
    x, dt, host = sharded
    for shard in x.addressable_shards:
        frag = dt.fragment_at(shard.index)
        assert frag.device.index == shard.device.id
        np.testing.assert_array_equal(np.asarray(frag.array), host[shard.index])


def test_lookups_fail_clearly():
    dt = dlmg.scatter(np.zeros((6, 2)), dlmg.Layout.slab((6, 2), 0, ["cpu", "cpu", "cpu"]))
    with pytest.raises(LookupError, match=r"3 fragments sit on cpu:0.*fragment_at"):
        dt.fragment_for("cpu")
    with pytest.raises(LookupError, match="no fragment of this tensor sits on cpu:5"):
        dt.fragment_for("cpu:5")
    assert dt.fragments_on("cpu:5") == ()
    assert dt.fragment_at((slice(2, 4), slice(None))).index == 1
    with pytest.raises(LookupError, match="covers exactly"):
        dt.fragment_at((slice(1, 3), slice(None)))
    with pytest.raises(TypeError, match="slice"):
        dt.fragment_at((1, slice(None)))
    cyclic = dlmg.scatter(np.zeros(6), dlmg.Layout((6,), block=(1,), grid=(2,), devices=["cpu:0", "cpu:1"]))
    with pytest.raises(LookupError, match="block-cyclic"):
        cyclic.fragment_at((slice(0, 3),))


def test_fragment_at_picks_the_replica():
    lay = dlmg.Layout.slab((4, 2), 0, ["cpu:0", "cpu:1"]).with_devices(["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    dt = dlmg.scatter(np.zeros((4, 2)), lay)
    assert dt.fragment_at((slice(2, 4), slice(None))).index == 1
    assert dt.fragment_at((slice(2, 4), slice(None)), replica=1).index == 3
