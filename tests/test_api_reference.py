"""The API reference documents every public name.

Public means listed in ``__all__`` of ``dlmg`` or of one of its public
submodules below. A name counts as documented when an autodoc or Python-domain
directive of a page in docs/ names it, or names the same function, class or
module under another public path (``dlmg.get_adapter`` documents
``dlmg.registry.get_adapter``); an ``automodule`` with ``:members:`` documents
the classes and functions of its module's ``__all__``. The site build
(tests/test_docs.py) checks that each of these directives really produced an
entry.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS / "_ext"))
from dotted_names import MISSING, lookup  # noqa: E402  (the reference's own walk of dotted names)
PUBLIC_MODULES = ("dlmg", "dlmg.registry", "dlmg.adapters", "dlmg.testing", "dlmg.distributed", "dlmg.interop")

DIRECTIVE = re.compile(
    r"^\s*\.\. (?:auto(?P<auto>function|class|data|exception|attribute|method|module)"
    r"|py:(?P<py>function|class|data|exception|attribute|method|module)|(?:py:)?(?P<current>currentmodule))"
    r"::\s*(?P<name>[\w.]+)(?P<options>(?:\n\s+:[\w-]+:.*)*)",
    re.M,
)


def _resolve(dotted: str) -> Any:
    obj = lookup(dotted)
    if obj is MISSING:
        raise AttributeError(dotted)
    return obj


def documented_names(text: str) -> set[str]:
    """The dotted names the directives of ``text`` (one page) document."""
    names: set[str] = set()
    current = ""  # the module that Python-domain directives' names are relative to
    for m in DIRECTIVE.finditer(text):
        name = m.group("name")
        if m.group("current") or m.group("py") == "module" or m.group("auto") == "module":
            current = "" if name == "None" else name
            if m.group("current"):
                continue
        module_option = re.search(r":module:\s*([\w.]+)", m.group("options"))
        if m.group("py") and m.group("py") != "module":
            context = module_option.group(1) if module_option else current
            name = f"{context}.{name}" if context else name
        names.add(name)
        if m.group("auto") == "module" and re.search(r":members:", m.group("options")):
            module = importlib.import_module(name)
            names.update(f"{name}.{member}" for member in getattr(module, "__all__", ())
                         if isinstance(getattr(module, member), (type, types.FunctionType)))
    return names


def _pages() -> list[Path]:
    """The pages of docs/: the reference's own (api.md, api/*.md, api-elementwise.md) and the narrative ones."""
    return sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("api/*.md"))


def reference_names() -> set[str]:
    """Every name the pages of docs/ document (each page read with its own module context)."""
    return set().union(*(documented_names(page.read_text()) for page in _pages()))


def _is_identity_checked(obj: Any) -> bool:
    # Functions, classes and modules are one object wherever they are re-exported; a constant
    # (a string, a tuple) may be equal to an unrelated one, so it must be documented by name.
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type, types.ModuleType)) or callable(obj)


def missing_names(names: set[str], modules: tuple[str, ...] = PUBLIC_MODULES) -> list[str]:
    """Public names of ``modules`` that are not among the documented ``names``."""
    objects = []
    for name in names:
        try:
            objects.append(_resolve(name))
        except (ImportError, AttributeError):
            continue
    missing = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for public in module.__all__:
            dotted = f"{module_name}.{public}"
            obj = getattr(module, public)
            if isinstance(obj, types.ModuleType):
                if obj.__name__ not in names:  # a submodule has its own automodule section
                    missing.append(dotted)
                continue
            if dotted in names:
                continue
            if _is_identity_checked(obj) and any(obj is other for other in objects):
                continue
            missing.append(dotted)
    return missing


def test_every_public_name_is_in_the_reference():
    missing = missing_names(reference_names())
    assert not missing, "add these to a page of docs/api/ (or docs/api-elementwise.md): " + ", ".join(missing)


def test_every_documented_name_exists():
    stale = []
    for name in sorted(reference_names()):
        if not name.startswith("dlmg."):
            continue
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            stale.append(name)
    assert not stale, stale


@pytest.mark.parametrize("name", ["dlmg.as_device", "dlmg.registry.register", "dlmg.testing.check_adapter",
                                  "dlmg.from_partitioned", "dlmg.sqrt", "dlmg.distributed.init"])
def test_a_name_left_out_is_reported(name):
    pages = [page.read_text() for page in _pages()]
    left_out = [("\n".join(line for line in text.splitlines() if not line.rstrip().endswith(":: " + name)))
                for text in pages]
    assert name not in missing_names(set().union(*(documented_names(t) for t in pages)))
    assert name in missing_names(set().union(*(documented_names(t) for t in left_out)))


def test_names_are_read_in_their_module():
    text = ".. automodule:: dlmg.testing\n   :no-members:\n\n.. py:data:: CHECKS\n.. py:data:: X\n   :module: dlmg.q\n"
    assert documented_names(text) == {"dlmg.testing", "dlmg.testing.CHECKS", "dlmg.q.X"}


def test_the_elementwise_functions_are_listed_one_by_one():
    import dlmg
    from dlmg.array_api import _elementwise

    names = documented_names((DOCS / "api-elementwise.md").read_text())
    elementwise = [n for n in (*_elementwise.__all__, *_elementwise.NUMPY_NAMES) if n in dlmg.__all__]
    assert len(elementwise) > 50
    assert {f"dlmg.{n}" for n in elementwise} <= names, sorted({f"dlmg.{n}" for n in elementwise} - names)
