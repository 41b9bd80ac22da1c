"""PyCapsule plumbing through ``ctypes.pythonapi``.

Every C API function is bound through a private prototype with explicit
``argtypes``/``restype``: the shared ``ctypes.pythonapi.<name>`` objects are
global mutable state that other libraries reconfigure.

Capsule names are stored by address, not copied, by CPython, so the names dlmg
gives capsules live in C strings that are never freed (not even at interpreter
shutdown, when a capsule may outlive this module).
"""

from __future__ import annotations

import ctypes
from ctypes import c_char_p, c_int, c_void_p, py_object

from ..errors import DLPackError
from .abi import (
    CAPSULE_NAME,
    CAPSULE_NAME_VERSIONED,
    USED_CAPSULE_NAME,
    USED_CAPSULE_NAME_VERSIONED,
)
from .abi import READ_ONLY, DLManagedTensorVersioned

__all__ = [
    "is_capsule",
    "capsule_name",
    "capsule_pointer",
    "new_capsule",
    "mark_consumed",
    "mark_readonly",
    "name_address",
    "CAPSULE_TYPE",
]

_API = ctypes.pythonapi


def _bind(name: str, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, _API))


_Py_IncRef = _bind("Py_IncRef", None, py_object)
_PyCapsule_New = _bind("PyCapsule_New", py_object, c_void_p, c_void_p, c_void_p)
_PyCapsule_GetName = _bind("PyCapsule_GetName", c_char_p, py_object)
_PyCapsule_GetPointer = _bind("PyCapsule_GetPointer", c_void_p, py_object, c_void_p)
_PyCapsule_SetName = _bind("PyCapsule_SetName", c_int, py_object, c_void_p)
_PyCapsule_IsValid = _bind("PyCapsule_IsValid", c_int, py_object, c_void_p)


def _immortal_cstring(text: bytes) -> int:
    buf = ctypes.create_string_buffer(text)
    _Py_IncRef(buf)  # deliberately leaked: capsules keep pointing at it
    return ctypes.addressof(buf)


_NAMES: dict[bytes, int] = {
    name: _immortal_cstring(name)
    for name in (CAPSULE_NAME, CAPSULE_NAME_VERSIONED, USED_CAPSULE_NAME, USED_CAPSULE_NAME_VERSIONED)
}

#: The type of PyCapsule objects (``types.CapsuleType`` from Python 3.13 on).
CAPSULE_TYPE: type = type(_PyCapsule_New(1, None, None))


def name_address(name: bytes) -> int:
    """Address of dlmg's never-freed C string for one of the protocol's names.

    Parameters
    ----------
    name : bytes
        ``b"dltensor"``, ``b"dltensor_versioned"`` or their ``used_`` forms.

    Returns
    -------
    int
        A ``const char *`` that stays valid for the life of the process.
    """
    return _NAMES[name]


def is_capsule(obj: object) -> bool:
    """Whether ``obj`` is exactly a PyCapsule."""
    return type(obj) is CAPSULE_TYPE


def capsule_name(capsule: object) -> bytes | None:
    """The name of a capsule (``None`` for an unnamed one).

    Raises
    ------
    DLPackError
        When ``capsule`` is not a PyCapsule.
    """
    if not is_capsule(capsule):
        raise DLPackError(f"expected a PyCapsule, got {type(capsule).__name__}")
    return _PyCapsule_GetName(capsule)


def capsule_pointer(capsule: object, name: bytes) -> int:
    """The pointer stored in ``capsule``, which must be named ``name``.

    Raises
    ------
    DLPackError
        When the capsule has another name or a NULL pointer.
    """
    if not is_capsule(capsule) or not _PyCapsule_IsValid(capsule, _NAMES[name]):
        raise DLPackError(
            f"capsule {capsule!r} is not a valid {name.decode()!r} capsule "
            f"(its name is {capsule_name(capsule) if is_capsule(capsule) else None!r})"
        )
    return int(_PyCapsule_GetPointer(capsule, _NAMES[name]))


def new_capsule(address: int, versioned: bool) -> object:
    """A fresh ``dltensor[_versioned]`` capsule around a managed tensor.

    The capsule has no destructor: whoever creates it stays responsible for
    the managed tensor until a consumer renames the capsule (dlmg's exporter
    does this through its registry, see :mod:`dlmg.dlpack.exporter`).

    Parameters
    ----------
    address : int
        Address of a ``DLManagedTensor`` (legacy) or
        ``DLManagedTensorVersioned``; must not be 0.
    versioned : bool
        Which of the two the address points to; selects the capsule name.
    """
    if not address:
        raise ValueError("a DLPack capsule cannot hold a NULL managed tensor")
    name = CAPSULE_NAME_VERSIONED if versioned else CAPSULE_NAME
    return _PyCapsule_New(address, _NAMES[name], None)


def mark_consumed(capsule: object, versioned: bool) -> None:
    """Rename a capsule to ``used_dltensor[_versioned]``, as a consumer must
    before it takes over the deleter."""
    name = USED_CAPSULE_NAME_VERSIONED if versioned else USED_CAPSULE_NAME
    if _PyCapsule_SetName(capsule, _NAMES[name]) != 0:  # pragma: no cover - only for non-capsules
        raise DLPackError("could not rename the DLPack capsule")


def mark_readonly(capsule: object) -> bool:
    """Set ``READ_ONLY`` on an unconsumed versioned capsule before handing it on.

    For memory whose framework cannot say it is read-only (torch holding a
    JAX buffer): consumers that honour the flag (NumPy) then refuse writes.
    Legacy capsules have no flags and are left as they are.

    Returns
    -------
    bool
        Whether the flag could be set.
    """
    if not is_capsule(capsule) or _PyCapsule_GetName(capsule) != CAPSULE_NAME_VERSIONED:
        return False
    managed = DLManagedTensorVersioned.from_address(capsule_pointer(capsule, CAPSULE_NAME_VERSIONED))
    managed.flags = int(managed.flags) | READ_ONLY
    return True
