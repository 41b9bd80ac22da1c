"""The linter: pyflakes' checks (unused imports and variables, undefined names, names
redefined before use) over the package, the adapters, the tests, the benchmarks and the
examples, as ``[tool.ruff]`` in pyproject.toml selects them."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(pathlib.Path(sys.executable).with_name("ruff"))
    if not pathlib.Path(ruff).exists():
        pytest.fail("ruff is part of the test extra: pip install -e '.[test]'")
    done = subprocess.run([ruff, "check", "--no-cache", "dlmg", "adapters", "tests", "benchmarks", "examples"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
