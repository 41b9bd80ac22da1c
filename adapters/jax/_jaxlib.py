"""JAX's DLPack calls without their Python wrappers, and what JAX's DLPack needs asked once.

``jax.dlpack.from_dlpack`` and ``jax.Array.__dlpack__`` spend most of their time
in Python around one jaxlib call each (35 against 4.2 us per import, 2.4 against
0.46 us per export, on the 2-core CPU). JAX's public API has no call taking a
capsule (``jax.dlpack`` offers ``from_dlpack`` of a producer only), so the
quick route reaches jaxlib's extension module ``jaxlib._jax`` itself; jaxlib is
a dependency of every JAX, and ``jax._src`` is not imported.
``tests/test_adapters.py::test_jax_public_dlpack_api_takes_no_capsule`` pins
why: when JAX's public API gains such a call, it fails, naming it.

The route is taken only where jaxlib's release has the signatures known here
(:data:`JAXLIB_WITH_ROUTE`) and is turned off for the process by the first call
that refuses its arguments (:class:`_Route`).
"""

from __future__ import annotations

import importlib
import inspect
from functools import lru_cache, partial
from typing import Any

__all__ = ["JAXLIB_WITH_ROUTE", "buffer_import", "host_slot", "quick_exporter", "ready_stream",
           "takes_every_keyword", "turn_off_import"]

#: The oldest jaxlib release whose ``dlpack_managed_tensor_to_buffer(capsule, device,
#: stream, copy, dlpack_device_type)`` and ``buffer_to_dlpack_managed_tensor(array,
#: stream=...)`` are the ones called here (its extension version 467).
JAXLIB_WITH_ROUTE = (0, 10, 2)


def _release(version: str) -> tuple[int, ...]:
    """``"0.10.2"`` as ``(0, 10, 2)`` (a pre-release suffix dropped)."""
    parts = []
    for part in version.split(".")[:3]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def _find_jaxlib_call(name: str) -> Any:
    """jaxlib's ``name`` where this jaxlib's release has the signatures known here;
    ``None`` elsewhere, or without it."""
    try:
        jaxlib = importlib.import_module("jaxlib")
        extension = importlib.import_module("jaxlib._jax")
    except ImportError:
        return None
    if _release(str(getattr(jaxlib, "__version__", "0"))) < JAXLIB_WITH_ROUTE:
        return None
    found = getattr(extension, name, None)
    return found if callable(found) else None


class _Route:
    """jaxlib's DLPack import and export, looked up on first use; each set to ``None``
    for the rest of the process when a call refuses its arguments (a jaxlib with
    another signature): the public calls from then on. Not a cache: a switch."""

    __slots__ = ("importer", "exporter", "found")

    def __init__(self) -> None:
        self.importer: Any = None
        self.exporter: Any = None
        self.found = False

    def find(self) -> "_Route":
        if not self.found:
            self.importer = _find_jaxlib_call("dlpack_managed_tensor_to_buffer")
            self.exporter = _find_jaxlib_call("buffer_to_dlpack_managed_tensor")
            self.found = True
        return self


_ROUTE = _Route()


def buffer_import() -> Any:
    """jaxlib's DLPack import, ``dlpack_managed_tensor_to_buffer(capsule, device,
    stream, copy, dlpack_device_type)``: the call ``jax.dlpack.from_dlpack`` ends
    in; ``None`` where none is usable."""
    return _ROUTE.find().importer


def turn_off_import() -> None:
    """Import through ``jax.dlpack.from_dlpack`` from now on (jaxlib's call refused its arguments)."""
    _ROUTE.importer = None


#: The oldest DLPack a consumer may name in ``max_version`` for JAX's capsules
_OLDEST_DLPACK = (0, 5)
#: The keywords of ``__dlpack__`` (the array API's)
_DLPACK_KEYWORDS = frozenset({"stream", "max_version", "dl_device", "copy"})


def _jaxlib_export(array: Any, own: Any, **keywords: Any) -> Any:
    """Export single-device array ``array`` through jaxlib's DLPack export, as
    ``array.__dlpack__`` does after its checks, for what a consumer asks of an
    array where it lies: a stream and a DLPack version JAX has (its capsules
    are legacy ones). ``own(**keywords)``, the array's own export, takes the
    rest: another device, a copy, another version, unknown keywords.

    ``jax.Array.__dlpack__`` cost 2.4 us against 0.46 us for jaxlib's call on
    the 2-core CPU, most of it finding the array's one device in Python."""
    make = _ROUTE.exporter
    if (
        make is not None and keywords.keys() <= _DLPACK_KEYWORDS
        and keywords.get("dl_device") is None and not keywords.get("copy")
    ):
        version = keywords.get("max_version")
        if version is None or tuple(version) >= _OLDEST_DLPACK:
            try:
                return make(array, stream=keywords.get("stream"))
            except TypeError:  # another signature after all: the array's own export from now on
                _ROUTE.exporter = None
    return own(**keywords)


def quick_exporter(array: Any, own: Any) -> Any:
    """:func:`_jaxlib_export` bound to ``array`` and its own export ``own``; ``None``
    where jaxlib's export is not usable or ``array`` is no single-device array."""
    if _ROUTE.find().exporter is None:
        return None
    try:
        if len(array.sharding.device_set) != 1:
            return None
    except Exception:  # noqa: BLE001 - no jax.Array after all: its own export says what it is
        return None
    return partial(_jaxlib_export, array, own)


def ready_stream(jdev: Any) -> Any:
    """The stream a producer makes its work ready on for JAX device ``jdev``, as
    ``jax.dlpack.from_dlpack`` asks it (``None`` where the device has none)."""
    try:
        return jdev.get_stream_for_external_ready_events()
    except RuntimeError as err:  # JaxRuntimeError
        if "UNIMPLEMENTED" in str(err):
            return None
        raise


@lru_cache(maxsize=16)
def takes_every_keyword(cls: Any) -> bool:
    """Whether ``cls.__dlpack__`` takes ``stream``, ``max_version``, ``dl_device`` and
    ``copy``, as recent JAX's does; read from its signature once per array type
    (reading a signature costs 41 us, the remembered answer 0.06 us, on the 2-core CPU, asked per fragment)."""
    try:
        parameters = inspect.signature(cls.__dlpack__).parameters
    except (TypeError, ValueError):  # no signature to read: take the fallback
        return False
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()) or (
        {"stream", "max_version", "dl_device", "copy"} <= parameters.keys()
    )


@lru_cache(maxsize=64)
def host_slot(jdev: Any) -> tuple[int, int]:
    """The DLPack device naming JAX CPU device ``jdev``: ``(1, ordinal in this process)``,
    not its global id, which differs in multi-controller JAX; asked per host import
    (JAX devices are hashable and live as long as the backend): worked out anew 0.25 us, remembered 0.06 us on the 2-core CPU."""
    ordinal = getattr(jdev, "local_hardware_id", None)
    return (1, int(jdev.id if ordinal is None else ordinal))
