"""Multi-process scenarios of pending tensors (run by :mod:`tests._mp_worker`).

A product over a mode split across the processes, left pending: each process
holds one addend. Every read of its values (index arrays, ``repr``, ``item``,
copies, saving) resolves it on every process alike, so every process sees the
value and the next collective finds the processes agreeing; transposes and
basic indexing keep it pending (each addend indexed alike, where it lies); a
write into it is refused on every process; ``x.T @ x`` and ``xp.matmul(x.T, x)`` are
one function and give the value.
"""

from __future__ import annotations

import copy
import os

import numpy as np

import dlmg
import dlmg.array_api as xp
import dlmg.distributed as dd
from dlmg import Layout


def _pending():
    world, ranks = dd.world_size(), list(range(dd.world_size()))
    rng = np.random.default_rng(11)
    A, B = rng.standard_normal((6, 4 * world)), rng.standard_normal((4 * world, 5))
    a = dlmg.scatter(A if dd.rank() == 0 else None, Layout.slab(A.shape, 1, ["cpu"] * world, ranks=ranks),
                     framework="numpy")
    b = dlmg.scatter(B if dd.rank() == 0 else None, Layout.slab(B.shape, 0, ["cpu"] * world, ranks=ranks),
                     framework="torch")
    c = dlmg.matmul(a, b, pending=True)
    assert c.layout.partial == "sum" and c.layout.nreplicas == world, c.layout
    return c, A @ B


def _np(x):
    return np.asarray(x.gather(framework="numpy"))


def pending_reads():
    """Every process reads the value: c[1], c.T, repr, item, copies, iteration; writes refused."""
    c, want = _pending()
    np.testing.assert_allclose(_np(c[1]), want[1])
    np.testing.assert_allclose(_np(c[:, 1:3]), want[:, 1:3])
    t = c.T
    assert t.layout.partial == "sum"  # a transpose of every addend: still pending, alike everywhere
    np.testing.assert_allclose(_np(t), want.T)
    np.testing.assert_allclose(_np(c.mT), want.T)
    np.testing.assert_allclose(_np(dlmg.reshape(c, (30,))), want.reshape(30))
    text = repr(c)
    assert "(shown resolved)" in text, text
    lay = c.layout
    twin = c.redistribute(lay.replace(devices=lay.devices[: lay.ngrid], ranks=lay.ranks[: lay.ngrid], partial=None))
    assert text.rpartition(",\n")[0] == repr(twin).rpartition(",\n")[0], (text, repr(twin))
    assert str(c).rpartition("\n(")[0] == str(twin).rpartition("\n(")[0]
    total = float(xp.sum(c))
    np.testing.assert_allclose(total, want.sum())
    np.testing.assert_allclose(dlmg.sum(c, axis=1)[0].item(), want.sum(axis=1)[0])
    np.testing.assert_allclose(float(c[0:1, 0:1]), want[0, 0])
    np.testing.assert_allclose(_np(copy.deepcopy(c)), want)
    np.testing.assert_allclose(_np(c.copy()), want)
    np.testing.assert_allclose(np.stack([_np(r) for r in c]), want)
    np.testing.assert_allclose(_np(xp.exp(c / 10.0)), np.exp(want / 10.0))
    try:
        c[0, 0] = 5.0
    except dlmg.LayoutError as exc:
        assert "redistribute" in str(exc), exc
    else:
        raise AssertionError("an assignment into a pending sum was not refused")
    np.testing.assert_allclose(_np(c), want)  # untouched, and the processes still agree
    return round(total, 6)


def pending_products():
    """``x.T @ x`` of row slabs over the processes is ``xp.matmul(x.T, x)``: the value."""
    world, ranks = dd.world_size(), list(range(dd.world_size()))
    full = np.arange(4.0 * world * 3).reshape(4 * world, 3)
    x = dlmg.scatter(full if dd.rank() == 0 else None, Layout.slab(full.shape, 0, ["cpu"] * world, ranks=ranks),
                     framework="numpy")
    op, fn = x.T @ x, xp.matmul(x.T, x)
    assert op.layout.partial is None and op.layout == fn.layout, (op.layout, fn.layout)
    np.testing.assert_allclose(_np(op), full.T @ full)
    np.testing.assert_allclose(_np(fn), full.T @ full)
    np.testing.assert_allclose(_np(op + 1.0), full.T @ full + 1.0)  # the next operator takes it
    assert dlmg.matmul(x.T, x, pending=True).layout.partial == "sum"
    return float((full.T @ full).sum())


def pending_save():
    """``dlmg.save`` of a pending sum writes its value (read back into one process's layout)."""
    c, want = _pending()
    path = os.path.join(os.environ["DLMG_TEST_PENDING_DIR"], f"pending-{dd.world_size()}")
    dlmg.save(path, c, overwrite=True)
    np.testing.assert_allclose(_np(dlmg.load(path)), want)
    return True


def pending_dcp():
    """``dlmg.dcp_save`` of a pending sum saves its value (torch.distributed only)."""
    c, want = _pending()
    path = os.path.join(os.environ["DLMG_TEST_PENDING_DIR"], "pending-dcp")
    dlmg.dcp_save({"c": c}, path)
    template = dlmg.empty(layout=Layout.replicated(c.shape, ["cpu"] * dd.world_size(), ranks=list(range(dd.world_size()))), dtype="float64", framework="numpy")
    np.testing.assert_allclose(_np(dlmg.dcp_load({"c": template}, path)["c"]), want)
    return True


def _random_key(rng, shape):
    """A basic key of ``shape`` drawn from ``rng`` (seeded alike on every process): per mode
    an integer or a slice of any step, ``None`` here and there, sometimes ``...``."""
    parts = []
    for n in shape[: int(rng.integers(0, len(shape) + 1))]:
        if rng.random() < 0.3:
            parts.append(int(rng.integers(-n, n)))
        else:
            step = int(rng.choice([-3, -2, -1, 1, 2, 3]))
            parts.append(slice(int(rng.integers(-n - 1, n + 1)), int(rng.integers(-n - 1, n + 1)), step))
    if rng.random() < 0.3:
        parts.append(Ellipsis)
    if rng.random() < 0.3:
        parts.insert(int(rng.integers(0, len(parts) + 1)), None)
    return tuple(parts)


def pending_views():
    """Basic indexing keeps the pending sum on every process: ``c[0:2]``, ``c[:, 1]`` of one
    addend per process (each a view of it), then random keys of a pending sum split over
    grid rows whose cuts read each addend's selection from its owners; writes are refused."""
    c, want = _pending()
    world = dd.world_size()
    for key in (np.s_[0:2], np.s_[:, 1], np.s_[..., ::2], np.s_[None], np.s_[1, ::-1], np.s_[-1]):
        got = c[key]
        assert got.layout.partial == "sum" and got.layout.nreplicas == world, (key, got.layout)
        for src, frag in zip(c.fragments, got.fragments):  # each addend sliced where it lies
            assert frag.is_local == src.is_local and frag.device == src.device
        np.testing.assert_allclose(_np(got), want[key], err_msg=str(key))
    ranks = list(range(world))
    rng = np.random.default_rng(5)
    A, B = rng.standard_normal((6, 4 * world)), rng.standard_normal((4 * world, 5))
    a = dlmg.scatter(A if dd.rank() == 0 else None,
                     Layout(A.shape, block=(3, 4), grid=(2, world), devices=["cpu"] * 2 * world,
                            ranks=[r for r in ranks for _ in range(2)]), framework="numpy")
    b = dlmg.scatter(B if dd.rank() == 0 else None, Layout.slab(B.shape, 0, ["cpu"] * world, ranks=ranks),
                     framework="numpy")
    s = dlmg.einsum("ik,kj->ij", a, b, pending=True)
    assert s.layout.partial == "sum" and s.layout.grid == (2, 1) and s.layout.nreplicas == world, s.layout
    value = A @ B
    checked = 0
    for key in [np.s_[0:2], np.s_[:, 1], np.s_[::-1], np.s_[1:5:3, None]] + [_random_key(rng, value.shape)
                                                                          for _ in range(24)]:
        got = s[key]
        assert got.layout.partial == "sum" and got.layout.nreplicas == world, (key, got.layout)
        np.testing.assert_allclose(_np(got), value[key], err_msg=str(key))
        checked += 1
    for target in (c, c[0:2], s[0:2]):
        try:
            target[0] = 1.0
        except dlmg.LayoutError as exc:
            assert "redistribute" in str(exc), exc
        else:
            raise AssertionError("an assignment into a pending sum was not refused")
    np.testing.assert_allclose(_np(c), want)
    return checked


def pending_all_reduce():
    """One whole addend per process resolved into one whole copy per process is the engine's
    own all-reduce (the stacking redistribution is not taken); the addends stay as they were."""
    import dlmg.ops.contract.pending as pending_module

    c, want = _pending()
    (mine,) = c.local_fragments
    before = np.array(np.asarray(mine.array), copy=True)
    world = dd.world_size()
    everywhere = Layout.replicated(c.shape, ["cpu"] * world, ranks=list(range(world)))

    def refuse(*args, **kwargs):
        raise AssertionError("the stacking redistribution ran where one all-reduce does")

    general, pending_module._one_phase = pending_module._one_phase, refuse
    try:
        value = c.redistribute(everywhere)
        as_torch = c.redistribute(everywhere, framework="torch")
    finally:
        pending_module._one_phase = general
    (got,) = value.local_fragments
    assert value.layout.partial is None and got.framework == mine.framework, (value.layout, got.framework)
    np.testing.assert_allclose(np.asarray(got.array), want)
    (t,) = as_torch.local_fragments
    assert t.framework == "torch"
    np.testing.assert_allclose(t.array.numpy(), want)
    np.testing.assert_array_equal(np.asarray(mine.array), before)  # the addend itself is untouched
    rows = c.redistribute(Layout.slab(c.shape, 0, ["cpu"] * world, ranks=list(range(world))))  # not one all-reduce
    np.testing.assert_allclose(_np(rows), want)
    return True


SCENARIOS = {
    "pending_all_reduce": pending_all_reduce,
    "pending_dcp": pending_dcp,
    "pending_reads": pending_reads,
    "pending_products": pending_products,
    "pending_save": pending_save,
    "pending_views": pending_views,
}
