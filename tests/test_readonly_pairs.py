"""Read-only memory across ``to()``, for every pair of source and target framework.

The promise (docs/dlpack.md, "Read-only memory"): memory dlmg knows to be
read-only (a non-writeable NumPy array, a JAX array, a DLPack tensor marked
``READ_ONLY``) is never written through dlmg. ``to()`` hands it on without a
copy where it can and the new fragments keep ``readonly``; in-place
operations on them raise :class:`dlmg.ReadOnlyError` before writing
anything. JAX fragments are never written at all (in-place operations replace
them). Writable sources stay writable, and ``to()`` shares their memory (the
documented view).
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import dlmg
from dlmg.dlpack import READ_ONLY

from _capsule_structs import Producer

SOURCES = ["numpy", "numpy-readonly", "torch", "jax", "dlpack", "dlpack-readonly"]
TARGETS = ["numpy", "torch", "jax"]
READONLY_SOURCES = {"numpy-readonly", "jax", "dlpack-readonly"}
LAYOUT = dlmg.Layout.slab((8,), 0, ["cpu:0", "cpu:1"])


def _source(kind: str):
    """Two float32 fragments holding 0..7, and whatever keeps their memory alive."""
    values = [np.arange(4.0, dtype=np.float32), np.arange(4.0, 8.0, dtype=np.float32)]
    if kind.startswith("numpy"):
        if kind == "numpy-readonly":
            for v in values:
                v.flags.writeable = False
        return values
    if kind == "torch":
        torch = pytest.importorskip("torch")
        return [torch.from_numpy(v) for v in values]
    if kind == "jax":
        jax = pytest.importorskip("jax")
        cpus = jax.devices("cpu")
        return [jax.device_put(v, cpus[i]) for i, v in enumerate(values)]
    producers = [Producer(flags=READ_ONLY if kind == "dlpack-readonly" else 0, shape=(4,), code=2, bits=32)
                 for _ in values]
    for p, v in zip(producers, values):
        ctypes.memmove(ctypes.addressof(p.memory), v.ctypes.data, v.nbytes)
    return producers


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("source", SOURCES)
def test_to_keeps_read_only_memory_unwritten(source, target):
    if "jax" in (source, target):
        pytest.importorskip("jax")
    if "torch" in (source, target):
        pytest.importorskip("torch")
    parts = _source(source)
    dt = dlmg.from_fragments(parts, LAYOUT)
    assert all(f.readonly == (source in READONLY_SOURCES) for f in dt.fragments)
    out = dt.to(target)
    shared = [f.adapter.data_ptr(f.array) == g.adapter.data_ptr(g.array) for f, g in zip(out.fragments, dt.fragments)]
    for f, same in zip(out.fragments, shared):
        # read-only when the source was and the memory is shared, and always for JAX arrays
        assert f.readonly == ((source in READONLY_SOURCES and same) or target == "jax")
    before = dt.gather("numpy").copy()
    if target != "jax" and any(f.readonly for f in out.fragments):
        with pytest.raises(dlmg.ReadOnlyError, match="nothing was written"):
            out += 1
        assert np.array_equal(out.gather("numpy"), before)
    else:
        out += 1
        assert np.array_equal(out.gather("numpy"), before + 1)
    after = dt.gather("numpy")
    if source in READONLY_SOURCES or target == "jax":
        assert np.array_equal(after, before)  # never written through dlmg
    else:  # a writable source shares its memory with to()'s result: the documented view
        assert np.array_equal(after, np.where(np.repeat(shared, 4), before + 1, before))


def test_copy_true_gives_writable_memory():
    parts = _source("numpy-readonly")
    t = dlmg.from_fragments(parts, LAYOUT).to("torch", copy=True)
    assert not any(f.readonly for f in t.fragments)
    t += 1
    assert parts[0].tolist() == [0, 1, 2, 3]


def test_read_only_fragments_export_read_only_to_numpy():
    pytest.importorskip("torch")
    t = dlmg.from_fragments(_source("numpy-readonly"), LAYOUT).to("torch")
    exported = np.from_dlpack(t.fragments[0])
    assert not exported.flags.writeable


def test_apply_out_refuses_read_only_before_writing():
    parts = _source("numpy")
    parts[1].flags.writeable = False
    out = dlmg.from_fragments(parts, LAYOUT)
    x = dlmg.scatter(np.ones(8, np.float32), LAYOUT)
    with pytest.raises(dlmg.ReadOnlyError, match="fragment 1"):
        dlmg.map_fragments(lambda a: a * 5, x, out=out)
    assert parts[0].tolist() == [0, 1, 2, 3]


def test_redistribute_keeps_read_only_on_reused_fragments():
    pytest.importorskip("torch")
    t = dlmg.from_fragments(_source("numpy-readonly"), LAYOUT).to("torch")
    same = t.redistribute(LAYOUT)
    assert all(f.readonly for f in same.fragments)


def test_gather_into_read_only_out():
    dt = dlmg.from_fragments(_source("numpy"), LAYOUT)
    out = np.zeros(8, np.float32)
    out.flags.writeable = False
    with pytest.raises(dlmg.ReadOnlyError):
        dt.gather(out=out)


GPU_FRAMEWORKS = ["torch", "cupy", "jax"]


@pytest.mark.gpu
@pytest.mark.parametrize("target", GPU_FRAMEWORKS)
@pytest.mark.parametrize("source", GPU_FRAMEWORKS)
def test_to_on_cuda_keeps_jax_memory_unwritten(source, target):
    lay = dlmg.Layout.slab((8,), 0, ["cuda:0", "cuda:0"])
    values = np.arange(8.0, dtype=np.float32)
    dt = dlmg.scatter(values, lay, framework=source)
    out = dt.to(target)
    if target != "jax" and source == "jax":
        assert all(f.readonly for f in out.fragments)
        with pytest.raises(dlmg.ReadOnlyError):
            out += 1
    else:
        out += 1
    expect = values + 1 if source != "jax" and target != "jax" else values
    np.testing.assert_array_equal(dt.gather("numpy"), expect)
