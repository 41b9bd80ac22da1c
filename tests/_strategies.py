"""Shared helpers of the tensor, gather/scatter and redistribution tests:
hypothesis strategies for random layouts, arrays of every framework and
element type, and the reference content of a fragment.

(No tests here; the module is named so that it belongs to the tensor tests.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import strategies as st

from dlmg import Layout

FRAMEWORKS = ("numpy", "torch", "jax")
#: element types every framework exchanges through DLPack
COMMON_DTYPES = ("float32", "int32", "bool", "complex64", "uint8", "float16")


def have(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def jax_cpus() -> int:
    if not have("jax"):
        return 0
    import jax

    return len(jax.devices("cpu"))


def need(*names: str) -> None:
    for name in names:
        if not have(name):
            pytest.skip(f"{name} is not installed")


def dtypes_for(*frameworks: str) -> tuple[str, ...]:
    """Element types all ``frameworks`` can hold and exchange through DLPack."""
    out = list(COMMON_DTYPES)
    if "numpy" not in frameworks:
        out.append("bfloat16")
    if "jax" not in frameworks:
        out += ["float64", "int64", "complex128"]
    return tuple(out)


# -- arrays -----------------------------------------------------------------------
def reference(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """A NumPy array with distinct-ish values (float32 values for bfloat16)."""
    rng = np.random.default_rng(seed)
    n = math.prod(shape)
    base = np.asarray(rng.permutation(max(n, 1))[:n].reshape(shape) % 251)
    if dtype == "bool":
        return np.asarray((base % 2).astype(bool))
    if dtype.startswith("complex"):
        return np.asarray((base + 1j * (base % 7)).astype(dtype))
    if dtype == "bfloat16":
        return np.asarray(base.astype(np.float32))
    return np.asarray(base.astype(dtype))


def make(x: np.ndarray, framework: str, dtype: str) -> object:
    """``x`` as an array of ``framework`` and ``dtype`` (host, JAX device 0)."""
    if framework == "numpy":
        return x.astype(dtype) if dtype != "bfloat16" else x
    if framework == "torch":
        import torch

        t = torch.from_numpy(np.require(x, requirements="C"))
        return t.to(getattr(torch, dtype)) if dtype == "bfloat16" else t
    if framework == "jax":
        import jax.numpy as jnp

        return jnp.asarray(x).astype(dtype)
    raise ValueError(framework)


def to_numpy(a: object) -> np.ndarray:
    """Any framework's array as NumPy on the host (bfloat16 widened to float32)."""
    mod = type(a).__module__.partition(".")[0]
    if mod == "torch":
        import torch

        if a.dtype == torch.bfloat16:
            a = a.float()
        out = a.detach().cpu().resolve_conj().numpy()
    elif mod in ("jax", "jaxlib"):
        if str(a.dtype) == "bfloat16":
            a = a.astype("float32")
        out = np.asarray(a)
    elif mod == "cupy":
        out = a.get()
    else:
        out = np.asarray(a)
    if str(out.dtype) == "bfloat16":
        out = out.astype(np.float32)
    return out


def expected_fragment(x: np.ndarray, layout: Layout, index: int) -> np.ndarray:
    """The elements fragment ``index`` must hold: its owned indices, increasing, per mode."""
    if layout.ndim == 0:
        return x
    owned = [layout.owned_indices(index, m) for m in range(layout.ndim)]
    return x[np.ix_(*owned)]


def check_fragments(dt, x: np.ndarray) -> None:
    for frag in dt.fragments:
        if frag.is_padded:
            for glob, view in frag.block_views():
                np.testing.assert_array_equal(to_numpy(view), x[glob])
            continue
        got = to_numpy(frag.array)
        want = expected_fragment(x, dt.layout, frag.index)
        assert got.shape == want.shape, (frag, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"fragment {frag.index} of {dt.layout!r}")


# -- layouts ------------------------------------------------------------------------
@st.composite
def shapes(draw, max_ndim: int = 3, max_extent: int = 9, min_ndim: int = 0):
    ndim = draw(st.integers(min_ndim, max_ndim))
    return tuple(draw(st.integers(0 if ndim else 1, max_extent)) for _ in range(ndim))


@st.composite
def layouts(draw, shape=None, jax_devices: bool | None = None, max_fragments: int = 12):
    """A random block-cyclic layout (random blocks, grids, replicas) on host devices.

    ``jax_devices``: draw devices among JAX's CPU devices (``cpu:0``..``cpu:7``)
    when true, all ``cpu`` when false, either when ``None``.
    """
    if shape is None:
        shape = draw(shapes())
    ndim = len(shape)
    block = tuple(draw(st.integers(1, max(n, 1) + 1)) for n in shape)
    grid = []
    budget = max_fragments
    for _ in range(ndim):
        g = draw(st.integers(1, max(1, min(3, budget))))
        grid.append(g)
        budget = max(1, budget // g)
    cells = math.prod(grid)
    replicas = draw(st.integers(1, max(1, min(2, max_fragments // cells))))
    n = cells * replicas
    ncpu = jax_cpus()
    use_jax = draw(st.booleans()) if jax_devices is None else jax_devices
    if use_jax and ncpu >= 2:
        devices = [f"cpu:{draw(st.integers(0, ncpu - 1))}" for _ in range(n)]
    else:
        devices = ["cpu"] * n
    return Layout(shape, block=block, grid=grid, devices=devices)


@st.composite
def layout_pairs(draw, jax_devices: bool | None = None):
    shape = draw(shapes())
    return draw(layouts(shape, jax_devices)), draw(layouts(shape, jax_devices))
