"""torch's compiler for elementwise work: ``torch.compile``, where it can build here.

The :class:`~dlmg.adapters.capabilities.CompiledElementwise` side of the torch adapter.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any

from dlmg.device import Device

def _compiler_missing(device: Device) -> str:
    """Why ``torch.compile`` cannot build kernels for ``device`` here ("" when it can)."""
    if device.kind == "cuda":
        return "" if importlib.util.find_spec("triton") is not None else "torch.compile needs triton for CUDA"
    if device.kind == "cpu":
        compilers = (os.environ.get("CXX", ""), "g++", "c++", "clang++")
        found = any(shutil.which(c) for c in compilers if c)
        return "" if found else "torch.compile needs a C++ compiler for the host"
    return f"torch.compile has no backend dlmg trusts for {device.kind}"


class _CombinedFirst:
    """A ``torch.compile`` kernel built with inductor's combo kernels, falling back
    to the plain build where that one fails.

    Combo kernels launch the independent kernels of one graph (one per
    fragment, when a device's fragments run as one compiled call) as a single
    kernel: on an H200, ``a * b + c`` over 8 CUDA fragments of 32 MiB took 264
    against 279 us per call, with 91 against 164 us of host time (one array of
    256 MiB: 258 us). Inductor calls them experimental, so a build they break
    is retried once without them, and that build is kept from then on.
    """

    __slots__ = ("call", "plain")

    def __init__(self, call: Any, plain: Any) -> None:
        self.call = call
        self.plain = plain  # makes the plain build; None once it replaced the combined one

    def __call__(self, *args: Any) -> Any:
        try:
            return self.call(*args)
        except Exception:  # noqa: BLE001 - retried once without combo kernels
            if self.plain is None:
                raise
            self.call, self.plain = self.plain(), None
            return self.call(*args)


def compile_elementwise(torch: Any, xp: Any, fn: Any, device: Device) -> tuple[Any, str]:
    """``torch.compile`` of ``fn(xp, *args)`` where torch's compiler can build for
    ``device`` (CUDA: Triton installed; host: a C++ compiler on the path); eager
    otherwise (the second value says which)."""

    def kernel(*args: Any) -> Any:
        return fn(xp, *args)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    missing = _compiler_missing(device)
    if missing:
        return kernel, f"eager ({missing})"
    if device.kind != "cuda":
        return torch.compile(kernel), "torch.compile"

    def plain_kernel(*args: Any) -> Any:  # its own code object: dynamo keeps compiled code per code object
        return fn(xp, *args)

    plain_kernel.__name__ = kernel.__name__
    combined = torch.compile(kernel, options={"combo_kernels": True})
    return _CombinedFirst(combined, lambda: torch.compile(plain_kernel)), "torch.compile"
