"""Finding adapters: by array type module (cached), by name, and through entry points.

The third-party adapter is a real installed distribution: a ``*.dist-info``
folder with ``entry_points.txt`` in a temporary directory put on ``sys.path``,
found by :func:`importlib.metadata.entry_points` like any pip-installed one.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from dataclasses import replace

import pytest

from dlmg import registry
from dlmg.adapters import available
from dlmg.errors import FrameworkError, FrameworkNotInstalledError
from dlmg.registry import BUILTIN_ADAPTERS, adapter_for, adapter_names, framework_of, get_adapter

np = pytest.importorskip("numpy")


def _clear_caches() -> None:
    registry._adapters.cache_clear()
    registry._instance.cache_clear()
    registry._adapter_for_type.cache_clear()


@pytest.fixture
def fresh_registry():
    _clear_caches()
    yield
    _clear_caches()


_THIRD_PARTY = '''
"""A third-party framework and its dlmg adapter: NumPy-backed arrays of their own type."""
import numpy as np
from dlmg.adapters.numpy import NumpyAdapter


class MyArray(np.ndarray):
    pass


class MyAdapter(NumpyAdapter):
    name = "myfw"
    modules = ("dlmg_thirdparty_fw",)
    package = "dlmg_thirdparty_fw"
    install_hint = "pip install dlmg-thirdparty-fw"

    def owns(self, array):
        return type(array).__module__.partition(".")[0] in self.modules

    def _wrap(self, a):
        return a.view(MyArray)

    def empty(self, shape, dtype, device):
        return self._wrap(super().empty(shape, dtype, device))

    def full(self, shape, fill_value, dtype, device):
        return self._wrap(super().full(shape, fill_value, dtype, device))

    def from_dlpack(self, obj, *, device=None, copy=None):
        return self._wrap(super().from_dlpack(obj, device=device, copy=copy))


class NotInstalledAdapter(NumpyAdapter):
    name = "ghostfw"
    modules = ("ghostfw",)
    package = "ghostfw_is_not_installed"
    install_hint = "pip install ghostfw"
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch, fresh_registry):
    """Install (on sys.path) a distribution declaring dlmg.adapters entry points:
    a working one, a broken one, a not-installed framework."""
    (tmp_path / "dlmg_thirdparty_fw.py").write_text(_THIRD_PARTY)
    dist = tmp_path / "dlmg_thirdparty_fw-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: dlmg-thirdparty-fw\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            """\
            [dlmg.adapters]
            myfw = dlmg_thirdparty_fw:MyAdapter
            brokenfw = dlmg_thirdparty_missing_module:Adapter
            ghostfw = dlmg_thirdparty_fw:NotInstalledAdapter
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.modules.pop("dlmg_thirdparty_fw", None)


def test_builtin_names_and_aliases(fresh_registry):
    assert set(BUILTIN_ADAPTERS) <= set(adapter_names())
    for alias, name in [("np", "numpy"), ("pytorch", "torch"), ("jnp", "jax"), ("cp", "cupy"), ("generic", "dlpack"), ("NumPy", "numpy")]:
        assert get_adapter(alias).name == name
    assert get_adapter("torch") is get_adapter("pytorch")  # one cached instance
    a = get_adapter("numpy")
    assert get_adapter(a) is a  # an adapter passes through


def test_builtin_type_modules_are_the_adapters_own():
    """The registry's table of type modules (what lets it skip an adapter without loading
    it) says what each built-in adapter's ``modules`` says."""
    import importlib

    from dlmg.registry import BUILTIN_ADAPTERS, BUILTIN_MODULES

    assert set(BUILTIN_MODULES) == set(BUILTIN_ADAPTERS) - {"dlpack"}
    for name, modules in BUILTIN_MODULES.items():
        module, _, cls = BUILTIN_ADAPTERS[name].partition(":")
        assert getattr(importlib.import_module(module), cls).modules == modules, name


def test_detection_by_type_module_is_cached(fresh_registry):
    x = np.ones(3)
    assert framework_of(x) == "numpy"
    assert registry._OWNED[np.ndarray].name == "numpy"  # the owner of a type, remembered
    before = registry._adapter_for_type.cache_info()
    for _ in range(5):
        assert adapter_for(np.zeros(2)).name == "numpy"
    assert registry._adapter_for_type.cache_info() == before  # no search again
    with pytest.raises(FrameworkError):  # a NumPy scalar: NumPy's module, but no array
        adapter_for(np.float32(1))
    assert np.float32 not in registry._OWNED
    registry.unregister("nothing-registered")
    registry.register(type("Extra", (registry.get_adapter("numpy").__class__,), {"name": "extra"}))
    assert not registry._OWNED  # a change of adapters forgets what types were found to be
    registry.unregister("extra")


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_detection_of_framework_arrays(framework):
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")
    a = get_adapter(framework)
    from dlmg import Device

    x = a.full((2,), 1, "float32", Device("cpu", 0))
    assert adapter_for(x) is a and framework_of(x) == framework
    assert a.owns(x) and not get_adapter("numpy").owns(x)


def test_non_arrays_are_rejected(fresh_registry):
    with pytest.raises(FrameworkError, match="not an array of a known framework"):
        adapter_for([1, 2, 3])
    with pytest.raises(FrameworkError):
        adapter_for(np.float32(1.0))  # a NumPy scalar is no fragment


def test_unknown_name_lists_known_ones(fresh_registry):
    with pytest.raises(FrameworkError) as info:
        get_adapter("tensorflowish")
    for name in ("numpy", "torch", "jax", "cupy"):
        assert name in str(info.value)
    with pytest.raises(FrameworkError):
        get_adapter(3.5)


def test_missing_framework_says_what_to_install(fresh_registry):
    if importlib.util.find_spec("cupy") is None:
        cupy = get_adapter("cupy")  # the adapter loads without CuPy...
        assert not available(cupy)
        with pytest.raises(FrameworkNotInstalledError, match="pip install cupy"):
            cupy.module()  # ...and says what to install when used
        with pytest.raises(ImportError):
            cupy.empty((2,), "float32", __import__("dlmg").Device("cuda", 0))


def test_entry_point_adapter_is_found_and_passes_the_contract(third_party):
    from dlmg import Device
    from dlmg.testing import check_adapter

    assert "myfw" in adapter_names()
    a = get_adapter("myfw")
    assert type(a).__name__ == "MyAdapter"
    x = a.full((2, 2), 3, "float32", Device("cpu", 0))
    assert type(x).__module__ == "dlmg_thirdparty_fw"
    assert adapter_for(x) is a and framework_of(x) == "myfw"
    assert framework_of(np.ones(1)) == "numpy"

    def make_array(adapter, shape, dtype, device):
        n = int(np.prod(shape))
        base = (np.arange(n) % (2 if dtype == "bool" else 100)).reshape(shape)
        return base.astype(adapter.native_dtype(dtype)).view(type(x))

    notes = check_adapter(a, make_array, device="cpu", dtypes=("bool", "int16", "float32", "complex64"))
    assert notes == []


def test_entry_point_not_installed_framework(third_party):
    ghost = get_adapter("ghostfw")
    assert not available(ghost)
    with pytest.raises(FrameworkNotInstalledError, match="pip install ghostfw"):
        ghost.module()


def test_broken_entry_point_warns_and_is_skipped(third_party):
    with pytest.raises(FrameworkError, match="brokenfw"):
        get_adapter("brokenfw")
    registry._adapter_for_type.cache_clear()
    with pytest.warns(RuntimeWarning, match="brokenfw"):  # detection goes on without it
        with pytest.raises(FrameworkError, match="not an array"):
            adapter_for(object())
    with pytest.warns(RuntimeWarning, match="brokenfw"):
        from dlmg.adapters._common import DLPackShim

        assert adapter_for(DLPackShim(np.ones(2))).name == "dlpack"


def test_the_adapters_find_built_in_peers_without_the_registry():
    """An adapter describing another built-in framework's array finds that adapter in
    the adapters' own table (``dlmg.adapters.builtin``): the same instance the
    registry hands out, and nothing for objects no built-in adapter owns."""
    from dlmg.adapters.builtin import builtin_adapter, known_adapter

    assert get_adapter("numpy") is builtin_adapter("numpy")
    assert known_adapter(np.ones(3)) is builtin_adapter("numpy")
    assert known_adapter(np.float32(1)) is None  # a NumPy scalar is no array
    assert known_adapter(object()) is None and known_adapter([1, 2]) is None
    assert set(registry.BUILTIN_ADAPTERS) == set(BUILTIN_ADAPTERS) >= set(registry.BUILTIN_MODULES)


def test_an_adapter_states_protocol_facts_and_dlmg_answers(fresh_registry):
    """An adapter declares how its framework calls a protocol (``ProtocolHook``); an
    unknown protocol or question is refused when it registers, and a known one gets
    dlmg's answer, built outside the adapter."""
    import dlmg
    from dlmg._protocols import NotConverted, protocol_answer
    from dlmg.adapters import ProtocolHook
    from dlmg.adapters.numpy import NumpyAdapter

    class Asking(NumpyAdapter):
        name = "asking"
        modules = ("asking_arrays",)
        traits = replace(NumpyAdapter.traits, protocols=(ProtocolHook("__jax_array__", "array", "; or ask nicely"),))

    class Unknown(Asking):
        name = "unknown_question"
        traits = replace(NumpyAdapter.traits, protocols=(ProtocolHook("__jax_array__", "telepathy"),))

    class Foreign(Asking):
        name = "foreign_protocol"
        traits = replace(NumpyAdapter.traits, protocols=(ProtocolHook("__dask_graph__", "array"),))

    with pytest.raises(FrameworkError, match="telepathy"):
        registry.register(Unknown)
    with pytest.raises(FrameworkError, match="__dask_graph__"):
        registry.register(Foreign)
    registry.register(Asking)
    try:
        assert registry.protocol_hook("__jax_array__")[0] == "asking"
        dt = dlmg.scatter(np.ones(4), dlmg.Layout.single(4))
        answer = protocol_answer("__jax_array__")(dt)
        assert isinstance(answer, NotConverted)
        with pytest.raises(TypeError, match="asking.*or ask nicely"):
            answer.__array__()
    finally:
        registry.unregister("asking")
    assert registry.protocol_hook("__jax_array__")[0] == "jax"
