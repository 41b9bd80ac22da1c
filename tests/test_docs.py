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
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"((?:<!--[^\n]*-->\n)*)```python\n(.*?)```", re.S)


def _pages() -> list[Path]:
    """The site's pages: docs/*.md and the reference's docs/api/*.md."""
    return sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("api/*.md"))


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
    for page in _pages():
        text, name = page.read_text(), str(page.relative_to(DOCS))
        for m in BLOCK.finditer(text):
            markers, code = m.group(1), m.group(2)
            line = text[: m.start(2)].count("\n") + 1
            needs = set(re.findall(r"<!-- needs: (\w+) -->", markers))
            if "<!-- continue -->" in markers and chains and chains[-1].page == name:
                chains[-1].blocks.append((line, code))
                chains[-1].needs |= needs
            else:
                chains.append(Chain(name, line, [(line, code)], needs))
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
    for page in _pages():
        text = page.read_text()
        for m in SESSION.finditer(text):
            found.append((str(page.relative_to(DOCS)), text[: m.start(1)].count("\n") + 1, m.group(1)))
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


def test_every_page_is_in_the_index_once():
    """One navigation: each page is listed by name in exactly one table of contents of the index."""
    index = (DOCS / "index.md").read_text()
    entries = [line for block in re.findall(r"```\{toctree\}\n(.*?)```", index, flags=re.S)
               for line in block.splitlines() if line and not line.startswith(":")]
    pages = {p.stem for p in DOCS.glob("*.md")} - {"index"}
    assert {"getting-started", "layouts", "tensors", "operations", "frameworks", "interop", "api"} <= set(entries)
    assert sorted(entries) == sorted(set(entries)), entries
    assert pages == set(entries), ("add to a toctree of docs/index.md", sorted(pages - set(entries)),
                                   "no such page", sorted(set(entries) - pages))


def test_every_reference_page_is_in_the_reference_index_once():
    """The reference's pages (docs/api/*.md) are listed by the table of contents of docs/api.md."""
    api = (DOCS / "api.md").read_text()
    entries = [line for block in re.findall(r"```\{toctree\}\n(.*?)```", api, flags=re.S)
               for line in block.splitlines() if line and not line.startswith(":")]
    pages = {f"api/{p.stem}" for p in DOCS.glob("api/*.md")}
    assert len(pages) >= 10
    assert sorted(entries) == sorted(set(entries)), entries
    assert pages == set(entries), ("add to the toctree of docs/api.md", sorted(pages - set(entries)),
                                   "no such page", sorted(set(entries) - pages))


def _write_inventory(path: Path, project: str, entries: list[str]) -> None:
    """An intersphinx inventory (format version 2) holding ``entries``."""
    header = f"# Sphinx inventory version 2\n# Project: {project}\n# Version: 1\n"
    header += "# The remainder of this file is compressed using zlib.\n"
    path.write_bytes(header.encode() + zlib.compress("".join(e + "\n" for e in entries).encode()))


def _read_inventory(path: Path) -> dict[str, str]:
    """name -> domain:role of the entries of a built site's objects.inv."""
    raw = path.read_bytes()
    body = raw.split(b"\n", 4)[4]
    return {line.split(" ")[0]: line.split(" ")[1] for line in zlib.decompress(body).decode().splitlines()}


NUMPY_DOCS = "https://numpy.org/doc/stable/"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built nitpicky with warnings as errors (the README's command).

    Intersphinx reads NumPy's inventory from a local folder here (a small one
    written by the test, with NumPy's real addresses), and Python's, PyTorch's
    and JAX's from the web where it can be reached; without network those
    three are left out and their names stay unlinked.
    """
    for module in ("sphinx", "myst_parser", "sphinx_book_theme"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (pip install 'dlmg[docs]')")
    tmp = tmp_path_factory.mktemp("docs")
    _write_inventory(tmp / "numpy.inv", "NumPy", [
        "numpy.ndarray py:class 1 reference/generated/numpy.ndarray.html#$ -",
        "numpy.dtype py:class 1 reference/generated/numpy.dtype.html#$ -",
    ])
    env = {**os.environ, "DLMG_DOCS_INVENTORIES": str(tmp)}
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp / "html")],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env=env,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    return tmp / "html"


# Not marked slow: one build (about 20 s of processor time) shared by the tests below, so that the fast
# loop catches a docstring the nitpicky build refuses before it lands.
def test_site_builds_nitpicky_with_warnings_as_errors(site):
    assert (site / "api.html").exists() and (site / "getting-started.html").exists()
    assert list((site / "_images").glob("*.png")), "the layout pictures were not rendered"


def test_every_reference_directive_made_an_entry(site):
    from test_api_reference import reference_names

    built = _read_inventory(site / "objects.inv")
    assert not sorted(reference_names() - set(built))
    for name in ("dlmg.registry.register", "dlmg.testing.check_adapter", "dlmg.as_device", "dlmg.sqrt",
                 "dlmg.from_partitioned", "dlmg.arccos"):
        assert name in built, name


def test_names_of_other_projects_link_to_their_docs(site):
    api = "".join(page.read_text() for page in (site / "api").glob("*.html"))
    assert f'href="{NUMPY_DOCS}reference/generated/numpy.ndarray.html#numpy.ndarray"' in api


def test_one_navigation(site):
    index = (site / "index.html").read_text()
    assert "sphinx-book-theme" in index or "sbt-" in index
    assert ">More<" not in index
    # each page is linked once from the navigation, not repeated in a second table of contents
    nav = index.split('class="bd-sidebar-primary', 1)[1].split("</nav>", 1)[0]
    assert nav.count('href="api.html"') == 1
