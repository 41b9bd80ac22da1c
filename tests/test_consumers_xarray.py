"""xarray wrapping dlmg tensors: reductions with the default ``skipna``, ``std`` with
``ddof``, ``rolling``, ``groupby``, ``concat``, ``.values``.

Every call runs on NumPy arrays and on dlmg tensors of one fragment and of row slabs
over 2 and 4 host devices, with NumPy, torch and JAX fragments, in a fresh process
(``tests/_consumer_calls.py``, which also counts them: ``python tests/_consumer_calls.py``);
values must equal NumPy's and array results must still be ``DistributedTensor``s.
What is known not to work is marked, with the reason, in ``_consumer_calls.KNOWN``.
"""

from __future__ import annotations

import pytest

pytest.importorskip("xarray", reason="xarray is in the test extra")

from _consumer_calls import params, run_in_child, verdict  # noqa: E402


@pytest.fixture(scope="module")
def found():
    return run_in_child("xarray")


@pytest.mark.parametrize("key", params("xarray"))
def test_call_matches_numpy(key, found):
    verdict(found, key)
