"""Indexing and assignment on CUDA fragments: NumPy's values and errors, owner-routed reads."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp
from dlmg import Layout

pytestmark = pytest.mark.gpu


def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    return torch


def test_cuda_fragments_index_as_numpy():
    torch = _torch_cuda()
    devices = [f"cuda:{i % torch.cuda.device_count()}" for i in range(2)]
    host = np.arange(20.0).reshape(4, 5)
    x = dlmg.scatter(host, Layout.slab((4, 5), 0, devices), framework="torch")
    for key in [np.array([3, 0, -1]), (slice(None), [4, 0]), (slice(None, None, -1),), host > 7]:
        np.testing.assert_array_equal(x[key].gather(framework="numpy"), host[key])
    np.testing.assert_array_equal(xp.take(x, np.array([1, 4]), axis=1).gather(framework="numpy"),
                                  host[:, [1, 4]])
    with pytest.raises(IndexError, match="out of bounds"):
        x[np.array([4])]
    x[:, 0] = torch.arange(4.0, device=devices[0]) + 100  # a CUDA value, split over the fragments
    x[::-1, 1] = np.arange(4.0)
    want = host.copy()
    want[:, 0] = np.arange(4.0) + 100
    want[::-1, 1] = np.arange(4.0)
    np.testing.assert_array_equal(x.gather(framework="numpy"), want)
    x[:, 1:] = x[:, :-1]
    want[:, 1:] = want[:, :-1].copy()
    np.testing.assert_array_equal(x.gather(framework="numpy"), want)


def test_basic_keys_of_a_pending_sum_on_cuda_keep_it():
    torch = _torch_cuda()
    devices = [f"cuda:{i % torch.cuda.device_count()}" for i in range(2)]
    rng = np.random.default_rng(2)
    A, B = rng.standard_normal((6, 8)), rng.standard_normal((8, 5))
    a = dlmg.scatter(A, Layout.slab(A.shape, 1, devices), framework="torch")
    b = dlmg.scatter(B, Layout.slab(B.shape, 0, devices), framework="torch")
    c = dlmg.matmul(a, b, pending=True)  # each addend whole on its device: views
    value, noise = A @ B, rng.standard_normal((6, 5))
    lay = Layout(value.shape, block=(3, 5), grid=(2, 1), devices=devices * 2, partial="sum")
    addends = [value - noise, noise]  # rows split: a cut of mode 0 reads each addend from its owners
    split = dlmg.from_fragments([torch.from_numpy(addends[f.replica][3 * f.coords[0]:3 * f.coords[0] + 3].copy())
                                 .to(str(f.device)) for f in lay.fragments], lay)
    for x in (c, split):
        assert x.layout.partial == "sum"
        for key in (np.s_[0:2], np.s_[:, 1], np.s_[..., ::-2], np.s_[None, 3]):
            got = x[key]
            assert got.layout.partial == "sum" and all(f.device.kind == "cuda" for f in got.fragments)
            np.testing.assert_allclose(got.gather(framework="numpy"), value[key], rtol=1e-12, atol=1e-12)
    with pytest.raises(dlmg.LayoutError, match="redistribute"):
        c[0:2] = 1.0
