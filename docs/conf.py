"""Sphinx configuration of dlmg's documentation site (MyST Markdown pages)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

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
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "layout_pictures",
    "public_names",
]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "_ext", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
# types only for the parameters a docstring documents: a dataclass's private fields stay out
autodoc_typehints_description_target = "documented_params"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# JAX's theme: one navigation (the table of contents on the left, the page's own sections
# on the right), no header menu.
html_theme = "sphinx_book_theme"
html_title = f"dlmg {release}"
html_static_path = ["_static"]
html_css_files = ["dlmg.css"]
html_theme_options = {
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "use_download_button": False,
    "use_fullscreen_button": False,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False

# Attribute sections become :ivar: fields, so dataclass fields are not described twice.
napoleon_use_ivar = True
# "dtype" in a parameter's type means any spelling of a data type, not one of dlmg's attributes.
napoleon_preprocess_types = True
napoleon_type_aliases = {
    "dtype": "data type", "dtype-like": "data type",
    # numpydoc's spellings of Python's abstract types link to Python's glossary.
    "sequence": ":term:`sequence <python:sequence>`", "iterable": ":term:`iterable <python:iterable>`",
    "mapping": ":term:`mapping <python:mapping>`", "callable": ":term:`callable <python:callable>`",
    "np.ndarray": "numpy.ndarray",
}

# Every reference must resolve (a misspelt or undocumented dlmg name fails the build) ...
autosummary_generate = False

nitpicky = True
# ... except the words docstrings use for kinds of values rather than for a class.
nitpick_ignore = [("py:class", word) for word in (
    "data type", "array", "arrays", "scalar", "0-d array", "buffer", "numpy integer",
    "any framework's dtype", "a framework's device object", "a registered engine name",
)]

# Links into Python's, NumPy's, PyTorch's and JAX's own references. Their inventories are
# fetched from the web at build time; a project whose site cannot be reached (a machine with
# no network) is left out of the mapping instead of failing the build, and its names are then
# shown unlinked. DLMG_DOCS_INVENTORIES names a folder of local inventories (python.inv,
# numpy.inv, torch.inv, jax.inv) to use first, e.g. copies kept for building offline.
EXTERNAL = {
    "python": "https://docs.python.org/3/",
    "numpy": "https://numpy.org/doc/stable/",
    "torch": "https://docs.pytorch.org/docs/stable/",
    "jax": "https://docs.jax.dev/en/latest/",
}
#: Module prefixes of those projects (and of others dlmg's signatures name, which have no
#: inventory here): an unresolved reference to them is not an error, only an unlinked name.
EXTERNAL_MODULES = (
    "numpy", "np", "torch", "jax", "jaxlib", "collections", "contextlib", "ctypes", "typing",
    "types", "matplotlib", "mpi4py", "cupy", "DTensor", "False", "True", "None",
)
# Python's standard library (os.PathLike, collections.abc.Sequence...) is external too.
EXTERNAL_MODULES += tuple(sorted(sys.stdlib_module_names))
nitpick_ignore_regex = [
    (r"py:.*", rf"({'|'.join(EXTERNAL_MODULES)})(\..*)?"),
    (r"std:term", r"python:.*"),
    (r"py:data", r"CUTENSOR_.*"),  # the cuTENSORMg library's own constants
]
intersphinx_timeout = 10


def _reachable(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    try:
        with socket.create_connection((host, 443), timeout=3):
            return True
    except OSError:
        return False


def _inventories() -> dict[str, tuple[str, object]]:
    local = os.environ.get("DLMG_DOCS_INVENTORIES")
    mapping: dict[str, tuple[str, object]] = {}
    for name, url in EXTERNAL.items():
        copy = Path(local, f"{name}.inv") if local else None
        if copy is not None and copy.is_file():
            mapping[name] = (url, str(copy))
        elif _reachable(url):
            mapping[name] = (url, None)
    return mapping


intersphinx_mapping = _inventories()


def _attribute_summaries_are_prose(app, what, name, obj, options, lines):
    """Keep a colon in the first line of an attribute's docstring as text.

    Napoleon reads ``Address of the first element: ...`` as an inline
    ``type: description`` pair; dlmg's attributes and properties take their
    types from annotations, so their first line is always prose.
    """
    if what in {"attribute", "data", "property"} and lines and ":" in lines[0]:
        lines[0] = ": " + lines[0]


def _no_private_parameters(app, what, name, obj, options, signature, return_annotation):
    """Leave a class's private fields (``_by_dst=<factory>`` of a dataclass) out of the
    signature the reference shows: they are no argument a user passes."""
    if what != "class" or not signature or "_" not in signature:
        return None
    inner = signature[1:-1]
    parts, depth, current = [], 0, ""
    for ch in inner:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch in "([{" and 1 or 0
        depth -= ch in ")]}" and 1 or 0
        current += ch
    parts.append(current)
    kept = [part for part in parts if not part.strip().lstrip("*").startswith("_")]
    return "(" + ",".join(kept).strip() + ")", return_annotation


def setup(app):
    # Before napoleon's own handler (priority 500) turns the docstring into fields.
    app.connect("autodoc-process-docstring", _attribute_summaries_are_prose, priority=400)
    app.connect("autodoc-process-signature", _no_private_parameters)
