"""A communication engine dlmg does not know becomes a full member through one file.

The engine below is written against the documented interface
(:class:`dlmg.distributed.Engine`) only: a group of one process whose
collectives copy buffers in NumPy and record every call. It is registered
through the entry-point group ``dlmg.engines`` of a package made on the fly,
exactly as an installed package would register it; nothing in dlmg names it.
:func:`dlmg.distributed.init` passes it its own option (``label=``), and
gather, scatter, redistribution and the reductions run through its
collectives.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
import dlmg.distributed as dd
from dlmg import Device
from dlmg.distributed import Engine, registry
from dlmg.registry import get_adapter

HOST = Device("cpu", 0)


def _flat(buf):
    return np.from_dlpack(buf).reshape(-1)


class OneProcessEngine(Engine):
    """Every collective of a group of one process, in NumPy, recording its calls."""

    name = "fake"

    def __init__(self, label: str, timeout: float) -> None:
        super().__init__(0, 1, timeout)
        self.label = label
        self.calls: list[str] = []

    def local_device(self):
        return HOST

    def transport(self, device):
        return "memory copy"

    def empty(self, n, dtype, device):
        return get_adapter("numpy").empty((int(n),), dtype, device), "numpy"

    def allgather_object(self, obj):
        self.calls.append("allgather_object")
        return [obj]

    def all_gather(self, send, recv):
        self.calls.append("all_gather")
        _flat(recv)[...] = _flat(send)

    def alltoallv(self, send, send_counts, recv, recv_counts):
        self.calls.append("alltoallv")
        (n,) = send_counts
        _flat(recv)[:n] = _flat(send)[:n]

    def broadcast(self, buf, root):
        self.calls.append("broadcast")

    def allreduce(self, buf, op):
        self.calls.append(f"allreduce {op}")


def create(*, label: str = "", timeout: float = 300.0) -> OneProcessEngine:
    """The factory the entry point names."""
    return OneProcessEngine(label, timeout)


@pytest.fixture
def fake_engine(tmp_path, monkeypatch):
    """``fake`` registered through an entry point of a package made in ``tmp_path``."""
    info = tmp_path / "dlmg_fake_engine-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlmg-fake-engine\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[dlmg.engines]\nfake = {__name__}:create\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry._table.cache_clear()
    yield
    if dd.is_initialized():
        dd.finalize()
    registry._table.cache_clear()


def test_an_engine_is_one_file(fake_engine):
    assert "fake" in dd.engine_names()
    with pytest.raises(TypeError, match="backend='fake' takes no option 'comm'; its options: label="):
        dd.init("fake", comm=object())
    engine = dd.init("fake", label="ours", timeout=5.0)
    assert isinstance(engine, OneProcessEngine) and engine.label == "ours" and engine.timeout == 5.0
    assert dd.backend() == "fake" and dd.world_size() == 1

    full = np.arange(48, dtype=np.float64).reshape(6, 8)
    rows = dd.slab(full.shape, 0)
    t = dlmg.scatter(full, rows, framework="numpy")
    np.testing.assert_array_equal(np.asarray(t.gather(framework="numpy")), full)
    np.testing.assert_array_equal(np.asarray(t.gather(root=0, framework="numpy")), full)
    moved = t.redistribute(dlmg.Layout((6, 8), block=(2, 3), grid=(3, 3), devices=["cpu"] * 9, ranks=[0] * 9))
    np.testing.assert_array_equal(np.asarray(moved.gather(framework="numpy")), full)
    assert float(dlmg.sum(t)) == full.sum()
    np.testing.assert_array_equal(np.asarray(dlmg.max(t, axis=0).gather(framework="numpy")), full.max(axis=0))
    assert int(dlmg.argmax(t)) == 47
    # every collective agreed through the engine (one process: no data crosses it)
    assert {"allgather_object", "allreduce sum", "allreduce max", "allreduce min"} <= set(engine.calls)


def test_options_go_to_the_engine_unchanged(fake_engine):
    with pytest.raises(TypeError, match="takes no option 'group'"):
        dd.init("fake", group=None)
    assert not dd.is_initialized()
