"""Multi-process scenarios of dlmg.save / dlmg.load (run by :mod:`tests._mp_worker`).

Checkpoints live under ``$DLMG_TEST_CKPT_DIR``, shared by the launches of one
test module: one launch saves from some number of processes, later launches of
other sizes load what is there. The data comes from fixed seeds, so every
launch knows what every checkpoint must hold.

Run as a script, it is one independent process of a concurrency test
(``tests/test_io_concurrency.py``): ``saver`` saves ``full(k)`` for the given
values of ``k``, ``loader`` loads the path a given number of times; each
writes what it saw as JSON.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import sys

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout

SHAPE = (37, 20)


def _dir() -> str:
    return os.environ["DLMG_TEST_CKPT_DIR"]


def _world_layouts(shape, world):
    """Column slabs, a block-cyclic 2-D grid and a replicated layout over the running processes."""
    devices = list(dd.devices())
    ranks = list(range(world))
    rows, cols = (2, world // 2) if world % 2 == 0 else (1, world)
    grid_devices = [devices[r] for r in ranks]
    return {
        "column slabs": Layout.slab(shape, 1, devices, ranks=ranks),
        "block-cyclic": Layout(shape, block=(3, 4), grid=(rows, cols), devices=grid_devices, ranks=ranks),
        "replicated": Layout.replicated(shape, devices, ranks=ranks),
    }


def _root(value):
    """``value`` on process 0, ``None`` elsewhere (what scatter takes)."""
    return value if dd.rank() == 0 else None


def _data():
    import torch

    rng = np.random.default_rng(35)
    w = rng.standard_normal(SHAPE).astype(np.float32)
    i = rng.integers(-2**40, 2**40, size=(SHAPE[0],), dtype=np.int64)
    bf = torch.arange(SHAPE[0] * 6, dtype=torch.float32).reshape(SHAPE[0], 6).to(torch.bfloat16)
    return {"w": w, "i": i, "bf": bf}


def _expected(name, value, layout, index):
    import torch

    if isinstance(value, torch.Tensor):
        value = value.float().numpy()
    owned = [layout.owned_indices(index, m) for m in range(layout.ndim)]
    return value[np.ix_(*owned)]


def _host(array):
    mod = type(array).__module__.partition(".")[0]
    if mod == "torch":
        return array.float().numpy() if str(array.dtype) == "torch.bfloat16" else array.numpy()
    array = np.asarray(array)
    return array.astype(np.float32) if array.dtype.name == "bfloat16" else array


def _check(tensor, name, value):
    for frag in tensor.fragments:
        if frag.is_local:
            np.testing.assert_array_equal(_host(frag.array), _expected(name, value, tensor.layout, frag.index),
                                          err_msg=f"{name}, fragment {frag.index} of {tensor.layout!r}")


def ckpt_save():
    """Save a dict (float32 row slabs, int64 slabs, bfloat16 block-cyclic) from every process."""
    world = dd.world_size()
    data = _data()
    ranks = list(range(world))
    devices = list(dd.devices())
    tensors = {
        "w": dlmg.scatter(_root(data["w"]), dd.slab(SHAPE, 0), root=0),
        "i": dlmg.scatter(_root(data["i"]), dd.slab(SHAPE[:1], 0), root=0),
        "bf": dlmg.scatter(_root(data["bf"]), Layout((SHAPE[0], 6), block=(4, 6), grid=(world, 1), devices=devices,
                                                ranks=ranks), framework="torch", root=0),
    }
    dlmg.save(os.path.join(_dir(), f"saved-by-{world}"), tensors)
    return world


def ckpt_load():
    """Load every checkpoint there is into column slabs, block-cyclic and replicated layouts of
    the running processes (torch and NumPy fragments), and into the saved layout where it fits."""
    world = dd.world_size()
    data = _data()
    loaded = []
    for path in sorted(glob.glob(os.path.join(_dir(), "saved-by-*"))):
        saved_by = int(path.rsplit("-", 1)[1])
        ones = Layout.slab(SHAPE[:1], 0, list(dd.devices()), ranks=list(range(world)))
        for kind, layout in _world_layouts(SHAPE, world).items():
            bf_layout = _world_layouts((SHAPE[0], 6), world)[kind]
            for framework in ("torch", "numpy"):
                got = dlmg.load(path, {"w": layout, "i": ones, "bf": bf_layout}, framework=framework)
                assert got["w"].layout == layout and set(got["w"].frameworks) <= {framework, None}
                _check(got["w"], "w", data["w"])
                _check(got["i"], "i", data["i"])
                _check(got["bf"], "bf", data["bf"])
            loaded.append([saved_by, kind])
        if saved_by <= world:
            got = dlmg.load(path)
            _check(got["w"], "w", data["w"])
            assert got["w"].layout.nprocesses == saved_by
            loaded.append([saved_by, "saved layout"])
        else:
            try:
                dlmg.load(path)
            except dlmg.LayoutError as exc:
                assert f"layout.nprocesses = {saved_by}" in str(exc), exc
            else:
                raise AssertionError("the saved layout of more processes was not refused")
            loaded.append([saved_by, "refused saved layout"])
    return loaded


def _rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def ckpt_bytes_read():
    """Saved as row slabs, loaded as column slabs: each process reads at most 1.1x its
    fragment's bytes (counted by the kernel: rchar of /proc/self/io)."""
    shape = (1024, 1024)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    path = os.path.join(_dir(), "bytes")
    dlmg.save(path, dlmg.scatter(_root(x), dd.slab(shape, 0), root=0))
    target = dd.slab(shape, 1)
    dlmg.load(path, target)  # once before counting: imports and first-use setup read files too
    before = _rchar()
    got = dlmg.load(path, target)
    read = _rchar() - before
    _check(got, "x", x)
    need = sum(f.size * 4 for f in got.fragments if f.is_local)
    return [read, need]


def ckpt_crash_save():
    """A good checkpoint, then a save over it during which process 1 dies after its first
    fragment: process 0 must see the failure, publish nothing and remove the staging directory."""
    world = dd.world_size()
    path = os.path.join(_dir(), "crash")
    layout = Layout((16, 6), block=(2, 6), grid=(2 * world, 1), devices=list(dd.devices()) * 2,
                    ranks=list(range(world)) * 2)  # two fragments per process
    good = dlmg.scatter(_root(np.full((16, 6), 1.0, np.float32)), layout, root=0)
    dlmg.save(path, good)
    if dd.rank() == 1:
        from dlmg.io import store

        real = store.write
        count = [0]

        def write_then_die(*args, **kwargs):
            future = real(*args, **kwargs)
            future.result()
            count[0] += 1
            if count[0] == 1:
                os._exit(17)
            return future

        store.write = write_then_die
    try:
        dlmg.save(path, good + 1, overwrite=True)
    except dlmg.CollectiveError as exc:
        left = glob.glob(os.path.join(_dir(), ".crash.dlmg-partial-*"))
        assert left == [], f"the failed save left {left}"
        return f"refused: {type(exc).__name__}"
    raise AssertionError("the save went through although process 1 died")


def ckpt_crash_check():
    """After the crash: the old checkpoint loads whole and nothing of the failed save is left;
    a copy of its staging directory, as a save killed with every process would leave it,
    is refused as incomplete."""
    path = os.path.join(_dir(), "crash")
    got = dlmg.load(path, Layout.single((16, 6)))
    np.testing.assert_array_equal(got.gather(), np.full((16, 6), 1.0, np.float32))
    assert glob.glob(os.path.join(_dir(), ".crash.dlmg-partial-*")) == []
    partial = os.path.join(_dir(), "crash-unfinished")
    shutil.copytree(path, partial)
    os.remove(os.path.join(partial, "dlmg-commit.json"))
    try:
        dlmg.load(partial, Layout.single((16, 6)))
    except dlmg.IncompleteCheckpointError as exc:
        return str(exc)
    raise AssertionError("the partial save was loaded")


def dcp_roundtrip():
    """dlmg -> DCP -> dlmg (block-cyclic) and -> DTensor (DCP's resharding); DTensor -> DCP -> dlmg
    of any layout; layouts DTensor cannot express are refused, naming redistribute."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    world = dd.world_size()
    shape = (10, 6)
    x = np.arange(60, dtype=np.float32).reshape(shape)
    devices, ranks = list(dd.devices()), list(range(world))
    cyclic = Layout(shape, block=(1, 2), grid=(2 * world, 1), devices=devices * 2, ranks=ranks * 2)
    first = os.path.join(_dir(), "dcp-from-dlmg")
    dlmg.dcp_save({"w": dlmg.scatter(_root(x), dd.slab(shape, 0), root=0), "step": torch.tensor(7)}, first)
    back = dlmg.dcp_load({"w": dlmg.empty(layout=cyclic, dtype="float32", framework="numpy"), "step": torch.tensor(0)}, first)
    assert back["step"].item() == 7
    assert back["w"].layout == cyclic and {f.framework for f in back["w"].fragments if f.is_local} == {"numpy"}
    _check(back["w"], "w", x)
    mesh = init_device_mesh("cpu", (world,))
    columns = distribute_tensor(torch.zeros(shape), mesh, [Shard(1)])
    dcp.load({"w": columns}, checkpoint_id=first)
    assert torch.equal(columns.full_tensor(), torch.from_numpy(x))
    try:
        dlmg.dcp_save({"w": dlmg.scatter(_root(x), cyclic, root=0)}, os.path.join(_dir(), "dcp-refused"))
    except dlmg.LayoutError as exc:
        assert "redistribute" in str(exc), exc
    else:
        raise AssertionError("a block-cyclic layout went to DCP")
    second = os.path.join(_dir(), "dcp-from-dtensor")
    dcp.save({"w": distribute_tensor(torch.from_numpy(x), mesh, [Shard(1)])}, checkpoint_id=second)
    for layout in (cyclic, Layout.single(shape, devices[0], ranks=0), dd.slab(shape, 1)):
        got = dlmg.dcp_load({"w": dlmg.empty(layout=layout, dtype="float32", framework="torch")}, second)["w"]
        assert got.layout == layout
        _check(got, "w", x)
    return world


def ckpt_load_during_saves():
    """Every process loads a path 30 times (column slabs, so each reads part of every chunk)
    while an independent process saves it 60 times: each load, gathered, is one save whole."""
    import subprocess
    import sys

    path = os.path.join(_dir(), "busy")
    out = os.path.join(_dir(), "busy-saver.json")
    if dd.rank() == 0:  # the first save, by a process of its own (under the engine a save is SPMD)
        subprocess.run([sys.executable, os.path.abspath(__file__), "saver", path, out, "0"], check=True, timeout=240)
    dlmg.zeros(layout=dd.slab((2,), 0), dtype="float32").gather()  # every process waits for the first save
    saver_process = None
    if dd.rank() == 0:
        saver_process = subprocess.Popen([sys.executable, os.path.abspath(__file__), "saver", path, out,
                                          ",".join(str(k) for k in range(1, 61))])
    seen = []
    for _ in range(30):
        x = dlmg.load(path, dd.slab(LOOP_SHAPE, 1)).gather()
        values = np.unique(x)
        assert len(values) == 1, f"a load mixed saves: {values}"
        seen.append(float(values[0]))
    assert seen == sorted(seen), seen
    if saver_process is not None:
        assert saver_process.wait(timeout=240) == 0
        with open(out) as f:
            assert json.load(f)["errors"] == []
    return len(seen)


def ckpt_load_pins_differ():
    """Process 0 pins the checkpoint, then an independent process saves a new one, and only
    then process 1 pins: the processes hold different saves, so they load again, each
    holding the save lock shared, and all return the new save."""
    import importlib
    import subprocess
    import sys
    import time
    from contextlib import contextmanager

    load_module = importlib.import_module("dlmg.io.load")
    path = os.path.join(_dir(), "differ")
    out = os.path.join(_dir(), "differ-saver.json")
    flag = os.path.join(_dir(), "differ-published")
    if dd.rank() == 0:
        subprocess.run([sys.executable, os.path.abspath(__file__), "saver", path, out, "1"], check=True, timeout=240)
    dlmg.zeros(layout=dd.slab((2,), 0), dtype="float32").gather()
    real = load_module.pinned
    holds = []

    @contextmanager
    def pinned_then_publish(where, hold=False):
        holds.append(hold)
        if dd.rank() == 1 and len(holds) == 1:  # pin only once the new save is there
            deadline = time.monotonic() + 120
            while not os.path.exists(flag) and time.monotonic() < deadline:
                time.sleep(0.01)
        with real(where, hold) as pin:
            if dd.rank() == 0 and len(holds) == 1:
                subprocess.run([sys.executable, os.path.abspath(__file__), "saver", path, out, "2"], check=True,
                               timeout=240)
                with open(flag, "w"):
                    pass
            yield pin

    load_module.pinned = pinned_then_publish
    try:
        x = dlmg.load(path, dd.slab(LOOP_SHAPE, 1)).gather()
    finally:
        load_module.pinned = real
    assert holds == [False, True], holds
    assert np.array_equal(x, np.full(LOOP_SHAPE, 2.0, np.float32)), np.unique(x)
    return holds


SCENARIOS = {
    "ckpt_load_pins_differ": ckpt_load_pins_differ,
    "ckpt_load_during_saves": ckpt_load_during_saves,
    "dcp_roundtrip": dcp_roundtrip,
    "ckpt_save": ckpt_save,
    "ckpt_load": ckpt_load,
    "ckpt_bytes_read": ckpt_bytes_read,
    "ckpt_crash_save": ckpt_crash_save,
    "ckpt_crash_check": ckpt_crash_check,
}


# -- independent processes saving and loading one path at once --------------------------
LOOP_SHAPE = (64, 64)


def loop_layout():
    """Four row blocks: four chunks (a save writes few files, so the loop runs many saves)."""
    return Layout(LOOP_SHAPE, block=(16, 64), grid=(4, 1), devices=["cpu"] * 4)


def loop_target():
    """Sixteen row slabs, each read on its own: a load spans many reads, so that saves
    publish while it runs."""
    return Layout(LOOP_SHAPE, block=(4, 64), grid=(16, 1), devices=["cpu"] * 16)


def saver(path, values):
    """Save ``full(k)`` at ``path`` for each ``k`` in turn, each replacing the last."""
    errors = []
    for k in values:
        try:
            dlmg.save(path, dlmg.full(layout=loop_layout(), fill_value=float(k), dtype="float32"), overwrite=True)
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"save {k}: {type(exc).__name__}: {exc}")
    return {"saved": list(values), "errors": errors}


def loader(path, count):
    """Load ``path`` ``count`` times; each load's distinct values (one, unless it mixed saves)."""
    seen, errors = [], []
    for _ in range(count):
        try:
            x = dlmg.load(path, loop_target()).gather()
        except Exception as exc:  # noqa: BLE001 - reported to the test
            errors.append(f"{type(exc).__name__}: {exc}")
            continue
        seen.append(sorted({float(v) for v in np.unique(x)}))
    return {"seen": seen, "errors": errors}


if __name__ == "__main__":
    role, where, out = sys.argv[1], sys.argv[2], sys.argv[3]
    if role == "saver":
        result = saver(where, [int(v) for v in sys.argv[4].split(",")])
    else:
        result = loader(where, int(sys.argv[4]))
    with open(out, "w") as f:
        json.dump(result, f)
