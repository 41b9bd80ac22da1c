"""The adapter contract's shape: a required core, the facts as one record of traits,
optional methods with defaults, capabilities; and the page that tables them."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import sys
from typing import Any

import pytest

from dlmg import registry
from dlmg.adapters import Adapter, AdapterCore, ProtocolHook, Traits, loose_traits
from dlmg.adapters.builtin import BUILTIN_ADAPTERS, builtin_adapter
from dlmg.adapters.capabilities import CAPABILITIES, CompiledElementwise
from dlmg.errors import FrameworkError

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
    traits = {field.name for field in dataclasses.fields(Traits)}
    for name in sorted(methods | attributes | optional | facts | traits):
        assert f"`{name}" in section, f"the adapter contract section does not name {name}"
    for capability in CAPABILITIES:
        assert f"`{capability.__name__}`" in section, capability.__name__


def test_the_facts_are_one_record():
    """Beside the four names of the core, ``traits`` is the adapter's only fact: no flag
    lives outside the record, and a capability declares methods only."""
    _, attributes = _core_members()
    assert set(Adapter.__annotations__) - attributes == {"traits"}
    assert isinstance(Adapter.traits, Traits)
    names = {field.name for field in dataclasses.fields(Traits)}
    for owner in (Adapter, *CAPABILITIES):
        assert not names & set(vars(owner)), (owner.__name__, names & set(vars(owner)))
        assert not [n for n, v in vars(owner).items() if isinstance(v, bool)], owner.__name__


def test_traits_are_frozen_and_refuse_what_contradicts_itself():
    traits = Traits(mutable=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        traits.mutable = True  # type: ignore[misc]
    assert dataclasses.replace(traits, distinct_host_devices=True).mutable is False
    for bad, match in (({"mutable": 0}, "Traits.mutable must be a bool, got 0"),
                       ({"can_view": True, "mutable": False}, "can_view=True needs mutable=True"),
                       ({"orders_across_devices": True}, "needs stream_ordered=True"),
                       ({"batches_operators": True}, "needs batches_elementwise=True"),
                       ({"dlpack_dtypes": frozenset({"float32", "float33"})}, "dlpack_dtypes must be"),
                       ({"dlpack_dtypes": ("float32",)}, "dlpack_dtypes must be"),
                       ({"protocols": (("__jax_array__", "array"),)}, "protocols must be a tuple of ProtocolHook")):
        with pytest.raises(FrameworkError, match=match):
            Traits(**bad)


@pytest.mark.parametrize("name", sorted(BUILTIN_ADAPTERS))
def test_every_builtin_adapter_states_its_facts_in_its_traits(name):
    adapter = builtin_adapter(name)
    assert type(adapter.traits) is Traits
    assert loose_traits(adapter) == {}
    # one place per adapter: the record is the class's own, or its base's unchanged
    assert "traits" in vars(type(adapter)), f"{name} states no traits of its own"
    traits = adapter.traits
    if traits.batches_elementwise:
        assert isinstance(adapter, CompiledElementwise)


def test_the_builtin_traits_say_what_each_framework_is():
    """The facts the core leans on, as each framework has them."""
    numpy, torch, jax, cupy, generic = (builtin_adapter(n).traits for n in ("numpy", "torch", "jax", "cupy", "dlpack"))
    assert numpy.host_only and numpy.can_view and numpy.done_on_return and numpy.dlpack_dtypes is not None
    assert torch.can_view and torch.stream_ordered and torch.orders_across_devices and torch.batches_elementwise
    assert not jax.mutable and not jax.can_view and jax.distinct_host_devices and jax.batches_operators
    assert cupy.stream_ordered and not cupy.orders_across_devices and not cupy.batches_elementwise
    assert not generic.mutable and generic.protocols == ()
    assert [h.name for h in numpy.protocols] == ["__array_ufunc__", "__array_function__"]


def _old_style(**members: Any) -> type:
    """An adapter written for the contract before the traits record: NumPy's, renamed,
    with ``members`` as class attributes."""
    numpy = type(builtin_adapter("numpy"))
    return type("OldStyle", (numpy,), {"name": "oldstyle", "modules": ("oldstyle_arrays",), **members})


@pytest.mark.parametrize("members", [{"mutable": False}, {"done_on_return": True, "host_only": True},
                                     {"protocols": (ProtocolHook("__jax_array__", "array"),)},
                                     {"batches_elementwise": True}, {"dlpack_dtypes": frozenset({"float32"})}])
def test_a_loose_flag_is_refused_when_the_adapter_registers(members):
    cls = _old_style(**members)
    with pytest.raises(FrameworkError) as caught:
        registry.register(cls)
    message = str(caught.value)
    for name, value in members.items():
        assert name in message and f"{name}={value!r}" in message
    assert "traits = Traits(" in message and "OldStyle" in message
    assert "oldstyle" not in registry.adapter_names()
    assert loose_traits(cls()) == members


def test_a_loose_flag_of_a_base_or_an_instance_is_refused_too():
    base = _old_style(can_view=False)
    child = type("Child", (base,), {"name": "oldchild"})
    with pytest.raises(FrameworkError, match="can_view"):
        registry.register(child)
    adapter = type(builtin_adapter("numpy"))()
    adapter.name = "oldinstance"  # type: ignore[misc]
    adapter.mutable = False  # type: ignore[attr-defined]
    with pytest.raises(FrameworkError, match="mutable=False"):
        registry.register(adapter)
    assert "oldchild" not in registry.adapter_names() and "oldinstance" not in registry.adapter_names()


def test_the_record_registers_where_the_loose_flag_did_not():
    numpy = type(builtin_adapter("numpy"))
    cls = type("NewStyle", (numpy,), {"name": "newstyle", "modules": ("newstyle_arrays",),
                                      "traits": dataclasses.replace(numpy.traits, done_on_return=False)})
    adapter = registry.register(cls)
    try:
        assert registry.get_adapter("newstyle") is adapter and not adapter.traits.done_on_return
    finally:
        registry.unregister("newstyle")


def test_an_entry_point_adapter_with_a_loose_flag_fails_to_load(tmp_path, monkeypatch):
    (tmp_path / "dlmg_oldstyle_fw.py").write_text(
        "from dlmg.adapters.numpy import NumpyAdapter\n\n"
        "class OldAdapter(NumpyAdapter):\n"
        "    name = 'oldfw'\n    modules = ('dlmg_oldstyle_fw',)\n    mutable = False\n"
    )
    dist = tmp_path / "dlmg_oldstyle_fw-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dlmg-oldstyle-fw\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[dlmg.adapters]\noldfw = dlmg_oldstyle_fw:OldAdapter\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    registry._clear_caches()
    try:
        with pytest.raises(FrameworkError, match=r"oldfw.*loose attribute mutable,.*traits = Traits\(mutable=False\)"):
            registry.get_adapter("oldfw")
    finally:
        monkeypatch.undo()
        sys.modules.pop("dlmg_oldstyle_fw", None)
        registry._clear_caches()
