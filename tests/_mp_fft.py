"""Multi-process scenarios of the FFTs (run by :mod:`tests._mp_worker`).

Every process draws the same cases from fixed seeds and holds only its own
fragments; the transforms along split modes move data by the engine's
all-to-all, and each process's new memory stays within the bound.
"""

from __future__ import annotations

import math

import numpy as np

import dlmg
import dlmg.distributed as dd
from dlmg import Layout
from tests._memory import measured


def _scatter(x, layout, framework="numpy"):
    return dlmg.scatter(x if dd.rank() == 0 else None, layout, framework=framework)


def _layouts(shape, world):
    """Slabs along each mode, a 2-D grid with uneven blocks, several fragments per process."""
    ranks = list(range(world))
    out = [Layout.slab(shape, m, ["cpu"] * world, ranks=ranks) for m in range(len(shape))]
    if len(shape) >= 2:
        out.append(Layout(shape, block=(3,) + (2,) * (len(shape) - 1), grid=(world, 2) + (1,) * (len(shape) - 2),
                          devices=["cpu"] * (2 * world), ranks=ranks * 2))
    return out


def fft_processes():
    """Every transform of the extension over split modes, against numpy.fft."""
    world = dd.world_size()
    rng = np.random.default_rng(5)
    count = 0
    for shape in [(8, 6, 4), (6, 10)]:
        x = rng.standard_normal(shape) + 1j * rng.standard_normal(shape)
        r = rng.standard_normal(shape)
        for layout in _layouts(shape, world):
            for framework in ("numpy", "torch"):
                a = _scatter(x, layout, framework)
                b = _scatter(r, layout, framework)
                for transposed_out in (False, True):
                    got = dlmg.fft.fftn(a, norm="ortho", transposed_out=transposed_out)
                    np.testing.assert_allclose(got.gather(framework="numpy"), np.fft.fftn(x, norm="ortho"))
                    if not transposed_out:
                        assert got.layout == layout
                back = dlmg.fft.ifftn(dlmg.fft.fftn(a, transposed_out=True))
                np.testing.assert_allclose(back.gather(framework="numpy"), x, atol=1e-12)
                np.testing.assert_allclose(dlmg.fft.rfftn(b, s=(4,) * len(shape)).gather(framework="numpy"),
                                           np.fft.rfftn(r, s=(4,) * len(shape)), atol=1e-12)
                spec = dlmg.fft.rfftn(b)
                np.testing.assert_allclose(dlmg.fft.irfftn(spec, s=shape).gather(framework="numpy"), r, atol=1e-12)
                for axis in range(len(shape)):
                    np.testing.assert_allclose(dlmg.fft.fft(a, axis=axis, n=5).gather(framework="numpy"),
                                               np.fft.fft(x, axis=axis, n=5), atol=1e-12)
                    np.testing.assert_allclose(dlmg.fft.hfft(a, axis=axis).gather(framework="numpy"),
                                               np.fft.hfft(x, axis=axis), atol=1e-11)
                np.testing.assert_array_equal(dlmg.fft.fftshift(a).gather(framework="numpy"), np.fft.fftshift(x))
                np.testing.assert_array_equal(dlmg.fft.ifftshift(a, axes=0).gather(framework="numpy"),
                                              np.fft.ifftshift(x, axes=0))
                count += 1
    # one mode split over the processes: the four-step decomposition
    v = rng.standard_normal(64) + 1j * rng.standard_normal(64)
    layout = Layout.slab((64,), 0, ["cpu"] * world, ranks=list(range(world)))
    a = _scatter(v, layout)
    np.testing.assert_allclose(dlmg.fft.fft(a).gather(framework="numpy"), np.fft.fft(v), atol=1e-11)
    np.testing.assert_allclose(dlmg.fft.irfft(a, n=32).gather(framework="numpy"), np.fft.irfft(v, n=32), atol=1e-11)
    np.testing.assert_array_equal(dlmg.fft.fftshift(a).gather(framework="numpy"), np.fft.fftshift(v))
    prime = _scatter(v[:13], Layout.slab((13,), 0, ["cpu"] * world, ranks=list(range(world))))
    np.testing.assert_allclose(dlmg.fft.ifft(prime).gather(framework="numpy"), np.fft.ifft(v[:13]), atol=1e-12)
    f = dlmg.array_api.fft.fftfreq(64, device=layout)
    assert [fr.is_local for fr in f.fragments] == [i == dd.rank() for i in range(world)]
    np.testing.assert_allclose(f.gather(framework="numpy"), np.fft.fftfreq(64))
    return count


def fft_memory():
    """Each process's new memory (NumPy fragments, which tracemalloc sees) during transforms
    whose modes start split: within 1.5 x (its share of operand and result) + one block."""
    world = dd.world_size()
    ranks = list(range(world))
    me = dd.rank()
    ratios = {}
    cases = [
        ("fftn slab", (32, 32, 32), lambda s: Layout.slab(s, 0, ["cpu"] * world, ranks=ranks), dlmg.fft.fftn, True),
        ("fft split", (64, 128), lambda s: Layout.slab(s, 0, ["cpu"] * world, ranks=ranks),
         lambda a: dlmg.fft.fft(a, axis=0), True),
        ("fft 1-D", (1 << 14,), lambda s: Layout.slab(s, 0, ["cpu"] * world, ranks=ranks), dlmg.fft.fft, True),
        ("fftn of real slab", (32, 32, 32), lambda s: Layout.slab(s, 0, ["cpu"] * world, ranks=ranks), dlmg.fft.fftn,
         False),
        ("rfftn", (32, 32, 32), lambda s: Layout.slab(s, 2, ["cpu"] * world, ranks=ranks), dlmg.fft.rfftn, False),
    ]
    for name, shape, make, call, complex_ in cases:
        rng = np.random.default_rng(1)
        x = rng.standard_normal(shape)
        if complex_:
            x = x + 1j * x
        a = _scatter(x, make(shape))
        del x
        out = call(a)  # first run: caches and plans
        del out
        out, peak = measured(lambda: call(a))
        share = sum(f.array.nbytes for f in a.fragments if f.is_local)
        result = sum(f.array.nbytes for f in out.fragments if f.is_local)
        block = max(math.prod(f.shape) for f in out.layout.fragments) * out.itemsize
        bound = 1.5 * (share + result) + block
        assert peak <= bound, f"{name}: rank {me} peaked at {peak} bytes, bound {bound:.0f} (share {share}, result {result})"
        ratios[name] = [round(peak / (share + result), 2), round(peak / bound, 2)]
    return ratios


SCENARIOS = {"fft_processes": fft_processes, "fft_memory": fft_memory}

