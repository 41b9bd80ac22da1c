"""No dead code in the package: every function that is not public API has a caller.

An AST scan of ``dlmg/`` and ``adapters/``: a module-level function that its
module does not export (``__all__``), and a private method (one leading
underscore), must be named somewhere else in the package's source. A name
used only by the tests does not count: test-only hooks do not belong in
production code. Public functions and methods are API and are left to the
API reference's tests.
"""

from __future__ import annotations

import ast
import collections
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = sorted([*(ROOT / "dlmg").rglob("*.py"), *(ROOT / "adapters").rglob("*.py")])
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _exported(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
                names |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return names


def _candidates(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """``(line, name looked up, name shown)`` of the functions of ``path`` that need a caller."""
    tree = ast.parse(path.read_text())
    exported = _exported(tree)
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in exported:
            found.append((node.lineno, node.name, node.name))
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if (isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)) and member.name.startswith("_")
                        and not member.name.startswith("__")):
                    found.append((member.lineno, member.name, f"{node.name}.{member.name}"))
    return found


def test_every_unexported_function_has_a_caller() -> None:
    mentions: collections.Counter[str] = collections.Counter()
    for path in SOURCES:
        mentions.update(WORD.findall(path.read_text()))
    dead = [
        f"{path.relative_to(ROOT)}:{line} {shown}"
        for path in SOURCES
        for line, name, shown in _candidates(path)
        if mentions[name] <= 1  # its own definition only
    ]
    assert not dead, "functions nothing in the package calls (remove them, or export them as API):\n" + "\n".join(dead)


def test_the_scan_finds_a_function_without_caller(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("__all__ = ['kept']\n\ndef kept():\n    return _used()\n\ndef _used():\n    return 1\n\n"
                      "def _orphan():\n    return 2\n\nclass C:\n    def _method(self):\n        return 3\n")
    names = [shown for _, _, shown in _candidates(module)]
    assert names == ["_used", "_orphan", "C._method"]
    text = WORD.findall(module.read_text())
    assert [n for n in names if text.count(n.rpartition(".")[2]) <= 1] == ["_orphan", "C._method"]
