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
