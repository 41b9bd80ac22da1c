"""torch's DLPack export: CUDA capsules made without ``Tensor.__dlpack__``'s Python
where nothing is left to order, and the stream a CUDA consumer names.

The :class:`~dlmg.adapters.capabilities.QuickExport` side of the torch adapter.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any, Callable

from .._common import ALREADY_CURRENT

def current_device(torch: Any) -> Any:
    """``torch.cuda.current_device`` without its lazy-initialisation check, for callers
    holding a CUDA tensor (so CUDA is initialised): on an H200 host the check made it
    cost 0.6 us, asked once per export of a CUDA fragment. The public function where
    torch lacks the binding."""
    return getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


@lru_cache(maxsize=1)
def capsule_makers(torch: Any) -> Any:
    """torch's own capsule makers of ``Tensor.__dlpack__``, its current-stream query and
    its test for ``__torch_function__`` overrides (``_to_dlpack``, ``_to_dlpack_versioned``,
    ``_cuda_getCurrentRawStream``, ``_has_torch_function_unary``); ``None`` where this
    torch lacks one or runs on ROCm. Looked up once: asked per export of a CUDA fragment."""
    if torch.version.hip is not None:
        return None
    names = ("_to_dlpack", "_to_dlpack_versioned", "_cuda_getCurrentRawStream", "_has_torch_function_unary")
    calls = tuple(getattr(torch._C, name, None) for name in names)
    return calls if all(callable(call) for call in calls) else None


def _same_stream_export(
    torch: Any, tensor: Any, index: int, slow: Callable[..., Any], *, stream: Any = -1, max_version: Any = None,
    dl_device: Any = None, copy: Any = None,
) -> Any:
    """Export CUDA tensor ``tensor`` (of type ``torch.Tensor`` itself, on device
    ``index``) as ``Tensor.__dlpack__`` does, making the capsule without its
    Python checks where nothing is left to order: the tensor plain (no grad,
    no lazy conjugate bit, strided, no ``__torch_function__`` mode or override
    in force) and on the current device, and the consumer's stream torch's
    current one there (``None`` and ``1`` name the legacy default stream, as
    in ``__dlpack__``). Anything else, another stream included, goes to
    ``slow(**keywords)``, which orders the streams or refuses.

    On an H200 host ``Tensor.__dlpack__`` cost about 12 us a call, most of it
    finding streams and devices in Python; a consumer's import of a torch
    array is mostly that.
    """
    legacy, versioned, raw_stream, overridden = capsule_makers(torch)
    if (
        tensor.requires_grad or tensor.is_conj() or tensor.layout is not torch.strided or overridden(tensor)
        or current_device(torch)() != index
        or copy or (dl_device is not None and tuple(dl_device) != (2, index))
        or (type(stream) is not int and stream is not None) or stream in (0, 2)  # (torch refuses 0 and 2)
        or (stream != -1 and (0 if stream is None or stream == 1 else stream) != raw_stream(index))
    ):
        return slow(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
    return versioned(tensor) if max_version is not None and max_version[0] >= 1 else legacy(tensor)


def quick_export(torch: Any, tensor: Any, slow: Callable[..., Any]) -> Callable[..., Any] | None:
    """:func:`_same_stream_export` bound to CUDA tensor ``tensor`` (``slow`` for the
    rest), or ``None`` where it does not apply (a subclass of ``torch.Tensor``,
    whose ``__dlpack__`` may differ; a torch without the capsule makers)."""
    if type(tensor) is not torch.Tensor or capsule_makers(torch) is None:
        return None
    return partial(_same_stream_export, torch, tensor, tensor.get_device(), slow)


def plain(tensor: Any) -> bool:
    """Whether a host tensor exports as it is: no grad to detach, no lazy conjugate bit."""
    return not (tensor.requires_grad or tensor.is_conj())


def current(torch: Any, index: int) -> Any:
    """A context making CUDA device ``index`` current: nothing to enter when it is
    already (asking which device is current costs less than switching to it)."""
    return ALREADY_CURRENT if torch.cuda.current_device() == index else torch.cuda.device(index)


def consumer_stream(torch: Any, index: int) -> int:
    """The stream torch names to a CUDA producer on device ``index`` in
    ``torch.from_dlpack``: its current stream there, ``1`` for the legacy default
    stream (which the array API numbers 1, not 0). Asked through torch's raw
    query where it has one (:func:`capsule_makers`), as the quick export asks it:
    ``torch.cuda.current_stream`` builds a ``Stream`` object on every call."""
    makers = capsule_makers(torch)
    handle = makers[2](index) if makers is not None else torch.cuda.current_stream(index).cuda_stream
    return 1 if handle == 0 else handle
