"""Multi-process scenarios of the namespace's shape, joining and reordering functions (run by
:mod:`tests._mp_worker`): values against NumPy over random layouts whose fragments belong to
several processes, and each process's peak of new memory during each call."""

from __future__ import annotations

import gc
import math
import tracemalloc

import numpy as np

import dlmg
import dlmg.array_api as xp
import dlmg.distributed as dd
from dlmg import Layout


def _piece(full, layout, i):
    if layout.ndim == 0:
        return full.copy()
    return np.ascontiguousarray(full[np.ix_(*[layout.owned_indices(i, m) for m in range(layout.ndim)])])


def _wrap(full, layout, frameworks=("numpy",)):
    arrays = {}
    for i in layout.fragments_of(dd.rank()):
        piece = _piece(full, layout, i)
        if frameworks[i % len(frameworks)] == "torch":
            import torch

            piece = torch.from_numpy(piece)
        arrays[i] = piece
    return dlmg.from_fragments(arrays, layout, dtype=str(full.dtype))


def _random_layout(rng, shape, world):
    block = [int(rng.integers(1, max(n, 1) + 1)) for n in shape]
    grid = [int(rng.integers(1, 4)) for _ in shape]
    if math.prod(grid) > 6:
        grid = [1] * len(shape)
        grid[0] = 3
    reps = int(rng.integers(1, 3))
    n = math.prod(grid) * reps
    ranks = [i % world for i in range(n)] if rng.random() < 0.5 else [int(r) for r in rng.integers(0, world, n)]
    return Layout(shape, block=block, grid=grid, devices=["cpu"] * n, ranks=ranks)


def _calls(x, a, y, b):
    """(name, result, NumPy's answer) for every function of the family."""
    return [
        ("expand_dims", xp.expand_dims(x, axis=1), np.expand_dims(a, 1)),
        ("squeeze", xp.squeeze(xp.expand_dims(x, axis=0), axis=0), a),
        ("moveaxis", xp.moveaxis(x, 0, -1), np.moveaxis(a, 0, -1)),
        ("reshape", xp.reshape(x, (a.size,)), a.reshape(-1)),
        ("reshape_t", xp.reshape(x, tuple(reversed(a.shape))), a.reshape(tuple(reversed(a.shape)))),
        ("concat0", xp.concat([x, y], axis=0), np.concatenate([a, b], 0)),
        ("stack", xp.stack([x, x], axis=1), np.stack([a, a], 1)),
        ("flip", xp.flip(x, axis=0), np.flip(a, 0)),
        ("flip_all", xp.flip(x), np.flip(a)),
        ("roll", xp.roll(x, 3, axis=0), np.roll(a, 3, 0)),
        ("roll_flat", xp.roll(x, -5), np.roll(a, -5)),
        ("repeat", xp.repeat(x, 2, axis=0), np.repeat(a, 2, 0)),
        ("repeat_counts", xp.repeat(x, np.arange(a.shape[1]) % 3, axis=1), np.repeat(a, np.arange(a.shape[1]) % 3, 1)),
        ("tile", xp.tile(x, (2, 3)), np.tile(a, (2, 3))),
    ]


def manipulation_values():
    """Every function on random layouts across the processes equals NumPy and stays on the
    lead's processes and devices."""
    world = dd.world_size()
    rng = np.random.default_rng(45)
    checked = 0
    for _ in range(6):
        shape = (int(rng.integers(2, 9)), int(rng.integers(2, 6)))
        a = rng.standard_normal(shape)
        b = rng.standard_normal((int(rng.integers(1, 6)), shape[1]))
        x = _wrap(a, _random_layout(rng, shape, world), ("numpy", "torch"))
        y = _wrap(b, _random_layout(rng, b.shape, world), ("torch", "numpy"))
        for name, got, want in _calls(x, a, y, b):
            np.testing.assert_array_equal(np.asarray(got.gather(framework="numpy")), want, err_msg=f"{name} {x.layout}")
            assert set(got.layout.ranks) == set(x.layout.ranks), (name, got.layout, x.layout)
            assert set(got.layout.devices) == set(x.layout.devices), (name, got.layout)
            checked += 1
        for i, part in enumerate(xp.unstack(x, axis=0)):
            np.testing.assert_array_equal(np.asarray(part.gather(framework="numpy")), a[i])
    return checked


def _local_bytes(t):
    return sum(f.array.nbytes for f in t.fragments if f.is_local)


def manipulation_memory():
    """Each process's peak of new NumPy memory during each call stays within 1.5 x (its share
    of the operands + its share of the result) plus one block."""
    world = dd.world_size()
    rows, cols = 256 * world, 512
    a = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    layout = Layout((rows, cols), block=(32, cols), grid=(world, 1), devices=["cpu"] * world, ranks=list(range(world)))
    x = _wrap(a, layout)
    columns = _wrap(a, Layout((rows, cols), block=(rows, cols // world), grid=(1, world), devices=["cpu"] * world,
                              ranks=list(range(world))))
    head = _wrap(a[:100], Layout((100, cols), block=(math.ceil(100 / world), cols), grid=(world, 1),
                                 devices=["cpu"] * world, ranks=list(range(world))))
    counts = np.arange(rows) % 3
    block = 32 * cols * 8
    calls = {
        "expand_dims": lambda: xp.expand_dims(x, axis=0),
        "squeeze": lambda: xp.squeeze(xp.expand_dims(x, axis=1), axis=1),
        "moveaxis": lambda: xp.moveaxis(x, 0, 1),
        "unstack": lambda: xp.unstack(x, axis=1)[0],
        "reshape": lambda: xp.reshape(columns, (rows * cols,)),
        "concat0": lambda: xp.concat([x, x], axis=0),
        "concat1": lambda: xp.concat([x, x], axis=1),
        "stack": lambda: xp.stack([x, x], axis=0),
        "flip": lambda: xp.flip(x, axis=0),
        "roll": lambda: xp.roll(x, 37, axis=0),
        "repeat": lambda: xp.repeat(x, 2, axis=0),
        "tile": lambda: xp.tile(x, (2, 1)),
        "repeat_counts": lambda: xp.repeat(x, counts, axis=0),
        "concat_moving": lambda: xp.concat([head, x], axis=0),
        "tile_moving": lambda: xp.tile(head, (3, 1)),
    }
    operands = {"reshape": [columns], "concat0": [x, x], "concat1": [x, x], "stack": [x, x],
                "concat_moving": [head, x], "tile_moving": [head]}
    for call in calls.values():  # once untraced: first calls import modules and fill caches
        call()
    peaks, over = {}, []
    tracemalloc.start()
    try:
        for name, call in calls.items():  # every call on every process, then the verdict
            gc.collect()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            out = call()
            peak = tracemalloc.get_traced_memory()[1] - base
            share = sum(_local_bytes(t) for t in operands.get(name, [x])) + _local_bytes(out)
            if peak > 1.5 * share + block:
                over.append(f"{name}: a peak of {peak} new bytes, over the bound {1.5 * share + block:.0f}")
            peaks[name] = round(peak / max(share, 1), 3)
            del out
    finally:
        tracemalloc.stop()
    assert not over, "; ".join(over)
    return peaks


SCENARIOS = {"manipulation_values": manipulation_values, "manipulation_memory": manipulation_memory}
