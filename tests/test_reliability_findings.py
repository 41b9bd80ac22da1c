"""Inputs that used to give wrong values with no error, in one process: each raises a
clear error now, or gives the right answer.

Fragments that change shape under dlmg, ``from_partitioned`` tilings that cut a mode
into no partition or partitions of the wrong shape or dtype, ``out=`` narrowing a
result into another kind, pickling and copying a tensor after an operation,
reductions of a tensor spread over processes when no engine runs. A Hypothesis
state machine then drives one process's tensors through wrapping, writes to the
source arrays, operations, export, pickling and redistribution, checked against
NumPy after every step.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import dlmg
from dlmg import Layout
from dlmg.errors import DtypeError, FragmentError, LayoutError

torch = pytest.importorskip("torch")

ROWS = Layout.slab((6, 4), 0, ["cpu:0", "cpu:1"])
COLS = Layout.slab((6, 4), 1, ["cpu:0", "cpu:1"])


# -- fragments that change under dlmg ------------------------------------------------
def _torch_tensor():
    frags = [torch.arange(12.0).reshape(3, 4), torch.arange(12.0, 24.0).reshape(3, 4)]
    return frags, dlmg.from_fragments(frags, ROWS)


@pytest.mark.parametrize("change", ["resize", "set_other_shape", "set_other_strides"])
@pytest.mark.parametrize("use", ["sum", "sum_axis", "gather", "add", "redistribute", "max"])
def test_a_torch_fragment_that_changes_under_dlmg_is_refused(change, use):
    frags, t = _torch_tensor()
    t.gather()  # plans and geometry remembered first
    if change == "resize":
        frags[0].resize_(10, 10)
    elif change == "set_other_shape":
        frags[0].set_(torch.zeros(2, 2))
    else:
        frags[1].set_(torch.zeros(4, 3).t())  # same shape, transposed strides
    run = {
        "sum": lambda: dlmg.sum(t), "sum_axis": lambda: dlmg.sum(t, axis=0), "gather": t.gather,
        "add": lambda: t + 1, "redistribute": lambda: t.redistribute(COLS), "max": lambda: dlmg.max(t),
    }[use]
    if change == "set_other_strides" and use not in ("gather", "redistribute"):
        run()  # operations hand the array to torch, which reads its strides itself
        return
    with pytest.raises(FragmentError, match="changed under dlmg"):
        run()


def test_a_numpy_fragment_whose_shape_is_reassigned_is_refused():
    a = np.arange(12.0).reshape(3, 4)
    t = dlmg.from_fragments([a], Layout((3, 4), devices=["cpu"]))
    assert float(dlmg.sum(t)) == 66.0
    a.shape = (4, 3)
    with pytest.raises(FragmentError, match=r"shape \(4, 3\).*shape \(3, 4\)"):
        t.gather()


def test_writing_values_into_a_source_is_not_a_change_of_geometry():
    frags, t = _torch_tensor()
    frags[0][0, 0] = 100.0  # values may change (the tensor views them), geometry may not
    assert float(dlmg.sum(t)) == sum(range(24)) + 100.0


# -- from_partitioned ------------------------------------------------------------------
@pytest.mark.parametrize("tiling", [(0, 1), (-1, 1), (2, 0)])
def test_partitioned_tiling_must_cut_every_mode(tiling):
    with pytest.raises(LayoutError, match="partition_tiling"):
        dlmg.from_partitioned({"shape": (6, 4), "partition_tiling": tiling, "partitions": {}})


def _irregular(second):
    return {
        "shape": (5,), "partition_tiling": (2,),
        "partitions": {
            (0,): {"start": (0,), "shape": (2,), "data": np.array([1.0, 2.0]), "location": [0]},
            (1,): {"start": (2,), "shape": (3,), "data": second, "location": [0]},
        },
    }


@pytest.mark.parametrize("second, word", [
    (np.array([9.0]), "float64\\[1\\]"),  # would be broadcast into (3,)
    (np.array([300.5, 1.0, 2.0], dtype=np.float32), "float32"),  # would be cast
])
def test_partitioned_copy_refuses_partitions_of_another_shape_or_dtype(second, word):
    with pytest.raises(LayoutError, match=word):
        dlmg.from_partitioned(_irregular(second), copy=True)


def test_partitioned_copy_of_a_right_irregular_tiling():
    t = dlmg.from_partitioned(_irregular(np.array([3.0, 4.0, 5.0])), copy=True)
    np.testing.assert_array_equal(np.asarray(t.gather(framework="numpy")), [1, 2, 3, 4, 5])


# -- out= ------------------------------------------------------------------------------
def _float_and_int8():
    a = dlmg.scatter(np.arange(24.0).reshape(6, 4) - 10, ROWS)
    return a, dlmg.zeros(layout=ROWS, dtype="int8", framework="numpy")


def test_fuse_out_refuses_narrowing_into_another_kind():
    a, out = _float_and_int8()
    with pytest.raises(DtypeError, match="float64 values.*int8"):
        dlmg.fuse(lambda x: x * 1.5 + 0.25)(a, out=out)
    assert not np.asarray(out.gather(framework="numpy")).any()  # nothing written


def test_map_fragments_out_refuses_narrowing_into_another_kind():
    a, out = _float_and_int8()
    with pytest.raises(DtypeError, match="same_kind|kind"):
        dlmg.map_fragments(lambda x: x * 1.5 + 0.25, a, out=out)
    assert not np.asarray(out.gather(framework="numpy")).any()


def test_out_within_a_kind_is_allowed_as_in_place_operators_allow_it():
    _, out = _float_and_int8()
    ints = dlmg.scatter(np.arange(24).reshape(6, 4), ROWS)
    dlmg.map_fragments(lambda x: x * 2, ints, out=out)
    np.testing.assert_array_equal(np.asarray(out.gather(framework="numpy")), np.arange(24).reshape(6, 4) * 2)


# -- pickling and copying ----------------------------------------------------------------
@pytest.mark.parametrize("framework", ["numpy", "torch", "jax"])
def test_pickle_and_deepcopy_after_an_operation(framework):
    if framework == "jax":
        pytest.importorskip("jax")
    full = np.arange(24.0, dtype=np.float32).reshape(6, 4)
    d = dlmg.scatter(full, ROWS, framework=framework)
    d + 1  # remembers a placement on the tensor
    for back in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d)):
        np.testing.assert_array_equal(np.asarray(back.gather(framework="numpy")), full)
        np.testing.assert_array_equal(np.asarray((back + 1).gather(framework="numpy")), full + 1)


# -- a tensor of several processes, without an engine -----------------------------------
@pytest.mark.parametrize("op", ["sum", "max", "mean", "var", "argmax", "sum_axis", "gather"])
def test_a_tensor_of_several_processes_is_refused_without_init(op):
    layout = Layout.slab((4, 3), 0, ["cpu", "cpu"], ranks=(0, 1))
    t = dlmg.from_fragments({0: np.ones((2, 3))}, layout)
    run = {"sum": dlmg.sum, "max": dlmg.max, "mean": dlmg.mean, "var": dlmg.var, "argmax": dlmg.argmax,
           "sum_axis": lambda x: dlmg.sum(x, axis=0), "gather": lambda x: x.gather()}[op]
    with pytest.raises(FragmentError, match=r"init\(\)"):
        run(t)


# -- a state machine over one process's tensors --------------------------------------------
LAYOUTS = [
    ROWS, COLS, Layout((6, 4), block=(2, 3), grid=(2, 2), devices=["cpu"] * 4),
    Layout((6, 4), block=(1, 1), grid=(3, 1), devices=["cpu"] * 3), Layout((6, 4), devices=["cpu"]),
]


class OneProcessTensors(RuleBasedStateMachine):
    """A tensor wrapping writable NumPy and torch arrays, and the NumPy array it must equal."""

    def __init__(self):
        super().__init__()
        self.tensor = None
        self.sources = []
        self.expected = None

    @rule(layout=st.sampled_from(LAYOUTS), framework=st.sampled_from(["numpy", "torch"]), seed=st.integers(0, 99))
    def wrap(self, layout, framework, seed):
        full = np.random.default_rng(seed).standard_normal(layout.shape)
        arrays = []
        for i in range(layout.nfragments):
            piece = np.ascontiguousarray(full[np.ix_(*[layout.owned_indices(i, m) for m in range(2)])])
            arrays.append(piece if framework == "numpy" else torch.from_numpy(piece))
        self.tensor = dlmg.from_fragments(arrays, layout)
        self.sources = [(i, a) for i, a in enumerate(arrays)]
        self.expected = full

    @precondition(lambda self: self.tensor is not None)
    @rule(value=st.floats(-5, 5, allow_nan=False), which=st.integers(0, 8))
    def write_the_source(self, value, which):
        """A write into a wrapped array shows in the tensor (no copy was made)."""
        i, array = self.sources[which % len(self.sources)]
        if array.shape[0] == 0 or array.shape[1] == 0:
            return
        array[0, 0] = value
        lay = self.tensor.layout
        self.expected[lay.owned_indices(i, 0)[0], lay.owned_indices(i, 1)[0]] = value

    @precondition(lambda self: self.tensor is not None)
    @rule(scale=st.floats(-3, 3, allow_nan=False))
    def operate(self, scale):
        self.tensor = self.tensor * scale + 1.0
        self.expected = self.expected * scale + 1.0
        self.sources = [(f.index, f.array) for f in self.tensor.fragments]

    @precondition(lambda self: self.tensor is not None)
    @rule(layout=st.sampled_from(LAYOUTS))
    def redistribute(self, layout):
        self.tensor = self.tensor.redistribute(layout)
        self.sources = [(f.index, f.array) for f in self.tensor.fragments]

    @precondition(lambda self: self.tensor is not None)
    @rule()
    def pickle_round_trip(self):
        self.tensor = pickle.loads(pickle.dumps(self.tensor))
        self.sources = [(f.index, f.array) for f in self.tensor.fragments]

    @precondition(lambda self: self.tensor is not None)
    @rule()
    def export_each_fragment(self):
        """Every fragment through DLPack is its own memory with the layout's values."""
        lay = self.tensor.layout
        for f in self.tensor.fragments:
            out = np.from_dlpack(f)
            want = self.expected[np.ix_(*[lay.owned_indices(f.index, m) for m in range(2)])]
            np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)

    @invariant()
    def equals_numpy(self):
        if self.tensor is None:
            return
        np.testing.assert_allclose(np.asarray(self.tensor.gather(framework="numpy")), self.expected,
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(float(dlmg.sum(self.tensor)), self.expected.sum(), rtol=1e-9, atol=1e-9)


OneProcessTensors.TestCase.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)
test_one_process_tensors = OneProcessTensors.TestCase


# -- fuse reads the same closure values in every framework -------------------------------------
SCALE = 1.0
WEIGHTS = np.ones(4, dtype=np.float32)


def _mixed_numpy_and_jax():
    jax = pytest.importorskip("jax")
    full = np.arange(16.0, dtype=np.float32).reshape(4, 4)
    layout = Layout.slab((4, 4), 0, ["cpu:0", "cpu:1"])
    arrays = [np.ascontiguousarray(full[:2]), jax.numpy.asarray(full[2:], device=jax.devices()[1])]
    return full, dlmg.from_fragments(arrays, layout)


def test_fuse_sees_a_changed_global_in_every_framework():
    global SCALE
    full, t = _mixed_numpy_and_jax()
    scaled = dlmg.fuse(lambda x: x * SCALE)
    try:
        np.testing.assert_array_equal(np.asarray(scaled(t).gather(framework="numpy")), full)
        SCALE = 2.0  # jax.jit traced 1.0 in: the kernel must be traced again
        np.testing.assert_array_equal(np.asarray(scaled(t).gather(framework="numpy")), full * 2)
    finally:
        SCALE = 1.0


def test_fuse_reading_an_array_global_runs_eagerly_everywhere():
    full, t = _mixed_numpy_and_jax()
    weighted = dlmg.fuse(lambda x: x * WEIGHTS)
    try:
        weighted(t)
        WEIGHTS[:] = 3.0  # changed in place: no compiled kernel may keep the old values
        np.testing.assert_array_equal(np.asarray(weighted(t).gather(framework="numpy")), full * 3)
        assert weighted.compile is False
    finally:
        WEIGHTS[:] = 1.0


def test_fuse_failing_on_jax_fragments_of_one_device_names_the_fragment():
    jax = pytest.importorskip("jax")
    layout = Layout.slab((4, 4), 0, ["cpu:0", "cpu:0"])
    t = dlmg.from_fragments([jax.numpy.ones((2, 4)), jax.numpy.ones((2, 4))], layout)

    def broken(x):
        raise ValueError("no such thing")

    with pytest.raises(FragmentError, match="fragment 0.*jax.*no such thing"):
        dlmg.fuse(broken)(t)


# -- errors that point the right way ----------------------------------------------------------
def test_a_device_index_beyond_int32_is_refused_when_the_layout_is_made():
    with pytest.raises((dlmg.DeviceError, LayoutError), match="int32"):
        Layout((4,), devices=[f"cuda:{2**31}"])


def test_partitioned_get_returning_none_says_so():
    obj = {"shape": (2,), "partition_tiling": (1,), "get": lambda handle: None,
           "partitions": {(0,): {"start": (0,), "shape": (2,), "location": [0], "data": 7}}}
    with pytest.raises(LayoutError, match="gave None instead of an array"):
        dlmg.from_partitioned(obj)


# -- the all-reduces of a reduction, known in advance --------------------------------------
class _Recorder:
    """Stands for an engine in one process: records each all-reduce's dtype and operation."""

    def __init__(self):
        self.calls = []

    def allreduce(self, buf, op):
        self.calls.append((buf.dtype, op))


_CASES = [(name, acc_dtype, dtype)
          for name in ("sum", "prod", "min", "max", "all", "any", "argmax", "argmin")
          for acc_dtype, dtype in (("float64", None), ("int64", None), ("uint8", None),
                                   ("float32", "float64"), ("int64", "float32"))
          if dtype is None or name in ("sum", "prod", "min", "max")]  # (the others take no dtype)


@pytest.mark.parametrize("name, acc_dtype, dtype", _CASES)
def test_a_reduction_knows_its_all_reduces_in_advance(name, acc_dtype, dtype):
    """A process whose arithmetic fails between all-reduces runs the rest from this list,
    so it must be the list the exchange runs."""
    from dlmg.ops import reduce_across

    acc = np.zeros((3,), dtype=np.dtype("uint8") if name in ("all", "any") else acc_dtype)
    idx = np.zeros((3,), dtype=np.int64) if name in ("argmax", "argmin") else None
    recorder = _Recorder()
    reduce_across._exchange(recorder, name, dtype, acc, idx, acc_dtype)
    assert recorder.calls == reduce_across._steps(name, dtype, acc)
