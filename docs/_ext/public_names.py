"""Resolve references to dlmg's objects by the name the API reference documents.

Type hints and docstrings name an object where it is defined
(``dlmg.plans.plan.RedistributionPlan``), or by its short name inside another
module (``DistributedTensor`` in ``dlmg.ops.pointwise``), while the reference
documents it once, under its public name (``dlmg.RedistributionPlan``). When
Sphinx finds no target for such a reference, this extension looks for the one
documented Python object that is the same object (same defining module and
qualified name), or failing that the only documented object whose dotted name
ends with the reference. A reference to one of dlmg's real modules or objects
that the reference leaves out on purpose (``dlmg.ops.fft``, a private helper)
is shown as code without a link. An ambiguous or unknown name stays unresolved,
so the nitpicky build still reports a misspelt or stale one.

Names written with the usual import aliases (``np.ndarray``) are looked up in
the other projects' inventories under their full names (``numpy.ndarray``).
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.ext import intersphinx
from sphinx.environment import BuildEnvironment
from sphinx.util.nodes import make_refnode

from dotted_names import MISSING, lookup


def _identity(dotted: str) -> tuple[str, str] | None:
    """(defining module, qualified name) of the object ``dotted`` names, if it imports."""
    obj = lookup(dotted)
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str):
        return module, qualname
    return None


def _exists_in_dlmg(node: pending_xref, target: str) -> bool:
    """Whether ``target``, read in the module and class the reference was written in, is dlmg's."""
    module, cls = node.get("py:module") or "", node.get("py:class") or ""
    scopes = [f"{module}.{cls}" if cls else "", module, ""]
    # A docstring's names are read where its code is written: the defining module of the class.
    defining = getattr(lookup(f"{module}.{cls}"), "__module__", None) if module and cls else None
    if isinstance(defining, str):
        scopes.insert(1, defining)
    for scope in scopes:
        dotted = f"{scope}.{target}" if scope else target
        if dotted.startswith("dlmg.") and lookup(dotted) is not MISSING:
            return True
    return False


def _candidates(env: BuildEnvironment, target: str, role: str) -> list[str]:
    domain = env.get_domain("py")
    kinds = set(domain.objtypes_for_role(role) or ())
    # Aliases (a class's canonical path beside its documented name) are the same entry twice.
    objects = {name: entry for name, entry in domain.objects.items()
               if entry.objtype in kinds and not entry.aliased}
    if not target.startswith("dlmg."):
        return [name for name in objects if name.startswith("dlmg.") and name.endswith("." + target)]
    wanted = _identity(target)
    if wanted is None:
        return []
    same = [name for name in objects if name.startswith("dlmg.") and name.rsplit(".", 1)[-1] == target.rsplit(".", 1)[-1]]
    return [name for name in same if _identity(name) == wanted]


#: The import aliases docstrings and annotations use for other projects' modules.
IMPORT_ALIASES = {"np": "numpy", "jnp": "jax.numpy"}


def resolve(app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element) -> nodes.Element | None:
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "").strip("'\"")
    head, dot, rest = target.partition(".")
    if dot and head in IMPORT_ALIASES:
        spelled_out = node.deepcopy()
        spelled_out["reftarget"] = f"{IMPORT_ALIASES[head]}.{rest}"
        return intersphinx.missing_reference(app, env, spelled_out, contnode)
    if not target or not target.replace(".", "").replace("_", "").isalnum():
        return None
    found = sorted(set(_candidates(env, target, node.get("reftype", ""))))
    if len(found) != 1:
        return contnode if _exists_in_dlmg(node, target) else None
    entry = env.get_domain("py").objects[found[0]]
    if entry.aliased:
        return None
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, found[0])


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("missing-reference", resolve)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
