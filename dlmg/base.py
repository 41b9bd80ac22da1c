"""What a distributed tensor holds: its layout, its fragments, its element type.

:class:`TensorBase` is the data of a tensor, with the two constructors dlmg's own
modules use. It sits below every layer that
makes tensors (construction, movement, operations, io, interop), so those layers
build their results without knowing the public class:
``type(x)._create(layout, fragments, dtype)`` where an operand ``x`` gives the
class, ``TensorBase._create(...)`` where none does (a scatter, a new tensor of a
creation function).

:class:`dlmg.DistributedTensor` (:mod:`dlmg.tensor`, at the top of the import
order) subclasses it with every method and operator, and names itself as the class
those results are made of (:func:`register_tensor_class`, called once by
:mod:`dlmg.tensor`): so every tensor any function returns is a
:class:`~dlmg.DistributedTensor`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Sequence, TypeGuard

from .distributed.state import check_ranks
from .dtypes import canonical
from .fragment import Fragment
from .registry import adapter_for

if TYPE_CHECKING:  # pragma: no cover
    from .layout import Layout
    from .tensor import DistributedTensor

__all__ = ["TensorBase", "register_tensor_class", "is_tensor"]

_CREATE = object()  # guards the constructor

class TensorBase:
    """The layout, fragments and dtype of a distributed tensor.

    Attributes
    ----------
    layout : Layout
        How the elements are spread.
    dtype : str
        The dlmg element type name (``"float32"``, ``"bfloat16"``...).
    fragments : tuple of Fragment
        One per layout fragment, in layout order.
    """

    # The class TensorBase._create makes (dlmg.DistributedTensor once dlmg.tensor is
    # imported, which `import dlmg` does): see register_tensor_class.
    _made: ClassVar[type["TensorBase"]]

    # What movement worked out about this tensor's current fragments (plans, source
    # buffers and views): a dlmg.movement.sources.Remembered, made on the first move.
    _remembered: Any = None
    # Where operations run this tensor's fragments (executors, frameworks, device groups):
    # a dlmg.ops._placement.Placement, made on the first operation and handed to results.
    # Worth keeping: making it costs a noticeable part of an operator's time, finding
    # it almost nothing.
    _placement: Any = None
    # Whether the tensor is a fresh operator result whose memory a following operator
    # may reuse when nothing else holds it (``a * b`` in ``a * b + c``; dlmg.ops.pointwise).
    _fresh: bool = False

    def __init__(self, *args: Any, token: object = None, **kwargs: Any) -> None:
        if token is not _CREATE:
            raise TypeError(
                "DistributedTensor objects are made by dlmg.from_fragments, dlmg.from_pointers, "
                "dlmg.empty/zeros/ones/full, dlmg.scatter, redistribute() and to()"
            )
        layout, fragments, dtype = args
        self.layout: "Layout" = layout
        self.dtype: str = dtype
        self.fragments: tuple[Fragment, ...] = tuple(fragments)

    def __getstate__(self) -> dict[str, Any]:
        """What pickling and copying keep: the layout, the dtype and the fragments
        (what operations remember about the tensor is found again on use)."""
        return {"layout": self.layout, "dtype": self.dtype, "fragments": self.fragments}

    # -- construction (trusted, unvalidated) ---------------------------------
    @classmethod
    def _create(cls, layout: "Layout", fragments: Sequence[Fragment], dtype: str) -> "DistributedTensor":
        """A tensor of ``cls`` holding ``fragments``, which fit ``layout`` by construction;
        called on :class:`TensorBase` itself, a tensor of the class named by
        :func:`register_tensor_class` (:class:`dlmg.DistributedTensor`)."""
        check_ranks(layout, "a distributed tensor")  # (a rank no process holds would read as missing rows)
        # __init__'s work without its call, which checks a token and unpacks arguments
        # (a large part of making a tensor; every wrap and operation makes one)
        self = object.__new__(TensorBase._made if cls is TensorBase else cls)
        self.layout, self.dtype, self.fragments = layout, dtype, tuple(fragments)
        return self  # type: ignore[return-value]  # (every class made is DistributedTensor or its subclass)

    @classmethod
    def _from_arrays(cls, arrays: Sequence[Any], layout: "Layout", dtype: str | None = None) -> "DistributedTensor":
        """A tensor whose fragment ``i`` is ``arrays[i]`` (``None`` for remote ones), unchecked.

        For dlmg's own modules, which build arrays that fit by construction.
        """
        frags = []
        last_type: type | None = None
        adapter: Any = None
        for frag, array in zip(layout.fragments, arrays):
            if array is None:
                frags.append(Fragment.remote(frag))
                continue
            if type(array) is not last_type:  # results of one operation share a type
                adapter, last_type = adapter_for(array), type(array)
            frags.append(Fragment.of_result(frag, array, adapter.name, adapter))
        if dtype is None:
            first = next((f for f in frags if f._array is not None), None)
            dtype = first.adapter.dtype_of(first._array) if first is not None else "float32"
        return cls._create(layout, frags, canonical(dtype))

    def _replace_arrays(self, arrays: Mapping[int, Any]) -> None:
        """Put new arrays (same shape, dtype and device) in place of some fragments (in-place
        updates of immutable JAX fragments)."""
        frags = list(self.fragments)
        for index, array in arrays.items():
            frags[index] = frags[index].with_array(array)
        self.fragments = tuple(frags)


TensorBase._made = TensorBase  # until dlmg.tensor names the public class


def register_tensor_class(cls: type[TensorBase]) -> None:
    """Name ``cls`` as the class :meth:`TensorBase._create` makes: the one registration of
    dlmg, which :mod:`dlmg.tensor` calls once with :class:`dlmg.DistributedTensor` (the
    layers below the public class build their results through it)."""
    if not (isinstance(cls, type) and issubclass(cls, TensorBase)):
        raise TypeError(f"register_tensor_class takes a subclass of TensorBase, got {cls!r}")
    TensorBase._made = cls


def is_tensor(obj: Any) -> TypeGuard["DistributedTensor"]:
    """Whether ``obj`` is a distributed tensor (for the layers below :mod:`dlmg.tensor`)."""
    return isinstance(obj, TensorBase)
