"""The Array API namespace across 2 processes (torch.distributed on gloo): the default
layout policy gives one piece per process, and the standard's functions run there."""

from __future__ import annotations

import pytest

from _multiproc import check, launch

pytestmark = pytest.mark.slow


def test_namespace_across_two_processes():
    pytest.importorskip("torch")
    values = check(launch("torch", 2, ["array_api_processes"]), "array_api_processes")
    assert len(values) == 2 and values[0] == values[1] == float(sum(2 * v + 1 + v % 3 for v in range(24)))
