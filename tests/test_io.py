"""dlmg.save / dlmg.load in one process: any layout and framework to any other,
every element type, the files read by zarr-python and TensorStore alike, and the
refusals (incomplete saves, corrupt or missing chunks, overwrites, foreign files)."""

from __future__ import annotations

import json
import os
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlmg
from dlmg import Layout
from _strategies import FRAMEWORKS, check_fragments, dtypes_for, jax_cpus, layouts, make, need, reference, shapes

pytest.importorskip("tensorstore")


def _source(x, layout, framework, dtype):
    return dlmg.scatter(make(x, framework, dtype), layout, framework=framework)


@st.composite
def _cases(draw):
    shape = draw(shapes(max_extent=7))
    use_jax = jax_cpus() >= 2
    src_fw, dst_fw = draw(st.sampled_from(FRAMEWORKS)), draw(st.sampled_from(FRAMEWORKS))
    dtype = draw(st.sampled_from(dtypes_for(src_fw, dst_fw)))
    return (shape, draw(layouts(shape, use_jax)), src_fw, draw(layouts(shape, use_jax)), dst_fw, dtype,
            draw(st.integers(0, 2**16)))


@settings(max_examples=100, derandomize=True)
@given(_cases())
def test_any_layout_and_framework_loads_into_any_other(case):
    """Save from a random layout and framework, load into another: every value exact."""
    need("torch", "jax")
    shape, src_layout, src_fw, dst_layout, dst_fw, dtype, seed = case
    x = reference(shape, dtype, seed)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t")
        dlmg.save(path, _source(x, src_layout, src_fw, dtype))
        got = dlmg.load(path, dst_layout, framework=dst_fw)
        assert got.layout == dst_layout and got.dtype == dtype
        assert set(got.frameworks) == {dst_fw}
        check_fragments(got, x)
        again = dlmg.load(path)  # the saved layout and framework
        assert again.layout == src_layout and set(again.frameworks) == {src_fw}
        check_fragments(again, x)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float64", "complex128", "bfloat16"])
def test_every_dtype_round_trips_exactly(tmp_path, dtype):
    need("torch")
    fw = "torch" if dtype == "bfloat16" else "numpy"
    x = reference((5, 6), dtype, 1)
    layout = Layout((5, 6), block=(2, 4), grid=(2, 1), devices=["cpu"] * 2)
    dlmg.save(tmp_path / "t", _source(x, layout, fw, dtype))
    got = dlmg.load(tmp_path / "t", Layout.single((5, 6)), framework=fw)
    check_fragments(got, x)


def test_a_dict_is_a_group_and_comes_back_as_a_dict(tmp_path):
    w = dlmg.scatter(np.arange(12.0).reshape(3, 4), Layout.slab((3, 4), 0, ["cpu"] * 2))
    b = dlmg.scatter(np.arange(4, dtype=np.int32), Layout.single(4))
    dlmg.save(tmp_path / "d", {"w": w, "b": b})
    meta = json.loads((tmp_path / "d" / "zarr.json").read_text())
    assert meta["node_type"] == "group" and meta["attributes"]["dlmg"]["keys"] == ["w", "b"]
    got = dlmg.load(tmp_path / "d", {"w": Layout.slab((3, 4), 1, ["cpu"] * 4)})
    assert got["w"].layout == Layout.slab((3, 4), 1, ["cpu"] * 4) and got["b"].layout == b.layout
    np.testing.assert_array_equal(got["w"].gather(framework="numpy"), np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(got["b"].gather(framework="numpy"), np.arange(4))
    assert dlmg.saved_layout(tmp_path / "d") == {"w": w.layout, "b": b.layout}


@pytest.mark.parametrize("reader", ["zarr", "tensorstore"])
def test_plain_zarr_readers_read_the_same_array(tmp_path, reader):
    """Both libraries read the files without dlmg; bfloat16 comes back as its bits in uint16."""
    need("torch")
    import torch

    x = np.arange(7 * 9, dtype=np.float32).reshape(7, 9)
    layout = Layout((7, 9), block=(2, 4), grid=(2, 2), devices=["cpu"] * 4)
    big = np.arange(256 * 512, dtype=np.float32).reshape(256, 512)  # sharded: inner chunks of 256 KiB
    bf = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    dlmg.save(tmp_path / "d", {
        "x": dlmg.scatter(x, layout),
        "big": dlmg.scatter(big, Layout.slab(big.shape, 0, ["cpu"] * 2)),
        "bf": dlmg.scatter(bf, Layout.single((3, 4))),
    })
    if reader == "zarr":
        zarr = pytest.importorskip("zarr")
        read = lambda name: zarr.open_array(str(tmp_path / "d" / name), mode="r")[...]  # noqa: E731
        attrs = zarr.open_array(str(tmp_path / "d" / "bf"), mode="r").attrs["dlmg"]
    else:
        import tensorstore as ts

        def read(name):
            spec = {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "d" / name)}}
            return ts.open(spec).result().read().result()

        attrs = json.loads((tmp_path / "d" / "bf" / "zarr.json").read_text())["attributes"]["dlmg"]
    np.testing.assert_array_equal(read("x"), x)
    np.testing.assert_array_equal(read("big"), big)
    bits = read("bf")
    assert bits.dtype == np.uint16 and attrs["dtype"] == "bfloat16"
    np.testing.assert_array_equal(bits, bf.view(torch.int16).numpy().view(np.uint16))


def test_chunks_follow_the_saved_blocks(tmp_path):
    layout = Layout((7, 9), block=(2, 4), grid=(2, 2), devices=["cpu"] * 4)
    dlmg.save(tmp_path / "t", dlmg.zeros(layout=layout, dtype="float32"))
    meta = json.loads((tmp_path / "t" / "zarr.json").read_text())
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [2, 4]
    assert {c["name"] for c in meta["codecs"]} == {"bytes", "crc32c"}
    record = meta["attributes"]["dlmg"]["layout"]
    assert record["block"] == [2, 4] and record["grid"] == [2, 2] and record["ranks"] == [0] * 4
    keys = sorted(os.path.relpath(os.path.join(d, f), tmp_path / "t") for d, _, fs in os.walk(tmp_path / "t" / "c")
                  for f in fs)
    assert keys == sorted(f"c/{i}/{j}" for i in range(4) for j in range(3))


# -- safe writes -----------------------------------------------------------------------
def test_an_existing_checkpoint_needs_overwrite(tmp_path):
    t = dlmg.scatter(np.arange(6.0), Layout.single(6))
    dlmg.save(tmp_path / "t", t)
    with pytest.raises(dlmg.CheckpointExistsError, match="overwrite=True"):
        dlmg.save(tmp_path / "t", t + 1)
    np.testing.assert_array_equal(dlmg.load(tmp_path / "t").gather(), np.arange(6.0))
    dlmg.save(tmp_path / "t", t + 1, overwrite=True)
    np.testing.assert_array_equal(dlmg.load(tmp_path / "t").gather(), np.arange(6.0) + 1)
    assert sorted(os.listdir(tmp_path)) == [".t.dlmg-lock", "t"]  # the lock file stays; no staging directory


def test_something_else_is_never_replaced(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(dlmg.CheckpointExistsError, match="no dlmg checkpoint"):
        dlmg.save(tmp_path / "mine", dlmg.zeros(layout=Layout.single(3), dtype="float32"), overwrite=True)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


def test_a_save_without_its_commit_marker_is_refused(tmp_path):
    dlmg.save(tmp_path / "t", dlmg.zeros(layout=Layout.single(3), dtype="float32"))
    os.remove(tmp_path / "t" / "dlmg-commit.json")
    with pytest.raises(dlmg.IncompleteCheckpointError, match="incomplete save"):
        dlmg.load(tmp_path / "t")


# -- corruption -----------------------------------------------------------------------
def _saved(tmp_path, shape=(8, 6), block=(4, 6)):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    layout = Layout(shape, block=block, grid=(2, 1), devices=["cpu"] * 2)
    dlmg.save(tmp_path / "t", dlmg.scatter(x, layout))
    return tmp_path / "t"


@pytest.mark.parametrize("shape, block", [((8, 6), (4, 6)), ((256, 512), (128, 512))], ids=["plain", "sharded"])
def test_a_flipped_byte_is_an_error_naming_the_chunk(tmp_path, shape, block):
    path = _saved(tmp_path, shape, block)
    chunk = path / "c" / "1" / "0"
    data = bytearray(chunk.read_bytes())
    data[10] ^= 0x40
    chunk.write_bytes(bytes(data))
    with pytest.raises(dlmg.ChunkError, match=r"chunk 'c/1/0'"):
        dlmg.load(path)


@pytest.mark.parametrize("shape, block", [((8, 6), (4, 6)), ((256, 512), (128, 512))], ids=["plain", "sharded"])
def test_a_truncated_chunk_is_an_error_naming_the_chunk(tmp_path, shape, block):
    path = _saved(tmp_path, shape, block)
    chunk = path / "c" / "0" / "0"
    chunk.write_bytes(chunk.read_bytes()[:-7])
    with pytest.raises(dlmg.ChunkError, match=r"chunk 'c/0/0'"):
        dlmg.load(path)


def test_a_missing_chunk_is_an_error_not_zeros(tmp_path):
    path = _saved(tmp_path)
    os.remove(path / "c" / "1" / "0")
    with pytest.raises(dlmg.ChunkError, match=r"chunk 'c/1/0' is missing"):
        dlmg.load(path)


# -- bad input ---------------------------------------------------------------------------
def test_clear_errors(tmp_path):
    path = _saved(tmp_path)
    with pytest.raises(dlmg.LayoutError, match=r"layout.shape = \(8, 5\)"):
        dlmg.load(path, Layout.single((8, 5)))
    with pytest.raises(dlmg.LayoutError, match="nprocesses = 2"):
        dlmg.load(path, Layout.slab((8, 6), 0, ["cpu"] * 2, ranks=[0, 1]))
    with pytest.raises(dlmg.CheckpointError, match="no Zarr v3 node"):
        dlmg.load(tmp_path)
    with pytest.raises(TypeError, match="dlmg.Layout"):
        dlmg.load(path, layout=(8, 6))
    with pytest.raises(TypeError, match="DistributedTensor"):
        dlmg.save(tmp_path / "u", np.zeros(3))
    with pytest.raises(dlmg.CheckpointError, match="key 'a/b'"):
        dlmg.save(tmp_path / "u", {"a/b": dlmg.zeros(layout=Layout.single(2), dtype="float32")})
    assert not (tmp_path / "u").exists()


def test_a_zarr_array_dlmg_did_not_write_is_named(tmp_path):
    zarr = pytest.importorskip("zarr")
    zarr.create_array(str(tmp_path / "z"), shape=(4,), dtype="float32")
    (tmp_path / "z" / "dlmg-commit.json").write_text(json.dumps({"complete": True}))
    with pytest.raises(dlmg.CheckpointError, match="no tensor saved by dlmg"):
        dlmg.load(tmp_path / "z")


def test_saved_layout_is_read_without_the_processes_it_needs(tmp_path):
    layout = Layout.slab((4, 2), 0, ["cpu"] * 2)
    dlmg.save(tmp_path / "t", dlmg.zeros(layout=layout, dtype="float32"))
    meta = json.loads((tmp_path / "t" / "zarr.json").read_text())
    meta["attributes"]["dlmg"]["layout"]["ranks"] = [0, 1]  # as two processes would have saved it
    (tmp_path / "t" / "zarr.json").write_text(json.dumps(meta))
    assert dlmg.saved_layout(tmp_path / "t") == Layout.slab((4, 2), 0, ["cpu"] * 2, ranks=[0, 1])
    with pytest.raises(dlmg.LayoutError, match=r"the saved layout \(layout=None\)"):
        dlmg.load(tmp_path / "t")
    np.testing.assert_array_equal(dlmg.load(tmp_path / "t", Layout.single((4, 2))).gather(), np.zeros((4, 2)))


def test_a_saved_file_opens_as_a_sharded_jax_array(tmp_path):
    """dlmg.load(..., framework="jax") then to_jax: the shards are the loaded fragments' buffers."""
    need("jax")
    if jax_cpus() < 2:
        pytest.skip("needs 2 JAX CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count=2)")
    import jax

    x = reference((8, 6), "float32", 3)
    dlmg.save(tmp_path / "t", dlmg.scatter(x, Layout.slab((8, 6), 0, ["cpu"] * 2)))
    loaded = dlmg.load(tmp_path / "t", Layout.slab((8, 6), 1, ["cpu:0", "cpu:1"]), framework="jax")
    array = loaded.to_jax()
    assert isinstance(array, jax.Array) and len(array.sharding.device_set) == 2
    np.testing.assert_array_equal(np.asarray(array), x)
    pointers = {s.data.unsafe_buffer_pointer() for s in array.addressable_shards}
    assert pointers == {f.array.unsafe_buffer_pointer() for f in loaded.fragments}


def test_a_framework_per_fragment(tmp_path):
    """Each fragment of the target layout in its own framework, handed over without a copy."""
    need("torch", "jax")
    x = reference((6, 4), "float32", 5)
    dlmg.save(tmp_path / "t", dlmg.scatter(x, Layout.single((6, 4))))
    target = Layout.slab((6, 4), 0, ["cpu:0", "cpu:1", "cpu:2"])
    got = dlmg.load(tmp_path / "t", target, framework=["torch", "numpy", "jax"])
    assert tuple(f.framework for f in got.fragments) == ("torch", "numpy", "jax")
    check_fragments(got, x)
    got = dlmg.load(tmp_path / "t", target, framework={0: "numpy", 1: "numpy", 2: "torch"})
    assert tuple(f.framework for f in got.fragments) == ("numpy", "numpy", "torch")
    check_fragments(got, x)
    with pytest.raises(dlmg.LayoutError, match="3 fragments"):
        dlmg.load(tmp_path / "t", target, framework=["torch", "numpy"])
