"""Whole redistributions handed to the framework owning every fragment (JAX's
``device_put``): the same results as dlmg's own plan, no copies of the input
shards, dlmg's plan for layouts no sharding expresses, and the plan text."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from dlmg.plans import DelegatedPlan, RedistributionPlan

from _strategies import check_fragments, jax_cpus, need, reference

pytestmark = pytest.mark.skipif(jax_cpus() < 8, reason="needs JAX with 8 CPU devices (XLA_FLAGS in conftest.py)")


@pytest.fixture(autouse=True)
def _jax() -> None:
    need("jax")


def _pointers(dt: dlmg.DistributedTensor) -> list[int]:
    return [f.adapter.data_ptr(f.array) for f in dt.fragments]


@st.composite
def sharded_layouts(draw, shape: tuple[int, ...]) -> Layout:
    """A layout a ``NamedSharding`` expresses: every split mode cut evenly into one
    block per device, replicas, and distinct devices among ``cpu:0``..``cpu:7``."""
    grid, budget = [], 8
    for n in shape:
        choices = [g for g in range(1, budget + 1) if n % g == 0]
        g = draw(st.sampled_from(choices))
        grid.append(g)
        budget //= g
    replicas = draw(st.integers(1, budget))
    count = math.prod(grid) * replicas
    devices = draw(st.permutations([f"cpu:{i}" for i in range(8)]))[:count]
    block = tuple(n // g if g > 1 else n for n, g in zip(shape, grid))
    return Layout(shape, block=block, grid=grid, devices=devices)


@st.composite
def sharded_pairs(draw) -> tuple[Layout, Layout]:
    shape = tuple(draw(st.lists(st.integers(1, 8), min_size=1, max_size=3)))
    return draw(sharded_layouts(shape)), draw(sharded_layouts(shape))


@settings(max_examples=60)
@given(pair=sharded_pairs(), dtype=st.sampled_from(["float32", "int32", "bool", "complex64"]))
def test_delegated_redistribution_equals_dlmg_plan(pair: tuple[Layout, Layout], dtype: str) -> None:
    source, target = pair
    x = reference(source.shape, dtype)
    dt = dlmg.scatter(x, source, framework="jax")
    assert isinstance(dt.plan_redistribution(target), DelegatedPlan)
    delegated = dt.redistribute(target)
    with dlmg.delegation(False):
        plan = dt.plan_redistribution(target)
        own = dt.redistribute(target)
    assert type(plan) is RedistributionPlan
    for result in (delegated, own):
        assert result.layout == target and result.dtype == dt.dtype
        assert set(result.frameworks) == {"jax"}
        assert [f.device for f in result.fragments] == list(target.devices)
        check_fragments(result, x)
    np.testing.assert_array_equal(delegated.gather(framework="numpy"), own.gather(framework="numpy"))


def test_rows_to_columns_is_delegated_and_equal() -> None:
    devices = [f"cpu:{i}" for i in range(8)]
    rows, cols = Layout.slab((64, 48), 0, devices), Layout.slab((64, 48), 1, devices)
    x = reference((64, 48), "float32")
    dt = dlmg.scatter(x, rows, framework="jax")
    out = dt.redistribute(cols)
    check_fragments(out, x)
    assert [f.adapter.device_of(f.array) for f in out.fragments] == [dlmg.Device.parse(d) for d in devices]
    assert len(set(_pointers(out))) == 8 and not set(_pointers(out)) & set(_pointers(dt))  # eight new shards


def test_layouts_no_sharding_expresses_take_dlmg_plan() -> None:
    devices = [f"cpu:{i}" for i in range(4)]
    rows = Layout.slab((16, 8), 0, devices)
    x = reference((16, 8), "float32")
    dt = dlmg.scatter(x, rows, framework="jax")
    targets = [
        Layout.block_cyclic((16, 8), block=(2, 8), grid=(4, 1), devices=devices),  # block-cyclic
        Layout.slab((16, 8), 1, ["cpu:0", "cpu:0", "cpu:1", "cpu:1"]),  # two fragments on one device
        Layout((16, 8), block=(5, 8), grid=(4, 1), devices=devices),  # uneven
    ]
    for target in targets:
        plan = dt.plan_redistribution(target)
        assert type(plan) is RedistributionPlan, target
        check_fragments(dt.redistribute(target), x)


def test_other_frameworks_and_mixed_fragments_take_dlmg_plan() -> None:
    devices = ["cpu:0", "cpu:1"]
    rows, cols = Layout.slab((8, 8), 0, devices), Layout.slab((8, 8), 1, devices)
    x = reference((8, 8), "float32")
    mixed = dlmg.from_fragments([np.ascontiguousarray(x[:4]), dlmg.get_adapter("jax").from_dlpack(
        np.ascontiguousarray(x[4:]), device=dlmg.Device.parse("cpu:1"))], rows)
    assert type(mixed.plan_redistribution(cols)) is RedistributionPlan
    check_fragments(mixed.redistribute(cols), x)
    jaxed = dlmg.scatter(x, rows, framework="jax")
    into_numpy = jaxed.redistribute(cols, framework="numpy")  # another framework asked for
    assert set(into_numpy.frameworks) == {"numpy"}
    check_fragments(into_numpy, x)


def test_input_shards_are_not_copied() -> None:
    """Fragments that stay where they are keep their memory: JAX's device_put takes the
    shards as they are (make_array_from_single_device_arrays copies nothing)."""
    x = reference((8, 8), "float32")
    rows = Layout.slab((8, 8), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.scatter(x, rows, framework="jax")
    assert _pointers(dt.redistribute(rows)) == _pointers(dt)  # the same layout: every shard kept
    with_replicas = Layout((8, 8), block=(4, 8), grid=(2, 1), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])
    out = dt.redistribute(with_replicas)
    assert isinstance(dt.plan_redistribution(with_replicas), DelegatedPlan)
    assert _pointers(out)[:2] == _pointers(dt)  # the first replica is the source, the second new
    check_fragments(out, x)
    replicated = dlmg.scatter(x, Layout.replicated((8, 8), devices=["cpu:0", "cpu:1"]), framework="jax")
    one = replicated.redistribute(Layout.single((8, 8), "cpu:1"))
    assert _pointers(one) == _pointers(replicated)[1:]  # the replica already on cpu:1


def test_from_jax_then_redistribute_shares_jax_memory() -> None:
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices("cpu")[:8]), ("d",))
    x = jax.device_put(reference((32, 16), "float32"), NamedSharding(mesh, PartitionSpec("d", None)))
    dt = dlmg.from_jax(x)
    assert _pointers(dt) == [s.data.unsafe_buffer_pointer() for s in x.addressable_shards]
    out = dt.redistribute(dlmg.Layout.slab((32, 16), 1, [f"cpu:{i}" for i in range(8)]))
    want = jax.device_put(x, NamedSharding(mesh, PartitionSpec(None, "d")))
    for frag, shard in zip(out.fragments, want.addressable_shards):
        np.testing.assert_array_equal(np.asarray(frag.array), np.asarray(shard.data))


def test_plan_text_names_the_delegation() -> None:
    devices = [f"cpu:{i}" for i in range(4)]
    rows, cols = Layout.slab((8, 8), 0, devices), Layout.slab((8, 8), 1, devices)
    dt = dlmg.scatter(reference((8, 8), "float32"), rows, framework="jax")
    plan = dt.plan_redistribution(cols)
    text = str(plan)
    assert text.startswith("RedistributionPlan: delegated to jax.device_put, moving 256 bytes (192 across devices)")
    assert "dlmg copies nothing (its own plan: 16 strided copies" in text and "cpu:0 -> cpu:1: 16 bytes" in text
    assert plan.delegated_to == "jax.device_put" and plan.total_bytes == 256
    assert "delegated_to='jax.device_put'" in repr(plan)
    with dlmg.delegation(False):
        assert not dlmg.delegation_enabled()
        assert str(dt.plan_redistribution(cols)).startswith("RedistributionPlan: 16 strided copies")
    assert dlmg.delegation_enabled()


def test_delegation_context_restores_on_error() -> None:
    with pytest.raises(RuntimeError):
        with dlmg.delegation(False):
            raise RuntimeError("inside")
    assert dlmg.delegation_enabled()
    with dlmg.delegation(False), dlmg.delegation(True):
        assert dlmg.delegation_enabled()
