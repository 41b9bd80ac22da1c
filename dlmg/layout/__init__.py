"""Layouts of distributed tensors: cuTENSORMg's block-cyclic descriptor as a
frozen value, its index math and its rendering (text tables and plots)."""

from __future__ import annotations

from .fragment import FragmentLayout
from .layout import Layout

__all__ = ["Layout", "FragmentLayout"]
