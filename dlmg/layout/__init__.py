"""Layouts of distributed tensors: cuTENSORMg's block-cyclic descriptor as a
frozen value, its index math and its rendering (text tables and plots)."""

from __future__ import annotations

from .layout import FragmentLayout, Layout

__all__ = ["Layout", "FragmentLayout"]
