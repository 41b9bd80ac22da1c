"""What the Array API namespace tests share: the two layout policies they run under.

``layout_policy`` is a fixture that runs a test once under the default policy
(one fragment) and once under a slab policy over three host devices; tests that
draw the policy with Hypothesis instead enter :func:`policy` themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import dlmg

SLAB = ["cpu:0", "cpu:1", "cpu:2"]
POLICIES = ["single", "slab"]


def policy(kind: str) -> Any:
    """The layout policy ``kind`` (one of :data:`POLICIES`), to enter with ``with``."""
    return dlmg.default_layout(kind, devices=SLAB) if kind == "slab" else dlmg.default_layout()


def gathered(t: Any) -> Any:
    """The whole value of ``t`` as one NumPy array."""
    return t.gather(framework="numpy")


@pytest.fixture(params=POLICIES)
def layout_policy(request: Any) -> Iterator[str]:
    """Runs the test under each policy of :data:`POLICIES`; yields its name."""
    with policy(request.param):
        yield request.param
