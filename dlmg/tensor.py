"""The distributed tensor: :class:`DistributedTensor`, every method and operator in one class.

A :class:`DistributedTensor` is one logical array of one element type whose
elements are spread over fragments as its :class:`~dlmg.layout.Layout` says.
Each :class:`Fragment` wraps an ordinary array of some framework (NumPy,
PyTorch, JAX, CuPy...) holding, along every mode, the elements of the blocks
it owns in increasing global order. Fragments of one tensor may belong to
different frameworks; their shapes follow the layout, their strides may be
anything the framework allows.

Tensors are made by the functions of :mod:`dlmg.construct`
(:func:`~dlmg.from_fragments`, :func:`~dlmg.from_pointers`,
:func:`~dlmg.empty`, :func:`~dlmg.zeros`, :func:`~dlmg.ones`,
:func:`~dlmg.full`, :func:`~dlmg.scatter`) and by :meth:`DistributedTensor.redistribute`
and :meth:`DistributedTensor.to`, never by calling the class.

Processes: the layout names the process (``rank``) holding every fragment;
only this process's fragments carry arrays (:attr:`Fragment.is_local`).
Without :func:`dlmg.distributed.init` dlmg runs in one process (rank 0).

This module sits at the top of the import order: every method below is a ``def``
whose body calls one function of the module that implements it (:mod:`dlmg.ops`,
:mod:`dlmg.movement`, :mod:`dlmg.interop`, :mod:`dlmg.array_api`,
:mod:`dlmg._printing`), imported here. The layers below build their results
through :class:`dlmg.base.TensorBase`, the data this class holds, and
:func:`~dlmg.base.register_tensor_class` (called once, at the end of this module)
makes every tensor they build one of this class.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

from . import movement
from ._lookup import fragment_holding, fragment_on_device, fragments_on_device
from ._printing import format_repr, format_spec, format_str
from ._protocols import FrameworkProtocols
from .array_api import array_object, matrix_transpose, reshape
from .base import TensorBase, register_tensor_class
from .device import Device
from .distributed.state import current
from .dtypes import info
from .errors import CopyRequiredError, NotLocalError
from .fragment import Fragment, process_rank, verify_fragments
from .interop.dtensor import to_dtensor
from .interop.jax import to_jax
from .interop.partitioned import partitioned
from .ops import dispatch, like, pointwise, reductions, statistics
from .ops import shape as shapes
from .ops.contract import matmul_operator, resolve

if TYPE_CHECKING:  # pragma: no cover
    from .layout import Layout
    from .plans.plan import RedistributionPlan

__all__ = ["DistributedTensor", "Fragment", "process_rank"]


class DistributedTensor(FrameworkProtocols, TensorBase):
    """One logical array spread over fragments on several devices.

    Made by :func:`dlmg.from_fragments`, :func:`dlmg.from_pointers`,
    :func:`dlmg.empty`/:func:`~dlmg.zeros`/:func:`~dlmg.ones`/:func:`~dlmg.full`,
    :func:`dlmg.scatter`, :meth:`redistribute` and :meth:`to`.

    Attributes
    ----------
    layout : Layout
        How the elements are spread.
    dtype : str
        The dlmg element type name (``"float32"``, ``"bfloat16"``...).
    fragments : tuple of Fragment
        One per layout fragment, in layout order.

    Notes
    -----
    Distributed tensors implement ``__dlpack__`` only where one fragment holds
    the whole tensor: the array API leaves distributed arrays out of the
    protocol. Export single fragments (``torch.from_dlpack(dt.fragments[i])``)
    or :meth:`gather` the tensor into one array first.
    """

    # the names register_method may not replace
    _CORE = frozenset(
        {"layout", "dtype", "fragments", "shape", "ndim", "size", "nbytes", "gather", "redistribute",
         "to", "fragment", "frameworks", "__getitem__", "__dlpack__", "__dlpack_device__", "__repr__"}
    )

    @classmethod
    def register_method(cls, name: str, func: Callable[..., Any] | None = None, *, override: bool = False) -> Any:
        """Attach ``func`` as method ``name`` (usable as a decorator).

        For packages outside dlmg adding methods of their own; dlmg's methods are
        all defined in the class. The core attributes (``gather``,
        ``layout``...) are refused unless ``override``.

        Examples
        --------
        >>> @DistributedTensor.register_method("__neg__")   # doctest: +SKIP
        ... def _neg(self): ...
        """
        def attach(f: Callable[..., Any]) -> Callable[..., Any]:
            if name in cls._CORE and not override:
                raise AttributeError(f"DistributedTensor.{name} is part of the core class; pass override=True")
            setattr(cls, name, f)
            return f

        return attach if func is None else attach(func)

    # -- descriptive attributes ----------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        """The global shape."""
        return self.layout.shape

    @property
    def ndim(self) -> int:
        """The number of modes."""
        return self.layout.ndim

    @property
    def size(self) -> int:
        """The number of elements of the logical tensor."""
        return self.layout.size

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return info(self.dtype).itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the logical tensor (``size * itemsize``; replicas and padding not counted,
        see ``layout.nbytes(dtype)`` for each fragment's memory)."""
        return self.size * self.itemsize

    @property
    def frameworks(self) -> tuple[str, ...]:
        """The frameworks of the local fragments, each once, in fragment order."""
        return tuple(dict.fromkeys(f.framework for f in self.fragments if f.framework is not None))

    @property
    def devices(self) -> tuple[Device, ...]:
        """The layout's devices, one per fragment."""
        return self.layout.devices

    def fragment(self, index: int) -> Fragment:
        """Fragment ``index`` (negative values count from the end)."""
        n = len(self.fragments)
        i = operator.index(index)
        if not -n <= i < n:
            raise IndexError(f"fragment {i} out of range for a tensor of {n} fragments")
        return self.fragments[i]

    @property
    def local_fragments(self) -> tuple[Fragment, ...]:
        """The fragments this process holds."""
        return tuple(f for f in self.fragments if f.is_local)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d distributed tensor")
        return self.shape[0]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any:
        """A host copy of the whole tensor as one NumPy array (``np.asarray(dt)``).

        In one process every fragment is here, so this is ``gather(framework="numpy")``
        (a pending sum is resolved first), converted to ``dtype`` if given. The result is
        always a copy: ``copy=False`` raises :class:`~dlmg.errors.CopyRequiredError`.
        Across processes the values lie partly elsewhere and making them whole is a
        collective every process must call: :class:`~dlmg.errors.NotLocalError` names
        :meth:`gather`, which is that collective.
        """
        if copy is False:
            raise CopyRequiredError(
                "np.asarray(dt, copy=False): a DistributedTensor's values lie in its fragments, so one NumPy "
                "array of them is always a copy; pass copy=None (or True), or export single fragments "
                "without a copy: np.from_dlpack(dt.fragments[i])"
            )
        if not all(f.is_local for f in self.fragments):
            ranks = sorted({f.rank for f in self.fragments if not f.is_local})
            raise NotLocalError(
                f"np.asarray(dt): fragments of this tensor lie in other processes (ranks {ranks}); making it "
                "whole is a collective every process calls: dt.gather(framework='numpy') (all-gather) or "
                "dt.gather(framework='numpy', root=0)"
            )
        host = self.gather(framework="numpy")
        return host if dtype is None else host.astype(dtype, copy=False)


    # -- finding fragments by device or by the part of the tensor they hold (dlmg._lookup)
    def fragments_on(self, device: Any) -> tuple[Fragment, ...]:
        """The fragments whose layout slot is ``device``, in fragment order.

        Parameters
        ----------
        device : Device, str, int or a framework's device object
            ``"cpu:3"``, ``dlmg.Device("cuda", 1)``, a ``jax.Device``, a
            ``torch.device``...

        Returns
        -------
        tuple of Fragment
            Empty when no fragment sits on ``device``.
        """
        return fragments_on_device(self, device)

    def fragment_for(self, device: Any) -> Fragment:
        """The one fragment on ``device``: ``dt.fragment_for(shard.device)``.

        Raises
        ------
        LookupError
            When no fragment, or more than one, sits on ``device`` (the message
            lists them; use :meth:`fragments_on` or :meth:`fragment_at` then).
        """
        return fragment_on_device(self, device)

    def fragment_at(self, index: Any, replica: int = 0) -> Fragment:
        """The fragment holding exactly the global slices ``index``.

        ``index`` is a tuple of slices, one per mode, such as a JAX shard's
        ``shard.index``: ``dt.fragment_at(shard.index)``. Only fragments holding
        one contiguous range per mode (slabs, grids of single blocks) can match.

        Parameters
        ----------
        index : tuple of slice
            The global ranges, ``slice(None)`` for a whole mode.
        replica : int
            Which copy of a replicated layout (0 by default).

        Raises
        ------
        LookupError
            When no fragment of that replica covers exactly those ranges.
        """
        return fragment_holding(self, index, replica)

    # -- moving data ---------------------------------------------------------
    def gather(self, framework: str | None = None, device: Any = None, out: Any = None, *,
               root: int | None = None) -> Any:
        """The whole tensor as one regular array, in row-major order.

        Parameters
        ----------
        framework : str, optional
            ``"numpy"``, ``"torch"``, ``"jax"``, ``"cupy"``... By default the
            framework of the first local fragment (or of ``out``).
        device : Device or str, optional
            Where the result lives. By default the device of the first
            fragment where ``framework`` can hold arrays there, otherwise where
            it can (the framework's :meth:`~dlmg.adapters.Adapter.landing_device`):
            ``framework="numpy"`` of GPU fragments lands in host memory,
            ``framework="cupy"`` of host fragments on ``cuda:0``.
            With ``out``, ``out``'s device.
        out : array, optional
            A writable array of the tensor's shape and dtype, of any mutable
            framework and any strides (a transposed view, a slice), filled in
            place and returned.
        root : int, optional
            Across processes: the only rank receiving the array.

        Returns
        -------
        array
            An array of ``framework`` (or ``out``).

        Notes
        -----
        Copies run as a few strided assignments per fragment, never element by
        element. Across processes (after :func:`dlmg.distributed.init`) this
        is an all-gather: every process receives the whole tensor, unless
        ``root`` names the one process that does (the others get ``None``).
        """
        if current() is None:  # (across processes the collective checks, inside its agreement)
            verify_fragments(self.fragments)
        if self.layout.partial is not None:  # a pending sum: its value first
            return resolve(self).gather(framework, device, out, root=root)
        return movement.gather(self, framework=framework, device=device, out=out, root=root)

    def redistribute(self, layout: "Layout", framework: str | None = None) -> "DistributedTensor":
        """The tensor in another layout of the same shape.

        Fragments that stay as they are (same device, same elements, same
        framework) are reused, not copied; everything else moves by strided
        copies. See :func:`dlmg.plan_redistribution` for the plan.

        Parameters
        ----------
        layout : Layout
            The target layout (any blocks, grid, replicas, devices, strides).
        framework : str, optional
            The frameworks of the new fragments; by default a fragment keeps the
            framework of a source fragment on its device, else the tensor's.
        """
        if current() is None:  # (across processes the collective checks, inside its agreement)
            verify_fragments(self.fragments)
        if self.layout.partial is not None:  # resolving a pending sum is a redistribution
            return resolve(self, layout, framework)
        return movement.redistribute(self, layout, framework=framework)

    def plan_redistribution(self, layout: "Layout") -> "RedistributionPlan":
        """The copy plan :meth:`redistribute` would run for ``layout``.

        Across processes (after :func:`dlmg.distributed.init`) the plan of
        messages instead: :class:`~dlmg.plans.routes.Routes`, with the
        bytes per pair of processes (``bytes_by_ranks``) and the transport.
        """
        return movement.tensor_plan(self, layout)

    def to(self, framework: str, copy: bool | None = None) -> "DistributedTensor":
        """The same tensor with every fragment handed to ``framework`` through DLPack.

        Parameters
        ----------
        framework : str
            The target framework.
        copy : bool, optional
            ``None``: zero-copy where possible, a copy otherwise; ``True``:
            always copy; ``False``: never copy, raising
            :class:`~dlmg.errors.CopyRequiredError` where the target would
            need one (JAX and unaligned host buffers, 64-bit types without x64...).
        """
        return movement.to_framework(self, framework, copy=copy)

    # -- Python's operators (dlmg.ops.pointwise) --------------------------------
    # Each broadcasts its operands as the array API says, aligning layouts that differ
    # (dlmg.explain shows the moves; inside dlmg.strict() they are refused).
    __hash__ = object.__hash__  # == is elementwise; tensors hash by identity

    def __add__(self, other: Any, /) -> Any:
        """``x + y``, element by element."""
        return pointwise.operator_add(self, other)

    def __radd__(self, other: Any, /) -> Any:
        """``y + x`` with ``y`` not a tensor."""
        return pointwise.operator_radd(self, other)

    def __iadd__(self, other: Any, /) -> Any:
        """``x += y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_iadd(self, other)

    def __sub__(self, other: Any, /) -> Any:
        """``x - y``, element by element."""
        return pointwise.operator_sub(self, other)

    def __rsub__(self, other: Any, /) -> Any:
        """``y - x`` with ``y`` not a tensor."""
        return pointwise.operator_rsub(self, other)

    def __isub__(self, other: Any, /) -> Any:
        """``x -= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_isub(self, other)

    def __mul__(self, other: Any, /) -> Any:
        """``x * y``, element by element."""
        return pointwise.operator_mul(self, other)

    def __rmul__(self, other: Any, /) -> Any:
        """``y * x`` with ``y`` not a tensor."""
        return pointwise.operator_rmul(self, other)

    def __imul__(self, other: Any, /) -> Any:
        """``x *= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_imul(self, other)

    def __truediv__(self, other: Any, /) -> Any:
        """``x / y``, element by element."""
        return pointwise.operator_truediv(self, other)

    def __rtruediv__(self, other: Any, /) -> Any:
        """``y / x`` with ``y`` not a tensor."""
        return pointwise.operator_rtruediv(self, other)

    def __itruediv__(self, other: Any, /) -> Any:
        """``x /= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_itruediv(self, other)

    def __floordiv__(self, other: Any, /) -> Any:
        """``x // y``, element by element."""
        return pointwise.operator_floordiv(self, other)

    def __rfloordiv__(self, other: Any, /) -> Any:
        """``y // x`` with ``y`` not a tensor."""
        return pointwise.operator_rfloordiv(self, other)

    def __ifloordiv__(self, other: Any, /) -> Any:
        """``x //= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_ifloordiv(self, other)

    def __mod__(self, other: Any, /) -> Any:
        """``x % y``, element by element."""
        return pointwise.operator_mod(self, other)

    def __rmod__(self, other: Any, /) -> Any:
        """``y % x`` with ``y`` not a tensor."""
        return pointwise.operator_rmod(self, other)

    def __imod__(self, other: Any, /) -> Any:
        """``x %= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_imod(self, other)

    def __pow__(self, other: Any, /) -> Any:
        """``x ** y``, element by element."""
        return pointwise.operator_pow(self, other)

    def __rpow__(self, other: Any, /) -> Any:
        """``y ** x`` with ``y`` not a tensor."""
        return pointwise.operator_rpow(self, other)

    def __ipow__(self, other: Any, /) -> Any:
        """``x **= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_ipow(self, other)

    def __and__(self, other: Any, /) -> Any:
        """``x & y``, element by element."""
        return pointwise.operator_and(self, other)

    def __rand__(self, other: Any, /) -> Any:
        """``y & x`` with ``y`` not a tensor."""
        return pointwise.operator_rand(self, other)

    def __iand__(self, other: Any, /) -> Any:
        """``x &= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_iand(self, other)

    def __or__(self, other: Any, /) -> Any:
        """``x | y``, element by element."""
        return pointwise.operator_or(self, other)

    def __ror__(self, other: Any, /) -> Any:
        """``y | x`` with ``y`` not a tensor."""
        return pointwise.operator_ror(self, other)

    def __ior__(self, other: Any, /) -> Any:
        """``x |= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_ior(self, other)

    def __xor__(self, other: Any, /) -> Any:
        """``x ^ y``, element by element."""
        return pointwise.operator_xor(self, other)

    def __rxor__(self, other: Any, /) -> Any:
        """``y ^ x`` with ``y`` not a tensor."""
        return pointwise.operator_rxor(self, other)

    def __ixor__(self, other: Any, /) -> Any:
        """``x ^= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_ixor(self, other)

    def __lshift__(self, other: Any, /) -> Any:
        """``x << y``, element by element."""
        return pointwise.operator_lshift(self, other)

    def __rlshift__(self, other: Any, /) -> Any:
        """``y << x`` with ``y`` not a tensor."""
        return pointwise.operator_rlshift(self, other)

    def __ilshift__(self, other: Any, /) -> Any:
        """``x <<= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_ilshift(self, other)

    def __rshift__(self, other: Any, /) -> Any:
        """``x >> y``, element by element."""
        return pointwise.operator_rshift(self, other)

    def __rrshift__(self, other: Any, /) -> Any:
        """``y >> x`` with ``y`` not a tensor."""
        return pointwise.operator_rrshift(self, other)

    def __irshift__(self, other: Any, /) -> Any:
        """``x >>= y``: into ``x``'s memory (JAX fragments are replaced by new arrays)."""
        return pointwise.operator_irshift(self, other)

    def __eq__(self, other: Any, /) -> Any:  # type: ignore[override]
        """``x == y``, element by element: a boolean tensor."""
        return pointwise.operator_eq(self, other)

    def __ne__(self, other: Any, /) -> Any:  # type: ignore[override]
        """``x != y``, element by element: a boolean tensor."""
        return pointwise.operator_ne(self, other)

    def __lt__(self, other: Any, /) -> Any:
        """``x < y``, element by element: a boolean tensor."""
        return pointwise.operator_lt(self, other)

    def __le__(self, other: Any, /) -> Any:
        """``x <= y``, element by element: a boolean tensor."""
        return pointwise.operator_le(self, other)

    def __gt__(self, other: Any, /) -> Any:
        """``x > y``, element by element: a boolean tensor."""
        return pointwise.operator_gt(self, other)

    def __ge__(self, other: Any, /) -> Any:
        """``x >= y``, element by element: a boolean tensor."""
        return pointwise.operator_ge(self, other)

    def __neg__(self) -> DistributedTensor:
        """``-x``, element by element."""
        return pointwise.operator_neg(self)

    def __pos__(self) -> DistributedTensor:
        """``+x``, element by element."""
        return pointwise.operator_pos(self)

    def __abs__(self) -> DistributedTensor:
        """``abs(x)``, element by element."""
        return pointwise.operator_abs(self)

    def __invert__(self) -> DistributedTensor:
        """``~x``, element by element."""
        return pointwise.operator_invert(self)

    def __bool__(self) -> bool:
        """The truth value of a one-element tensor; others raise ``ValueError``, as NumPy's arrays."""
        return pointwise.truth(self)

    def __round__(self, ndigits: int | None = None) -> DistributedTensor:
        """``round(x)`` and ``round(x, n)``: half to even, as NumPy's ``round``."""
        return like.round(self, ndigits or 0)

    # -- element types, complex parts, placement (dlmg.ops) -----------------------
    def astype(self, dtype: Any, /, *, copy: bool = True) -> DistributedTensor:
        """The tensor converted to element type ``dtype``: :func:`dlmg.astype`."""
        return pointwise.astype(self, dtype, copy=copy)

    def conj(self) -> DistributedTensor:
        """The complex conjugate (a new tensor): :func:`dlmg.conj`."""
        return pointwise.conj(self)

    @property
    def real(self) -> DistributedTensor:
        """The real part (a new tensor)."""
        return pointwise.real(self)

    @property
    def imag(self) -> DistributedTensor:
        """The imaginary part (a new tensor)."""
        return pointwise.imag(self)

    @property
    def device(self) -> Any:
        """The array API ``device``: the one device every fragment is on, or, for a tensor
        on several devices (or processes), their :class:`~dlmg.device.Placement`.

        Creation functions take either back (``xp.zeros(n, device=x.device)``); see
        :attr:`devices` for the device of every fragment.
        """
        return like.device_of(self)

    def synchronize(self) -> DistributedTensor:
        """Wait until all queued work producing this tensor's local fragments is done; returns the tensor."""
        dispatch.synchronize_tensor(self)
        return self

    def to_device(self, device: Any, /, *, stream: Any = None) -> DistributedTensor:
        """The tensor laid out on ``device`` (one fragment there, or a placement's slab)."""
        return array_object.to_device(self, device, stream=stream)

    # -- reductions and statistics (dlmg.ops.reductions, dlmg.ops.statistics) -----
    def sum(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.sum` of the tensor."""
        return reductions.sum(self, axis=axis, **kwargs)

    def prod(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.prod` of the tensor."""
        return reductions.prod(self, axis=axis, **kwargs)

    def min(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.min` of the tensor."""
        return reductions.min(self, axis=axis, **kwargs)

    def max(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.max` of the tensor."""
        return reductions.max(self, axis=axis, **kwargs)

    def mean(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.mean` of the tensor."""
        return reductions.mean(self, axis=axis, **kwargs)

    def all(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.all` of the tensor."""
        return reductions.all(self, axis=axis, **kwargs)

    def any(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.any` of the tensor."""
        return reductions.any(self, axis=axis, **kwargs)

    def argmax(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.argmax` of the tensor."""
        return reductions.argmax(self, axis=axis, **kwargs)

    def argmin(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.argmin` of the tensor."""
        return reductions.argmin(self, axis=axis, **kwargs)

    def var(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.var` of the tensor."""
        return statistics.var(self, axis=axis, **kwargs)

    def std(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.std` of the tensor."""
        return statistics.std(self, axis=axis, **kwargs)

    def cumsum(self, axis: Any = None, **kwargs: Any) -> Any:
        """:func:`dlmg.cumsum` of the tensor."""
        return statistics.cumsum(self, axis=axis, **kwargs)

    # -- mode permutations and reshapes (dlmg.ops.shape, dlmg.array_api) ---------
    @property
    def T(self) -> DistributedTensor:
        """The transpose of a 2-D tensor (array API ``.T``); other ranks use :meth:`permute_dims`."""
        return shapes.transpose_matrix(self)

    @property
    def mT(self) -> DistributedTensor:
        """The last two modes swapped (array API ``mT``)."""
        return matrix_transpose(self)

    def permute_dims(self, axes: Any) -> DistributedTensor:
        """The modes reordered (no data moves): :func:`dlmg.permute_dims`."""
        return shapes.permute_dims(self, axes)

    def transpose(self, *axes: Any) -> DistributedTensor:
        """``x.transpose()``, ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``: :func:`dlmg.transpose`."""
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = tuple(axes[0])
        return shapes.transpose(self, axes or None)

    def reshape(self, *shape: Any, copy: bool | None = None) -> DistributedTensor:
        """``x.reshape(2, 8)`` or ``x.reshape((2, 8))``: :func:`dlmg.reshape` (a view of the
        fragments where the layout allows, else one redistribution; ``copy=False`` refuses
        to move data)."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return reshape(self, shape, copy=copy)

    def flatten(self) -> DistributedTensor:
        """The elements as a new 1-D tensor in row-major order (always a copy, as NumPy's)."""
        return array_object.flatten(self)

    def ravel(self) -> DistributedTensor:
        """The elements as a 1-D tensor in row-major order (a view where the layout allows)."""
        return array_object.ravel(self)

    # -- indexing, iteration, products (dlmg.array_api) ---------------------------
    def __getitem__(self, key: Any, /) -> DistributedTensor:
        """``x[key]``: the array API's indexing (views where the layout allows)."""
        return array_object.getitem(self, key)

    def __setitem__(self, key: Any, value: Any, /) -> None:
        """``x[key] = value``: the array API's assignment; refused into a pending reduction."""
        array_object.setitem(self, key, value)

    def __iter__(self) -> Iterator[DistributedTensor]:
        """The sub-tensors along mode 0, ``x[0]``, ``x[1]``... (views where the layout allows), as NumPy iterates."""
        return array_object.rows(self)

    def __matmul__(self, other: Any, /) -> Any:
        """``x @ y``: the namespace's :func:`~dlmg.array_api.matmul` (a value, never a pending sum)."""
        return matmul_operator(self, other)

    def __rmatmul__(self, other: Any, /) -> Any:
        """``y @ x`` with ``y`` not a tensor: see :meth:`__matmul__`."""
        return matmul_operator(other, self)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> Any:
        """The array API namespace of distributed tensors, :mod:`dlmg.array_api`."""
        return array_object.namespace(self, api_version=api_version)

    # -- Python values and copies (dlmg.array_api) --------------------------------
    def item(self) -> Any:
        """The one element as a Python scalar (``int``, ``float``, ``complex`` or ``bool``)."""
        return array_object.item(self)

    def __int__(self) -> int:
        """``int(x)`` of a one-element tensor."""
        return array_object.as_int(self)

    def __float__(self) -> float:
        """``float(x)`` of a one-element tensor."""
        return array_object.as_float(self)

    def __complex__(self) -> complex:
        """``complex(x)`` of a one-element tensor."""
        return array_object.as_complex(self)

    def __index__(self) -> int:
        """``operator.index(x)`` of a one-element integer tensor."""
        return array_object.as_index(self)

    def tolist(self) -> Any:
        """The elements as nested Python lists (gathered; across processes every process gets them)."""
        return array_object.tolist(self)

    def copy(self) -> DistributedTensor:
        """A copy: same layout, frameworks and devices, new memory (of the value, for a pending
        reduction: its layout without the pending replicas)."""
        return array_object.copy(self)

    def __copy__(self) -> DistributedTensor:
        """``copy.copy``: a copy with new memory, as NumPy's arrays make (see :meth:`copy`)."""
        return array_object.copy(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> DistributedTensor:
        """``copy.deepcopy``: a copy with new memory (see :meth:`copy`)."""
        return array_object.copy(self)

    # -- DLPack (dlmg.array_api) --------------------------------------------------
    def __dlpack__(self, /, *, stream: Any = None, max_version: Any = None, dl_device: Any = None,
                   copy: bool | None = None) -> Any:
        """The one buffer of a tensor held by one fragment; refused (``BufferError``) otherwise."""
        return array_object.dlpack(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the one fragment holding the tensor (see :meth:`__dlpack__`)."""
        return array_object.dlpack_device(self)

    # -- other libraries' distributed arrays (dlmg.interop) -----------------------
    def to_jax(self, *, mesh: Any = None, redistribute: bool = False) -> Any:
        """One sharded ``jax.Array`` over the fragments: :func:`dlmg.to_jax`."""
        return to_jax(self, mesh=mesh, redistribute=redistribute)

    def to_dtensor(self, mesh: Any = None) -> Any:
        """A torch ``DTensor`` over the fragments: :func:`dlmg.to_dtensor`."""
        return to_dtensor(self, mesh)

    @property
    def __partitioned__(self) -> dict[str, Any]:
        """The ``__partitioned__`` dictionary of the tensor: :func:`dlmg.interop.partitioned`."""
        return partitioned(self)

    # -- printing (dlmg._printing) ------------------------------------------------
    def __repr__(self) -> str:
        """``DistributedTensor(<values>, <layout summary>)``: the values as NumPy prints them."""
        return format_repr(self)

    def __str__(self) -> str:
        """The values as ``str`` of a NumPy array, then the layout summary."""
        return format_str(self)

    def __format__(self, spec: str) -> str:
        """``format(x, spec)``: ``str(x)`` for an empty ``spec``; the one element of a 0-d tensor formatted by ``spec``."""
        return format_spec(self, spec)


register_tensor_class(DistributedTensor)  # the one registration: lower layers build results of this class
