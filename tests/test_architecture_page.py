"""The architecture page (docs/architecture.md) names every package of dlmg and of its adapters.

A package is a directory with an ``__init__.py`` under ``dlmg/`` or ``adapters/``; the page
names it by its path below that root followed by a slash (``ops/contract/``, ``torch/``), so a
new package without its place on the page fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"


def packages() -> list[str]:
    """Every package directory of ``dlmg/`` and ``adapters/``, as ``path/`` below its root."""
    found = []
    for top in ("dlmg", "adapters"):
        base = ROOT / top
        for init in sorted(base.rglob("__init__.py")):
            directory = init.parent
            if directory == base or any(p.is_symlink() for p in [directory, *directory.parents]):
                continue  # the root itself; dlmg/adapters is a link to adapters/, walked on its own
            found.append(directory.relative_to(base).as_posix() + "/")
    return found


def unnamed(text: str) -> list[str]:
    """The packages ``text`` does not name."""
    return [name for name in packages() if name not in text]


def test_the_packages_are_found():
    names = packages()
    assert {"ops/", "ops/contract/", "movement/", "io/", "array_api/", "torch/", "jax/", "cupy/"} <= set(names)


def test_every_package_is_named_on_the_architecture_page():
    missing = unnamed(PAGE.read_text())
    assert not missing, f"name these packages in docs/architecture.md: {missing}"


def test_a_package_left_out_is_reported():
    text = PAGE.read_text().replace("ops/contract/", "ops/c/")
    assert "ops/contract/" in unnamed(text)



def chain_steps(text: str) -> list[tuple[str, str]]:
    """The steps of the page's "Following a call" section: (file below ``dlmg/``, the function
    it names first), from each "`file.py` (`name`" of the section."""
    section = text.split("## Following a call", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`([\w/]+\.py)` \(`([\w.]+)`", section)


def misnamed(text: str) -> list[tuple[str, str]]:
    """The steps whose file defines no function (``def``) or name (``name = ``) they name."""
    wrong = []
    for path, name in chain_steps(text):
        source = (ROOT / "dlmg" / path).read_text()
        short = name.rsplit(".", 1)[-1]
        if f"def {short}(" not in source and f"\n{short} = " not in source:
            wrong.append((path, name))
    return wrong


def test_every_step_of_a_chain_names_a_function_of_its_file():
    text = PAGE.read_text()
    assert len(chain_steps(text)) >= 13
    assert not misnamed(text), f"the architecture page names functions its files do not define: {misnamed(text)}"


def test_a_chain_step_naming_a_missing_function_is_reported():
    text = PAGE.read_text().replace("`tensor.py` (`__matmul__`", "`tensor.py` (`__gone__`", 1)
    assert misnamed(text) == [("tensor.py", "__gone__")]
