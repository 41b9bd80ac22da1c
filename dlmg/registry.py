"""Finding the adapter of an array or of a framework name.

Adapters are loaded lazily from one table: the built-in adapters
(:data:`BUILTIN_ADAPTERS`, read from :mod:`dlmg.adapters.builtin`, the only place
dlmg names frameworks), then the entry-point group ``dlmg.adapters`` (so an
installed package adds a framework without touching dlmg), then adapters given to
:func:`register` at run time. An array's framework is found from its type's
module name, looked up without importing any framework, and cached per type.

Imports run one way: the registry imports the adapters; no adapter imports the
registry (or anything of the tensor layer above it).
"""

from __future__ import annotations

import importlib
import warnings
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from .adapters import PROTOCOL_QUESTIONS, Adapter, ProtocolHook, builtin, loose_traits
from .device import native_device
from .errors import FrameworkError

if TYPE_CHECKING:  # pragma: no cover
    from dlmg.device import Device

__all__ = [
    "BUILTIN_ADAPTERS",
    "DEFAULT_FRAMEWORK",
    "viewing_frameworks",
    "get_adapter",
    "adapter_for",
    "framework_of",
    "adapter_names",
    "as_zero_d",
    "register",
    "unregister",
    "device_from_native",
    "BUILTIN_PROTOCOLS",
    "BUILTIN_MODULES",
    "protocol_hook",
    "refuse_loose_traits",
]

#: The built-in adapters: framework name -> ``"module:Class"`` (:data:`dlmg.adapters.builtin.BUILTIN_ADAPTERS`).
BUILTIN_ADAPTERS: dict[str, str] = builtin.BUILTIN_ADAPTERS
#: The top-level modules whose array types each built-in adapter owns (its ``modules``):
#: finding an array's adapter loads no built-in adapter that cannot own it.
BUILTIN_MODULES: dict[str, tuple[str, ...]] = builtin.BUILTIN_MODULES
#: The protocols of other frameworks a :class:`~dlmg.DistributedTensor` answers, and the
#: built-in framework whose adapter declares each (``Traits.protocols``): the tensor's
#: method looks the declaration up when it is called, so importing dlmg loads no
#: adapter module.
BUILTIN_PROTOCOLS: dict[str, str] = {
    "__array_ufunc__": "numpy",
    "__array_function__": "numpy",
    "__jax_array__": "jax",
    "__torch_function__": "torch",
}
#: The framework of new arrays when none is named (host memory, always installed).
DEFAULT_FRAMEWORK = "numpy"
_ENTRY_POINT_GROUP = "dlmg.adapters"
_ALIASES = {"np": "numpy", "pytorch": "torch", "jnp": "jax", "cp": "cupy", "generic": "dlpack"}


def _load(target: str) -> "Adapter":
    for name, known in BUILTIN_ADAPTERS.items():
        if target == known:
            return builtin.builtin_adapter(name)  # the instance the adapters themselves find
    module_name, _, attr = target.partition(":")
    adapter = getattr(importlib.import_module(module_name), attr)()
    refuse_loose_traits(adapter)
    return adapter


def refuse_loose_traits(adapter: "Adapter") -> None:
    """Refuse an adapter that states a fact about its framework outside its
    :attr:`~dlmg.adapters.Adapter.traits` record (:func:`dlmg.adapters.loose_traits`):
    dlmg would read the record's defaults and describe the framework wrongly.

    Raises
    ------
    FrameworkError
        Naming each such member and the record to state it in.
    """
    loose = loose_traits(adapter)
    if loose:
        given = ", ".join(f"{name}={value!r}" for name, value in loose.items())
        raise FrameworkError(
            f"adapter {type(adapter).__qualname__} sets the loose attribute{'s' if len(loose) > 1 else ''} "
            f"{', '.join(loose)}, which dlmg does not read: the facts about a framework are one record, declare "
            f"traits = Traits({given}) (dlmg.adapters.Traits; dataclasses.replace(Base.traits, ...) "
            f"to change a base adapter's) instead"
        )


#: Registry (not a cache): adapters registered at run time, by name (see :func:`register`).
_REGISTERED: dict[str, "Adapter"] = {}


@lru_cache(maxsize=None)
def _adapters() -> dict[str, str]:
    table = dict(BUILTIN_ADAPTERS)
    for ep in entry_points(group=_ENTRY_POINT_GROUP):
        table[ep.name] = ep.value
    for name, adapter in _REGISTERED.items():
        table[name] = f"{type(adapter).__module__}:{type(adapter).__qualname__}"
    return table


def _clear_caches() -> None:
    _adapters.cache_clear()
    _instance.cache_clear()
    _adapter_for_type.cache_clear()
    protocol_hook.cache_clear()
    _OWNED.clear()


def register(adapter: "Adapter | type[Adapter]", *, replace: bool = False) -> "Adapter":
    """Add a framework adapter at run time, under ``adapter.name``.

    What an entry point of the group ``dlmg.adapters`` does for an installed
    package, for an adapter defined in a script or a test. Arrays whose type
    module is in ``adapter.modules`` are then found by :func:`adapter_for`.

    Parameters
    ----------
    adapter : Adapter or type
        An instance (or an ``Adapter`` subclass, instantiated without arguments).
    replace : bool
        Allow replacing an adapter of the same name (built-in or registered).

    Returns
    -------
    Adapter
        The registered instance.

    Raises
    ------
    FrameworkError
        When ``adapter`` is no :class:`dlmg.adapters.Adapter`, has no name, its
        name is taken and ``replace`` is false, it states a trait outside its
        :attr:`~dlmg.adapters.Adapter.traits` record (:func:`refuse_loose_traits`),
        or it answers a protocol the tensor does not carry (the keys of :data:`BUILTIN_PROTOCOLS`) or asks a question dlmg
        does not answer (:data:`dlmg.adapters.PROTOCOL_QUESTIONS`).
    """
    if isinstance(adapter, type) and issubclass(adapter, Adapter):
        adapter = adapter()
    if not isinstance(adapter, Adapter):
        raise FrameworkError(f"register needs a dlmg.adapters.Adapter, got {adapter!r}")
    name = adapter.name.lower() if isinstance(adapter.name, str) else ""
    if not name:
        raise FrameworkError(f"adapter {adapter!r} has no name (set the class attribute 'name')")
    if name in _adapters() and not replace:
        raise FrameworkError(f"a framework named {name!r} is registered already; pass replace=True to replace it")
    refuse_loose_traits(adapter)
    unknown = sorted({hook.name for hook in adapter.traits.protocols} - BUILTIN_PROTOCOLS.keys())
    if unknown:
        raise FrameworkError(
            f"adapter {name!r} answers protocols {unknown} that DistributedTensor does not carry; "
            f"it carries {sorted(BUILTIN_PROTOCOLS)}"
        )
    for hook in adapter.traits.protocols:
        if hook.asks not in PROTOCOL_QUESTIONS:
            raise FrameworkError(
                f"adapter {name!r} declares protocol {hook.name} asking {hook.asks!r}; "
                f"dlmg answers {sorted(PROTOCOL_QUESTIONS)}"
            )
    _REGISTERED[name] = adapter
    _clear_caches()
    return adapter


def unregister(name: str) -> None:
    """Remove an adapter added with :func:`register` (built-in and entry-point ones stay)."""
    if _REGISTERED.pop(name.lower(), None) is not None:
        _clear_caches()


@lru_cache(maxsize=None)
def _instance(name: str) -> "Adapter":
    registered = _REGISTERED.get(name)
    if registered is not None:
        return registered
    target = _adapters()[name]
    try:
        return _load(target)
    except Exception as exc:  # a broken third-party adapter must not break dlmg
        if name in BUILTIN_ADAPTERS and target != BUILTIN_ADAPTERS[name]:
            warnings.warn(
                f"dlmg adapter {name!r} from entry point {target!r} failed to load "
                f"({exc!r}); using the built-in one",
                RuntimeWarning,
                stacklevel=3,
            )
            return _load(BUILTIN_ADAPTERS[name])
        raise


def adapter_names() -> tuple[str, ...]:
    """Names of every registered framework adapter (built-in and entry points)."""
    return tuple(_adapters())


def get_adapter(framework: "str | Adapter") -> "Adapter":
    """The adapter of a framework given by name (``"torch"``, ``"jax"``...).

    Raises
    ------
    FrameworkError
        For a name no adapter is registered under.
    """
    if not isinstance(framework, str):
        if isinstance(framework, Adapter):
            return framework
        raise FrameworkError(f"framework must be a name such as 'torch', got {framework!r}")
    name = _ALIASES.get(framework.lower(), framework.lower())
    if name not in _adapters():
        raise FrameworkError(
            f"framework {framework!r} is unknown; registered: {', '.join(adapter_names())}"
        )
    try:
        return _instance(name)
    except Exception as exc:
        raise FrameworkError(f"the adapter for framework {name!r} failed to load: {exc!r}") from exc


#: Cache: array types and the adapter that owns them, filled as adapter_for meets them
#: (asked for every operand of every operation): it saves asking ``_adapter_for_type``
#: and the adapters' ``owns`` again (figure in docs/performance-history.md). Keyed on
#: the type, a value; as large as the array types a process meets (a handful), emptied
#: when an adapter is registered.
_OWNED: dict[type, "Adapter"] = {}


@lru_cache(maxsize=256)
def _adapter_for_type(cls: type) -> "Adapter | None":
    top = cls.__module__.partition(".")[0]
    for name in _adapters():
        if name == "dlpack" or _cannot_own(name, top):
            continue
        try:
            adapter = _instance(name)
        except Exception as exc:
            warnings.warn(f"dlmg adapter {name!r} failed to load and is skipped: {exc!r}", RuntimeWarning, stacklevel=4)
            continue
        if top in adapter.modules:
            return adapter
    if hasattr(cls, "__dlpack__"):
        return _instance("dlpack")
    return None


def _cannot_own(name: str, top: str) -> bool:
    """Whether the built-in adapter ``name``, as built in, owns no type of module ``top``
    (told by :data:`BUILTIN_MODULES`, without loading the adapter)."""
    known = BUILTIN_MODULES.get(name)
    return (known is not None and top not in known and name not in _REGISTERED
            and _adapters()[name] == BUILTIN_ADAPTERS[name])


def adapter_for(array: Any) -> "Adapter":
    """The adapter of the framework that owns ``array``, found without importing it.

    Raises
    ------
    FrameworkError
        When no adapter claims the array and it has no ``__dlpack__``.
    """
    cls = type(array)
    found = _OWNED.get(cls)
    if found is not None:
        return found
    adapter = _adapter_for_type(cls)  # type: ignore[arg-type]  # classes are hashable
    if adapter is not None and adapter.owns(array):
        _OWNED[cls] = adapter  # owns answers by type (see Adapter.owns)
        return adapter
    raise FrameworkError(
        f"an object of type {cls.__module__}.{cls.__qualname__} is not an "
        f"array of a known framework ({', '.join(adapter_names())}) and has no __dlpack__"
    )


def device_from_native(obj: Any) -> "Device | None":
    """The dlmg device of a framework's device object, read by the adapter of
    the framework that owns its type; ``None`` when none does."""
    adapter = _adapter_for_type(type(obj))  # type: ignore[arg-type]  # classes are hashable
    return None if adapter is None else adapter.device_from_native(obj)


def viewing_frameworks() -> tuple[str, ...]:
    """Names of the registered frameworks that can view memory with any strides
    (:attr:`~dlmg.adapters.Traits.can_view`); imports no framework."""
    out = []
    for name in _adapters():
        try:
            if _instance(name).traits.can_view:
                out.append(name)
        except Exception:  # a broken adapter views nothing
            continue
    return tuple(out)


def as_zero_d(obj: Any) -> Any:
    """A framework's scalar object that no adapter owns as an array
    (NumPy's ``np.float32(1)``) as a 0-d array of that framework
    (:meth:`~dlmg.adapters.Adapter.from_scalar`); ``None`` for anything else."""
    adapter = _adapter_for_type(type(obj))  # type: ignore[arg-type]  # classes are hashable
    if adapter is None or adapter.owns(obj):
        return None
    return adapter.from_scalar(obj)


def framework_of(array: Any) -> str:
    """The framework name (``"numpy"``, ``"torch"``...) of ``array``."""
    return adapter_for(array).name


@lru_cache(maxsize=16)
def protocol_hook(name: str) -> tuple[str, ProtocolHook]:
    """The framework that declares protocol ``name`` (``"__torch_function__"``...) and
    its declaration (:class:`~dlmg.adapters.ProtocolHook`), from which
    ``dlmg._protocols`` builds the answer :class:`~dlmg.DistributedTensor`'s method
    of that name gives: from the adapter registered last that declares it in
    ``traits.protocols``, else from the built-in adapter :data:`BUILTIN_PROTOCOLS` names,
    loaded now (the framework asking is in use).

    Raises
    ------
    FrameworkError
        For a protocol no adapter declares.
    """
    for adapter in reversed(list(_REGISTERED.values())):
        for hook in adapter.traits.protocols:
            if hook.name == name:
                return adapter.name, hook
    framework = BUILTIN_PROTOCOLS.get(name)
    if framework is None:
        raise FrameworkError(f"no framework adapter answers the protocol {name!r}")
    adapter = get_adapter(framework)
    for hook in adapter.traits.protocols:
        if hook.name == name:
            return adapter.name, hook
    raise FrameworkError(f"the {framework} adapter declares no protocol {name!r}")


native_device.provide(device_from_native)  # as_device of a framework's device object
