"""``import dlmg`` and everything up to creating adapters imports no framework.

Run in a fresh interpreter (this test process has frameworks loaded already),
as array-api-compat does for its own namespaces.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

_HEAVY = ("torch", "jax", "jaxlib", "cupy", "cupy_backends", "tensorflow")

_SCRIPT = r"""
import json, sys
import dlmg
import dlmg.adapters
import dlmg.registry
import dlmg.testing
from dlmg.registry import adapter_names, get_adapter, adapter_for, framework_of
from dlmg import Device
import numpy as np

adapters = {}
for name in ("numpy", "torch", "jax", "cupy", "dlpack"):
    a = get_adapter(name)
    adapters[name] = type(a).__name__
    a.owns(object()), a.name, a.modules, a.traits.mutable
for alias in ("np", "pytorch", "jnp", "cp", "generic"):
    get_adapter(alias)
adapter_names()
# detecting a NumPy array walks every adapter's `modules` without importing frameworks
assert framework_of(np.ones(3)) == "numpy"
d = adapter_for(np.ones((2, 3))).describe(np.ones((2, 3)))
print(json.dumps({"adapters": adapters, "loaded": sorted(sys.modules)}))
"""


def test_import_dlmg_loads_no_framework():
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["adapters"] == {
        "numpy": "NumpyAdapter",
        "torch": "TorchAdapter",
        "jax": "JaxAdapter",
        "cupy": "CupyAdapter",
        "dlpack": "GenericAdapter",
    }
    top = {m.partition(".")[0] for m in report["loaded"]}
    loaded = [m for m in _HEAVY if m in top]
    assert not loaded, f"importing dlmg / creating adapters imported {loaded}"
    compat = [m for m in report["loaded"] if m.startswith(("array_api_compat.torch", "array_api_compat.cupy"))]
    assert not compat, f"framework namespaces of array-api-compat were imported: {compat}"


def test_import_dlmg_loads_no_adapter_module():
    """``import dlmg`` loads the adapter contract, not a framework's adapter: the
    tensor's protocol methods find their answers when a framework calls them."""
    script = (
        "import sys, json\n"
        "import dlmg\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dlmg.adapters'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    frameworks = [m for m in loaded if m.split(".")[2:3] in (["numpy"], ["torch"], ["jax"], ["cupy"], ["generic"])]
    assert not frameworks, f"import dlmg loaded adapter modules {frameworks}"
    assert "dlmg.adapters._base" in loaded  # the contract itself is part of the core's picture


@pytest.mark.slow
def test_finding_an_arrays_adapter_loads_no_other_adapter():
    """The adapter of a JAX array is found without loading the torch or CuPy adapter
    modules (the registry knows each built-in adapter's type modules)."""
    pytest.importorskip("jax")
    script = (
        "import sys, json\n"
        "import jax.numpy as jnp\n"
        "from dlmg import adapter_for\n"
        "assert adapter_for(jnp.ones(3)).name == 'jax'\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dlmg.adapters'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "dlmg.adapters.jax" in loaded
    others = [m for m in loaded if m.split(".")[2:3] in (["torch"], ["cupy"], ["numpy"], ["generic"])]
    assert not others, f"finding a JAX array's adapter loaded {others}"


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_using_one_framework_loads_only_that_one(framework):
    pytest.importorskip(framework)
    script = (
        "import sys, json\n"
        "from dlmg import get_adapter, adapter_for, Device\n"
        f"a = get_adapter({framework!r})\n"
        "x = a.full((2,), 1, 'float32', Device('cpu', 0))\n"
        "assert adapter_for(x).name == a.name\n"
        "print(json.dumps(sorted(set(m.partition('.')[0] for m in sys.modules))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    others = {"torch", "jax", "cupy"} - {framework}
    assert framework in loaded and not (others & loaded), f"{framework} pulled in {others & loaded}"
