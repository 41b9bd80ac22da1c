"""Random einsum cases over random layouts and frameworks, shared by the one-process
property test and the multi-process scenarios (built from a seed, no Hypothesis there)."""

from __future__ import annotations

import math
import random

import numpy as np

import dlmg
import dlmg.distributed
from dlmg import Layout

FRAMEWORKS_F64 = ("numpy", "torch")
FRAMEWORKS_F32 = ("numpy", "torch", "jax")
POOL = "abcd"


def random_equation(rnd: random.Random) -> tuple[str, list[tuple[int, ...]]]:
    """An equation NumPy accepts (1-3 operands, up to 4 modes, traces, batch modes, ``...``)
    and its operands' shapes."""
    nops = rnd.randint(1, 3)
    extents = {c: rnd.randint(1, 5) for c in POOL}
    ell = rnd.random() < 0.25
    ell_extents = [rnd.randint(2, 3) for _ in range(rnd.randint(1, 2))] if ell else []
    terms, shapes = [], []
    for _ in range(nops):
        nd = rnd.randint(0 if not ell else 0, 3)
        letters = [rnd.choice(POOL) for _ in range(nd)]
        shape = [extents[c] for c in letters]
        term = "".join(letters)
        if ell:
            k = rnd.randint(0, len(ell_extents))
            mine = [rnd.choice((e, 1)) for e in ell_extents[len(ell_extents) - k:]]
            term = "..." + term
            shape = mine + shape
        terms.append(term)
        shapes.append(tuple(shape))
    lhs = ",".join(terms)
    if rnd.random() < 0.3:
        return lhs, shapes
    seen = list(dict.fromkeys(c for t in terms for c in t if c in POOL))
    out = [c for c in seen if rnd.random() < 0.5]
    rnd.shuffle(out)
    if ell:
        pos = rnd.randint(0, len(out))
        out.insert(pos, "...")
    return lhs + "->" + "".join(out), shapes


def random_layout(rnd: random.Random, shape: tuple[int, ...], devices: list[str], ranks=None) -> Layout:
    """Slab, cyclic, block-cyclic (uneven blocks), replicated or single, on random devices
    (several fragments per device allowed)."""
    nd = len(shape)
    kind = rnd.choice(("single", "slab", "cyclic", "block", "block", "replicated"))
    block = [max(n, 1) for n in shape]
    grid = [1] * nd
    if nd and kind in ("slab", "cyclic", "block"):
        modes = [rnd.randrange(nd)] if kind != "block" or nd < 2 else rnd.sample(range(nd), 2)
        for m in modes:
            grid[m] = rnd.randint(2, 3)
            if kind == "slab":
                block[m] = max(math.ceil(shape[m] / grid[m]), 1)
            elif kind == "cyclic":
                block[m] = 1
            else:
                block[m] = rnd.randint(1, max(shape[m], 1))
    cells = math.prod(grid)
    reps = rnd.randint(2, 3) if kind == "replicated" or rnd.random() < 0.15 else 1
    devs = [rnd.choice(devices) for _ in range(cells * reps)]
    if ranks is not None:
        r = [rnd.choice(ranks) for _ in range(cells * reps)]
        return Layout(shape, block=block, grid=grid, devices=devs, ranks=r)
    return Layout(shape, block=block, grid=grid, devices=devs)


def fragment_array(arr: np.ndarray, framework: str, device: str):
    if framework == "numpy":
        return arr
    if framework == "torch":
        import torch

        return torch.from_numpy(np.require(arr, requirements="C"))
    import jax

    index = int(device.partition(":")[2] or 0)
    return jax.device_put(arr, jax.devices("cpu")[index])


def distribute(x: np.ndarray, layout: Layout, seed: int, frameworks: tuple[str, ...]):
    """``x`` scattered into ``layout``, each local fragment in a random framework (drawn from
    ``seed`` and the fragment's index, so that every process draws the same layouts after)."""
    me = dlmg.distributed.rank() if dlmg.distributed.is_initialized() else 0
    arrays = {}
    for f in layout.fragments:
        if layout.ranks[f.index] == me:
            fw = random.Random(seed * 7919 + f.index).choice(frameworks)
            part = x[np.ix_(*(layout.owned_indices(f.index, m) for m in range(x.ndim)))] if x.ndim else x
            arrays[f.index] = fragment_array(np.array(part), fw, str(f.device))
    return dlmg.from_fragments(arrays, layout, dtype=str(x.dtype))


def tolerance(dtype: str, values: list[np.ndarray]) -> dict:
    scale = max([1.0] + [float(np.abs(v).max()) if v.size else 1.0 for v in values])
    if dtype == "float32":
        return {"rtol": 1e-4, "atol": 1e-4 * scale ** 3 * 10}
    return {"rtol": 1e-10, "atol": 1e-10 * scale ** 3 * 10}


def run_case(seed: int, devices: list[str], ranks=None, frameworks=None) -> None:
    """One random case: ``dlmg.einsum`` equals ``numpy.einsum`` in float64 on the gathered operands."""
    rnd = random.Random(seed)
    subscripts, shapes = random_equation(rnd)
    dtype = rnd.choice(("float32", "float64"))
    fws = frameworks or (FRAMEWORKS_F32 if dtype == "float32" else FRAMEWORKS_F64)
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1, 1, s).astype(dtype) for s in shapes]
    tensors = [distribute(a, random_layout(rnd, a.shape, devices, ranks), seed + i, fws) for i, a in enumerate(arrays)]
    want = np.einsum(subscripts, *(a.astype(np.float64) for a in arrays))
    layout = None
    if rnd.random() < 0.3 and np.ndim(want) > 0:
        layout = random_layout(rnd, np.shape(want), devices, ranks)
    got = dlmg.einsum(subscripts, *tensors, layout=layout)
    assert got.shape == np.shape(want), (subscripts, got.shape, np.shape(want))
    if layout is not None:
        assert got.layout == layout
    value = np.asarray(got.gather(framework="numpy"), dtype=np.float64)
    np.testing.assert_allclose(value, want, **tolerance(dtype, arrays),
                               err_msg=f"seed {seed}: {subscripts} {[t.layout for t in tensors]}")
