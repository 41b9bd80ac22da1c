"""The documentation: the site builds with warnings as errors, every Python
block in docs/ runs, every ``>>>`` session prints what the page shows, and
every page is in the site's table of contents.

A block runs on its own, or continues the namespace of the block before it when
the line just above it is ``<!-- continue -->``. A block preceded by
``<!-- needs: cuda -->`` needs a CUDA GPU and is skipped without one; one
preceded by ``<!-- needs: processes -->`` is part of a program of several
processes (those run in the multi-process tests) and is skipped here. Blocks
that only show a signature or an output are written as ``text``/``console``,
not ``python``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"((?:<!--[^\n]*-->\n)*)```python\n(.*?)```", re.S)


@dataclass
class Chain:
    """Consecutive Python blocks of one page that share a namespace."""

    page: str
    line: int
    blocks: list[tuple[int, str]] = field(default_factory=list)
    needs: set[str] = field(default_factory=set)

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _chains() -> list[Chain]:
    chains: list[Chain] = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for m in BLOCK.finditer(text):
            markers, code = m.group(1), m.group(2)
            line = text[: m.start(2)].count("\n") + 1
            needs = set(re.findall(r"<!-- needs: (\w+) -->", markers))
            if "<!-- continue -->" in markers and chains and chains[-1].page == page.name:
                chains[-1].blocks.append((line, code))
                chains[-1].needs |= needs
            else:
                chains.append(Chain(page.name, line, [(line, code)], needs))
    return chains


def _cuda() -> bool:
    from conftest import HAS_CUDA

    return HAS_CUDA


CHAINS = _chains()


@pytest.mark.parametrize("chain", CHAINS, ids=[c.id for c in CHAINS])
def test_python_blocks_run(chain: Chain, monkeypatch):
    if "cuda" in chain.needs and not _cuda():
        pytest.skip("needs a CUDA GPU")
    if "processes" in chain.needs:
        pytest.skip("needs several processes (started by torchrun or mpirun)")
    saved_env = dict(os.environ)
    for module in ("torch", "jax"):
        if any(re.search(rf"\b(import|from) {module}\b", code) for _, code in chain.blocks):
            pytest.importorskip(module)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict = {"__name__": "__docs__"}
    try:
        for line, code in chain.blocks:
            # Pad so that tracebacks show the page's own line numbers.
            source = "\n" * (line - 1) + code
            exec(compile(source, str(DOCS / chain.page), "exec"), namespace)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


SESSION = re.compile(r"```[a-z]*\n(>>> .*?)```", re.S)


def _sessions() -> list[tuple[str, int, str]]:
    found = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        for m in SESSION.finditer(text):
            found.append((page.name, text[: m.start(1)].count("\n") + 1, m.group(1)))
    return found


SESSIONS = _sessions()


@pytest.mark.parametrize("page, line, session", SESSIONS, ids=[f"{p}:{n}" for p, n, _ in SESSIONS])
def test_interpreter_sessions_print_what_the_page_shows(page, line, session):
    """``>>>`` blocks are doctests: the output shown is the output dlmg prints."""
    import doctest

    import dlmg

    test = doctest.DocTestParser().get_doctest(
        session, {"dlmg": dlmg, "Layout": dlmg.Layout}, f"{page}:{line}", str(DOCS / page), line - 1)
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE | doctest.IGNORE_EXCEPTION_DETAIL)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)


def test_blocks_were_found():
    pages = {c.page for c in CHAINS}
    assert {"getting-started.md", "tensors.md", "operations.md", "interop.md"} <= pages


def test_every_page_is_in_the_index():
    index = (DOCS / "index.md").read_text()
    toc = set(re.findall(r"^([\w-]+)$", index, flags=re.M))
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    # Pages listed by name come in reading order; a final glob entry reaches any page added later.
    assert {"getting-started", "layouts", "tensors", "operations", "frameworks", "interop", "api"} <= toc
    assert pages <= toc or re.search(r":glob:\n\n\*\n", index), sorted(pages - toc)


@pytest.mark.slow
def test_site_builds_with_warnings_as_errors(tmp_path):
    for module in ("sphinx", "myst_parser"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (pip install 'dlmg[docs]')")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    html = tmp_path / "html"
    assert (html / "api.html").exists() and (html / "getting-started.html").exists()
    assert list((html / "_images").glob("*.png")), "the layout pictures were not rendered"
