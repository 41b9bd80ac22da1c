"""The interop bridges across 2 and 4 processes (torch.distributed on gloo), and a
global jax.Array through DTensor and back in 2 multi-controller JAX processes.

Each setup launches its processes once for the module and runs its scenarios
of :mod:`tests._mp_interop` in them; the tests read the per-process results.
"""

from __future__ import annotations

import pytest

from _multiproc import check, launch

SCENARIOS = ["dtensor_roundtrip", "dtensor_partial", "dtensor_refusals", "partitioned_roundtrip"]
SETUPS = [2, 4]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module", params=SETUPS, ids=[f"torch-{n}" for n in SETUPS])
def run(request):
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    return request.param, launch("torch", request.param, SCENARIOS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(run, scenario):
    nprocs, result = run
    values = check(result, scenario)
    assert len(values) == nprocs
    if scenario == "dtensor_roundtrip":
        meshes = {tuple(case[0]) for case in values[0]}
        assert meshes == ({(2,)} if nprocs == 2 else {(4,), (2, 2)})
        assert all(v == values[0] for v in values)
    if scenario == "dtensor_partial":
        assert values == [sum(range(1, nprocs + 1))] * nprocs


def test_sharded_jax_array_through_dtensor_keeps_every_buffer():
    pytest.importorskip("torch")
    jax = pytest.importorskip("jax")
    if not hasattr(jax, "distributed"):  # pragma: no cover
        pytest.skip("needs jax.distributed")
    values = check(launch("jax", 2, ["dtensor_jax_chain"]), "dtensor_jax_chain")
    assert values == [True, True]
