"""Fused elementwise work: a user's function compiled by each fragment's owner.

Eager ``a * b + c`` runs two kernels, each a full pass over memory. With
:func:`fuse` the whole function runs as one compiled kernel per fragment, built
by the framework that owns the fragment (``jax.jit`` for JAX, ``cupy.fuse`` for
CuPy, ``torch.compile`` for torch where its compiler can build for the device;
frameworks without a compiler, such as NumPy, run the function eagerly). The
adapter method :meth:`~dlmg.adapters.capabilities.CompiledElementwise.compile_elementwise` does the
compiling; this module keeps one kernel per (function, framework, device,
argument shapes and dtypes) and reuses it, so a kernel is traced and compiled
once however many fragments or calls share that signature.

A kernel that the compiler cannot build (an operation it does not support, a
missing toolchain found only at build time) falls back to running the function
eagerly for that signature; :attr:`FusedFunction.compilers` says which
compiler ran where.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..device import Device
from ..adapters.capabilities import CompiledElementwise, compiled
from ..errors import FragmentError
from ..registry import adapter_for
from ._captured import UNCOMPARABLE, captured
from ._executor import executor, fail
from ._operands import SCALAR_TYPES
from ._placement import inherit
from .blockwise import shielded
from .dispatch import (
    unaliased,
    check_same_layout,
    is_distributed,
    local_groups,
    map_fragments,
    new_tensor,
    placement,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..tensor import DistributedTensor

__all__ = ["FusedFunction", "batches_operators", "fuse"]


def _signature(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """What a compiled kernel specialises on: each array's shape and dtype, each scalar's type."""
    sig: list[Any] = []
    for a in args:
        shape = getattr(a, "shape", None)
        if shape is None:
            sig.append(type(a))
        else:
            sig.append((tuple(shape), a.dtype))
    return tuple(sig)


def _device_groups(placed: Any, layout: Any) -> tuple[tuple[Any, Device, tuple[int, ...], tuple[Any, ...]], ...]:
    """The lead's local fragments that can run as one compiled call per device:
    ``(adapter, device, fragment indices, their shapes)`` for each device holding
    two or more of them (padded ones left out) in a framework whose compiler traces
    lists. Kept on the placement, which results of an operation inherit."""
    groups = placed.groups
    if groups is None:
        kept = [
            (adapter, device, tuple(i for i in indices if placed.fragments[i]._array is not None))  # not padded
            for adapter, device, indices in local_groups(placed)
            if adapter.traits.batches_elementwise and isinstance(adapter, CompiledElementwise)
        ]
        groups = placed.groups = tuple(
            (adapter, device, indices, tuple(layout.fragments[i].shape for i in indices))
            for adapter, device, indices in kept
            if len(indices) >= 2
        )
    return groups


def batches_operators(tensor: "DistributedTensor") -> bool:
    """Whether operators on ``tensor`` run as one compiled call per device: every
    local fragment in a device group of a framework that batches operators
    (:attr:`~dlmg.adapters.Traits.batches_operators`)."""
    placed = placement(tensor, check=False)  # (the operator asking runs its work through a checked one)
    found = placed.batched  # asked by every operator: kept on the placement, which results inherit
    if found is None:
        groups = _device_groups(placed, tensor.layout)
        found = placed.batched = (
            bool(groups)
            and sum(len(g[2]) for g in groups) == len(placed.indices)
            and all(g[0].traits.batches_operators and isinstance(g[0], CompiledElementwise) for g in groups)
        )
    return found


class _Kernel:
    """One compiled kernel, with its eager fallback decided on the first call."""

    __slots__ = ("call", "compiler", "eager", "tried", "checked", "aliases", "foreign")

    def __init__(self, call: Callable[..., Any], compiler: str, eager: Callable[..., Any]) -> None:
        self.call = call
        self.compiler = compiler
        self.eager = eager
        self.tried = compiler.startswith("eager")
        # Whether a result's shape and memory were checked (on the first call: both are
        # fixed by the traced function for a signature), and whether a result aliased
        # an operand then (so every later call copies such results).
        self.checked = False
        self.aliases = False
        # whether a result was an array of another framework than its lead fragment's
        # (torch.compile hands NumPy results back as NumPy arrays)
        self.foreign = False

    def __call__(self, *args: Any) -> Any:
        if self.tried:
            return self.call(*args)
        try:
            result = self.call(*args)
        except Exception as compiled_error:  # noqa: BLE001 - the compiler refused: run eagerly
            result = self.eager(*args)  # the user's own error, if the function is wrong, raises here
            reason = f"{type(compiled_error).__name__}: {str(compiled_error).splitlines()[0][:160]}" \
                if str(compiled_error) else type(compiled_error).__name__
            self.call, self.compiler = self.eager, f"eager ({self.compiler} failed: {reason})"
        self.tried = True
        return result


class FusedFunction:
    """An elementwise function run fused, fragment by fragment, by each owner's compiler.

    Made by :func:`fuse`; calling it is like :func:`dlmg.map_fragments` with the
    function compiled.

    Attributes
    ----------
    fn : callable
        The user's function.
    namespace : bool
        Whether ``fn`` takes the array-API namespace as its first argument.
    compile : bool
        ``False`` runs ``fn`` eagerly everywhere (for comparison and debugging).
    """

    def __init__(self, fn: Callable[..., Any], *, namespace: bool = False, compile: bool = True) -> None:
        if not callable(fn):
            raise TypeError(f"dlmg.fuse needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.namespace = namespace
        self.compile = compile
        self.__name__ = getattr(fn, "__name__", "fused")
        self.__doc__ = getattr(fn, "__doc__", None)
        self._name = f"fuse({self.__name__})"
        self._operands_checked = False  # True: its callers check the operands' fragments (operators, see collect)
        self._kernels: dict[tuple[Any, ...], _Kernel] = {}
        self._compiled: dict[tuple[str, str], tuple[Callable[..., Any], str]] = {}
        self._captured = captured(fn)  # the closure and global values the kernels were traced with
        if namespace:
            self._with_xp = fn
        else:
            def with_xp(xp: Any, *args: Any) -> Any:
                return fn(*args)

            with_xp.__name__ = self.__name__
            self._with_xp = with_xp
        functools.update_wrapper(self, fn, updated=())

    # -- compiling ------------------------------------------------------------
    def _kernel(self, xp: Any, args: tuple[Any, ...]) -> _Kernel:
        first = next(a for a in args if getattr(a, "shape", None) is not None)
        adapter = adapter_for(first)
        device = adapter.device_of(first)
        key = (adapter.name, device, _signature(args))
        kernel = self._kernels.get(key)
        if kernel is None:
            with_xp = self._with_xp

            def eager(*a: Any) -> Any:
                return with_xp(xp, *a)

            if self.compile:
                # one compiler object per framework and device kind: it traces once and
                # specialises per shape, dtype and device itself
                built = self._compiled.get((adapter.name, device.kind))
                if built is None:
                    built = self._compiled[(adapter.name, device.kind)] = compiled(adapter, with_xp, device)
                call, compiler = built
            else:
                call, compiler = eager, "eager (compile=False)"
            kernel = self._kernels[key] = _Kernel(call, compiler, eager)
        return kernel

    def _fresh_result(
        self, xp: Any, args: tuple[Any, ...], lead_at: int, arrays_at: Sequence[int], lead_frags: Sequence[Any]
    ) -> Any:
        """The kernel's result for one fragment, of the fragment's shape and in new
        memory (a copy where it shares the memory of a fragment operand, at
        ``arrays_at`` in ``args``, or is read-only). A compiled
        kernel is checked on its first call only, as :meth:`_checked` does for
        batched ones (the traced function fixes both for its signature); an eager
        one on every call (plain Python may answer differently per call)."""
        kernel = self._kernel(xp, args)
        result = kernel(*args)
        if kernel.checked and not kernel.aliases:
            return result
        if not hasattr(result, "shape"):  # a Python scalar from an eager function
            result = xp.asarray(result)
        lead = args[lead_at]
        if tuple(result.shape) != tuple(lead.shape):
            index = next(f.index for f in lead_frags if f._array is lead)
            self._check_shape(result, index, tuple(lead.shape))
        adapter = adapter_for(lead)  # the operands' framework, as _checked and dispatch take it
        fresh = unaliased(result, args, arrays_at, adapter, xp) if adapter.traits.mutable else result
        if not kernel.compiler.startswith("eager"):
            kernel.checked, kernel.aliases = True, fresh is not result
        return fresh

    def _batched_kernel(self, adapter: Any, device: Device, key: tuple[Any, ...], width: int) -> _Kernel:
        """One kernel over all of a device's fragments: ``fn`` traced over the list of them
        (``key``: the fragments' shapes and the operands' dtypes; ``width``: operands per call)."""
        key = (adapter.name, device, ("batch", key))
        kernel = self._kernels.get(key)
        if kernel is None:
            with_xp = self._with_xp
            xp = adapter.namespace()

            def batch(xp_: Any, *flat: Any) -> list[Any]:
                return [with_xp(xp_, *flat[k:k + width]) for k in range(0, len(flat), width)]

            batch.__name__ = self.__name__ if self.__name__.isidentifier() else "fused_batch"
            call, compiler = compiled(adapter, batch, device)
            kernel = self._kernels[key] = _Kernel(call, compiler, lambda *flat: batch(xp, *flat))
        return kernel

    def _run_batched(self, operands: tuple[Any, ...]) -> tuple[int, dict[int, Any], bool, bool]:
        """Results of the lead's local fragments computed one compiled call per device.

        Only where the owner's compiler traces lists (``Traits.batches_elementwise``),
        a device holds two or more of the lead's fragments, every distributed
        operand's fragment there is of the lead's framework, and the other operands
        are Python scalars: one compiled call then pays the compiler's per-call
        host cost once for all of the device's fragments. Returns the lead's
        position among the operands, the results by fragment index, whether
        they are every local fragment's (then nothing is left to run one by one),
        and whether compiled kernels whose results were found to be arrays of
        their lead fragments' framework made them all.
        """
        lead_at = -1
        batchable = self.compile
        for k, op in enumerate(operands):  # plain loops: this runs for every JAX operator
            if is_distributed(op):
                if lead_at < 0:
                    lead_at = k
            elif not isinstance(op, SCALAR_TYPES):
                batchable = False
        if lead_at < 0:
            raise TypeError(f"{self._name} needs at least one distributed tensor operand")
        if not batchable:
            return lead_at, {}, False, False
        lead = operands[lead_at]
        placed = placement(lead, check=not self._operands_checked)
        groups = placed.groups
        if groups is None:
            groups = _device_groups(placed, lead.layout)
        if not groups:
            return lead_at, {}, False, False
        tensors = []
        columns: list[Any] = []  # per operand: its fragment arrays, or the scalar itself
        dtypes = []
        mixed = False  # whether an operand's fragment is of another framework than the lead's
        for op in operands:
            if isinstance(op, SCALAR_TYPES):
                columns.append(op)
                dtypes.append(type(op))
                continue
            if op is not lead:
                check_same_layout(self._name, lead, op)
                other = placement(op, check=not self._operands_checked)
                mixed = mixed or (other.groups is not groups and other.frameworks != placed.frameworks)
            tensors.append(op)
            columns.append([f._array for f in op.fragments])
            dtypes.append(op.dtype)
        key_dtypes = tuple(dtypes)
        width = len(operands)
        found: dict[int, Any] = {}
        compiled = True
        for adapter, device, indices, shapes in groups:
            if mixed:
                indices = tuple(i for i in indices if all(op.fragments[i].framework == placed.frameworks[i]
                                                          for op in tensors))
                if len(indices) < 2:
                    continue
                shapes = tuple(lead.layout.fragments[i].shape for i in indices)
            flat = [col[i] if type(col) is list else col for i in indices for col in columns]
            kernel = self._batched_kernel(adapter, device, (shapes, key_dtypes), width)
            context = adapter.device_context(device)
            try:
                if context is None:
                    results = kernel(*flat)
                else:
                    with context():
                        results = kernel(*flat)
            except FragmentError:
                raise
            except Exception as exc:  # as one fragment at a time says it: the fragment, device, framework
                raise fail(self._name, indices[0], executor(adapter.name, device), exc) from exc
            if not kernel.checked or kernel.aliases:
                arrays_at = [k for k, op in enumerate(operands) if is_distributed(op)]
                results = self._checked(kernel, results, indices, flat, width, arrays_at, placed, lead.layout)
            found.update(zip(indices, results))
            compiled = compiled and kernel.checked and not kernel.foreign
        return lead_at, found, len(found) == len(placed.indices), compiled

    def _checked(self, kernel: _Kernel, results: list[Any], indices: Sequence[int], flat: list[Any],
                 width: int, positions: Sequence[int], placed: Any, layout: Any) -> list[Any]:
        """The results with their shapes checked, and copied where they share the
        memory of an array operand (at ``positions`` in each call): results are
        new arrays, as eager operations' are. A compiled kernel is checked on its
        first call (the traced function fixes what it returns), an eager one on
        every call."""
        out = []
        for k, (i, result) in enumerate(zip(indices, results)):
            self._check_shape(result, i, layout.fragments[i].shape)
            ex = placed.executors[i]
            call = flat[k * width:(k + 1) * width]
            fresh = unaliased(result, call, positions, ex.adapter, ex.xp) if ex.traits.mutable else result
            kernel.aliases = kernel.aliases or fresh is not result
            kernel.foreign = kernel.foreign or adapter_for(fresh).name != placed.frameworks[i]
            out.append(fresh)
        kernel.checked = not kernel.compiler.startswith("eager")
        return out

    @property
    def compilers(self) -> dict[tuple[str, Device], str]:
        """Which compiler built the kernels that ran, per ``(framework, device)``.

        Values are ``"jax.jit"``, ``"cupy.fuse"``, ``"torch.compile"``, or
        ``"eager (...)"`` with the reason no compiler ran.
        """
        found: dict[tuple[str, Device], str] = {}
        for (framework, device, _), kernel in self._kernels.items():
            found.setdefault((framework, device), kernel.compiler)
        return found

    @property
    def cache_size(self) -> int:
        """How many kernels were built (one per framework, device, shapes and dtypes)."""
        return len(self._kernels)

    def clear_cache(self) -> None:
        """Drop the compiled kernels (they are rebuilt on the next call)."""
        self._kernels.clear()
        self._compiled.clear()

    # -- running --------------------------------------------------------------
    def __call__(self, *operands: Any, out: "DistributedTensor | None" = None) -> "DistributedTensor":
        """Run the function on every local fragment of the operands.

        Parameters
        ----------
        *operands : DistributedTensor, scalar or 0-d array
            As for :func:`dlmg.map_fragments`: at least one distributed tensor, all of
            one layout; the first one's fragments decide where each
            fragment's work runs.
        out : DistributedTensor, optional
            A tensor of the same layout to write the results into.

        Returns
        -------
        DistributedTensor

        Raises
        ------
        LayoutMismatchError
            When the operands' (or ``out``'s) layouts differ.
        FragmentError
            When the function fails on a fragment, or returns an array that is
            not of the fragment's shape.
        """
        if out is not None:
            lead = next((op for op in operands if is_distributed(op)), None)
            if lead is None:
                raise TypeError(f"{self._name} needs at least one distributed tensor operand")
            check_same_layout(self._name, lead, out)
        operands = shielded(operands)
        if self.compile:
            self._follow_captured()
        lead_at, done, whole, compiled = self._run_batched(operands)
        if whole and out is None:
            lead = operands[lead_at]
            built = new_tensor([done.get(i) for i in range(lead.layout.nfragments)], lead.layout.dense)
            inherit(built, placement(lead, check=False), same_frameworks=compiled)  # (checked in _run_batched)
            return built
        lead_frags = operands[lead_at].fragments
        # by identity, for this call only: the lead operand keeps its fragments' arrays alive
        # until map_fragments returns, so no other array can show one of these ids meanwhile
        by_array = {id(lead_frags[i].array): r for i, r in done.items()}
        arrays_at = [k for k, op in enumerate(operands) if is_distributed(op)]

        def run(xp: Any, *args: Any) -> Any:
            found = by_array.pop(id(args[lead_at]), None)
            return found if found is not None else self._fresh_result(xp, args, lead_at, arrays_at, lead_frags)

        # results are checked here (shape, memory), so dispatch checks identity only
        result = map_fragments(run, operands, name=self._name, out=out, new_arrays=True)
        assert result is not None
        return result

    def _follow_captured(self) -> None:
        """Trace again when a value the function reads from its closure or globals changed,
        and stop compiling when it reads one that cannot be compared (see
        :mod:`dlmg.ops._captured`): every framework then sees the same values."""
        now = captured(self.fn)
        if now is UNCOMPARABLE:
            self.compile = False
            self.clear_cache()
        elif now != self._captured:
            self.clear_cache()
            self._captured = now

    def _check_shape(self, result: Any, index: int, want: tuple[int, ...]) -> None:
        """Refuse a result that is not of its fragment's shape (no elementwise function)."""
        if tuple(result.shape) != want:
            raise FragmentError(
                f"{self._name} returned an array of shape {tuple(result.shape)} for fragment {index}, "
                f"whose shape is {want}; fuse runs elementwise functions only"
            )

    def __repr__(self) -> str:
        return f"<dlmg.fuse of {self.__name__}: {self.cache_size} kernel(s)>"


def fuse(
    fn: Callable[..., Any] | None = None, *, namespace: bool = False, compile: bool = True
) -> Any:
    """Run an elementwise function fused, per fragment, through each owner's compiler.

    Use as ``dlmg.fuse(fn)`` or as a decorator (``@dlmg.fuse`` or
    ``@dlmg.fuse(namespace=True)``).

    Parameters
    ----------
    fn : callable
        ``fn(*arrays)`` (or ``fn(xp, *arrays)`` with ``namespace=True``):
        elementwise work on one fragment's arrays, returning an array of the
        fragment's shape. It is traced by the owner's compiler, so it must be
        traceable: array operations only, no Python branching on values.
    namespace : bool
        Pass the fragment framework's array namespace as the first argument
        (inside ``cupy.fuse`` it is the ``cupy`` module, whose ufuncs it fuses).
    compile : bool
        ``False`` runs ``fn`` eagerly (the same results, one kernel per
        operation).

    Returns
    -------
    FusedFunction
        Callable as ``f(*operands, out=None)``; returns a DistributedTensor.

    Notes
    -----
    Compilers per framework: JAX ``jax.jit``; CuPy ``cupy.fuse``; torch
    ``torch.compile`` where it can build for the device (CUDA: Triton; host:
    a C++ compiler), eager otherwise; NumPy and other frameworks: eager. A
    kernel is built once per (function, framework, device, shapes and dtypes)
    and reused; the first call of each pays the compilation (``torch.compile``:
    seconds). Where a compiler rejects the function it runs eagerly;
    :attr:`FusedFunction.compilers` reports what ran. Fragments whose memory is read-only
    in a framework that cannot refuse writes (a torch view of JAX memory) reach ``fn``
    as copies, as in :func:`dlmg.map_fragments`.

    Examples
    --------
    >>> @dlmg.fuse                                       # doctest: +SKIP
    ... def axpy(a, b, c):
    ...     return a * b + c
    >>> y = axpy(x1, x2, x3)                             # doctest: +SKIP
    >>> axpy.compilers                                   # doctest: +SKIP
    {('jax', Device('cpu', 0)): 'jax.jit', ...}
    """
    if fn is None:
        return lambda f: FusedFunction(f, namespace=namespace, compile=compile)
    return FusedFunction(fn, namespace=namespace, compile=compile)
