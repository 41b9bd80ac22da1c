"""What failed saves leave beside a checkpoint, and who removes it.

A process killed part way through a save (``os._exit`` after its first chunk,
in a child process) leaves its staging directory: refused as incomplete, the
earlier checkpoint whole, and removed by the next save to that path. A save
that fails with the process alive removes its own staging directory at once.
"""

from __future__ import annotations

import glob
import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from dlmg.io import publish

save_module = importlib.import_module("dlmg.io.save")

pytest.importorskip("tensorstore")

SHAPE = (16, 6)
LAYOUT = Layout(SHAPE, block=(4, 6), grid=(4, 1), devices=["cpu"] * 4)

_CRASH = textwrap.dedent("""
    import os, sys
    import numpy as np
    import dlmg
    from dlmg.io import store
    path = sys.argv[1]
    layout = dlmg.Layout((16, 6), block=(4, 6), grid=(4, 1), devices=["cpu"] * 4)
    real = store.write
    def write_then_die(*args, **kwargs):
        real(*args, **kwargs).result()
        os._exit(17)
    store.write = write_then_die
    dlmg.save(path, dlmg.scatter(np.full((16, 6), 2.0, np.float32), layout), overwrite=True)
""")


def _staging(path):
    return sorted(glob.glob(os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.dlmg-partial-*")))


def _good(path, value=1.0):
    dlmg.save(path, dlmg.scatter(np.full(SHAPE, value, np.float32), LAYOUT), overwrite=True)


def test_a_killed_save_is_refused_then_removed_by_the_next_save(tmp_path):
    path = str(tmp_path / "ckpt")
    _good(path)
    child = subprocess.run([sys.executable, "-c", _CRASH, path], capture_output=True, text=True, timeout=120)
    assert child.returncode == 17, child.stderr[-2000:]
    (left,) = _staging(path)
    assert glob.glob(os.path.join(left, "c", "*", "*")), "no chunk was written before the kill"
    with pytest.raises(dlmg.IncompleteCheckpointError, match="incomplete save"):
        dlmg.load(left, Layout.single(SHAPE))
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full(SHAPE, 1.0, np.float32))
    _good(path, 3.0)
    assert _staging(path) == []
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full(SHAPE, 3.0, np.float32))


def test_a_save_that_raises_removes_its_staging_directory(tmp_path, monkeypatch):
    path = str(tmp_path / "ckpt")
    _good(path)

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(save_module, "_write_fragments", fail)
    with pytest.raises(OSError, match="disk full"):
        _good(path, 2.0)
    assert _staging(path) == []
    np.testing.assert_array_equal(dlmg.load(path).gather(), np.full(SHAPE, 1.0, np.float32))


def test_a_finished_copy_is_kept_while_the_path_holds_none(tmp_path):
    """A save that died between the two renames of a replacement (systems without an atomic
    exchange) leaves the path empty and the earlier checkpoint set aside: never removed then."""
    path = str(tmp_path / "ckpt")
    _good(path)
    aside = publish.staging_path(path, "0123456789ab") + ".old"
    os.rename(path, aside)
    os.makedirs(publish.staging_path(path, "ba9876543210"))  # an unfinished save beside it
    assert publish.remove_stale(path) == [publish.staging_path(path, "ba9876543210")]
    assert _staging(path) == [aside]
    _good(path, 4.0)  # a finished checkpoint at the path again: the copy aside goes
    assert _staging(path) == []


def test_stale_directories_of_other_paths_are_left_alone(tmp_path):
    path, other = str(tmp_path / "ckpt"), str(tmp_path / "ckpt2")
    os.makedirs(publish.staging_path(other, "0123456789ab"))
    _good(path)
    assert len(_staging(other)) == 1
