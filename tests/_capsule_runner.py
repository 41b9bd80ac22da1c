"""Feed hand-built DLPack capsules to every dlmg entry point, in a child process.

Run as ``python _capsule_runner.py`` with a JSON list of :class:`Spec` field
dicts on stdin. For each case it prints ``START <i>`` before touching it and
``DONE <i> <json>`` after, flushing each line, so that a parent which sees
the process die (a segmentation fault, an abort) knows the case that killed
it. Memory is read (gather, copies) only for cases whose elements lie inside
the producer's real buffer; every other case goes only through the entry
points that read metadata (inspect, device_of, framework imports without a
copy, from_fragments).

The JSON per case says which entry points raised what, and per producer
(capsules taken over, deleter calls): each capsule a consumer took over must
be deleted exactly once, and none other.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import dlmg  # noqa: E402
from dlmg.dlpack import bounds  # noqa: E402
from dlmg.dtypes import from_dlpack_code  # noqa: E402

from _capsule_structs import Producer, Spec  # noqa: E402

BUFFER_BYTES = 64 * 8


def _inside_buffer(spec: Spec) -> bool:
    """Whether every element the metadata describes lies in the real buffer
    (so reading them is safe whatever dlmg decides)."""
    if spec.data != "buffer" or spec.shape is None or not 0 <= spec.ndim <= 8:
        return False
    if spec.device_type != 1 or spec.major != 1 and spec.versioned:
        return False
    try:
        itemsize = from_dlpack_code(spec.code, spec.bits, spec.lanes).itemsize
    except Exception:  # noqa: BLE001 - an unknown dtype: nothing is read anyway
        return False
    shape = list(spec.shape[: spec.ndim]) + [0] * max(0, spec.ndim - len(spec.shape))
    if any(n < 0 for n in shape):
        return False
    if spec.strides is None:
        strides, acc = [], 1
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= n
    else:
        strides = list(spec.strides[: spec.ndim]) + [0] * max(0, spec.ndim - len(spec.strides))
    if 0 in shape:
        return True
    low, high = bounds.strided_extent(shape, strides)
    start = spec.byte_offset + low * itemsize
    end = spec.byte_offset + (high + 1) * itemsize
    return 0 <= start and end <= BUFFER_BYTES and spec.byte_offset < 2**63


def _outcome(fn) -> str:
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - recorded, judged by the parent
        return f"{type(exc).__module__}.{type(exc).__qualname__}"
    return "ok"


def run_case(fields: dict) -> dict:
    spec = Spec(**fields)
    safe = _inside_buffer(spec)
    out: dict = {"safe": safe}

    p = Producer(spec)
    out["inspect"] = _outcome(lambda: dlmg.dlpack.inspect(p))
    out["inspect_deleted"] = (p.consumed, p.deleted)

    raw = Producer(spec)
    capsule = raw.capsule()
    out["device_of_capsule"] = _outcome(lambda: dlmg.dlpack.device_of(capsule))  # noqa: F821 (called before the del)
    out["inspect_capsule"] = _outcome(lambda: dlmg.dlpack.inspect(capsule))  # noqa: F821 (called before the del)
    out["inspect_capsule_deleted"] = (raw.consumed, raw.deleted)
    del capsule

    for name in ("numpy", "torch"):
        q = Producer(spec)
        copy = None if safe else False  # without a safe buffer, nothing may be read
        out[f"{name}_import"] = _outcome(lambda: dlmg.get_adapter(name).from_dlpack(q, copy=copy))
        out[f"{name}_import_deleted"] = (q.consumed, q.deleted)

    w = Producer(spec)

    def wrap_and_use() -> None:
        shape = dlmg.dlpack.inspect(Producer(spec)).shape
        dt = dlmg.from_fragments([w], dlmg.Layout(shape, devices=["cpu"]))
        if safe:
            dt.gather("numpy")
            dt.to("numpy")
            dt.to("torch")

    out["from_fragments"] = _outcome(wrap_and_use)
    out["from_fragments_deleted"] = (w.consumed, w.deleted)
    return out


def main() -> None:
    cases = json.load(sys.stdin)
    for i, fields in enumerate(cases):
        print(f"START {i}", flush=True)
        print(f"DONE {i} {json.dumps(run_case(fields))}", flush=True)


if __name__ == "__main__":
    main()
