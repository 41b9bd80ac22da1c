"""Helpers of the dlmg.ops tests: random layouts, tensors whose fragments belong
to chosen frameworks (mixed ones too), and NumPy references.

(No tests here; the module is named so that it belongs to the ops tests.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import strategies as st

import dlmg
from dlmg import Layout

FRAMEWORKS = ("numpy", "torch", "jax")
#: per-fragment framework assignments: one framework, or a cycle over several
ASSIGNMENTS = ("numpy", "torch", "jax", "mixed")
#: ASSIGNMENTS for parametrize: the JAX ones (first-call compiles) run outside the fast loop.
ASSIGNMENT_PARAMS = (
    "numpy",
    "torch",
    pytest.param("jax", marks=pytest.mark.slow),
    pytest.param("mixed", marks=pytest.mark.slow),
)


def have(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def need(*names: str) -> None:
    for name in names:
        if name == "mixed":
            need("torch", "jax")
        elif not have(name):
            pytest.skip(f"{name} is not installed")


def jax_cpus() -> int:
    if not have("jax"):
        return 0
    import jax

    return len(jax.devices("cpu"))


# -- layouts --------------------------------------------------------------------------
@st.composite
def shapes(draw, min_ndim: int = 0, max_ndim: int = 3, max_extent: int = 7, min_extent: int = 0):
    ndim = draw(st.integers(min_ndim, max_ndim))
    return tuple(draw(st.integers(min_extent, max_extent)) for _ in range(ndim))


@st.composite
def layouts(draw, shape=None, *, jax_devices: bool = False, replicas: bool = True, max_fragments: int = 8,
            whole: tuple[int, ...] = (), ndevices: int = 8):
    """A random block-cyclic layout: random blocks, grids and replicas.

    ``jax_devices``: devices drawn among JAX's CPU devices ``cpu:0..7`` (so JAX
    fragments really sit on different devices); otherwise all ``cpu``.
    ``whole``: modes (negative allowed) that keep grid 1. ``ndevices``: how
    many of JAX's devices to draw from.
    """
    if shape is None:
        shape = draw(shapes())
    ndim = len(shape)
    whole_modes = {m % ndim for m in whole} if ndim else set()
    block = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    grid = []
    budget = max_fragments
    for m in range(ndim):
        g = 1 if m in whole_modes else draw(st.integers(1, max(1, min(3, budget))))
        grid.append(g)
        budget = max(1, budget // g)
    cells = math.prod(grid)
    nrep = draw(st.integers(1, max(1, min(2, max_fragments // cells)))) if replicas else 1
    n = cells * nrep
    ncpu = jax_cpus()
    if jax_devices and ncpu >= 2:
        devices = [f"cpu:{draw(st.integers(0, min(ncpu, ndevices) - 1))}" for _ in range(n)]
    else:
        devices = ["cpu"] * n
    return Layout(shape, block=block, grid=grid, devices=devices)


#: few shapes, so that JAX's per-shape compilations are reused across examples
JAX_SHAPES = ((6, 4), (7,), (), (3, 0), (2, 3, 2))


def layouts_for(assignment: str, whole: tuple[int, ...] = (), shapes_=None):
    """Random layouts for tensors of ``assignment``; with JAX fragments, a few
    shapes and 3 devices only (JAX compiles every operation per shape and device)."""
    if assignment in ("jax", "mixed"):
        shape = st.sampled_from(shapes_ or JAX_SHAPES)
        return shape.flatmap(lambda s: layouts(s, jax_devices=True, ndevices=3, whole=whole))
    if shapes_ is not None:
        return st.sampled_from(shapes_).flatmap(lambda s: layouts(s, whole=whole))
    return layouts(whole=whole)


#: hypothesis examples per assignment (JAX compiles each operation per shape and device)
EXAMPLES = {"numpy": 15, "torch": 10, "jax": 5, "mixed": 6}

#: 4 fragments of one shape on one JAX device: every function compiles once
UNIFORM = Layout((6, 4), block=(3, 2), grid=(2, 2), devices=["cpu:1"] * 4)


# -- data and tensors -------------------------------------------------------------------
def data(shape: tuple[int, ...], dtype: str = "float32", seed: int = 0, low: float = -4, high: float = 4) -> np.ndarray:
    """Reproducible random values of ``dtype`` (integers in [low, high), bools, floats)."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        out = rng.integers(0, 2, size=shape).astype(bool)
    elif np.dtype(dtype).kind in "iu":
        lo = 0 if np.dtype(dtype).kind == "u" else int(low)
        out = rng.integers(lo, int(high), size=shape).astype(dtype)
    elif np.dtype(dtype).kind == "c":
        out = (rng.uniform(low, high, size=shape) + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    else:
        out = rng.uniform(low, high, size=shape).astype(dtype)
    return np.asarray(out)


def expected_fragment(x: np.ndarray, layout: Layout, index: int) -> np.ndarray:
    """The elements fragment ``index`` holds: its owned indices, increasing, per mode."""
    if layout.ndim == 0:
        return np.array(x)
    owned = [layout.owned_indices(index, m) for m in range(layout.ndim)]
    return np.ascontiguousarray(x[np.ix_(*owned)])


def framework_of_fragment(assignment: str, index: int) -> str:
    """The framework fragment ``index`` gets under ``assignment`` ("mixed" cycles torch, numpy, jax)."""
    if assignment == "mixed":
        return ("torch", "numpy", "jax")[index % 3]
    return assignment


def as_framework(piece: np.ndarray, framework: str, device) -> object:
    """``piece`` (a fresh copy) as an array of ``framework`` on ``device``."""
    piece = np.array(piece, copy=True)
    if framework == "numpy":
        return piece
    if framework == "torch":
        import torch

        return torch.from_numpy(piece)
    if framework == "jax":
        import jax

        cpus = jax.devices("cpu")
        return jax.device_put(piece, cpus[device.index % len(cpus)])
    raise ValueError(framework)


def build(x: np.ndarray, layout: Layout, assignment: str = "numpy") -> "dlmg.DistributedTensor":
    """A distributed tensor of ``layout`` holding ``x``, fragment ``i`` of framework
    ``framework_of_fragment(assignment, i)``."""
    arrays = [
        as_framework(expected_fragment(x, layout, f.index), framework_of_fragment(assignment, f.index), f.device)
        for f in layout.fragments
    ]
    return dlmg.from_fragments(arrays, layout)


def to_numpy(a: object) -> np.ndarray:
    """Any framework's array, a distributed tensor (gathered) or a Python scalar as NumPy."""
    if isinstance(a, dlmg.DistributedTensor):
        return np.asarray(a.gather(framework="numpy"))
    mod = type(a).__module__.partition(".")[0]
    if mod == "torch":
        return a.detach().cpu().resolve_conj().numpy()
    if mod == "cupy":
        return a.get()
    return np.asarray(a)


def gathered(dt) -> np.ndarray:
    """The whole tensor as NumPy, checked fragment by fragment against its layout too."""
    full = to_numpy(dt.gather(framework="numpy"))
    for frag in dt.fragments:
        got = to_numpy(frag.array)
        want = expected_fragment(full, dt.layout, frag.index)
        assert got.shape == want.shape, (frag, got.shape, want.shape)
    return full


def fragment_dtypes(dt) -> set[str]:
    return {f.adapter.dtype_of(f.array) for f in dt.fragments if f.is_local}


def data_ptrs(dt) -> list[int]:
    return [f.adapter.data_ptr(f.array) for f in dt.fragments]


def jax_dtype_ok(dtype: str) -> bool:
    """Whether JAX (x64 off) holds ``dtype`` without narrowing."""
    return dtype not in ("float64", "int64", "uint64", "complex128")


# -- comparing an operator's two paths ----------------------------------------------
def outcome(fn):
    """``fn()``, or the type of the exception it raised (the same refusal,
    whichever path raised it)."""
    try:
        return fn()
    except Exception as exc:
        return type(exc)


def per_fragment(op, left, right, reflected: bool = False):
    """``op`` through the per-fragment path (the framework's operator on each pair;
    ``reflected``: with the operands swapped)."""
    from dlmg.ops.dispatch import map_fragments

    if reflected:
        return map_fragments(lambda xp, x, y: op(y, x), (left, right), name="reference", new_arrays=True)
    return map_fragments(lambda xp, x, y: op(x, y), (left, right), name="reference", new_arrays=True)


#: Python scalars an arithmetic operator takes on either side
SCALARS = [3, -2, 2.5, True, 1 + 2j]


def compare_operator(op, a, b, c, same) -> None:
    """``op`` through dlmg against ``per_fragment``: on ``a`` and ``b``, on ``a``
    and ``c`` (another dtype: promotion), and with every scalar on either side;
    ``same(got, want)`` compares the outcomes."""
    same(outcome(lambda: op(a, b)), outcome(lambda: per_fragment(op, a, b)))
    same(outcome(lambda: op(a, c)), outcome(lambda: per_fragment(op, a, c)))
    for s in SCALARS:
        same(outcome(lambda: op(a, s)), outcome(lambda: per_fragment(op, a, s)))
        same(outcome(lambda: op(s, a)), outcome(lambda: per_fragment(op, a, s, reflected=True)))


def same_outcome(got, want, same_arrays) -> None:
    """Both refused, or tensors of one dtype whose fragments ``same_arrays(g, w)`` accepts."""
    if isinstance(want, type):  # refused fragment by fragment: refused here too
        assert isinstance(got, type), (got, want)
        return
    assert not isinstance(got, type), (got, want)
    assert got.dtype == want.dtype
    for g, w in zip(got.fragments, want.fragments):
        same_arrays(g.array, w.array)
