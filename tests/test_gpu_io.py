"""Saving and loading fragments on a CUDA GPU: ``dlmg.save`` of torch, CuPy and JAX fragments
on cuda:0 (copied to host memory first), ``dlmg.load`` back onto the GPU in the saved layout
(in the first saved fragment's framework), into another layout there, and into host memory,
checked against NumPy.

Marked ``gpu``: skipped without a CUDA GPU; ``python -m pytest -m gpu`` runs them on a GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout
from test_gpu_ops import build, host

pytestmark = pytest.mark.gpu

ASSIGNMENTS = [("torch",), ("cupy",), ("jax",), ("torch", "cupy", "jax")]


@pytest.mark.parametrize("frameworks", ASSIGNMENTS, ids=lambda f: "-".join(f))
def test_save_and_load_fragments_on_cuda(tmp_path, frameworks):
    for name in frameworks:
        pytest.importorskip(name)
    x = np.random.default_rng(3).standard_normal((48, 10)).astype(np.float32)
    rows = Layout((48, 10), block=(6, 10), grid=(8, 1), devices=["cuda:0"] * 8)
    path = tmp_path / "ckpt"
    dlmg.save(path, build(x, rows, frameworks))

    back = dlmg.load(path)
    assert back.layout.same_distribution(rows)
    assert all(str(f.device).startswith("cuda") for f in back.fragments), [str(f.device) for f in back.fragments]
    assert {f.framework for f in back.fragments} == {frameworks[0]}  # the first saved fragment's framework
    np.testing.assert_array_equal(host(back), x)

    columns = Layout((48, 10), block=(48, 5), grid=(1, 2), devices=["cuda:0"] * 2)
    np.testing.assert_array_equal(host(dlmg.load(path, layout=columns, framework="torch")), x)
    on_host = dlmg.load(path, layout=Layout.slab((48, 10), 0, ["cpu"] * 4), framework="numpy")
    assert all(isinstance(f.array, np.ndarray) for f in on_host.fragments)
    np.testing.assert_array_equal(host(on_host), x)
