"""The README's install resolves against the public package indexes.

pip runs as a resolver only (``--dry-run --report``): nothing is installed. Its
configuration is reset to what a new user has -- no configuration file, no
local wheel folder, no extra index -- so the answer is the one the standard
package index (and, for the CPU build of PyTorch, PyTorch's own index) gives.
Packaging metadata (licence, authors, extras) is checked from the built
metadata, and the source distribution and wheel from a build of each.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import tarfile
import urllib.request
import zipfile
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="needs Python 3.11 or later (tomllib)")

ROOT = Path(__file__).resolve().parent.parent
PYPI = "https://pypi.org/simple/"
TORCH_CPU = "https://download.pytorch.org/whl/cpu"


def _reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10):
            return True
    except OSError:
        return False


def _user_env() -> dict[str, str]:
    """The environment minus every pip setting; only proxy and certificate settings stay."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") or k == "PIP_CERT"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _resolve(tmp_path: Path, *extra: str) -> dict[str, str]:
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--report", str(report), "-c", "constraints.txt", ".[all]", *extra]
    done = subprocess.run(cmd, cwd=ROOT, env=_user_env(), capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    installs = json.loads(report.read_text())["install"]
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in installs}


def _pinned_torch() -> str:
    line = next(ln for ln in (ROOT / "constraints.txt").read_text().splitlines() if ln.startswith("torch"))
    return line.split("==", 1)[1].strip()


def test_constraints_pin_a_release_without_a_local_label():
    # A "+cpu" label exists only on indexes that carry that build: pip would fail elsewhere.
    assert "+" not in _pinned_torch()


@pytest.mark.slow
def test_readme_install_resolves_on_the_standard_index(tmp_path):
    if not _reachable(PYPI):
        pytest.skip("needs network access to pypi.org")
    versions = _resolve(tmp_path, "--index-url", PYPI)
    assert {"dlmg", "numpy", "array-api-compat", "torch", "jax", "sphinx", "myst-parser", "pytest"} <= set(versions)
    assert versions["torch"] == _pinned_torch()
    assert "cupy-cuda12x" not in versions and "cupy-cuda13x" not in versions


@pytest.mark.slow
def test_readme_cpu_torch_alternative_resolves_the_cpu_build(tmp_path):
    if not (_reachable(PYPI) and _reachable(TORCH_CPU + "/torch/")):
        pytest.skip("needs network access to pypi.org and download.pytorch.org")
    versions = _resolve(tmp_path, "--index-url", PYPI, "--extra-index-url", TORCH_CPU)
    assert versions["torch"] == _pinned_torch() + "+cpu"


def test_readme_names_the_cpu_index_and_every_extra():
    readme = (ROOT / "README.md").read_text()
    assert TORCH_CPU in readme
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for name in extras:
        assert f"`{name}`" in readme, name


def test_packaging_metadata():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    project = pyproject["project"]
    licence = (ROOT / "LICENSE").read_text()
    # An SPDX expression (PEP 639), which setuptools reads from version 77 on; no licence classifier
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    assert "setuptools>=77" in pyproject["build-system"]["requires"]
    lowest = int(project["requires-python"].removeprefix(">=3."))
    versions = [c.rsplit(" ", 1)[1] for c in project["classifiers"] if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)]
    assert versions and versions[0] == f"3.{lowest}", versions
    assert f"{sys.version_info.major}.{sys.version_info.minor}" in versions
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "END OF TERMS AND CONDITIONS" in licence
    assert project["authors"]
    extras = project["optional-dependencies"]
    assert extras["cuda12"] == [e for e in extras["cuda12"] if e.startswith("cupy-cuda12x")]
    assert extras["cuda13"] == [e for e in extras["cuda13"] if e.startswith("cupy-cuda13x")]
    assert extras["all"] == ["dlmg[torch,jax,plot,io,test,docs]"]
    assert {d.split(">")[0] for d in extras["docs"]} >= {"sphinx", "myst-parser"}


def test_installed_metadata_carries_the_licence_file():
    from importlib.metadata import distribution

    dist = distribution("dlmg")
    files = [str(f) for f in dist.files or []]
    meta = dist.metadata
    assert meta["License"] == "Apache-2.0" or meta.get("License-Expression") == "Apache-2.0"
    assert any(f.endswith("LICENSE") for f in files) or "LICENSE" in (meta.get_all("License-File") or [])


def _build(kind: str, out: Path) -> tuple[Path, str]:
    """Build the sdist or wheel with the installed setuptools (no download), as ``python -m build`` does."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = f"from setuptools import build_meta as b; print(b.build_{kind}({str(out)!r}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return out / done.stdout.strip().splitlines()[-1], done.stdout + done.stderr


@pytest.mark.slow
def test_sdist_carries_what_its_tests_read(tmp_path):
    sdist, log = _build("sdist", tmp_path)
    assert not re.search(r"(?i)warning", log), log[-4000:]
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"README.md", "CHANGELOG.md", "LICENSE", "constraints.txt", ".ci/run", "pyproject.toml",
            "dlmg/py.typed", "docs/conf.py", "docs/index.md", "docs/_static/dlmg.css",
            "docs/_ext/layout_pictures.py", "examples/quickstart.py", "benchmarks/run.py",
            "tests/conftest.py", "tests/test_install.py"} <= names
    # every file the tests and the pages they build read from the tree
    for folder in ("tests", "examples", "docs"):
        tracked = {str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*")
                   if p.is_file() and p.suffix in {".py", ".md", ".css", ".png"}
                   and not {"_build", "_generated", "__pycache__"} & set(p.parts)}
        assert tracked <= names, sorted(tracked - names)
    assert not [n for n in names if "__pycache__" in n or n.startswith(("docs/_build", "benchmarks/results"))]


@pytest.mark.slow
def test_wheel_ships_the_type_marker_and_the_licence(tmp_path):
    wheel, log = _build("wheel", tmp_path)
    assert not re.search(r"(?i)warning", log), log[-4000:]
    with zipfile.ZipFile(wheel) as whl:
        names = set(whl.namelist())
        metadata = whl.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "dlmg/py.typed" in names
    assert "dlmg/adapters/numpy.py" in names or "dlmg/adapters/numpy/__init__.py" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Typing :: Typed" in metadata
