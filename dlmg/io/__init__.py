"""Saving and loading distributed tensors as Zarr v3 (see ``docs/saving.md``).

* :func:`save` writes a tensor, or a dict of tensors, from every process at
  once: one chunk per block of its layout, each written by its owner, with a
  checksum; published atomically when all processes are done;
* :func:`load` reads it back into any layout, framework and number of
  processes, each process reading only the chunks its fragments need;
* :func:`saved_layout` tells the layout a checkpoint was saved from.

The modules: :mod:`.format` (the metadata, as values), :mod:`.store` (the
Zarr library), :mod:`.publish` (staging, commit marker, atomic rename),
:mod:`.locks` (one save of a path at a time, loads that pin one generation),
:mod:`.host` (host bytes of fragments), :mod:`.geometry` (a fragment's
indices), :mod:`.steps` (agreement across processes), :mod:`.save`,
:mod:`.load`.
"""

from __future__ import annotations

from .load import load, saved_layout
from .save import save

__all__ = ["save", "load", "saved_layout"]
