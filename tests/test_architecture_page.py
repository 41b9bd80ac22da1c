"""The architecture page (docs/architecture.md) names every package of dlmg and of its adapters.

A package is a directory with an ``__init__.py`` under ``dlmg/`` or ``adapters/``; the page
names it by its path below that root followed by a slash (``ops/contract/``, ``torch/``), so a
new package without its place on the page fails here.
"""

from __future__ import annotations

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
