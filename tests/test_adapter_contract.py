"""The adapter contract's shape: a required core, facts and optional methods with
defaults, capabilities; and the page that tables them."""

from __future__ import annotations

import inspect
import pathlib

import pytest

from dlmg.adapters import Adapter, AdapterCore
from dlmg.adapters.builtin import BUILTIN_ADAPTERS, builtin_adapter
from dlmg.adapters.capabilities import CAPABILITIES

ARCHITECTURE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def _required_methods() -> set[str]:
    """The methods of Adapter that every framework must implement (they raise NotImplementedError)."""
    return {name for name, fn in vars(Adapter).items()
            if inspect.isfunction(fn) and "raise NotImplementedError" in inspect.getsource(fn)}


def _core_members() -> tuple[set[str], set[str]]:
    methods = {n for n, v in vars(AdapterCore).items() if inspect.isfunction(v) and not n.startswith("_")}
    return methods, set(AdapterCore.__annotations__)


def test_the_required_core_is_the_protocol():
    methods, attributes = _core_members()
    assert methods == _required_methods()
    assert attributes == {"name", "modules", "package", "install_hint"}
    assert len(methods) <= 12


@pytest.mark.parametrize("name", sorted(BUILTIN_ADAPTERS))
def test_every_builtin_adapter_answers_the_core(name):
    adapter = builtin_adapter(name)
    assert isinstance(adapter, Adapter) and isinstance(adapter, AdapterCore)


def test_no_capability_repeats_the_core_or_the_base():
    """A capability adds fast paths; it never redeclares what the base class answers."""
    base = {n for n in vars(Adapter) if not n.startswith("_")}
    for capability in CAPABILITIES:
        own = {n for n in vars(capability) if not n.startswith("_")}
        assert not own & base, (capability.__name__, own & base)


def test_the_architecture_page_tables_the_contract():
    """Every required member, every optional method and every capability appears on the page."""
    page = ARCHITECTURE.read_text()
    section = page[page.index("## The adapter contract"):page.index("## Where each kind of change goes")]
    methods, attributes = _core_members()
    optional = {n for n, v in vars(Adapter).items() if inspect.isfunction(v) and not n.startswith("_")} - methods
    facts = set(Adapter.__annotations__) - attributes
    for name in sorted(methods | attributes | optional | facts):
        assert f"`{name}" in section, f"the adapter contract section does not name {name}"
    for capability in CAPABILITIES:
        assert f"`{capability.__name__}`" in section, capability.__name__
