"""JAX multi-controller on the CPU: two processes joined by ``jax.distributed.initialize``
(gloo CPU collectives) and by dlmg on torch.distributed.

A global ``jax.Array`` wraps as each process's fragments (ranks from the
devices' ``process_index``), goes to torch and back to a global ``jax.Array``
keeping every buffer, and gathers, redistributes and reduces like any tensor.
"""

from __future__ import annotations

import pytest

from _multiproc import check, launch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run():
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    return launch("jax", 2, ["jax_multicontroller", "allgather", "mixed_frameworks"])


def test_global_jax_array_keeps_its_buffers(run):
    values = check(run, "jax_multicontroller")
    assert values[0] == values[1]
    assert values[0]["ranks"] == [0, 0, 1, 1]


@pytest.mark.parametrize("scenario", ["allgather", "mixed_frameworks"])
def test_collectives_beside_jax(run, scenario):
    check(run, scenario)
