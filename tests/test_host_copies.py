"""``np.asarray(dt)``: a host copy of the whole tensor in one process, refused across processes."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg import Layout

HOST = np.arange(24.0).reshape(6, 4)


@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("devices", [1, 3])
def test_asarray_is_a_host_copy_of_the_whole_tensor(framework, devices):
    pytest.importorskip(framework)
    host = HOST.astype(np.float32)
    layout = Layout.slab(host.shape, 0, [f"cpu:{i}" for i in range(devices)])
    dt = dlmg.scatter(host, layout, framework=framework)
    got = np.asarray(dt)
    assert type(got) is np.ndarray and got.flags.writeable
    np.testing.assert_array_equal(got, host)
    got[0, 0] = -1.0  # a copy: the fragments keep their values
    assert float(dt[0, 0]) == 0.0
    assert np.asarray(dt, dtype=np.float64).dtype == np.float64
    assert np.array(dt).shape == (6, 4)


def test_asarray_refuses_copy_false_saying_what_works():
    dt = dlmg.scatter(HOST, Layout.slab(HOST.shape, 0, ["cpu:0", "cpu:1"]))
    with pytest.raises(dlmg.CopyRequiredError, match=r"np\.from_dlpack\(dt\.fragments\[i\]\)"):
        np.asarray(dt, copy=False)
    np.testing.assert_array_equal(np.asarray(dt, copy=True), HOST)


def test_asarray_of_a_pending_sum_is_its_value():
    dt = dlmg.scatter(HOST, Layout.slab(HOST.shape, 0, ["cpu:0", "cpu:1", "cpu:2"]))
    gram = dlmg.einsum("ij,ik->jk", dt, dt, layout=None)
    np.testing.assert_allclose(np.asarray(gram), HOST.T @ HOST)


def test_asarray_across_processes_names_gather():
    """Fragments held by other processes: making the tensor whole is a collective."""
    layout = Layout.slab((6,), 0, ["cpu"] * 3, ranks=[0, 1, 0])
    dt = dlmg.from_fragments([np.arange(2.0), None, np.arange(4.0, 6.0)], layout)
    with pytest.raises(dlmg.NotLocalError, match=r"ranks \[1\].*dt\.gather\(framework='numpy'\).*root=0"):
        np.asarray(dt)
    with pytest.raises(ValueError):  # also the built-in
        np.asarray(dt)
