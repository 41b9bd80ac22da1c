"""Code written against the Python Array API standard, run on a distributed tensor.

array-api-extra (a library of functions built only from the standard's API)
receives dlmg tensors, finds their namespace through ``__array_namespace__``
and computes with it; dlmg runs the work fragment by fragment where it can.

Run: python examples/array_api_consumer.py
"""

import array_api_extra as xpx
import numpy as np

import dlmg
import dlmg.array_api as xp

host = np.random.default_rng(0).standard_normal((8, 4))

# One fragment (the default layout policy): covariance of the rows.
x = xp.asarray(host)
print("namespace:", x.__array_namespace__().__name__)
cov = xpx.cov(x)
assert np.allclose(cov.gather(), np.cov(host))
print("cov of 8 variables:", cov.shape)

# A slab over four host devices: elementwise and padding work per fragment.
with dlmg.default_layout("slab", devices=["cpu:0", "cpu:1", "cpu:2", "cpu:3"]):
    y = xp.asarray(host)
    s = xpx.sinc(y)
    print(s)
    assert s.layout == y.layout and np.allclose(s.gather(), np.sinc(host))
    padded = xpx.pad(y, 2)
    assert np.allclose(padded.gather(), np.pad(host, 2))
    print("padded:", padded.shape, "on", padded.device)
