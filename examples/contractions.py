"""Contractions over distributed operands: the plan, the strategies, pending sums.

Runs on the CPU in a few seconds with NumPy and PyTorch installed::

    python examples/contractions.py
"""

from __future__ import annotations

import numpy as np
import torch

import dlmg
from dlmg import Layout

DEVICES = ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]


def main() -> None:
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))

    # 1. Both operands split the contracted mode k alike: each device multiplies its panels,
    #    and, asked for (pending=True), the product is left a pending sum (four addends),
    #    computed without moving a byte. a @ b would give the value (the plan resolves it).
    a = dlmg.scatter(A, Layout.slab((8, 8), 1, DEVICES))
    b = dlmg.scatter(B, Layout.slab((8, 8), 0, DEVICES), framework="torch")
    print(dlmg.einsum_plan("ik,kj->ij", a, b, pending=True))
    c = dlmg.matmul(a, b, pending=True)
    assert c.layout.partial == "sum"
    assert (a @ b).layout.partial is None

    # 2. Linear operations keep it; redistribute resolves it (here a reduce-scatter into row slabs).
    d = 2 * c - c
    rows = d.redistribute(Layout.slab((8, 8), 0, DEVICES))
    np.testing.assert_allclose(rows.gather(framework="numpy"), A @ B)

    # 3. Row slabs times column slabs: the cheaper operand moves (the plan says how many bytes).
    x = dlmg.scatter(A, Layout.slab((8, 8), 0, DEVICES))
    y = dlmg.scatter(B[:, :4], Layout.slab((8, 4), 1, DEVICES))
    plan = dlmg.einsum_plan("ik,kj->ij", x, y)
    print(plan)
    assert plan.strategy == "move x1" and plan.moved.nbytes == 768

    # 4. Any equation NumPy's einsum takes: a trace and a batch mode, torch and NumPy fragments.
    t = dlmg.scatter(rng.standard_normal((4, 3, 3)), Layout.slab((4, 3, 3), 0, DEVICES), framework="torch")
    traces = dlmg.einsum("bii->b", t)
    np.testing.assert_allclose(traces.gather(framework="numpy"), np.einsum("bii->b", t.gather(framework="numpy")))
    assert isinstance(traces.fragments[0].array, torch.Tensor)
    print("traces:", traces.gather(framework="numpy"))


if __name__ == "__main__":
    main()
