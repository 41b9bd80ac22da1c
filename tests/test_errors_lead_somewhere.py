"""Errors that say what to do: a missing framework names what to install, on every path;
host fragments export DLPack's one CPU device."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _child(code: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("missing", ["jax", "torch"])
def test_a_missing_framework_gives_framework_not_installed_on_every_path(missing):
    """The framework is made unimportable in a child (``sys.modules[name] = None``)."""
    out = _child(f"""
        import sys
        import numpy as np
        sys.modules[{missing!r}] = None
        import dlmg
        import dlmg.distributed as dd
        one = dlmg.Layout.single((4,), "cpu:0")
        calls = {{
            "scatter": lambda: dlmg.scatter(np.ones(4), one, framework={missing!r}),
            "zeros": lambda: dlmg.zeros(layout=one, dtype="float32", framework={missing!r}),
            "gather": lambda: dlmg.scatter(np.ones(4), one).gather(framework={missing!r}),
            "to": lambda: dlmg.scatter(np.ones(4), one).to({missing!r}),
        }}
        if {missing!r} == "torch":
            calls["init"] = lambda: dd.init("torch")
            calls["to_dtensor"] = lambda: dlmg.to_dtensor(dlmg.scatter(np.ones(4), one))
        for name, call in calls.items():
            try:
                call()
            except dlmg.FrameworkNotInstalledError as exc:
                assert "pip install" in str(exc), (name, exc)
                print(name, "ok")
            except Exception as exc:
                print(name, "WRONG", type(exc).__name__, exc)
            else:
                print(name, "WRONG: no error")
    """)
    assert "WRONG" not in out, out
    assert out.count(" ok") == (6 if missing == "torch" else 4), out


def test_host_fragments_export_dlpacks_one_cpu_device():
    """A NumPy fragment in slot cpu:2 reaches JAX even where JAX has one CPU device."""
    out = _child("""
        import numpy as np
        import dlmg
        import jax.numpy as jnp
        dt = dlmg.scatter(np.arange(16.0, dtype=np.float32).reshape(8, 2),
                          dlmg.Layout.slab((8, 2), 0, ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]))
        frag = dt.fragments[2]
        assert frag.__dlpack_device__() == (1, 0), frag.__dlpack_device__()
        np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(frag)), frag.array)
        print("ok")
    """, env={"XLA_FLAGS": ""})
    assert out.strip() == "ok"


def _rows(framework="numpy"):
    import numpy as np

    import dlmg

    pytest.importorskip(framework)
    return dlmg.scatter(np.ones((8, 8), np.float32), dlmg.Layout.slab((8, 8), 0, ["cpu:0", "cpu:1"]),
                        framework=framework)


def test_every_hint_names_a_call_that_works():
    import numpy as np

    import dlmg

    m = _rows()
    with pytest.raises(TypeError, match=r"x \+= y") as info:
        np.add(m, 1, out=m)
    assert "dlmg.add(x, y)" in str(info.value)
    m += 1  # the call the hint names
    assert float(m[0, 0]) == 2.0
    with pytest.raises(TypeError, match=r"result = dlmg\.sqrt"):
        np.sqrt(m, out=m)
    with pytest.raises(TypeError, match=r"dlmg\.array_api\.linalg\.vector_norm") as info:
        np.linalg.norm(m)
    assert "has no" not in str(info.value)
    np.testing.assert_allclose(np.asarray(dlmg.array_api.linalg.vector_norm(m, axis=1)), np.full(8, 2 * 8 ** 0.5))
    with pytest.raises(TypeError, match=r"dlmg\.array_api\.linalg\.det"):
        np.linalg.det(m)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_matmul_with_a_regular_array_of_any_framework_says_to_scatter(framework):
    mod = pytest.importorskip(framework)
    m = _rows()
    regular = mod.ones((8, 8))
    for attempt in (lambda: m @ regular, lambda: regular @ m):
        with pytest.raises(TypeError, match=r"dlmg\.scatter\(array"):
            attempt()


def test_print_shows_values_of_fragments_that_require_grad():
    torch = pytest.importorskip("torch")
    import dlmg

    lay = dlmg.Layout.slab((4, 2), 0, ["cpu:0", "cpu:1"])
    dt = dlmg.from_fragments([torch.full((2, 2), float(i), requires_grad=True) for i in range(2)], lay)
    text = str(dt)
    assert "not shown" not in text and text.startswith("[[0., 0.],")
    assert "1., 1." in repr(dt)


def test_layout_cyclic_deals_elements_round_robin():
    import numpy as np

    import dlmg

    lay = dlmg.Layout.cyclic((5, 3), 0, ["cpu:0", "cpu:1"])
    assert lay == dlmg.Layout.block_cyclic((5, 3), (1, 3), (2, 1), ["cpu:0", "cpu:1"])
    dt = dlmg.scatter(np.arange(15.0).reshape(5, 3), lay)
    np.testing.assert_array_equal(dt.fragments[0].array[:, 0], [0.0, 6.0, 12.0])
    np.testing.assert_array_equal(dt.fragments[1].array[:, 0], [3.0, 9.0])
    assert dlmg.Layout.cyclic((6,), -1, ["cpu"]).grid == (1,)
