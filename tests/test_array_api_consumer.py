"""A library written against the Array API standard, array-api-extra, run on dlmg tensors.

array-api-extra finds the namespace through ``x.__array_namespace__()`` (via
array-api-compat) and calls only the standard's functions, so every result
below is computed by ``dlmg.array_api`` and compared with NumPy's.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
import dlmg.array_api as xp

xpx = pytest.importorskip("array_api_extra", reason="array-api-extra is in the test extra")

HOST = np.random.default_rng(7).standard_normal((6, 5))


def test_covariance_and_kronecker_product_of_one_fragment():
    x = xp.asarray(HOST)
    cov = xpx.cov(x)
    assert isinstance(cov, dlmg.DistributedTensor)
    np.testing.assert_allclose(cov.gather(), np.cov(HOST), rtol=1e-12)
    np.testing.assert_allclose(xpx.kron(x[:2, :2], x[:2, :2]).gather(), np.kron(HOST[:2, :2], HOST[:2, :2]))
    assert int(xpx.nunique(xp.asarray([3, 1, 3, 2]))) == 3


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_elementwise_and_padding_functions_on_a_slab_over_three_devices(framework):
    pytest.importorskip(framework)
    with dlmg.default_layout("slab", devices=["cpu:0", "cpu:1", "cpu:2"], framework=framework):
        x = xp.asarray(HOST.tolist())  # Python values: the policy's framework holds them
        assert x.layout.grid == (3, 1) and x.frameworks == (framework,)
        sinc = xpx.sinc(x)
        assert sinc.layout == x.layout  # computed fragment by fragment, nothing moved
        np.testing.assert_allclose(sinc.gather(framework="numpy"), np.sinc(HOST), rtol=1e-12)
        np.testing.assert_allclose(xpx.pad(x, 1).gather(framework="numpy"), np.pad(HOST, 1))
        np.testing.assert_array_equal(xpx.isclose(x, x + 1e-12).gather(framework="numpy"), np.ones(HOST.shape, bool))
        updated = xpx.at(x)[1, 2].set(9.0)
        np.testing.assert_array_equal(updated.gather(framework="numpy")[1, 2], 9.0)
        np.testing.assert_array_equal(xpx.atleast_nd(x[0], ndim=2).gather(framework="numpy"), HOST[:1])
