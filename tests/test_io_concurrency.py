"""Saves and loads of one path at once: a load reads one save whole, saves run one at a time.

In one process, a save published in the middle of a load (between the reads of two
fragments) leaves the load reading the earlier checkpoint whole, and the replaced
checkpoint stays beside the path until no load reads it; a save that cannot take the
path's lock raises a CheckpointError naming the path. Across independent processes,
a saver and a loader (and two savers at once) loop a fixed number of rounds: every
load returns one of the saved values, no save fails, the path loads after all saves
end, and nothing is left beside it.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from dlmg.io import locks, store

pytest.importorskip("tensorstore")

load_module = importlib.import_module("dlmg.io.load")
HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "_mp_checkpoint.py"
LAYOUT = Layout((64, 64), block=(16, 64), grid=(4, 1), devices=["cpu"] * 4)


def _full(k):
    return dlmg.full(layout=LAYOUT, fill_value=float(k), dtype="float32")


def _leftovers(path):
    return sorted(glob.glob(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.dlmg-partial-*")))


def test_a_save_published_during_a_load_leaves_the_load_reading_one_checkpoint(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    dlmg.save(path, _full(1))
    real = store.read_into
    calls = []

    def read_then_save(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # one fragment read: another save replaces the checkpoint
            dlmg.save(path, _full(2), overwrite=True)
            assert len(_leftovers(path)) == 1, "the checkpoint a load reads was removed"
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "read_into", read_then_save)
    got = dlmg.load(path).gather()
    monkeypatch.undo()
    assert len(calls) == 4
    np.testing.assert_array_equal(got, np.full((64, 64), 1.0, np.float32))
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full((64, 64), 2.0, np.float32))
    dlmg.save(path, _full(3), overwrite=True)  # no load reads the old one any more: removed
    assert _leftovers(path) == []


def test_saved_layout_and_a_dict_read_one_checkpoint_too(tmp_path, monkeypatch):
    path = str(tmp_path / "d")
    dlmg.save(path, {"a": _full(1), "b": _full(1)})
    real = load_module._array_meta
    calls = []

    def meta_then_save(*args):
        calls.append(1)
        if len(calls) == 1:
            dlmg.save(path, {"a": _full(2), "b": dlmg.full(layout=Layout.single((3,)), fill_value=2.0, dtype="float32")}, overwrite=True)
        return real(*args)

    monkeypatch.setattr(load_module, "_array_meta", meta_then_save)
    got = dlmg.load(path)
    monkeypatch.undo()
    assert {k: float(v.gather().max()) for k, v in got.items()} == {"a": 1.0, "b": 1.0}
    assert dlmg.saved_layout(path)["b"] == Layout.single((3,))


def test_a_save_that_cannot_take_the_lock_names_the_path(tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    dlmg.save(path, _full(1))
    monkeypatch.setattr(locks, "LOCK_TIMEOUT", 0.2)
    with locks.exclusive(path), pytest.raises(dlmg.CheckpointError, match=r"t: another save of this path held"):
        dlmg.save(path, _full(2), overwrite=True)  # another save of the path holds the lock, as far as it tells
    assert _leftovers(path) == []
    dlmg.save(path, _full(3), overwrite=True)
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full((64, 64), 3.0, np.float32))


def test_a_load_waits_for_no_save(tmp_path, monkeypatch):
    """A save in progress (its lock held) does not stop a load of the last checkpoint."""
    path = str(tmp_path / "t")
    dlmg.save(path, _full(1))
    with locks.exclusive(path):
        np.testing.assert_array_equal(dlmg.load(path).gather(), np.full((64, 64), 1.0, np.float32))


# -- independent processes ---------------------------------------------------------------
def _start(role, path, arg, out):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, str(SCRIPT), role, path, str(out), arg], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(procs, timeout=240):
    results = []
    try:
        for proc, out in procs:
            output, _ = proc.communicate(timeout=timeout)
            assert proc.returncode == 0, output[-3000:]
            results.append(json.loads(Path(out).read_text()))
    finally:
        for proc, _ in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return results


ROUNDS = 200


@pytest.mark.slow
def test_loads_in_one_process_while_another_saves(tmp_path):
    """200 saves of full(k), k = 1..200, in one process; 600 loads in another at the same
    time (a load takes less time than a save). Each load is one save whole, in the order
    saved; the last save loads after."""
    path = str(tmp_path / "t")
    dlmg.save(path, _full(0))
    values = list(range(1, ROUNDS + 1))
    procs = [(_start("saver", path, ",".join(map(str, values)), tmp_path / "saver.json"), tmp_path / "saver.json"),
             (_start("loader", path, str(3 * ROUNDS), tmp_path / "loader.json"), tmp_path / "loader.json")]
    saved, loaded = _finish(procs)
    assert saved["errors"] == [] and loaded["errors"] == []
    assert len(loaded["seen"]) == 3 * ROUNDS
    mixed = [s for s in loaded["seen"] if len(s) != 1]
    assert mixed == [], f"{len(mixed)} loads mixed two saves: {mixed[:5]}"
    seen = [s[0] for s in loaded["seen"]]
    assert set(seen) <= {0.0, *map(float, values)}
    assert seen == sorted(seen), "a load returned an older save than the load before it"
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full((64, 64), float(ROUNDS), np.float32))
    dlmg.save(path, _full(-1), overwrite=True)  # no load runs now: whatever was kept goes
    assert _leftovers(path) == []


@pytest.mark.slow
def test_two_processes_save_one_path_at_once(tmp_path):
    """Two savers (60 saves each, odd and even values) and a loader: no save fails, the path
    is never stuck, every load is one save whole, and the path ends with one saver's last."""
    path = str(tmp_path / "t")
    count = 60
    odd, even = list(range(1, 2 * count, 2)), list(range(2, 2 * count + 1, 2))
    procs = [(_start("saver", path, ",".join(map(str, odd)), tmp_path / "a.json"), tmp_path / "a.json"),
             (_start("saver", path, ",".join(map(str, even)), tmp_path / "b.json"), tmp_path / "b.json"),
             (_start("loader", path, str(count), tmp_path / "l.json"), tmp_path / "l.json")]
    first, second, loaded = _finish(procs)
    assert first["errors"] == [] and second["errors"] == []
    # The loader may start before the first save is published: only "no checkpoint yet" is allowed.
    assert all("holds no Zarr v3 node" in e for e in loaded["errors"]), loaded["errors"][:5]
    assert [s for s in loaded["seen"] if len(s) != 1] == []
    assert {s[0] for s in loaded["seen"]} <= set(map(float, odd + even))
    final = float(dlmg.load(path).gather()[0, 0])
    assert final in (float(odd[-1]), float(even[-1]))
    dlmg.save(path, _full(-1), overwrite=True)
    assert _leftovers(path) == []
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full((64, 64), -1.0, np.float32))
