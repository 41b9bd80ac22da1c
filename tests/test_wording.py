"""What the tests tell a user who runs them: a skipped test says what is missing.

A skip reason names what the machine lacks ("needs a CUDA GPU", "needs mpi4py
and an MPI") or how the environment differs (a framework's build without a
feature). dlmg's own modules are always there: a test of a dlmg feature that
is absent fails instead of skipping, so no skip reason names a part of dlmg.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


def _literal_text(node: ast.AST) -> str | None:
    """The text of a string literal or f-string (placeholders as ``{}``), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def skip_reasons(source: str) -> list[tuple[int, str]]:
    """(line, reason) of every literal reason given to ``skip``, ``skipif`` or ``importorskip``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in {"skip", "skipif", "importorskip"}:
            continue
        candidates = [kw.value for kw in node.keywords if kw.arg in {"reason", "msg"}]
        if name == "skip" and node.args:
            candidates.append(node.args[0])
        for candidate in candidates:
            text = _literal_text(candidate)
            if text is not None:
                found.append((node.lineno, text))
    return found


def _all_skip_reasons() -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(TESTS.glob("*.py")):
        out += [(path.name, line, text) for line, text in skip_reasons(path.read_text())]
    return out


def test_skip_reasons_were_found():
    reasons = [text for _, _, text in _all_skip_reasons()]
    assert len(reasons) > 20
    assert "needs a CUDA GPU" in reasons


def test_no_skip_waits_for_a_part_of_dlmg():
    waiting = [f"{name}:{line}: {text}" for name, line, text in _all_skip_reasons() if "dlmg." in text]
    assert not waiting, "\n".join(waiting)


def test_gpu_skip_reason_says_what_is_missing():
    from conftest import _GPU_REASON

    assert _GPU_REASON.startswith("needs a CUDA GPU")


@pytest.mark.parametrize("source, caught", [
    ('pytest.skip("dlmg.dlpack.inspect is missing")', True),
    ('pytest.importorskip("dlmg.io", reason="dlmg.io is missing")', True),
    ('pytest.mark.skipif(True, reason=f"dlmg.{name} is missing")', True),
    ('pytest.skip("needs a CUDA GPU")', False),
    ('pytest.importorskip("torch")', False),
])
def test_the_check_reads_each_way_of_skipping(source, caught):
    assert any("dlmg." in text for _, text in skip_reasons(source)) is caught
