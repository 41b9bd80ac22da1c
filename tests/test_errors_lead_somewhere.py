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
            "zeros": lambda: dlmg.zeros(one, framework={missing!r}),
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
