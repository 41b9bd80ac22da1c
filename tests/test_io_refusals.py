"""Damaged checkpoints and odd input to dlmg.save / dlmg.load raise dlmg's errors, never
wrong values or a library's raw error.

A directory in place of a chunk, bit flips of ``zarr.json`` (a seeded fuzz), dict keys
that cannot name an array, saving through a symbolic link, failures of TensorStore
while writing, and PyTorch DCP's ``CheckpointException``.
"""

from __future__ import annotations

import glob
import os
import random

import numpy as np
import pytest

import dlmg
from dlmg import Layout

pytest.importorskip("tensorstore")

SHAPE = (8, 6)
TWO = Layout(SHAPE, block=(4, 6), grid=(2, 1), devices=["cpu"] * 2)
BIG = (128, 1024)  # one block of 512 KiB: a shard of inner chunks


def _x(shape=SHAPE, dtype=np.float32):
    return np.arange(np.prod(shape)).astype(dtype).reshape(shape)


def _leftovers(tmp_path):
    return sorted(p for p in glob.glob(str(tmp_path / "**" / ".*dlmg-partial-*"), recursive=True))


def test_a_directory_in_place_of_a_chunk_is_refused_not_read_as_zeros(tmp_path):
    dlmg.save(tmp_path / "t", dlmg.scatter(_x(), TWO))
    chunk = tmp_path / "t" / "c" / "1" / "0"
    os.remove(chunk)
    os.makedirs(chunk)
    with pytest.raises(dlmg.ChunkError, match=r"chunk 'c/1/0' is missing or no regular file"):
        dlmg.load(tmp_path / "t")
    with pytest.raises(dlmg.ChunkError, match=r"chunk 'c/1/0'"):
        dlmg.load(tmp_path / "t", Layout.single(SHAPE))


def _flips(data: bytes, count: int, seed: int):
    rng = random.Random(seed)
    for bit in rng.sample(range(8 * len(data)), min(count, 8 * len(data))):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        yield bit, bytes(flipped)


@pytest.mark.parametrize("kind", ["tensor", "dict"])
def test_bit_flips_of_the_metadata_raise_only_checkpoint_errors(tmp_path, kind):
    """Single bit flips of each ``zarr.json`` (a seeded sample of 300 per file): the load
    raises a CheckpointError, or returns exactly the saved values; nothing else."""
    path = tmp_path / "t"
    x, big = _x(), _x(BIG)
    if kind == "tensor":
        dlmg.save(path, dlmg.scatter(x, TWO))
        files = [path / "zarr.json"]
        target, want = Layout.single(SHAPE), {"": x}
    else:
        dlmg.save(path, {"n": dlmg.scatter(x, TWO), "w": dlmg.scatter(big, Layout.single(BIG))})
        files = [path / "zarr.json", path / "n" / "zarr.json", path / "w" / "zarr.json"]
        target, want = {"n": Layout.single(SHAPE), "w": Layout.single(BIG)}, {"n": x, "w": big}
    raw = []
    for name in files:
        original = name.read_bytes()
        for bit, flipped in _flips(original, 300, seed=len(original)):
            name.write_bytes(flipped)
            try:
                got = dlmg.load(path, target, framework="numpy")
            except dlmg.CheckpointError:
                continue
            except Exception as exc:  # noqa: BLE001 - what the test looks for
                raw.append((name.name, bit, f"{type(exc).__name__}: {exc}"[:200]))
                continue
            finally:
                name.write_bytes(original)
            got = {"": got} if kind == "tensor" else got
            for key, value in want.items():
                np.testing.assert_array_equal(got[key].gather(), value, err_msg=f"{name} bit {bit}")
    assert raw == [], raw[:10]


@pytest.mark.parametrize("key", ["zarr.json", "dlmg-commit.json", "x" * 300, "a\0b", "...", "\ud800"],
                         ids=["zarr.json", "marker", "300 chars", "NUL", "periods", "surrogate"])
def test_keys_that_cannot_name_an_array_are_refused_before_anything_is_written(tmp_path, key):
    with pytest.raises(dlmg.CheckpointError, match="cannot name a saved array"):
        dlmg.save(tmp_path / "d", {"ok": dlmg.zeros(layout=Layout.single(2), dtype="float32"), key: dlmg.zeros(layout=Layout.single(2), dtype="float32")})
    assert os.listdir(tmp_path) == []


def test_saving_through_a_symbolic_link_writes_where_it_points(tmp_path):
    real = tmp_path / "real"
    dlmg.save(real, dlmg.scatter(_x(), TWO))
    link = tmp_path / "link"
    os.symlink(real, link)
    dlmg.save(link, dlmg.scatter(_x() + 1, TWO), overwrite=True)
    assert os.path.islink(link) and os.readlink(link) == str(real)
    np.testing.assert_array_equal(dlmg.load(link).gather(), _x() + 1)
    np.testing.assert_array_equal(dlmg.load(real).gather(), _x() + 1)
    dangling = tmp_path / "dangling"
    os.symlink(tmp_path / "later", dangling)
    dlmg.save(dangling, dlmg.scatter(_x() + 2, TWO))
    assert os.path.islink(dangling)
    np.testing.assert_array_equal(dlmg.load(tmp_path / "later").gather(), _x() + 2)
    assert _leftovers(tmp_path) == []


def test_a_path_left_with_a_marker_but_no_metadata_is_replaced(tmp_path):
    """What two unserialized saves once left (chunks and a commit marker, no zarr.json) is
    still dlmg's: a save with overwrite=True replaces it instead of refusing for ever."""
    path = tmp_path / "t"
    dlmg.save(path, dlmg.scatter(_x(), TWO))
    os.remove(path / "zarr.json")
    with pytest.raises(dlmg.CheckpointError, match="no Zarr v3 node"):
        dlmg.load(path)
    with pytest.raises(dlmg.CheckpointExistsError, match="overwrite=True"):
        dlmg.save(path, dlmg.scatter(_x() + 1, TWO))
    dlmg.save(path, dlmg.scatter(_x() + 1, TWO), overwrite=True)
    np.testing.assert_array_equal(dlmg.load(path).gather(), _x() + 1)


def test_a_failure_of_tensorstore_while_writing_names_the_path_and_the_part(tmp_path, monkeypatch):
    """A file where the chunks' directory belongs: TensorStore cannot write a chunk. The save
    raises a CheckpointError (TensorStore's error its cause), publishes nothing and leaves
    nothing behind."""
    from dlmg.io import store

    path = tmp_path / "t"
    dlmg.save(path, dlmg.scatter(_x(), TWO))
    real_open = store.open_array

    def open_then_block(directory, where=None):
        handle = real_open(directory, where)
        with open(os.path.join(directory, "c"), "w") as f:
            f.write("in the way")
        return handle

    monkeypatch.setattr(store, "open_array", open_then_block)
    with pytest.raises(dlmg.CheckpointError, match=r"t: writing the chunks failed") as info:
        dlmg.save(path, dlmg.scatter(_x() + 1, TWO), overwrite=True)
    assert info.value.__cause__ is not None and not isinstance(info.value.__cause__, dlmg.DlmgError)
    monkeypatch.undo()
    assert _leftovers(tmp_path) == []
    np.testing.assert_array_equal(dlmg.load(path).gather(), _x())


def test_a_marker_is_written_only_over_whole_metadata(tmp_path, monkeypatch):
    """Metadata lost from the staging directory before the commit (as when something else
    removed files there): the save refuses to commit, and the earlier checkpoint stays."""
    import importlib

    save_module = importlib.import_module("dlmg.io.save")
    path = tmp_path / "t"
    dlmg.save(path, dlmg.scatter(_x(), TWO))
    real = save_module._write_fragments

    def write_then_lose_metadata(directory, *args):
        done = real(directory, *args)
        os.remove(os.path.join(directory, "zarr.json"))
        return done

    monkeypatch.setattr(save_module, "_write_fragments", write_then_lose_metadata)
    with pytest.raises(dlmg.CheckpointError, match="staged metadata"):
        dlmg.save(path, dlmg.scatter(_x() + 1, TWO), overwrite=True)
    assert _leftovers(tmp_path) == []
    np.testing.assert_array_equal(dlmg.load(path).gather(), _x())


@pytest.fixture(scope="module")
def one_process_group():
    dist = pytest.importorskip("torch.distributed")
    from dlmg.testing import free_port

    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"tcp://127.0.0.1:{free_port()}")
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_dcp_failures_are_checkpoint_errors_with_the_cause_chained(tmp_path, one_process_group):
    from torch.distributed.checkpoint.api import CheckpointException

    x = dlmg.scatter(_x(), Layout.single(SHAPE), framework="torch")
    dlmg.dcp_save({"w": x}, tmp_path / "c")
    with pytest.raises(dlmg.CheckpointError, match=r"dcp_load from .*Size mismatch") as info:
        dlmg.dcp_load({"w": dlmg.empty(layout=Layout.single((5, 6)), dtype="float32", framework="torch")}, tmp_path / "c")
    assert isinstance(info.value.__cause__, CheckpointException)
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(dlmg.CheckpointError, match="dcp_save to") as info:
        dlmg.dcp_save({"w": x}, tmp_path / "file" / "c")
    assert isinstance(info.value.__cause__, CheckpointException)
    got = dlmg.dcp_load({"w": dlmg.empty(layout=Layout.single(SHAPE), dtype="float32", framework="numpy")}, tmp_path / "c")["w"]
    np.testing.assert_array_equal(got.gather(), _x())
