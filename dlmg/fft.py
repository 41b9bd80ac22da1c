"""Batch-local FFTs on distributed tensors (``dlmg.fft.fft``, ``ifft``, ``rfft``, ``irfft``).

See :mod:`dlmg.ops.fft` for the rules: the transformed mode must be whole in
every fragment, the other modes may be distributed, each fragment's framework
transforms its own signals.
"""

from __future__ import annotations

from .ops.fft import fft, ifft, irfft, rfft

__all__ = ["fft", "ifft", "rfft", "irfft"]
