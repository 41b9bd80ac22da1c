"""Multi-process scenarios of the interop bridges (run by :mod:`tests._mp_worker`).

Every process builds the same global data, goes through a bridge and checks
what it holds against the single-process answer; zero-copy claims are checked
by data pointers. Each scenario returns a small JSON-able value or raises.
"""

from __future__ import annotations

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout


def _torch():
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor

    return torch, init_device_mesh, DTensor, Partial, Replicate, Shard, distribute_tensor


def _cases(world):
    _, _, _, _, Replicate, Shard, _ = _torch()
    cases = [((world,), [Shard(0)]), ((world,), [Shard(1)]), ((world,), [Replicate()])]
    if world == 4:
        cases += [
            ((2, 2), [Shard(0), Shard(1)]),
            ((2, 2), [Shard(0), Replicate()]),
            ((2, 2), [Replicate(), Shard(1)]),
            ((2, 2), [Shard(0), Shard(0)]),
        ]
    return cases


def dtensor_roundtrip():
    """DTensor -> dlmg -> DTensor on meshes (n,) and (2, 2), even and uneven extents: values
    equal full_tensor(), and the local shard's memory never moves."""
    torch, init_device_mesh, _, _, _, _, distribute_tensor = _torch()
    world = dd.world_size()
    checked = []
    for mesh_shape, placements in _cases(world):
        mesh = init_device_mesh("cpu", mesh_shape)
        for shape in ((4 * world, 2 * world), (2 * world + 1, world + 3), (3, 1)):
            full = torch.arange(int(np.prod(shape)), dtype=torch.float64).reshape(shape)
            x = distribute_tensor(full, mesh, placements)
            try:
                t = dlmg.from_dtensor(x)
            except dlmg.LayoutError as exc:
                assert "uneven pieces" in str(exc), exc  # nested uneven cuts only
                continue
            ptr = x.to_local().data_ptr()
            local = [f for f in t.fragments if f.is_local]
            assert len(local) == 1 and local[0].array.data_ptr() == ptr
            assert local[0].rank == dd.rank()
            np.testing.assert_array_equal(np.asarray(t.gather(framework="numpy")), x.full_tensor().numpy())
            for back in (t.to_dtensor(), dlmg.to_dtensor(t, mesh=mesh)):
                assert back.to_local().data_ptr() == ptr
                assert torch.equal(back.full_tensor(), full)
            checked.append([list(mesh_shape), [str(p) for p in placements], list(shape)])
    return checked


def dtensor_partial():
    torch, init_device_mesh, DTensor, Partial, _, Shard, _ = _torch()
    world = dd.world_size()
    mesh = init_device_mesh("cpu", (world,))
    local = torch.full((3, 2), float(dd.rank() + 1))
    x = DTensor.from_local(local, mesh, [Partial()])
    want = sum(range(1, world + 1))
    t = dlmg.from_dtensor(x)  # a pending sum: each shard one addend, nothing reduced
    assert t.layout.partial == "sum" and t.layout.nreplicas == world
    assert next(f for f in t.fragments if f.is_local).array.data_ptr() == local.data_ptr()
    back = t.to_dtensor()
    assert back.placements[0].is_partial() and back.to_local().data_ptr() == local.data_ptr()
    np.testing.assert_array_equal(back.full_tensor().numpy(), np.full((3, 2), want))
    np.testing.assert_array_equal(np.asarray(t.gather(framework="numpy")), np.full((3, 2), want))
    t = dlmg.from_dtensor(x, reduce=True)
    np.testing.assert_array_equal(np.asarray(t.gather(framework="numpy")), np.full((3, 2), want))
    return want


def dtensor_refusals():
    """A block-cyclic layout is refused on every process, naming the redistribute call."""
    world = dd.world_size()
    bc = Layout((4 * world,), block=(1,), grid=(world,), devices=["cpu"] * world, ranks=list(range(world)))
    t = dlmg.from_fragments({bc.fragments_of(dd.rank())[0]: np.zeros(4)}, bc)
    try:
        t.to_dtensor()
    except dlmg.LayoutError as exc:
        assert "block-cyclic" in str(exc) and "redistribute" in str(exc), exc
        return True
    raise AssertionError("a block-cyclic layout became a DTensor")


def partitioned_roundtrip():
    """__partitioned__ across processes: each process sees its own partitions as data and
    the others' as None; consuming it gives the same layout on the same memory."""
    world = dd.world_size()
    full = np.arange(9.0 * 7).reshape(9, 7)
    layout = Layout((9, 7), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4, ranks=[r % world for r in range(4)])
    arrays = {}
    for i in layout.fragments_of(dd.rank()):
        idx = [layout.owned_indices(i, m) for m in range(2)]
        arrays[i] = np.ascontiguousarray(full[np.ix_(*idx)])
    dt = dlmg.from_fragments(arrays, layout)
    d = dt.__partitioned__
    for pos, part in d["partitions"].items():
        holder = part["location"][0][0]
        assert (part["data"] is not None) == (holder == dd.rank()), (pos, holder)
    assert sorted(d["locals"]) == sorted(p for p, part in d["partitions"].items() if part["data"] is not None)
    back = dlmg.from_partitioned(d)
    assert back.layout == layout
    for f, g in zip(back.fragments, dt.fragments):
        assert f.is_local == g.is_local
        if f.is_local:
            assert f.array is g.array
    np.testing.assert_array_equal(np.asarray(back.gather(framework="numpy")), full)
    return len(d["locals"])


def dtensor_jax_chain():
    """A global jax.Array over one CPU device per process -> dlmg -> DTensor -> dlmg ->
    jax.Array: every process's buffer stays the same memory all along (multi-controller JAX)."""
    import jax
    import torch
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    world, me = dd.world_size(), dd.rank()
    devs = [next(d for d in jax.devices() if d.process_index == p) for p in range(world)]
    mesh = Mesh(np.array(devs), ("x",))
    full = np.arange(4 * world * 3, dtype=np.float32).reshape(4 * world, 3)
    x = jax.make_array_from_callback(full.shape, NamedSharding(mesh, P("x")), lambda idx: full[idx])
    (shard,) = x.addressable_shards
    ptr = shard.data.unsafe_buffer_pointer()
    t = dlmg.from_jax(x)
    dt = t.to_dtensor()
    assert dt.to_local().data_ptr() == ptr, "JAX -> DTensor copied"
    assert torch.equal(dt.full_tensor(), torch.from_numpy(full))
    t2 = dlmg.from_dtensor(dt, devices=t.layout.devices)
    assert t2.layout == t.layout
    y = t2.to_jax(mesh=mesh)  # torch fragments go to JAX on their devices, no copy
    (back,) = y.addressable_shards
    assert back.data.unsafe_buffer_pointer() == ptr, "DTensor -> JAX copied"
    np.testing.assert_array_equal(np.asarray(back.data), full[4 * me:4 * me + 4])
    return ptr != 0


SCENARIOS = {
    "dtensor_roundtrip": dtensor_roundtrip,
    "dtensor_partial": dtensor_partial,
    "dtensor_refusals": dtensor_refusals,
    "partitioned_roundtrip": partitioned_roundtrip,
    "dtensor_jax_chain": dtensor_jax_chain,
}
