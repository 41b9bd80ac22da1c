"""dlmg.einsum equals numpy.einsum on random equations, layouts and frameworks (one process)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _contract_cases import run_case
from _strategies import jax_cpus

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


@pytest.mark.skipif(jax_cpus() < 4, reason="needs 4 JAX CPU devices (XLA_FLAGS set in conftest)")
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_einsum_matches_numpy(seed):
    run_case(seed, DEVICES)


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 5, 8, 13, 21])
def test_pinned_cases(seed):
    run_case(seed, DEVICES, frameworks=("numpy", "torch"))
