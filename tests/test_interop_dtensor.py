"""PyTorch DTensor in and out of dlmg, in one process (a world-size-1 gloo group),
and the placement rules checked against DTensor's own shard arithmetic."""

from __future__ import annotations

import itertools
import socket

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():  # pragma: no cover
    pytest.skip("needs torch.distributed", allow_module_level=True)

from torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor  # noqa: E402

import dlmg  # noqa: E402
from dlmg import Layout, LayoutError  # noqa: E402
from dlmg.device import Device  # noqa: E402
from dlmg.interop._dtensor_layout import chunk_pieces, layout_from_placements  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def world():
    """A world-size-1 gloo process group (left alone if the run already has one)."""
    if dist.is_initialized():
        yield dist.get_world_size()
        return
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{_free_port()}")
    try:
        yield 1
    finally:
        dist.destroy_process_group()


@pytest.fixture(scope="module")
def mesh(world):
    if world != 1:
        pytest.skip("these checks run in a one-process group")
    return init_device_mesh("cpu", (1,))


@pytest.fixture(scope="module")
def mesh2d(world):
    if world != 1:
        pytest.skip("these checks run in a one-process group")
    return init_device_mesh("cpu", (1, 1))


# -- the placement rules against DTensor's arithmetic ----------------------------------------
def _torch_placement(p):
    return {"shard": lambda: Shard(p[1]), "replicate": Replicate}[p[0]]()


CASES = [
    ((4,), [("shard", 0)]),
    ((4,), [("shard", 1)]),
    ((4,), [("replicate",)]),
    ((2, 2), [("shard", 0), ("shard", 1)]),
    ((2, 2), [("shard", 1), ("shard", 0)]),
    ((2, 2), [("shard", 0), ("replicate",)]),
    ((2, 2), [("replicate",), ("shard", 1)]),
    ((2, 2), [("shard", 0), ("shard", 0)]),
    ((2, 3), [("shard", 1), ("shard", 1)]),
    ((2, 3), [("shard", 0), ("shard", 1)]),
    ((2, 2, 2), [("shard", 0), ("replicate",), ("shard", 1)]),
]
SHAPES = [(8, 12), (7, 5), (3, 2), (1, 9), (0, 4), (13, 1)]


@pytest.mark.parametrize("mesh_shape, placements", CASES, ids=[str(c) for c in CASES])
def test_placements_match_dtensor_local_shapes_and_offsets(mesh_shape, placements):
    from torch.distributed.tensor._utils import _compute_local_shape_and_global_offset

    torch_placements = [_torch_placement(p) for p in placements]
    ranks = list(range(int(np.prod(mesh_shape))))
    checked = 0
    for shape in SHAPES:
        try:
            layout, frag_ranks = layout_from_placements(
                shape, ranks, mesh_shape, placements, lambda r: Device("cpu", 0)
            )
        except LayoutError:
            # only nested uneven cuts are refused: their pieces are not equal blocks
            cut = [p[1] for p in placements if p[0] == "shard"]
            assert len(cut) != len(set(cut))
            continue
        for flat, coord in enumerate(itertools.product(*(range(s) for s in mesh_shape))):
            local, offset = _compute_local_shape_and_global_offset(shape, mesh_shape, list(coord), torch_placements)
            frag = layout.fragments[frag_ranks.index(flat)]
            assert frag.shape == tuple(local), (shape, coord)
            if frag.size:
                assert tuple(r[0][0] for r in frag.ranges) == tuple(offset), (shape, coord)
            checked += 1
    assert checked


def test_nested_uneven_pieces_are_refused():
    assert chunk_pieces(10, [2, 2]) == [(0, 3), (3, 2), (5, 3), (8, 2)]
    with pytest.raises(LayoutError, match=r"pieces of sizes \[3, 2, 3, 2\].*Shard\(0\)"):
        layout_from_placements((10,), range(4), (2, 2), [("shard", 0), ("shard", 0)], lambda r: Device("cpu", 0))
    # even nested pieces are one grid of 4 (mesh dimension 0 major)
    lay, ranks = layout_from_placements((8,), range(4), (2, 2), [("shard", 0), ("shard", 0)], lambda r: Device("cpu", 0))
    assert lay.grid == (4,) and lay.block == (2,) and ranks == (0, 1, 2, 3)


def test_uneven_torch_chunk_rule():
    lay, _ = layout_from_placements((5,), range(4), (4,), [("shard", 0)], lambda r: Device("cpu", 0))
    assert [f.shape for f in lay.fragments] == [(2,), (2,), (1,), (0,)]
    assert lay == Layout.slab((5,), 0, ["cpu"] * 4)


def test_two_d_mesh_order_and_replicas():
    """Mesh (2, 2) of ranks [[0, 1], [2, 3]] with (Shard(0), Replicate()): rows split by mesh
    dimension 0; the two ranks of a mesh row are replicas."""
    lay, ranks = layout_from_placements(
        (6, 4), [0, 1, 2, 3], (2, 2), [("shard", 0), ("replicate",)], lambda r: Device("cpu", 0)
    )
    assert lay.grid == (2, 1) and lay.nreplicas == 2 and ranks == (0, 2, 1, 3)
    lay, ranks = layout_from_placements(
        (6, 4), [0, 1, 2, 3], (2, 2), [("shard", 1), ("shard", 0)], lambda r: Device("cpu", 0)
    )
    assert lay.grid == (2, 2) and lay.block == (3, 2)
    assert ranks == (0, 1, 2, 3)  # fragment (c0, c1) = rank at mesh (c1, c0)


# -- one process ---------------------------------------------------------------------------
@pytest.mark.parametrize("placement", [Shard(0), Shard(1), Replicate()])
@pytest.mark.parametrize("shape", [(6, 4), (5, 3), (0, 2)])
def test_from_dtensor_and_back_zero_copy(mesh, placement, shape):
    x = torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)
    dt = distribute_tensor(x, mesh, [placement])
    t = dlmg.from_dtensor(dt)
    assert t.shape == shape and t.dtype == "float32"
    assert t.fragments[0].array.data_ptr() == dt.to_local().data_ptr()
    torch.testing.assert_close(t.gather(), dt.full_tensor())
    back = t.to_dtensor()
    assert back.to_local().data_ptr() == dt.to_local().data_ptr()
    assert back.shape == dt.shape and back.stride() == dt.stride()
    torch.testing.assert_close(back.full_tensor(), x)


def test_two_mesh_dimensions(mesh2d):
    x = torch.arange(20, dtype=torch.float64).reshape(4, 5)
    for placements in ([Shard(0), Shard(1)], [Shard(0), Replicate()], [Shard(1), Shard(1)]):
        dt = distribute_tensor(x, mesh2d, placements)
        t = dlmg.from_dtensor(dt)
        assert t.fragments[0].array.data_ptr() == dt.to_local().data_ptr()
        torch.testing.assert_close(t.gather(), x)
        back = dlmg.to_dtensor(t, mesh=mesh2d)
        assert back.to_local().data_ptr() == dt.to_local().data_ptr()
        torch.testing.assert_close(back.full_tensor(), x)


def test_partial_is_a_pending_sum_or_reduced_on_request(mesh):
    x = torch.ones(3, 2)
    dt = DTensor.from_local(x, mesh, [Partial()])
    t = dlmg.from_dtensor(dt)  # no reduction: the shard is one addend
    assert t.layout.partial == "sum"
    assert t.fragments[0].array.data_ptr() == x.data_ptr()
    back = dlmg.to_dtensor(t)
    assert back.placements[0].is_partial() and back.to_local().data_ptr() == x.data_ptr()
    torch.testing.assert_close(t.gather(), x)
    t = dlmg.from_dtensor(dt, reduce=True)
    assert t.layout.partial is None
    torch.testing.assert_close(t.gather(), x)
    with pytest.raises(LayoutError, match=r"Partial \(avg\).*reduce=True"):
        dlmg.from_dtensor(DTensor.from_local(x, mesh, [Partial("avg")]))


def test_block_cyclic_is_refused_with_the_redistribute_call(world):
    lay = Layout((12,), block=(2,), grid=(2,), devices=["cpu"] * 2)
    t = dlmg.scatter(np.arange(12.0), lay)
    with pytest.raises(LayoutError, match=r"block-cyclic.*block=\(6,\).*redistribute"):
        t.to_dtensor()
    odd = dlmg.scatter(np.arange(8.0), Layout((8,), block=(3,), grid=(4,), devices=["cpu"] * 4))
    with pytest.raises(LayoutError, match=r"pieces of 2"):
        odd.to_dtensor()


def test_two_fragments_in_one_process_are_refused(world):
    t = dlmg.scatter(np.arange(12.0), Layout.slab((12,), 0, ["cpu"] * 2))
    with pytest.raises(LayoutError, match="fragments 0 and 1 .* rank 0"):
        t.to_dtensor()


def test_other_frameworks_go_through_dlpack(mesh):
    t = dlmg.scatter(np.arange(6.0).reshape(2, 3), Layout.single((2, 3), "cpu"))
    dt = t.to_dtensor()
    assert dt.to_local().data_ptr() == t.fragments[0].array.ctypes.data
    torch.testing.assert_close(dt.full_tensor(), torch.arange(6.0, dtype=torch.float64).reshape(2, 3))


def test_devices_of_the_wrong_count_are_refused(mesh):
    dt = distribute_tensor(torch.zeros(2, 2), mesh, [Shard(0)])
    with pytest.raises(LayoutError, match="devices has 2 entries but the DTensor has 1 shards"):
        dlmg.from_dtensor(dt, devices=["cpu", "cpu"])


def test_not_a_dtensor():
    with pytest.raises(TypeError, match="DTensor"):
        dlmg.from_dtensor(torch.zeros(2))


def test_jax_array_through_dtensor_keeps_its_buffer(mesh):
    """jax.Array -> dlmg -> DTensor -> dlmg -> jax.Array: the same buffer all along."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jax.device_put(jnp.arange(24, dtype=jnp.float32).reshape(4, 6), jax.devices("cpu")[0])
    ptr = x.unsafe_buffer_pointer()
    t = dlmg.from_jax(x)
    dt = t.to_dtensor(mesh=mesh)
    assert dt.to_local().data_ptr() == ptr
    t2 = dlmg.from_dtensor(dt, devices=t.layout.devices)
    assert t2.layout == t.layout
    y = t2.to("jax").to_jax()
    assert y.unsafe_buffer_pointer() == ptr
    np.testing.assert_array_equal(np.asarray(y), np.asarray(x))


def test_a_given_two_dimensional_mesh(mesh2d):
    t = dlmg.scatter(np.arange(4.0), Layout.single((4,), "cpu"))
    other = DeviceMesh("cpu", torch.tensor([[0]]))
    assert dlmg.to_dtensor(t, mesh=other).placements == (Replicate(), Replicate())


# -- read-only memory and the advice of errors ------------------------------------------------
def test_to_dtensor_of_read_only_numpy_never_hands_torch_a_writable_view(world):
    if world != 1:
        pytest.skip("these checks run in a one-process group")
    source = np.arange(6.0).reshape(2, 3)
    source.flags.writeable = False
    t = dlmg.from_fragments([source], Layout((2, 3), devices=["cpu"]))
    local = t.to_dtensor().to_local()
    local.add_(1)
    np.testing.assert_array_equal(source, np.arange(6.0).reshape(2, 3))


def test_the_layout_to_dtensor_suggests_keeps_the_ranks():
    from dlmg.interop._dtensor_layout import nearest_expressible

    layout = Layout((7, 4), block=(2, 4), grid=(2, 1), devices=["cpu"] * 2, ranks=(1, 0))
    assert nearest_expressible(layout).ranks == (1, 0)
