"""Fuzzing the DLPack capsule reader: no input crashes the process.

Hypothesis builds ``DLManagedTensorVersioned`` / ``DLManagedTensor`` structs
field by field (``_capsule_structs.Spec``), mixing honest values with
adversarial ones for every field: versions and flags of all sizes, NULL and
wild data pointers, unknown device and dtype codes, negative and huge
``ndim``, extents and strides at the int64 limits, byte offsets up to
``2**64 - 1``. Each batch runs in a child process (``_capsule_runner.py``)
that feeds every case to every entry point, so a crash is a test failure
naming the case, not a lost run.

What must hold for every case:

* the child process survives (no segmentation fault, no abort);
* every capsule dlmg consumed had its deleter called exactly once;
* what the reader refuses, it refuses with :class:`dlmg.DLPackError`, and
  the other entry points refuse with dlmg's errors too;
* metadata whose sizes or addresses no memory can hold is refused.

The short run draws the same batches every time (``derandomize``); the
``slow`` long variant draws new ones on every run, for hunting. Every case
such a hunt finds goes into the explicit examples below.

Budget: ``DLMG_FUZZ_BATCHES`` batches of ``DLMG_FUZZ_CASES`` cases (4 x 25 by
default, about 15 seconds on two cores); the ``slow`` variant runs
``DLMG_FUZZ_LONG_BATCHES`` batches (16 by default, about a minute; raise it
for a longer hunt).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, example, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import dlmg  # noqa: E402
from _capsule_structs import Producer, Spec  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "_capsule_runner.py"
BATCHES = int(os.environ.get("DLMG_FUZZ_BATCHES", "4"))
CASES = int(os.environ.get("DLMG_FUZZ_CASES", "25"))

I64 = [0, 1, 2, 3, 8, -1, -8, 2**31, 2**32, 2**62, 2**63 - 1, -(2**62), -(2**63)]
U64 = [0, 1, 7, 8, 64, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 8, 2**64 - 1]
U32 = [0, 1, 2, 3, 2**31, 2**32 - 1]
DTYPES = [(0, 8, 1), (0, 32, 1), (0, 64, 1), (1, 8, 1), (1, 64, 1), (2, 16, 1), (2, 32, 1), (2, 64, 1),
          (4, 16, 1), (5, 64, 1), (5, 128, 1), (6, 8, 1), (17, 4, 2)]

honest = st.fixed_dictionaries(
    {
        "versioned": st.booleans(),
        "flags": st.sampled_from([0, 1, 2, 3]),
        "data": st.just("buffer"),
        "ndim": st.integers(0, 3),
        "code_bits_lanes": st.sampled_from(DTYPES[:9]),
        "shape": st.lists(st.integers(0, 4), min_size=3, max_size=3),
        "strides": st.one_of(st.none(), st.lists(st.integers(-4, 8), min_size=3, max_size=3)),
        "byte_offset": st.sampled_from([0, 8, 64, 128]),
    }
)

adversarial = st.fixed_dictionaries(
    {
        "versioned": st.booleans(),
        "major": st.sampled_from(U32),
        "minor": st.sampled_from(U32),
        "flags": st.one_of(st.sampled_from(U64), st.integers(0, 2**64 - 1)),
        "data": st.one_of(st.sampled_from(["buffer", None]), st.sampled_from(U64), st.integers(1, 2**64 - 1)),
        "device_type": st.sampled_from([1, 2, 3, 4, 10, 13, 20, 0, 5, 99, -1, 2**31 - 1]),
        "device_id": st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)]),
        "ndim": st.sampled_from([-(2**31), -1, 0, 1, 2, 3, 64, 65, 2**31 - 1]),
        "code_bits_lanes": st.one_of(
            st.sampled_from(DTYPES),
            st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 65535)),
        ),
        "shape": st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(I64), st.integers(-(2**63), 2**63 - 1)),
                                                 max_size=6)),
        "strides": st.one_of(st.none(), st.lists(st.one_of(st.sampled_from(I64), st.integers(-(2**63), 2**63 - 1)),
                                                   max_size=6)),
        "byte_offset": st.one_of(st.sampled_from(U64), st.integers(0, 2**64 - 1)),
    }
)


def _as_spec(fields: dict) -> dict:
    fields = dict(fields)
    fields["code"], fields["bits"], fields["lanes"] = fields.pop("code_bits_lanes")
    for key in ("shape", "strides"):
        if fields.get(key) is not None:
            fields[key] = list(fields[key])
    return fields


cases = st.lists(st.one_of(honest, adversarial).map(_as_spec), min_size=CASES, max_size=CASES)


def _run_batch(batch: list[dict]) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, str(RUNNER)], input=json.dumps(batch), capture_output=True, text=True, timeout=600,
    )
    started = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("START ")]
    if proc.returncode != 0:
        culprit = batch[started[-1]] if started else None
        pytest.fail(
            f"the capsule runner died (exit status {proc.returncode}) on case {culprit!r}\n"
            f"stderr:\n{proc.stderr[-3000:]}"
        )
    return [json.loads(line.split(" ", 2)[2]) for line in proc.stdout.splitlines() if line.startswith("DONE ")]


# What an entry point may raise on bad metadata: dlmg's own errors.
ALLOWED = {"ok"} | {f"dlmg.errors.{name}" for name in (
    "DLPackError", "CopyRequiredError", "DtypeError", "UnsupportedDtypeError", "DeviceError", "FragmentError",
    "FrameworkError", "LayoutError", "LayoutMismatchError", "ViewNotSupportedError",
)}


def _impossible(spec: dict) -> bool:
    """Metadata dlmg's bounds promise to refuse (only for otherwise valid, host, versioned-1 cases)."""
    if spec.get("byte_offset", 0) >= 2**63:
        return True
    shape = spec.get("shape")
    ndim = spec.get("ndim", 1)
    if shape is None or not 0 < ndim <= len(shape) or any(n < 0 for n in shape[:ndim]):
        return False
    count = 1
    for n in shape[:ndim]:
        count *= n
    return count >= 2**63


def _check(batch: list[dict], results: list[dict]) -> None:
    assert len(results) == len(batch)
    for spec, res in zip(batch, results):
        for key, value in res.items():
            if key.endswith("_deleted"):
                consumed, deleted = value
                if deleted != consumed:
                    pytest.fail(f"{key}: {deleted} deleter calls for {consumed} capsules taken over; case {spec}")
            elif key != "safe" and value not in ALLOWED:
                pytest.fail(f"{key} raised {value}, not one of dlmg's errors; case {spec}")
        if _impossible(spec) and res["inspect"] == "ok":
            pytest.fail(f"inspect accepted metadata no memory can hold; case {spec}")


def _fuzz(batch: list[dict]) -> None:
    _check(batch, _run_batch(batch))


_SETTINGS = dict(
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # a failure names its case; no shrinking
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# Zero elements, yet the extents multiplied left to right overflow int64: torch
# refuses it after running the deleter of a capsule it leaves unconsumed.
NUMEL_OVERFLOW = {"ndim": 3, "shape": [2**62, 2**62, 0], "strides": [1, 1, 1]}


@pytest.mark.slow  # every batch runs in a child process
@settings(max_examples=BATCHES, derandomize=True, **_SETTINGS)
@given(cases)
@example([NUMEL_OVERFLOW, dict(NUMEL_OVERFLOW, strides=None), dict(NUMEL_OVERFLOW, shape=[2**32, 2**32, 0])])
def test_no_capsule_crashes_or_leaks(batch):
    _fuzz(batch)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("DLMG_FUZZ_LONG_BATCHES", "16")), **_SETTINGS)
@given(cases)
def test_no_capsule_crashes_or_leaks_long(batch):
    _fuzz(batch)


@pytest.mark.slow
def test_known_crash_cases_are_refused_in_a_child_process():
    batch = [
        {"byte_offset": 2**63},
        {"shape": [8], "strides": [2**62]},
        {"ndim": 4, "shape": [2**20] * 4, "strides": [0, 0, 0, 0]},
        {"data": 2**64 - 16, "shape": [8], "strides": [1]},
    ]
    results = _run_batch(batch)
    _check(batch, results)
    assert all(r["inspect"] == "dlmg.errors.DLPackError" for r in results)
    assert all(r["from_fragments"] == "dlmg.errors.DLPackError" for r in results)


def test_torch_runs_the_deleter_of_a_capsule_it_refuses_and_leaves_unconsumed():
    """The torch fact behind the adapter's shape check.

    ``torch.from_dlpack`` of shape ``(2**62, 2**62, 0)`` raises, after the
    deleter ran, with the capsule still named ``dltensor_versioned``: by the
    protocol the producer still owns it and frees it again. (This producer's
    capsules have no destructor and its deleter only counts, so nothing is
    freed here.)
    """
    torch = pytest.importorskip("torch")
    p = Producer(Spec(**NUMEL_OVERFLOW))
    with pytest.raises(RuntimeError, match="numel"):
        torch.from_dlpack(p)
    assert (p.exports, p.consumed, p.deleted) == (1, 0, 1)


@pytest.mark.parametrize("shape", [[2**62, 2**62, 0], [2**32, 2**32, 0], [3, 2**62, 2**62, 0]])
def test_torch_import_refuses_a_shape_torch_would_free_twice(shape):
    pytest.importorskip("torch")
    p = Producer(Spec(**dict(NUMEL_OVERFLOW, ndim=len(shape), shape=shape, strides=[1] * len(shape))))
    with pytest.raises(dlmg.DLPackError, match=r"shape \(.*exceeds 2\*\*63 - 1"):
        dlmg.get_adapter("torch").from_dlpack(p)
    # One capsule, read by dlmg's inspect and deleted once; torch never got one.
    assert (p.exports, p.consumed, p.deleted) == (1, 1, 1)


def test_torch_import_keeps_zero_size_shapes_torch_can_hold():
    torch = pytest.importorskip("torch")
    p = Producer(Spec(**dict(NUMEL_OVERFLOW, shape=[0, 2**62, 2**62])))
    t = dlmg.get_adapter("torch").from_dlpack(p)
    assert isinstance(t, torch.Tensor) and tuple(t.shape) == (0, 2**62, 2**62)
    del t
    assert (p.exports, p.consumed, p.deleted) == (2, 2, 2)
