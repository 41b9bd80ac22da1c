"""Running one function fragment by fragment: dlmg's single execution path.

Every operation of :mod:`dlmg.ops` ends up in :func:`map_fragments`: for each
local fragment it takes the corresponding fragments of the distributed
operands, hands them to the framework of the *first* distributed operand's
fragment (zero-copy through DLPack where they belong to another framework),
and calls the per-fragment function with that framework's array-API
namespace, on that fragment's device:

* torch CUDA work runs inside ``torch.cuda.device(index)``, CuPy work inside
  ``cupy.cuda.Device(index)``; JAX arrays carry their device; host work needs
  no context;
* nothing is synchronised: GPU frameworks queue the work on their current
  stream and JAX dispatches asynchronously. :func:`synchronize` (every
  framework in use) and :func:`synchronize_tensor` (one tensor's fragments)
  are the completion boundaries;
* a failure on one fragment raises :class:`~dlmg.errors.FragmentError`
  naming the operation, the fragment index, its device and its framework,
  chained to the original exception.

What can be computed once is: an :class:`Executor` (adapter, namespace,
device context) per ``(framework, device)`` pair, and the distribution key of
each layout. The per-fragment loop does attribute reads, one dictionary
lookup and the call itself.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..errors import DlmgError, FragmentError, FrameworkError, LayoutMismatchError
from ..registry import adapter_for, adapter_names, get_adapter

if TYPE_CHECKING:  # pragma: no cover
    from ..layout import Layout
    from ..tensor import DistributedTensor

__all__ = [
    "Executor",
    "executor",
    "map_fragments",
    "apply",
    "is_distributed",
    "check_same_layout",
    "synchronize",
    "synchronize_tensor",
    "move_array",
    "new_tensor",
]

#: Python scalars broadcast to every fragment as they are.
SCALAR_TYPES = (bool, int, float, complex)


# --------------------------------------------------------------------------
# executors: what running on one (framework, device) needs


def _device_context(adapter: Any, device: Device) -> Callable[[], Any] | None:
    """A factory of the context manager that makes ``device`` current, or None."""
    if device.kind != "cuda":
        return None
    index = device.index
    if adapter.name == "torch":
        torch = adapter.module()
        return lambda: torch.cuda.device(index)
    if adapter.name == "cupy":
        cupy = adapter.module()
        return lambda: cupy.cuda.Device(index)
    return None  # JAX arrays carry their device; other frameworks: as they are


class Executor:
    """How work for one ``(framework, device)`` pair is run.

    Attributes
    ----------
    framework : str
        The framework name (``"torch"``).
    device : Device
        The device the work runs on.
    adapter : Adapter
        The framework's adapter.
    xp : module
        The framework's array-API namespace.
    context : callable or None
        Returns a context manager making ``device`` current (CUDA devices of
        torch and CuPy); ``None`` where no context is needed.
    """

    __slots__ = ("framework", "device", "adapter", "xp", "context", "_dtypes")

    def __init__(self, framework: str, device: Device) -> None:
        self.framework = framework
        self.device = device
        self.adapter = get_adapter(framework)
        self.xp = self.adapter.namespace()
        self.context = _device_context(self.adapter, device)
        self._dtypes: dict[str, Any] = {}

    def dtype(self, name: str) -> Any:
        """The framework's dtype object for the dlmg dtype ``name``."""
        found = self._dtypes.get(name)
        if found is None:
            found = getattr(self.xp, name, None)
            if found is None:
                from ..errors import DtypeError

                raise DtypeError(f"{self.framework} has no element type {name!r}")
            self._dtypes[name] = found
        return found

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(xp, *args)`` on this executor's device."""
        if self.context is None:
            return fn(self.xp, *args)
        with self.context():
            return fn(self.xp, *args)

    def __repr__(self) -> str:
        return f"Executor({self.framework!r}, {self.device})"


_EXECUTORS: dict[tuple[str, Device], Executor] = {}
_BY_ID: dict[tuple[str, int], Executor] = {}  # fast path: keyed by the Device object's id


def executor(framework: str, device: Device) -> Executor:
    """The (cached) :class:`Executor` of ``framework`` on ``device``."""
    ex = _BY_ID.get((framework, id(device)))
    if ex is not None and ex.device is device:
        return ex
    key = (framework, device)
    ex = _EXECUTORS.get(key)
    if ex is None:
        ex = _EXECUTORS[key] = Executor(framework, device)
    if len(_BY_ID) > 4096:
        _BY_ID.clear()
    _BY_ID[(framework, id(device))] = ex
    return ex


# --------------------------------------------------------------------------
# tensors: recognising them, comparing layouts, building results


def _tensor_class() -> type:
    from ..tensor import DistributedTensor

    return DistributedTensor


_TENSOR_CLASS: list[type] = []


def is_distributed(obj: Any) -> bool:
    """Whether ``obj`` is a :class:`~dlmg.DistributedTensor`."""
    if not _TENSOR_CLASS:
        _TENSOR_CLASS.append(_tensor_class())
    return isinstance(obj, _TENSOR_CLASS[0])


_DIST_KEYS: dict[int, tuple[Any, tuple]] = {}


def distribution_key(layout: "Layout") -> tuple:
    """What decides which element sits in which fragment on which device.

    Two layouts with the same key place every element in the same fragment
    at the same local position; they may differ in memory strides only (and
    in block sizes that make no difference, such as any block along a mode
    with a grid of 1).
    """
    cached = _DIST_KEYS.get(id(layout))
    if cached is not None and cached[0] is layout:
        return cached[1]
    blocks = tuple(
        None if g == 1 else min(b, max(n, 1)) for n, b, g in zip(layout.shape, layout.block, layout.grid)
    )
    key = (layout.shape, blocks, layout.grid, layout.devices)
    if len(_DIST_KEYS) > 4096:
        _DIST_KEYS.clear()
    _DIST_KEYS[id(layout)] = (layout, key)
    return key


def same_distribution(a: "Layout", b: "Layout") -> bool:
    """Whether layouts ``a`` and ``b`` distribute elements identically."""
    return a is b or distribution_key(a) == distribution_key(b)


def check_same_layout(name: str, first: "DistributedTensor", other: "DistributedTensor") -> None:
    """Raise :class:`~dlmg.errors.LayoutMismatchError` unless both layouts match.

    The message names the operation, both layouts and ``redistribute``.
    """
    if same_distribution(first.layout, other.layout):
        return
    raise LayoutMismatchError(
        f"{name}: the operands' layouts differ: {first.layout!r} and {other.layout!r}. "
        "Elementwise work needs identical layouts and never communicates; make them match "
        "explicitly, e.g. other = other.redistribute(first.layout)"
    )


def dense(layout: "Layout") -> "Layout":
    """``layout`` without explicit memory strides (results are fresh dense arrays)."""
    if layout.element_strides is None:
        return layout
    cached = _DENSE.get(id(layout))
    if cached is not None and cached[0] is layout:
        return cached[1]
    out = layout.replace(element_strides=None, block_strides=None)
    _DENSE[id(layout)] = (layout, out)
    return out


_DENSE: dict[int, tuple[Any, Any]] = {}


def new_tensor(arrays: Sequence[Any], layout: "Layout", dtype: str | None = None) -> "DistributedTensor":
    """A distributed tensor of ``layout`` whose fragments are ``arrays``.

    ``arrays`` lists one array per fragment of ``layout`` (``None`` for
    fragments held by other processes), built by construction to fit, so the
    tensor class's trusted, unvalidated constructor is used. ``dtype`` is
    the first local array's unless given.
    """
    return _tensor_class()._from_arrays(arrays, layout, dtype)


def replace_fragment_arrays(tensor: "DistributedTensor", arrays: dict[int, Any]) -> None:
    """Put new arrays in place of some fragments of ``tensor`` (JAX in-place updates)."""
    tensor._replace_arrays(arrays)


# --------------------------------------------------------------------------
# moving arrays between frameworks and devices


def move_array(array: Any, target: Executor, source: Any = None) -> Any:
    """``array`` as an array of ``target``'s framework on ``target``'s device.

    Zero-copy through DLPack where the memory already is on that device; a
    copy (by whichever framework can make it) otherwise.

    Parameters
    ----------
    array : array
        An array of any known framework.
    target : Executor
        Where the result must live.
    source : Adapter, optional
        ``array``'s adapter when the caller knows it.
    """
    src = source if source is not None else adapter_for(array)
    dst = target.adapter
    device = target.device
    if src is dst:
        return dst.to_device(array, device)
    here = src.device_of(array)
    if here == device or (here.is_host and device.is_host):
        return dst.from_dlpack(array, device=device)
    if src.supports(device):  # the source framework moves it, then a zero-copy hand-over
        return dst.from_dlpack(src.to_device(array, device), device=device)
    if dst.supports(here):  # a zero-copy hand-over, then the target framework moves it
        return dst.to_device(dst.from_dlpack(array, device=here), device)
    host = Device("cpu", 0)
    return dst.from_dlpack(src.to_device(array, host), device=device)


# --------------------------------------------------------------------------
# the one per-fragment loop


_FAIL_CLASSES: dict[type, type] = {}


def _fail_class(exc: BaseException) -> type:
    """FragmentError, or a subclass that is also the original's dlmg error class
    (so ``except dlmg.DtypeError`` still catches a dtype failure on one fragment)."""
    cls = type(exc)
    if not isinstance(exc, DlmgError) or isinstance(exc, FragmentError):
        return FragmentError
    found = _FAIL_CLASSES.get(cls)
    if found is None:
        found = _FAIL_CLASSES[cls] = type(f"Fragment{cls.__name__}", (FragmentError, cls), {"__module__": __name__})
    return found


def _fail(name: str, index: int, ex: Executor, exc: BaseException) -> FragmentError:
    err = _fail_class(exc)(
        f"{name} failed on fragment {index} (device {ex.device}, framework {ex.framework}): "
        f"{type(exc).__name__}: {exc}"
    )
    err.fragment = index  # type: ignore[attr-defined]
    err.device = ex.device  # type: ignore[attr-defined]
    err.framework = ex.framework  # type: ignore[attr-defined]
    return err


class _ZeroD:
    """A 0-d array operand, converted once per executor."""

    __slots__ = ("array", "adapter", "_by_executor")

    def __init__(self, array: Any, adapter: Any) -> None:
        self.array = array
        self.adapter = adapter
        self._by_executor: dict[int, Any] = {}

    def for_executor(self, ex: Executor) -> Any:
        got = self._by_executor.get(id(ex))
        if got is None:
            if self.adapter is ex.adapter and self.adapter.device_of(self.array) == ex.device:
                got = self.array
            else:
                try:
                    got = move_array(self.array, ex, self.adapter)
                except Exception:  # no DLPack route: go through a Python scalar
                    got = self.array.item()
            self._by_executor[id(ex)] = got
        return got


def classify_operand(obj: Any) -> Any:
    """Check one operand: a distributed tensor, a Python scalar or a 0-d array.

    Returns the operand, or a :class:`_ZeroD` wrapper for a 0-d array.

    Raises
    ------
    TypeError
        For anything else (a regular array of rank > 0 must be scattered first).
    """
    if isinstance(obj, SCALAR_TYPES) or is_distributed(obj):
        return obj
    if type(obj).__module__.partition(".")[0] == "numpy":
        import numpy as np

        if isinstance(obj, np.generic):  # a NumPy scalar such as np.float32(1): a 0-d array
            obj = np.asarray(obj)
    try:
        adapter = adapter_for(obj)
    except FrameworkError:
        adapter = None
    if adapter is None or getattr(obj, "ndim", None) is None:
        raise TypeError(
            f"an operand of type {type(obj).__module__}.{type(obj).__qualname__} cannot be combined with "
            "a distributed tensor; use a Python scalar, a 0-d array or a DistributedTensor"
        )
    if obj.ndim != 0:
        raise TypeError(
            f"a regular {adapter.name} array of shape {tuple(obj.shape)} cannot be combined with a "
            "distributed tensor (no hidden scatter); scatter it into the tensor's layout first: "
            "dlmg.scatter(array, tensor.layout)"
        )
    return _ZeroD(obj, adapter)


def map_fragments(
    fn: Callable[..., Any],
    operands: Sequence[Any],
    *,
    name: str = "apply",
    out_layout: "Layout | None" = None,
    indices: Sequence[int] | None = None,
    out: "DistributedTensor | None" = None,
    in_place: bool = False,
    check: bool = True,
) -> "DistributedTensor | None":
    """Run ``fn(xp, *fragment_arrays)`` on every local fragment.

    Parameters
    ----------
    fn : callable
        Called as ``fn(xp, *args)`` once per fragment, where ``xp`` is the
        array-API namespace of the fragment's framework and ``args`` are the
        operands with distributed tensors replaced by their fragment arrays
        (in that framework), Python scalars as they are and 0-d arrays
        converted to that framework and device.
    operands : sequence
        Distributed tensors, Python scalars, 0-d arrays and ``None`` (passed
        as it is, for optional arguments such as ``clip``'s bounds). The first
        distributed tensor leads: its fragments' frameworks and devices run
        the work, and every other distributed operand must have its layout.
    name : str
        The operation's name for error messages.
    out_layout : Layout, optional
        The result's layout; fragment ``i`` of the result is ``fn``'s result
        for fragment ``i``. By default the lead's layout (without explicit
        strides: results are fresh arrays).
    indices : sequence of int, optional
        The fragments to run on (default: every local fragment of the lead).
    out : DistributedTensor, optional
        Write the results into this tensor's fragments instead of building a
        new tensor (mutable frameworks: in place, same memory; JAX: the
        fragment arrays are replaced).
    in_place : bool
        ``fn`` already modified the lead's fragment arrays in place (mutable
        frameworks) or returned their replacements (JAX); the lead is the
        result. Implies ``out`` is the lead.
    check : bool
        Check that distributed operands share the lead's layout.

    Returns
    -------
    DistributedTensor or None
        The result (``out`` or the lead itself when writing in place).

    Raises
    ------
    LayoutMismatchError
        When a distributed operand's layout differs from the lead's.
    FragmentError
        When ``fn`` fails on a fragment (chained to the original error).
    """
    lead = None
    args: list[Any] = []
    tensors: list[tuple[int, Any]] = []  # (position in args, fragments)
    zero_d: list[int] = []
    for position, op in enumerate(operands):
        if op is not None and not isinstance(op, (SCALAR_TYPES, _ZeroD)):
            op = classify_operand(op)
        if isinstance(op, _ZeroD):
            zero_d.append(position)
            args.append(op)
        elif op is None or isinstance(op, SCALAR_TYPES):
            args.append(op)
        else:
            if lead is None:
                lead = op
            elif check:
                check_same_layout(name, lead, op)
            args.append(None)
            tensors.append((position, op.fragments))
    if lead is None:
        raise TypeError(f"{name} needs at least one distributed tensor operand")
    lead_frags = lead.fragments
    layout = out_layout if out_layout is not None else dense(lead.layout)
    if indices is None:
        indices = [f.index for f in lead_frags if f.is_local]
    # Fragments of the other operands whose framework differs from the lead's.
    lead_fw = [f.framework for f in lead_frags]
    foreign = [
        (position, frags)
        for position, frags in tensors[1:]
        if any(frags[i].framework != lead_fw[i] for i in indices)
    ]
    results: list[Any] = [None] * layout.nfragments
    multi = len({lead_fw[i] for i in indices}) > 1
    scalar_out = layout.ndim == 0  # NumPy turns 0-d results into scalars
    active: Executor | None = None  # the executor whose device context is entered
    manager: Any = None
    try:
        for i in indices:
            frag = lead_frags[i]
            ex = executor(frag.framework, frag.device)
            if ex is not active and (ex.context is not None or manager is not None):
                # one context per run of fragments on the same device, not one per fragment
                if manager is not None:
                    manager.__exit__(None, None, None)
                    manager = None
                if ex.context is not None:
                    manager = ex.context()
                    manager.__enter__()
                active = ex
            call = list(args)
            for position, frags in tensors:
                call[position] = frags[i].array
            for position, frags in foreign:
                other = frags[i]
                if other.framework != ex.framework:
                    try:
                        call[position] = move_array(other.array, ex, other.adapter)
                    except Exception as exc:
                        raise _fail(f"{name} (handing fragment {i} of operand {position} from "
                                    f"{other.framework} to {ex.framework})", i, ex, exc) from exc
            for position in zero_d:
                call[position] = args[position].for_executor(ex)
            try:
                results[i] = fn(ex.xp, *call)
            except Exception as exc:
                raise _fail(name, i, ex, exc) from exc
            if scalar_out and not hasattr(results[i], "__dlpack__"):
                results[i] = ex.xp.asarray(results[i])
    finally:
        if manager is not None:
            manager.__exit__(None, None, None)
    if multi:
        _unify_dtypes(results, indices, lead_frags, name)
    if in_place:
        if not all(executor(lead_frags[i].framework, lead_frags[i].device).adapter.mutable for i in indices):
            replace_fragment_arrays(
                lead,
                {i: results[i] for i in indices if not get_adapter(lead_frags[i].framework).mutable},
            )
        return lead
    if out is not None:
        _write_into(out, results, indices, name)
        return out
    return new_tensor(results, layout)


def _unify_dtypes(results: list[Any], indices: Sequence[int], frags: Sequence[Any], name: str) -> None:
    """Cast results of fragments of other frameworks to the first result's dtype.

    Frameworks differ in their promotion rules (``int32 / int32`` is float64 in
    NumPy, float32 in torch); one tensor has one dtype, the first local
    fragment's.
    """
    first = None
    for i in indices:
        r = results[i]
        ex = executor(frags[i].framework, frags[i].device)
        got = ex.adapter.dtype_of(r)
        if first is None:
            first = got
        elif got != first:
            try:
                results[i] = ex.run(lambda xp, a: xp.astype(a, ex.dtype(first)), r)
            except Exception as exc:
                raise _fail(f"{name} (casting to {first})", i, ex, exc) from exc


def _write_into(out: "DistributedTensor", results: list[Any], indices: Sequence[int], name: str) -> None:
    """Copy per-fragment results into ``out``'s fragments (JAX ones are replaced)."""
    frags = out.fragments
    replaced: dict[int, Any] = {}
    for i in indices:
        frag = frags[i]
        ex = executor(frag.framework, frag.device)
        r = results[i]
        try:
            if adapter_for(r) is not ex.adapter:
                r = move_array(r, ex)
            dtype = ex.adapter.dtype_of(frag.array)
            if ex.adapter.dtype_of(r) != dtype:
                r = ex.run(lambda xp, a: xp.astype(a, ex.dtype(dtype)), r)
            if ex.adapter.mutable:
                if ex.context is None:
                    ex.adapter.copy_into(frag.array, r)
                else:
                    with ex.context():
                        ex.adapter.copy_into(frag.array, r)
            else:
                replaced[i] = r
        except Exception as exc:
            raise _fail(f"{name} (writing into out)", i, ex, exc) from exc
    if replaced:
        replace_fragment_arrays(out, replaced)


# --------------------------------------------------------------------------
# the public entry point


def apply(
    fn: Callable[..., Any],
    *operands: Any,
    out: "DistributedTensor | None" = None,
    namespace: bool = False,
) -> "DistributedTensor":
    """Run an elementwise function on every fragment, in its owner's framework.

    Parameters
    ----------
    fn : callable
        Called once per local fragment with the operands' fragment arrays:
        ``fn(*arrays)``, or ``fn(xp, *arrays)`` with ``namespace=True``
        (``xp`` being the array-API namespace of the fragment's framework).
        It must return an array of the fragment's shape (elementwise work).
    *operands : DistributedTensor, scalar or 0-d array
        At least one distributed tensor; all of them must share one layout.
        The first one's fragments decide the framework and device of each
        fragment's work; fragments of the others that belong to another
        framework are handed over zero-copy through DLPack. Python scalars
        are passed as they are; 0-d arrays are converted to each fragment's
        framework and device.
    out : DistributedTensor, optional
        A tensor of the same layout to write the results into (in place for
        NumPy, torch and CuPy fragments; JAX fragments are replaced by new
        arrays). Results are cast to ``out``'s dtype.
    namespace : bool
        Pass the array-API namespace as the first argument of ``fn``.

    Returns
    -------
    DistributedTensor
        A new tensor of the operands' layout, or ``out``.

    Raises
    ------
    LayoutMismatchError
        When the distributed operands' (or ``out``'s) layouts differ.
    FragmentError
        When ``fn`` fails on a fragment; the message names the fragment, its
        device and framework, and the original error is chained.

    Notes
    -----
    The work is queued asynchronously where the framework allows it (CUDA
    streams, JAX dispatch); call :func:`dlmg.synchronize` or
    ``tensor.synchronize()`` before timing or reading the memory otherwise.

    Examples
    --------
    >>> y = dlmg.apply(lambda a, b: a * b + 1, x, x)          # doctest: +SKIP
    >>> y = dlmg.apply(lambda xp, a: xp.tanh(a), x, namespace=True)  # doctest: +SKIP
    """
    if namespace:
        per_fragment = fn
    else:
        def per_fragment(xp: Any, *arrays: Any) -> Any:
            return fn(*arrays)

    name = f"apply({getattr(fn, '__name__', 'fn')})"
    if out is not None:
        lead = next((op for op in operands if is_distributed(op)), None)
        if lead is None:
            raise TypeError(f"{name} needs at least one distributed tensor operand")
        check_same_layout(name, lead, out)
    result = map_fragments(per_fragment, operands, name=name, out=out)
    assert result is not None
    if out is None:
        _check_elementwise_shapes(result, name)
    return result


def _check_elementwise_shapes(result: "DistributedTensor", name: str) -> None:
    for frag in result.fragments:
        if frag.is_local:
            shape = tuple(frag.array.shape)
            if shape != frag.layout.shape:
                raise FragmentError(
                    f"{name} returned an array of shape {shape} for fragment {frag.index}, whose "
                    f"shape is {frag.layout.shape}; apply runs elementwise functions only"
                )


# --------------------------------------------------------------------------
# completion boundaries


def synchronize_tensor(tensor: "DistributedTensor") -> None:
    """Wait until all queued work producing ``tensor``'s local fragments is done."""
    seen: set[tuple[str, Device]] = set()
    for frag in tensor.fragments:
        if not frag.is_local:
            continue
        adapter = get_adapter(frag.framework)
        sync_array = getattr(adapter, "synchronize_array", None)
        if sync_array is not None:
            sync_array(frag.array)
        else:
            key = (frag.framework, frag.device)
            if key not in seen:
                seen.add(key)
                adapter.synchronize(frag.device)


def synchronize() -> None:
    """Wait until the work queued on every device of every framework in use is done.

    A framework is in use when its module has been imported; nothing is
    imported here.
    """
    for name in adapter_names():
        try:
            adapter = get_adapter(name)
        except Exception:  # a broken adapter cannot have queued work
            continue
        package = getattr(adapter, "package", "")
        if package and package in sys.modules:
            adapter.synchronize(None)
