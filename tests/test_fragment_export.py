"""Exporting a fragment through DLPack, first and later times: a fragment keeps its
adapter's exporter after the first export (for NumPy arrays, NumPy's own
``__dlpack__``), and everything its adapter checks on every export is still
checked on every export."""

from __future__ import annotations

import numpy as np
import pytest

import dlmg
from dlmg.errors import DLPackError

torch = pytest.importorskip("torch")


def _tensor(arrays):
    n = sum(len(a) for a in arrays)
    return dlmg.from_fragments(arrays, dlmg.Layout.slab((n,), 0, ["cpu"] * len(arrays)))


def test_numpy_fragments_export_through_numpy_itself_after_the_first_time():
    arrays = [np.arange(4, dtype=np.float32) + 4 * k for k in range(3)]
    dt = _tensor(arrays)
    for _ in range(3):
        for frag, array in zip(dt.fragments, arrays):
            t = torch.from_dlpack(frag)
            assert t.data_ptr() == array.ctypes.data
            assert np.from_dlpack(frag).ctypes.data == array.ctypes.data
    for frag, array in zip(dt.fragments, arrays):
        assert frag._export == array.__dlpack__  # one call past the fragment's own


def test_wrapped_numpy_fragments_keep_numpy_export_from_the_start():
    """from_fragments asks once per dtype whether NumPy's own export is the whole
    export, so even the first export of a fragment is NumPy's, zero-copy."""
    arrays = [np.arange(4, dtype=np.int16) + 4 * k for k in range(2)]
    dt = _tensor(arrays)
    for frag, array in zip(dt.fragments, arrays):
        assert frag._export == array.__dlpack__
        assert torch.from_dlpack(frag).data_ptr() == array.ctypes.data


def test_wrapped_numpy_bfloat16_fragments_still_refuse_to_export():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="NumPy holds bfloat16 through ml_dtypes")
    from dlmg.errors import DtypeError

    arrays = [np.ones(4, dtype=ml_dtypes.bfloat16) for _ in range(2)]
    dt = _tensor(arrays)
    assert dt.dtype == "bfloat16"
    for frag in dt.fragments:
        assert frag._export is None  # the checked export, at first use
        with pytest.raises(DtypeError, match="bfloat16"):
            torch.from_dlpack(frag)


def test_read_only_sources_stay_read_only_on_every_export():
    array = np.arange(8, dtype=np.float64)
    array.flags.writeable = False
    dt = dlmg.from_fragments([array], dlmg.Layout.slab((8,), 0, ["cpu"]))
    for _ in range(2):
        out = np.from_dlpack(dt.fragments[0])
        assert out.ctypes.data == array.ctypes.data and not out.flags.writeable


def test_torch_checks_run_on_every_export():
    t = torch.arange(6, dtype=torch.float32)
    dt = dlmg.from_fragments([t], dlmg.Layout.slab((6,), 0, ["cpu"]))
    frag = dt.fragments[0]
    assert np.from_dlpack(frag).ctypes.data == t.data_ptr()
    t.requires_grad_(True)  # after the first export: exported through detach(), the same memory
    assert np.from_dlpack(frag).ctypes.data == t.data_ptr()
    z = torch.tensor([1 + 2j, 3 - 1j]).conj()
    lazy = dlmg.from_fragments([z], dlmg.Layout.slab((2,), 0, ["cpu"]))
    for _ in range(2):  # refused every time, with the reason
        with pytest.raises(DLPackError, match="conjugate"):
            np.from_dlpack(lazy.fragments[0])


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_tensor_exports_its_own_arrays(how):
    # the exporter a fragment keeps is bound to its array: a copy must not inherit it
    import copy
    import pickle

    arrays = [np.arange(4, dtype=np.float32), np.arange(4, 8, dtype=np.float32)]
    dt = _tensor(arrays)
    for frag in dt.fragments:
        torch.from_dlpack(frag)  # the exporters are made and kept
    other = copy.deepcopy(dt) if how == "deepcopy" else pickle.loads(pickle.dumps(dt))
    for frag, original in zip(other.fragments, arrays):
        assert frag.array.ctypes.data != original.ctypes.data
        assert torch.from_dlpack(frag).data_ptr() == frag.array.ctypes.data
        np.testing.assert_array_equal(np.from_dlpack(frag), original)
