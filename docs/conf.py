"""Sphinx configuration of dlmg's documentation site (MyST Markdown pages)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))
# The API pages import dlmg and the adapters; JAX shows 8 host devices for the pictures' examples.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("MPLBACKEND", "Agg")

project = "dlmg"
author = "The dlmg authors"
copyright = "The dlmg authors"  # noqa: A001 - Sphinx's name
try:
    from dlmg import __version__ as release
except ImportError:  # building the docs without dlmg installed
    release = "0.1.0"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "layout_pictures",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_ext", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

html_theme = "alabaster"
html_title = f"dlmg {release}"
html_static_path: list[str] = []

# Attribute sections become :ivar: fields, so dataclass fields are not described twice.
napoleon_use_ivar = True
# "dtype" in a parameter's type means any spelling of a data type, not one of dlmg's attributes.
napoleon_preprocess_types = True
napoleon_type_aliases = {"dtype": "data type", "dtype-like": "data type"}
