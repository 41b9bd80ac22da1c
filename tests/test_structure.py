"""The package's structure: imports run one way.

An AST scan of ``dlmg/``: no module imports another module of dlmg inside a
function (imports inside functions are for optional frameworks only), and the
modules' top-level imports, those of the adapters (``dlmg.adapters``, kept in
``adapters/``) included, form no circle. Imports under ``if TYPE_CHECKING:``
do not run and are left out.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / "dlmg"
ADAPTERS = ROOT.parent / "adapters"  # installed as dlmg.adapters


def _module_name(path: pathlib.Path) -> str:
    if path.is_relative_to(ADAPTERS):
        parts = ["dlmg", "adapters", *path.relative_to(ADAPTERS).with_suffix("").parts]
    else:
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted([*ROOT.rglob("*.py"), *ADAPTERS.rglob("*.py")])}


def _package(name: str) -> str:
    return name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The dlmg modules an import statement of ``module`` loads."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "dlmg"]
    if node.level:
        base = _package(module)
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        base = f"{base}.{node.module}" if node.module else base
    else:
        base = node.module or ""
    if base.split(".")[0] != "dlmg":
        return []
    found = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
    if len(found) < len(node.names):
        found.append(base)
    return found


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported (those in functions excluded)."""
    out: list[ast.Import | ast.ImportFrom] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(node)
        elif isinstance(node, (ast.If, ast.Try, ast.With)) and not _is_type_checking(node):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []))
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)
        elif isinstance(node, ast.ClassDef):
            todo.extend(node.body)
    return out


def import_graph() -> dict[str, set[str]]:
    """dlmg module -> the dlmg modules its import statements load."""
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[name] = {t for node in _top_level_imports(tree) for t in _targets(name, node) if t != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return circles


def lazy_imports() -> list[str]:
    """``path:line module`` for every import of a dlmg module inside a function."""
    out = []
    for name, path in MODULES.items():
        if not path.is_relative_to(ROOT):
            continue  # dlmg/ only: the adapters in adapters/ are checked for circles above
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and _targets(name, node):
                        out.append(f"{path.relative_to(ROOT.parent)}:{node.lineno} {', '.join(_targets(name, node))}")
    return sorted(set(out))


def test_the_scan_sees_imports():
    graph = import_graph()
    assert "dlmg.movement.relayout" in graph["dlmg.movement"]
    assert "dlmg.errors" in graph["dlmg.movement.destinations"]
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle():
    circles = import_circles(import_graph())
    assert not circles, "import circles among dlmg modules:\n" + "\n".join(" -> ".join(c) for c in circles)


#: What the adapters may import of dlmg: the layers below them (values, devices,
#: dtypes, DLPack). The registry imports the adapters, never the other way, and no
#: adapter imports the tensor layer (its protocol policy is built in dlmg._protocols
#: from the facts the adapters declare).
ADAPTERS_MAY_IMPORT = ("dlmg.adapters", "dlmg.errors", "dlmg.device", "dlmg.dtypes", "dlmg.dlpack")


def _imports_above(name: str, tree: ast.Module) -> list[str]:
    """``module -> target`` for each import of adapter module ``name`` (top level or inside
    a function; under ``TYPE_CHECKING`` left out) that reaches above the adapters."""
    hidden = {id(n) for node in tree.body if _is_type_checking(node) for n in ast.walk(node)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in hidden:
            for target in _targets(name, node):
                if not any(target == ok or target.startswith(ok + ".") for ok in ADAPTERS_MAY_IMPORT):
                    out.append(f"{name} -> {target}")
    return out


def adapter_imports_above() -> list[str]:
    """Every import of a module under adapters/ that reaches above the adapters."""
    out = []
    for name, path in MODULES.items():
        if path.is_relative_to(ADAPTERS):
            out.extend(_imports_above(name, ast.parse(path.read_text(), str(path))))
    return sorted(out)


def test_adapters_import_nothing_above_them():
    """No module under adapters/ imports dlmg's registry or tensor layer (``_protocols``,
    the tensor, ops, movement...): imports run one way, registry above adapters."""
    assert adapter_imports_above() == []
    graph = import_graph()
    assert "dlmg.adapters" in graph["dlmg.registry"]  # the registry reads the adapters' table


def test_the_adapter_import_scan_can_fail():
    """The scan flags an adapter importing the registry or the protocol policy, in a
    function too, and lets the layers below through."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from dlmg.errors import DtypeError\n"
        "from .._common import BaseAdapter\n"
        "if TYPE_CHECKING:\n"
        "    from dlmg.layout import Layout\n"
        "def f():\n"
        "    from dlmg.registry import get_adapter\n"
        "from dlmg._protocols import function_hook\n"
    )
    found = _imports_above("dlmg.adapters.torch", ast.parse(source))
    assert sorted(found) == ["dlmg.adapters.torch -> dlmg._protocols", "dlmg.adapters.torch -> dlmg.registry"]


def test_no_dlmg_import_inside_functions():
    found = lazy_imports()
    assert not found, f"{len(found)} imports of dlmg modules inside functions:\n" + "\n".join(found)


def _class_body_names(cls: type) -> set[str]:
    """Names a class statement defines in its body (methods, properties, assignments)."""
    path = pathlib.Path(sys.modules[cls.__module__].__file__ or "")
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.add(item.name)
                elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    names.update(t.id for t in targets if isinstance(t, ast.Name))
            return names
    raise AssertionError(f"no class statement of {cls.__name__} in {path}")


def attached_from_outside() -> dict[str, str]:
    """Attributes of DistributedTensor and its dlmg bases that no class body defines: name -> module."""
    import dlmg

    implicit = {"__module__", "__dict__", "__weakref__", "__doc__", "__qualname__", "__annotations__",
                "__firstlineno__", "__static_attributes__", "__slots__", "__annotate__", "__annotate_func__",
                "__annotations_cache__", "__slotnames__"}  # (copyreg adds __slotnames__ on a copy)
    out = {}
    for cls in dlmg.DistributedTensor.__mro__:
        if cls is object:
            continue
        defined = _class_body_names(cls)
        for name, value in vars(cls).items():
            if name not in defined and name not in implicit:
                fn = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
                out[name] = getattr(fn, "__module__", "?")
    return out


def test_the_tensor_surface_is_in_the_class():
    """Nothing of dlmg (adapters included) attaches attributes to the tensor class from outside."""
    # (packages outside dlmg may add methods through register_method: the docs show one)
    attached = {n: m for n, m in attached_from_outside().items() if m.startswith("dlmg")}
    assert not attached, attached


def test_every_method_is_a_def_in_the_class_body():
    """Every public method, property and operator of DistributedTensor is a ``def`` in the
    class body of dlmg/tensor.py (a reader greps ``def __add__`` and finds it there), with
    a docstring; only the frameworks' protocols (dlmg._protocols) and the data the layers
    below build (dlmg.base) come from its bases."""
    import dlmg
    from dlmg._protocols import FrameworkProtocols
    from dlmg.base import TensorBase

    cls = dlmg.DistributedTensor
    tree = ast.parse(pathlib.Path(sys.modules[cls.__module__].__file__ or "").read_text())
    (body,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls.__name__]
    defs = {n.name for n in body.body if isinstance(n, ast.FunctionDef)}
    inherited = set(vars(FrameworkProtocols)) | set(vars(TensorBase)) | set(vars(object))
    public = {n for n in dir(cls) if not n.startswith("_")}
    dunders = {n for n in vars(cls) if n.startswith("__") and callable(getattr(cls, n, None))}
    def outside(name: str) -> bool:  # attached through register_method by code outside dlmg
        value = vars(cls).get(name)
        value = getattr(value, "fget", value)
        return not str(getattr(value, "__module__", "dlmg")).startswith("dlmg")

    missing = sorted(n for n in public | dunders if n not in defs and n not in inherited and not outside(n))
    assert not missing, f"not a def in the body of DistributedTensor: {missing}"
    assert {"__add__", "__radd__", "__iadd__", "__matmul__", "sum", "redistribute", "gather"} <= defs
    undocumented = sorted(n for n in defs if not n.startswith("_") and not (getattr(cls, n).__doc__ or "").strip())
    assert not undocumented, undocumented
    assert not {n for n in vars(TensorBase) if not n.startswith("_")}, "the base holds data, not methods"
    assert cls.__hash__ is object.__hash__  # == is elementwise; identity hashing


def test_the_tensor_sits_above_the_parts_it_calls():
    """dlmg.tensor imports the parts its methods call, so none of them (nor anything they
    import) may import it back: the circle test above fails on the first that does."""
    reach: set[str] = set()
    graph = import_graph()
    todo = ["dlmg.tensor"]
    while todo:
        for dep in graph.get(todo.pop(), ()):
            if dep not in reach:
                reach.add(dep)
                todo.append(dep)
    for part in ("dlmg.ops.pointwise", "dlmg.ops.reductions", "dlmg.movement", "dlmg.interop.jax",
                 "dlmg.array_api.array_object", "dlmg._printing", "dlmg.construct"):
        assert part in reach, part
    assert "dlmg.tensor" not in reach


def test_lower_layers_build_the_public_class():
    """The layers below the public class build results through TensorBase; every tensor is a
    DistributedTensor (the one registration, dlmg.base.register_tensor_class)."""
    import numpy as np

    import dlmg
    from dlmg.base import TensorBase

    assert TensorBase._made is dlmg.DistributedTensor
    x = dlmg.scatter(np.arange(6.0), dlmg.Layout.slab((6,), 0, ["cpu:0", "cpu:1"]))
    for y in (x, x + 1, x.sum(axis=0, keepdims=True), x.redistribute(dlmg.Layout.single((6,), "cpu:0")),
              dlmg.array_api.zeros(3), x[1:4], x.to("numpy")):
        assert isinstance(y, dlmg.DistributedTensor), type(y)


_MUTABLE_CALLS = {"dict", "list", "set", "WeakKeyDictionary", "WeakValueDictionary", "OrderedDict", "defaultdict"}

#: Every module-level mutable container of dlmg, and what it is. A cache keeps answers
#: keyed on values, bounded, with the figure that justifies it in a comment beside it;
#: the rest hold state that is no cache (registries, the active engine, the copy
#: threads). docs/architecture.md ("How remembering works") lists them too.
MODULE_STATE = {
    "dlmg/dtypes.py _CANONICAL_CACHE": "cache",
    "dlmg/layout/layout.py _KEYS": "cache",
    "dlmg/registry.py _OWNED": "cache",
    "dlmg/registry.py _REGISTERED": "registry",
    "dlmg/dlpack/exporter.py _LIVE": "registry",
    "dlmg/dlpack/exporter.py _PENDING": "registry",
    "dlmg/distributed/__init__.py _devices": "state",
    "dlmg/distributed/state.py _current": "state",
    "dlmg/movement/copies.py _POOL": "state",
}


def module_state() -> dict[str, int]:
    """``path name`` -> line of every module-level assignment of an empty or made
    mutable container (a dict, list or set; ``__all__`` left out) in dlmg/ and adapters/."""
    out = {}
    for path in MODULES.values():
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                continue
            value, target = node.value, (node.targets[0] if isinstance(node, ast.Assign) else node.target)
            func = value.func if isinstance(value, ast.Call) else None
            called = getattr(func, "id", None) or getattr(func, "attr", None)
            empty = isinstance(value, (ast.Dict, ast.List, ast.Set)) and not (
                getattr(value, "elts", None) or getattr(value, "keys", None))
            if (empty or called in _MUTABLE_CALLS) and isinstance(target, ast.Name) and target.id != "__all__":
                out[f"{path.relative_to(ROOT.parent).as_posix()} {target.id}"] = node.lineno
    return out


def test_module_state_is_each_named_with_its_reason():
    """No new module-level dict, list or set: a question's answers are kept with the
    question (an lru_cache over values, or the plan's own answers), and each one here
    says beside it why it exists: a cache what it saves, and where its figure is (the
    performance page; figures stay out of code comments)."""
    found = module_state()
    assert set(found) == set(MODULE_STATE), (sorted(set(found) - set(MODULE_STATE)), sorted(set(MODULE_STATE) - set(found)))
    for entry, line in found.items():
        path, _, name = entry.partition(" ")
        before = " ".join((ROOT.parent / path).read_text().splitlines()[max(0, line - 8):line - 1])
        kind = MODULE_STATE[entry]
        assert kind.lower() in before.lower(), f"{entry}: no comment above it says it is a {kind}"
        if kind == "cache":
            assert "save" in before.lower(), f"{entry}: a cache's comment says what it saves"
            assert "docs/performance-history.md" in before or "performance history" in before.lower(), (
                f"{entry}: a cache's comment points to its figure in docs/performance-history.md")
            assert not re.search(r"\d\s*(us|µs|ms|ns)\b", before), f"{entry}: the figure belongs on the performance page"


def test_no_identity_keyed_tables_in_movement():
    """Tables that movement keeps across calls are keyed on values (copies, layouts),
    never on ``id()``: an id is reused once its object is gone."""
    for path in (ROOT / "movement").glob("*.py"):
        text = path.read_text()
        assert "id(copies)" not in text and "(id(c)," not in text, path


if __name__ == "__main__":  # pragma: no cover - a listing for people restructuring the package
    for circle in import_circles(import_graph()):
        print("circle:", " ".join(circle))
    for item in lazy_imports():
        print("lazy:", item)
    for name, module in sorted(attached_from_outside().items()):
        print("attached:", name, "from", module)
    pytest.main([__file__, "-q"])
