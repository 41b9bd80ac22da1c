"""What users read speaks of dlmg only.

Tests, skip reasons, docs, examples, benchmarks and the package say what is
missing ("needs a CUDA GPU") and what was measured on what; they never explain
things by how the project is made (which machines were at hand, work items,
time spent).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ["README.md", "docs", "tests", "examples", "benchmarks", "dlmg", "adapters", "pyproject.toml"]
SUFFIXES = {".py", ".md", ".toml", ".txt", ".rst"}

#: Phrases about the making of the project, not about the project.
FORBIDDEN = [
    r"device\s+tool",
    r"\bwere lent\b|\blent to\b",
    r"borrowed machines?",
    r"\bagents?\b",
    r"\bsubagents?\b",
    r"\b(this|the|a) session\b",
    r"\bsession's\b",
    r"\bissue ?#? ?\d+\b",
    r"\bwork[- ]items?\b",
    r"\btime budgets?\b",
    r"\bdevice\s+time\b",
    r"\bthe GPU machine\b",
    r"\bCI has none\b",
    r"\bthe brief\b",
]
PATTERN = re.compile("|".join(f"(?:{p})" for p in FORBIDDEN), re.IGNORECASE)


def _files() -> list[Path]:
    out = []
    for name in SCANNED:
        path = ROOT / name
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += [p for p in path.rglob("*") if p.suffix in SUFFIXES and "_build" not in p.parts
                    and p.is_file() and p.resolve() != Path(__file__).resolve()]
    return sorted(out)


def test_no_words_about_how_the_project_is_made():
    hits = []
    for path in _files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if PATTERN.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_gpu_skip_reason_says_what_is_missing():
    from conftest import _GPU_REASON

    assert _GPU_REASON.startswith("needs a CUDA GPU")
    assert not PATTERN.search(_GPU_REASON)


@pytest.mark.parametrize("line", [
    "measured on borrowed machines",
    "only one-GPU machines were lent to this project",
    "blocked until work item 8 lands",
    "the session's time budget was spent",
])
def test_the_scan_catches_such_words(line):
    assert PATTERN.search(line)
