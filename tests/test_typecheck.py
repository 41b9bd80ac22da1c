"""The type checker passes on dlmg/ and adapters/ (configuration in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow  # a cold mypy run takes about a minute


def test_mypy_passes():
    pytest.importorskip("mypy", reason="needs mypy (pip install mypy)")
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, f"mypy found problems:\n{done.stdout}\n{done.stderr}"
