"""Sharded ``jax.Array`` in and out of dlmg, on JAX's 8 CPU devices.

Every conversion is checked three ways: the values, the data pointers (the
same buffers before and after: no copy), and the geometry (each fragment owns
exactly the elements JAX's ``addressable_shards[i].index`` says).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding  # noqa: E402

import dlmg  # noqa: E402
from dlmg import Layout  # noqa: E402
from dlmg.errors import DtypeError, FrameworkError, FragmentError, LayoutError  # noqa: E402
from dlmg.interop.jax import (  # noqa: E402
    from_jax,
    jax_compatible_layout,
    jax_layout_problems,
    layout_from_sharding,
    sharding_from_layout,
    to_jax,
)

CPUS = jax.devices("cpu")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    len(CPUS) < 8, reason="needs 8 JAX CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)"
)]

SHAPE = (8, 8, 4)

#: mesh shape -> PartitionSpecs: one axis, two axes, one mode over two mesh axes, none
CASES = {
    (8,): [P("a"), P(None, "a"), P()],
    (2, 4): [P("a"), P("a", "b"), P(("b", "a")), P(None, ("a", "b")), P()],
    (4, 2): [P("b"), P("b", "a"), P(("a", "b")), P(None, None, "b"), P()],
    (2, 2, 2): [P("c"), P("a", None, "b"), P(("c", "a"), "b"), P()],
}
NAMES = ("a", "b", "c")
MESH_SPECS = [(m, s) for m, specs in CASES.items() for s in specs]


def _ids(case):
    mesh_shape, spec = case
    return f"mesh{'x'.join(map(str, mesh_shape))}-{spec}"


def make_mesh(mesh_shape, *, shuffle=False):
    devices = list(CPUS[:8])
    if shuffle:  # an arbitrary device order exercises every ordering rule
        devices = [devices[i] for i in np.random.default_rng(len(mesh_shape)).permutation(8)]
    return jax.sharding.Mesh(np.array(devices).reshape(mesh_shape), NAMES[: len(mesh_shape)])


def make_array(sharding, dtype="float32", shape=SHAPE):
    host = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    if dtype == "bool":
        host = host % 3 == 0
    else:
        host = host.astype(jnp.dtype(dtype))
    return jax.device_put(host, sharding), host


def pointers(x):
    """``{device: buffer address}`` of a jax.Array's shards (replicas included)."""
    return {dlmg.Device("cpu", s.device.id): s.data.unsafe_buffer_pointer() for s in x.addressable_shards}


def torch_ptr(t):
    return t.data_ptr()


def same_placement(a, b, shape):
    """Whether two shardings put the same piece on every device (JAX's
    ``is_equivalent_to`` also wants the same device order)."""
    return a.devices_indices_map(tuple(shape)) == b.devices_indices_map(tuple(shape))


@pytest.fixture
def x64():
    """64-bit types on for one test; the previous setting comes back afterwards."""
    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


# --------------------------------------------------------------------------
# sharding -> layout: the geometry


@pytest.mark.parametrize("shuffle", [False, True], ids=["ordered", "shuffled"])
@pytest.mark.parametrize("case", MESH_SPECS, ids=_ids)
def test_layout_owns_what_each_shard_index_says(case, shuffle):
    mesh_shape, spec = case
    sharding = NamedSharding(make_mesh(mesh_shape, shuffle=shuffle), spec)
    x, host = make_array(sharding)
    layout = layout_from_sharding(sharding, SHAPE)
    assert layout.nfragments == 8 and len(set(layout.devices)) == 8
    for shard in x.addressable_shards:
        f = layout.devices.index(dlmg.Device("cpu", shard.device.id))
        frag = layout.fragments[f]
        assert frag.replica == shard.replica_id
        assert frag.shape == shard.data.shape
        for m, n in enumerate(SHAPE):
            np.testing.assert_array_equal(layout.owned_indices(f, m), np.arange(n)[shard.index[m]])


def test_mode_over_two_mesh_axes_is_major_first():
    mesh = make_mesh((2, 4))
    layout = layout_from_sharding(NamedSharding(mesh, P(("a", "b"))), (8,))
    # grid coordinate along mode 0 = a_index * |b| + b_index: devices in mesh row-major order
    assert layout.grid == (8,) and layout.block == (1,)
    assert [d.index for d in layout.devices] == [d.id for d in mesh.devices.flat]
    layout = layout_from_sharding(NamedSharding(mesh, P(("b", "a"))), (8,))
    assert [d.index for d in layout.devices] == [d.id for d in mesh.devices.T.flat]


def test_grid_is_column_major_then_replica():
    mesh = make_mesh((2, 2, 2))
    layout = layout_from_sharding(NamedSharding(mesh, P("b", "c")), (4, 4))
    assert layout.grid == (2, 2) and layout.nreplicas == 2 and layout.block == (2, 2)
    # fragment f = c0 + 2 * c1 + 4 * replica; c0 along 'b', c1 along 'c', replica along 'a'
    expect = [mesh.devices[r, c0, c1].id for r in range(2) for c1 in range(2) for c0 in range(2)]
    assert [d.index for d in layout.devices] == expect


#: the table of docs/interop.md: spec on mesh (2, 4) -> block, grid, replicas, device ids
DOC_TABLE = [
    (P("a", "b"), (4, 2), (2, 4), 1, [0, 4, 1, 5, 2, 6, 3, 7]),
    (P("b", "a"), (2, 4), (4, 2), 1, [0, 1, 2, 3, 4, 5, 6, 7]),
    (P(("a", "b")), (1, 8), (8, 1), 1, [0, 1, 2, 3, 4, 5, 6, 7]),
    (P(("b", "a")), (1, 8), (8, 1), 1, [0, 4, 1, 5, 2, 6, 3, 7]),
    (P("a"), (4, 8), (2, 1), 4, [0, 4, 1, 5, 2, 6, 3, 7]),
    (P(None, "b"), (8, 2), (1, 4), 2, [0, 1, 2, 3, 4, 5, 6, 7]),
    (P(), (8, 8), (1, 1), 8, [0, 1, 2, 3, 4, 5, 6, 7]),
]


@pytest.mark.parametrize("spec, block, grid, nreplicas, ids", DOC_TABLE, ids=[str(r[0]) for r in DOC_TABLE])
def test_the_documented_table(spec, block, grid, nreplicas, ids):
    layout = layout_from_sharding(NamedSharding(make_mesh((2, 4)), spec), (8, 8))
    assert (layout.block, layout.grid, layout.nreplicas) == (block, grid, nreplicas)
    assert [d.index for d in layout.devices] == ids


@pytest.mark.parametrize("case", MESH_SPECS, ids=_ids)
def test_sharding_from_layout_round_trips(case):
    mesh_shape, spec = case
    mesh = make_mesh(mesh_shape, shuffle=True)
    sharding = NamedSharding(mesh, spec)
    layout = layout_from_sharding(sharding, SHAPE)
    own = sharding_from_layout(layout)  # a mesh of its own
    assert layout_from_sharding(own, SHAPE) == layout
    on_mesh = sharding_from_layout(layout, mesh)  # the given mesh: the spec comes back
    assert on_mesh.mesh == mesh
    assert on_mesh.devices_indices_map(SHAPE) == sharding.devices_indices_map(SHAPE)
    assert tuple(on_mesh.spec) + (None,) * 3 == tuple(spec) + (None,) * (3 + len(on_mesh.spec) - len(spec))
    assert Layout.to_sharding(layout, mesh) == on_mesh  # attached by dlmg


def test_single_device_and_scalar_layouts():
    dev = CPUS[3]
    layout = layout_from_sharding(SingleDeviceSharding(dev), (4, 5))
    assert layout == Layout.single((4, 5), "cpu:3")
    assert layout_from_sharding(SingleDeviceSharding(dev), ()) == Layout.single((), "cpu:3")
    sharding = sharding_from_layout(layout)
    assert sharding.device_set == {dev}
    assert layout_from_sharding(sharding, (4, 5)) == layout


def test_fully_replicated_layout():
    mesh = make_mesh((2, 4))
    layout = layout_from_sharding(NamedSharding(mesh, P()), (3, 5))
    assert layout == Layout.replicated((3, 5), [f"cpu:{d.id}" for d in mesh.devices.flat])


def test_gspmd_sharding_goes_through_the_index_map():
    sharding_impls = pytest.importorskip("jax._src.sharding_impls")
    gspmd = getattr(sharding_impls, "GSPMDSharding", None)
    if gspmd is None:
        pytest.skip("this JAX has no GSPMDSharding")
    mesh = make_mesh((2, 4))
    named = NamedSharding(mesh, P("b"))
    sharding = gspmd(tuple(mesh.devices.flat), named._to_xla_hlo_sharding(2))
    assert layout_from_sharding(sharding, (8, 8)) == layout_from_sharding(named, (8, 8))
    x, host = make_array(sharding, shape=(8, 8))
    dt = from_jax(x)
    np.testing.assert_array_equal(np.asarray(to_jax(dt)), host)


class _MapSharding:
    """A duck-typed sharding with a hand-written device -> index map."""

    def __init__(self, index_map):
        self.index_map = index_map

    def devices_indices_map(self, shape):
        return self.index_map


@pytest.mark.parametrize(
    "index_map, match",
    [
        ({0: (slice(0, 3),), 1: (slice(2, 8),)}, "does not tile"),
        ({0: (slice(0, 2),), 1: (slice(2, 8),)}, "one size"),
        ({0: (slice(0, 4),), 1: (slice(4, 8),), 2: (slice(4, 8),)}, "held unevenly"),
        ({0: (slice(0, 8, 2),)}, "step 2"),
    ],
    ids=["overlap", "unequal", "uneven-replicas", "strided"],
)
def test_irregular_index_maps_are_refused(index_map, match):
    index_map = {CPUS[k]: v for k, v in index_map.items()}
    with pytest.raises(LayoutError, match=match):
        layout_from_sharding(_MapSharding(index_map), (8,))


def test_a_sharding_that_does_not_fit_the_shape():
    sharding = NamedSharding(make_mesh((8,)), P("a"))
    with pytest.raises(LayoutError, match="does not fit shape"):
        layout_from_sharding(sharding, (6,))
    with pytest.raises(TypeError, match="jax.sharding.Sharding"):
        layout_from_sharding(object(), (6,))


def test_every_mesh_factorisation_and_assignment():
    """All ways to factor 8 devices into a mesh and hand its axes to two modes."""
    devices = [CPUS[i] for i in np.random.default_rng(1).permutation(8)]
    by_id = {d.id: d for d in devices}
    shape = (16, 8)
    count = 0
    for mesh_shape in [(8,), (2, 4), (4, 2), (2, 2, 2), (1, 8), (2, 1, 4)]:
        names = tuple(f"m{i}" for i in range(len(mesh_shape)))
        mesh = jax.sharding.Mesh(np.array(devices).reshape(mesh_shape), names)
        specs = set()
        for assign in itertools.product(range(3), repeat=len(names)):  # axis -> mode 0, mode 1, unused
            for perm in itertools.permutations(names):
                entries = [tuple(a for a in perm if assign[names.index(a)] == m) for m in range(2)]
                specs.add(tuple(e if e else None for e in entries))
        for entries in sorted(specs, key=repr):
            sharding = NamedSharding(mesh, P(*entries))
            layout = layout_from_sharding(sharding, shape)
            index_map = sharding.devices_indices_map(shape)
            for f, frag in enumerate(layout.fragments):
                index = index_map[by_id[frag.device.index]]
                for m in range(2):
                    assert list(layout.owned_indices(f, m)) == list(range(shape[m]))[index[m]]
            assert sharding_from_layout(layout, mesh).devices_indices_map(shape) == index_map
            assert layout_from_sharding(sharding_from_layout(layout), shape) == layout
            count += 1
    assert count > 50


# --------------------------------------------------------------------------
# from_jax / to_jax: values and pointers


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "bfloat16"])
@pytest.mark.parametrize("case", MESH_SPECS, ids=_ids)
def test_round_trip_is_zero_copy(case, dtype):
    mesh_shape, spec = case
    mesh = make_mesh(mesh_shape, shuffle=True)
    x, host = make_array(NamedSharding(mesh, spec), dtype)
    before = pointers(x)
    dt = from_jax(x)
    assert dt.shape == SHAPE and dt.layout == layout_from_sharding(x.sharding, SHAPE)
    assert {f.device: f.array.unsafe_buffer_pointer() for f in dt.fragments} == before
    for frag in dt.fragments:  # each fragment holds what its layout says
        ix = np.ix_(*(dt.layout.owned_indices(frag.index, m) for m in range(3)))
        np.testing.assert_array_equal(np.asarray(frag.array), host[ix])
    y = to_jax(dt, mesh=mesh)
    assert same_placement(y.sharding, x.sharding, SHAPE)
    assert pointers(y) == before
    np.testing.assert_array_equal(np.asarray(y), host)
    z = dt.to_jax()  # the method; a mesh of its own
    assert pointers(z) == before and same_placement(z.sharding, x.sharding, SHAPE)


@pytest.mark.parametrize("case", MESH_SPECS, ids=_ids)
def test_to_torch_shares_the_shards(case):
    torch = pytest.importorskip("torch")
    mesh_shape, spec = case
    x, host = make_array(NamedSharding(make_mesh(mesh_shape), spec), "float32")
    before = pointers(x)
    tt = from_jax(x).to("torch")
    assert all(isinstance(f.array, torch.Tensor) for f in tt.fragments)
    got = {tt.layout.devices[f.index]: torch_ptr(f.array) for f in tt.fragments}
    assert got == before
    # and back to JAX onto the same devices, still without a copy
    y = tt.to_jax(mesh=x.sharding.mesh)
    assert pointers(y) == before
    np.testing.assert_array_equal(np.asarray(y), host)


@pytest.mark.parametrize("dtype", ["bfloat16", "bool", "int32"])
def test_to_torch_dtypes(dtype):
    torch = pytest.importorskip("torch")
    x, host = make_array(NamedSharding(make_mesh((2, 4)), P("a", "b")), dtype)
    tt = from_jax(x).to("torch")
    expect = {"bfloat16": torch.bfloat16, "bool": torch.bool, "int32": torch.int32}[dtype]
    assert {f.array.dtype for f in tt.fragments} == {expect}
    assert {tt.layout.devices[f.index]: f.array.data_ptr() for f in tt.fragments} == pointers(x)


def test_float64_with_x64(x64):
    torch = pytest.importorskip("torch")
    x, host = make_array(NamedSharding(make_mesh((4, 2)), P("a", "b")), "float64")
    host = host + 2.0**-40  # a value float32 would lose
    x = jax.device_put(host, x.sharding)
    before = pointers(x)
    dt = from_jax(x)
    assert dt.dtype == "float64"
    y = to_jax(dt)
    assert y.dtype == jnp.float64 and pointers(y) == before
    np.testing.assert_array_equal(np.asarray(y), host)
    tt = dt.to("torch")
    assert {f.array.dtype for f in tt.fragments} == {torch.float64}
    assert {tt.layout.devices[f.index]: f.array.data_ptr() for f in tt.fragments} == before
    np.testing.assert_array_equal(np.asarray(tt.to_jax()), host)


def test_float64_without_x64_is_refused():
    layout = Layout.slab((8, 2), axis=0, devices=[f"cpu:{i}" for i in range(8)])
    host = np.arange(16, dtype=np.float64).reshape(8, 2)
    dt = dlmg.from_fragments([host[i : i + 1].copy() for i in range(8)], layout)
    if jax.config.jax_enable_x64:
        pytest.skip("needs jax_enable_x64 off")
    with pytest.raises(DtypeError, match="x64"):
        to_jax(dt)


def test_single_device_and_replicated_arrays():
    x = jax.device_put(np.arange(12.0, dtype=np.float32).reshape(3, 4), CPUS[5])
    dt = from_jax(x)
    assert dt.layout == Layout.single((3, 4), "cpu:5")
    assert dt.fragments[0].array.unsafe_buffer_pointer() == x.unsafe_buffer_pointer()
    y = to_jax(dt)
    assert y.unsafe_buffer_pointer() == x.unsafe_buffer_pointer() and y.devices() == {CPUS[5]}

    x, host = make_array(NamedSharding(make_mesh((2, 4)), P()), "int32", shape=(3, 5))
    dt = from_jax(x)
    assert dt.layout.nreplicas == 8 and [f.replica for f in dt.fragments] == list(range(8))
    y = to_jax(dt)
    assert y.sharding.is_fully_replicated and pointers(y) == pointers(x)
    np.testing.assert_array_equal(np.asarray(y), host)


def test_scalar_array():
    x = jax.device_put(jnp.float32(2.5), CPUS[2])
    dt = from_jax(x)
    assert dt.shape == () and float(to_jax(dt)) == 2.5


def test_numpy_fragments_become_a_sharded_array():
    layout = Layout((8, 6), block=(4, 3), grid=(2, 2), devices=["cpu:7", "cpu:1", "cpu:4", "cpu:2"])
    host = np.arange(48, dtype=np.float32).reshape(8, 6)
    arrays = []
    for frag in layout.fragments:
        (r0, r1), (c0, c1) = frag.ranges[0][0], frag.ranges[1][0]
        arrays.append(host[r0:r1, c0:c1].copy())
    y = to_jax(dlmg.from_fragments(arrays, layout))
    np.testing.assert_array_equal(np.asarray(y), host)
    assert layout_from_sharding(y.sharding, (8, 6)) == layout


# --------------------------------------------------------------------------
# layouts JAX cannot express


def _numpy_tensor(layout, dtype=np.float32):
    host = np.arange(int(np.prod(layout.shape)), dtype=dtype).reshape(layout.shape)
    arrays = []
    for f in range(layout.nfragments):
        ix = np.ix_(*(layout.owned_indices(f, m) for m in range(layout.ndim)))
        arrays.append(np.ascontiguousarray(host[ix]))
    return dlmg.from_fragments(arrays, layout), host


EIGHT = [f"cpu:{i}" for i in range(8)]
BAD = {
    "block-cyclic": Layout((16, 4), block=(2, 4), grid=(4, 1), devices=EIGHT[:4]),
    "uneven": Layout.slab((10, 4), axis=0, devices=EIGHT[:4]),
    "one-device-two-fragments": Layout.slab((8, 4), axis=0, devices=["cpu:0"] * 4),
    "cyclic-2d": Layout((8, 8), block=(1, 1), grid=(2, 4), devices=EIGHT),
}


@pytest.mark.parametrize("name", list(BAD))
def test_inexpressible_layouts_name_a_target(name):
    layout = BAD[name]
    assert jax_layout_problems(layout)
    dt, host = _numpy_tensor(layout)
    with pytest.raises(LayoutError, match=r"redistribute\(Layout") as info:
        to_jax(dt)
    message = str(info.value)
    assert "redistribute=True" in message
    target = jax_compatible_layout(layout)
    assert not jax_layout_problems(target)
    # the layout the message names is one JAX can express, and it is that target
    expr = message.split("redistribute(", 1)[1].rsplit("), or call", 1)[0]
    assert eval(expr, {"Layout": Layout}) == target
    with pytest.raises(LayoutError, match="JAX cannot express"):
        sharding_from_layout(layout)


@pytest.mark.parametrize("name", list(BAD))
def test_redistribute_true_makes_them_work(name):
    dt, host = _numpy_tensor(BAD[name])
    y = to_jax(dt, redistribute=True)
    np.testing.assert_array_equal(np.asarray(y), host)
    assert layout_from_sharding(y.sharding, host.shape) == jax_compatible_layout(BAD[name])


def test_block_cyclic_keeps_grid_and_devices_in_the_target():
    layout = BAD["cyclic-2d"]
    target = jax_compatible_layout(layout)
    assert target.grid == layout.grid and target.devices == layout.devices and target.block == (4, 2)


def test_redistribute_onto_a_given_mesh():
    mesh = make_mesh((2, 4), shuffle=True)
    dt, host = _numpy_tensor(BAD["block-cyclic"])
    with pytest.raises(LayoutError, match="Layout.slab"):
        to_jax(dt, mesh=mesh)
    y = to_jax(dt, mesh=mesh, redistribute=True)
    assert y.sharding.mesh == mesh
    np.testing.assert_array_equal(np.asarray(y), host)


def test_layout_that_does_not_fit_the_mesh():
    mesh = make_mesh((2, 4))
    x, _ = make_array(NamedSharding(mesh, P("a", "b")))
    layout = layout_from_sharding(x.sharding, SHAPE)
    with pytest.raises(LayoutError, match="exactly the layout's devices"):
        sharding_from_layout(Layout.slab(SHAPE, axis=0, devices=EIGHT[:4]), mesh)
    # the same devices, numbered so that no mesh axis order gives mode 0's coordinates
    scrambled = layout.with_devices([layout.devices[i] for i in (0, 3, 2, 1, 4, 5, 6, 7)])
    with pytest.raises(LayoutError, match="does not fit mesh"):
        sharding_from_layout(scrambled, mesh)


# --------------------------------------------------------------------------
# what from_jax refuses


def test_from_jax_refuses_non_jax_and_deleted_arrays():
    with pytest.raises(FrameworkError, match="jax.Array"):
        from_jax(np.zeros(3))
    x = jax.device_put(np.zeros(4, np.float32), NamedSharding(make_mesh((8,)), P()))
    x.delete()
    with pytest.raises(FragmentError, match="deleted"):
        from_jax(x)


def test_public_names():
    assert dlmg.from_jax is from_jax
    assert dlmg.layout_from_sharding is layout_from_sharding
    assert dlmg.sharding_from_layout is sharding_from_layout
    assert callable(dlmg.to_sharding)
