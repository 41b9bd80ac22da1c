"""The one exception hierarchy of dlmg.

Every class derives from :class:`DlmgError` and also from the built-in
exception that the relevant protocol expects, so callers may catch either
(``except dlmg.LayoutError`` or ``except ValueError``).
"""

from __future__ import annotations

__all__ = [
    "DlmgError",
    "LayoutError",
    "LayoutMismatchError",
    "AxisError",
    "DLPackError",
    "CopyRequiredError",
    "DtypeError",
    "DtypeRangeError",
    "DeviceError",
    "FrameworkError",
    "FrameworkNotInstalledError",
    "NotLocalError",
    "FragmentError",
    "ReadOnlyError",
    "UnsupportedDtypeError",
    "ViewNotSupportedError",
    "CollectiveError",
    "CollectiveMismatchError",
    "CheckpointError",
    "CheckpointExistsError",
    "IncompleteCheckpointError",
    "ChunkError",
]


class DlmgError(Exception):
    """Base class of every error raised by dlmg."""


class LayoutError(DlmgError, ValueError):
    """An invalid layout descriptor (names the field, the mode and the value)."""


class LayoutMismatchError(DlmgError, ValueError):
    """Operands whose layouts differ where identical layouts are required.

    The message names both layouts and points to ``redistribute``.
    """


class AxisError(DlmgError, ValueError, IndexError):
    """An ``axis`` (``axes``) argument out of range for the tensor's number of modes, or
    naming one mode twice. Also a ``ValueError`` and an ``IndexError``, as NumPy's
    ``AxisError`` is."""


class DLPackError(DlmgError, BufferError):
    """A DLPack producer handed over something dlmg cannot use, or dlmg cannot
    export what was asked for (the protocol's ``BufferError``)."""


class CopyRequiredError(DLPackError):
    """``copy=False`` was requested but the exchange would need a copy."""


class DtypeError(DlmgError, TypeError):
    """An unknown, unsupported or mismatched element type."""


class DtypeRangeError(DtypeError, ValueError, OverflowError):
    """A value the element type cannot represent (``full(layout, 300, "int8")``).

    The message names the value, the type and its range. Also a
    ``ValueError`` and an ``OverflowError``, what NumPy raises for the same
    conversion."""


class DeviceError(DlmgError, ValueError):
    """An unknown device, or an array on a device other than the expected one."""


class FrameworkError(DlmgError, TypeError):
    """An array of an unknown framework, or an unknown framework name."""


class NotLocalError(DlmgError, ValueError):
    """A call that needs every value of a tensor in this process, made on a tensor
    whose fragments lie partly in other processes; the message names the collective
    (``gather``) that makes it whole."""


class FrameworkNotInstalledError(DlmgError, ImportError):
    """The framework asked for is not installed; the message says what to install."""


class FragmentError(DlmgError, ValueError):
    """A fragment does not fit its slot (count, shape, dtype, device or rank),
    or work on one fragment failed (the message names the fragment, its device
    and its framework)."""


class ReadOnlyError(DlmgError, ValueError):
    """A write into memory that must not be written: a read-only NumPy array,
    a JAX buffer, a DLPack tensor marked ``READ_ONLY``, or any fragment handed
    on from one of them (``Fragment.readonly``). Raised before anything is
    written; also a ``ValueError``, as NumPy's own refusal."""


class UnsupportedDtypeError(DtypeError, DLPackError):
    """An element type a framework cannot import or export through DLPack
    (NumPy and bfloat16). Both a ``TypeError`` and the ``BufferError`` the
    DLPack protocol prescribes for an export that cannot be done."""


class ViewNotSupportedError(FrameworkError, NotImplementedError):
    """The framework cannot make a strided view of existing memory or write
    into an array in place (JAX). Also a ``NotImplementedError``, so generic
    code can fall back to a copy."""


class CollectiveError(DlmgError, RuntimeError):
    """A collective across processes failed: a process raised while preparing it,
    left, or did not arrive within the timeout (the message names the rank where
    it is known)."""


class CollectiveMismatchError(CollectiveError, ValueError):
    """Processes called different collectives, or the same one on different
    layouts, dtypes or arguments (SPMD broken); the message shows both sides."""


class CheckpointError(DlmgError, ValueError):
    """A path that holds no dlmg checkpoint, or a checkpoint that does not fit the
    request (the message names the path, the field and the value)."""


class CheckpointExistsError(CheckpointError, FileExistsError):
    """:func:`dlmg.save` onto a path that already holds something, without
    ``overwrite=True`` (or onto something that is no dlmg checkpoint, which is
    never replaced)."""


class IncompleteCheckpointError(CheckpointError):
    """A checkpoint whose save did not finish: its commit marker is missing.
    Nothing of it is read."""


class ChunkError(CheckpointError):
    """A chunk of a saved array is missing, truncated or fails its checksum; the
    message names the chunk's key and file."""
