"""Printing a distributed tensor shows its values as NumPy prints them, beside the layout.

Large tensors are summarised with ``...`` and only the shown elements are read.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout, _printing


def _values_text(dt) -> str:
    return str(dt).rsplit("\n(", 1)[0]


@pytest.mark.parametrize("shape, layout", [
    ((6, 4), Layout.slab((6, 4), 0, ["cpu:0", "cpu:1", "cpu:2"])),
    ((9, 9), Layout((9, 9), block=(4, 2), grid=(2, 2), devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"])),
    ((2, 3, 4), Layout.slab((2, 3, 4), 1, ["cpu", "cpu", "cpu"])),
    ((3000,), Layout.slab((3000,), 0, ["cpu", "cpu", "cpu"])),
    ((2000, 30), Layout((2000, 30), block=(7, 4), grid=(3, 2), devices=[f"cpu:{i}" for i in range(6)])),
    ((40, 40, 3), Layout((40, 40, 3), block=(3, 7, 3), grid=(2, 2, 1), devices=["cpu"] * 4)),
])
def test_values_print_as_numpy_prints_them(shape, layout):
    host = (np.arange(np.prod(shape)) / 7).reshape(shape).astype(np.float32)
    dt = dlmg.scatter(host, layout)
    assert _values_text(dt) == np.array2string(host, separator=", ")
    text = repr(dt)
    assert text.startswith("DistributedTensor([") and f"shape={shape}" in text and "frameworks=numpy" in text


def test_integers_bools_and_scalars():
    ints = np.arange(-5, 7).reshape(3, 4)
    dt = dlmg.scatter(ints, Layout.slab((3, 4), 1, ["cpu", "cpu"]))
    assert _values_text(dt) == np.array2string(ints, separator=", ")
    flags = dlmg.scatter(ints > 0, Layout.slab((3, 4), 1, ["cpu", "cpu"]))
    assert _values_text(flags) == np.array2string(ints > 0, separator=", ")
    total = dlmg.sum(dt, axis=(0, 1))
    assert repr(total).startswith("DistributedTensor(6,")


def test_torch_and_jax_fragments_print_their_values():
    torch = pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    host = np.arange(12, dtype=np.float32).reshape(4, 3)
    lay = Layout.slab((4, 3), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.from_fragments([torch.from_numpy(host[:2].copy()), jax.device_put(host[2:], jax.devices("cpu")[1])], lay)
    assert _values_text(dt) == np.array2string(host, separator=", ")
    assert "frameworks=torch, jax" in repr(dt)
    bf16 = dlmg.from_fragments([torch.ones(2, 3, dtype=torch.bfloat16)] * 2, lay)
    assert repr(bf16).startswith("DistributedTensor([[1") and "dtype=bfloat16" in repr(bf16)


def test_only_shown_elements_are_read(monkeypatch):
    host = np.arange(3000.0)
    dt = dlmg.scatter(host, Layout.slab((3000,), 0, ["cpu"] * 3))
    read: list[tuple[int, int]] = []
    original = _printing._fragment_values

    def spy(tensor, frag, local):
        got = original(tensor, frag, local)
        read.append((frag.index, got.size))
        return got

    monkeypatch.setattr(_printing, "_fragment_values", spy)
    text = repr(dt)
    assert "..." in text
    assert read == [(0, 3), (2, 3)]  # the middle fragment holds nothing shown


def test_print_options_are_honoured():
    host = np.arange(100.0)
    dt = dlmg.scatter(host, Layout.slab((100,), 0, ["cpu", "cpu"]))
    with np.printoptions(threshold=10, edgeitems=2):
        assert _values_text(dt) == np.array2string(host, separator=", ")
        assert "..." in _values_text(dt)


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "cupy", "jax"])
def test_cuda_fragments_print_their_values(framework):
    pytest.importorskip(framework)
    host = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    dt = dlmg.scatter(host, Layout.slab((1000, 3), 0, ["cuda:0", "cuda:0"]), framework=framework)
    assert _values_text(dt) == np.array2string(host, separator=", ")
    assert "..." in repr(dt) and f"frameworks={framework}" in repr(dt)
