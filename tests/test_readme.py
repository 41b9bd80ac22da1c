"""The README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    setup = text.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", setup, flags=re.S)


def test_readme_has_exactly_two_setup_commands():
    commands = _readme_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands)
    assert commands[0].endswith("python examples/quickstart.py")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_install_and_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    install_and_test = _readme_commands()[1].split("&& ", 2)[2]  # after venv creation and activation
    assert install_and_test in ci
    assert (ROOT / "examples" / "quickstart.py").exists()


def test_readme_example_runs():
    import pytest

    pytest.importorskip("torch")
    pytest.importorskip("jax")
    text = (ROOT / "README.md").read_text()
    example = re.findall(r"```python\n(.+?)```", text, flags=re.S)[0]
    exec(compile(example, "README.md", "exec"), {})
