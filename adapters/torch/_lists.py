"""torch's list operators: ``torch._foreach_*``, or large CUDA arrays on two streams.

The :class:`~dlmg.adapters.capabilities.ListOperators` side of the torch adapter.
"""

from __future__ import annotations

from functools import lru_cache, partial
from typing import Any

from .._common import OPERATORS, pair_by_pair, partners
from ._export import current as device_current

#: torch's list operations of the arithmetic operators (see ``list_operator``). Not
#: ``pow``: on CUDA ``_foreach_pow`` differs from ``**`` in the last bit for float64
#: and complex64 with small integer exponents, which ``**`` computes as products.
_FOREACH_NAMES = {"add": "add", "subtract": "sub", "multiply": "mul", "divide": "div"}
#: CUDA arrays from this size on take the operator array by array, alternating
#: between the current stream and a second one, so that one array's kernel fills
#: the SMs another's last wave leaves idle. The streams cost the host time per array
#: (allocating, switching, launching): for smaller arrays that is more than the
#: kernel's time, and the host falls behind the device.
_TWO_STREAM_BYTES = 32 << 20
#: CUDA device index -> the second stream of the large list operations




def _list_operation(torch: Any, foreach: Any, pairwise: tuple[Any, Any, str], in_place: bool,
                    xs: list[Any], ys: Any) -> Any:
    """``foreach(xs, ys)``; for CUDA arrays of :data:`_TWO_STREAM_BYTES` and more the
    operator array by array on two streams (:func:`_on_two_streams`), or pair by pair
    where they are not all C-contiguous. In place the results are written into ``xs``."""
    if not xs or not xs[0].is_cuda or xs[0].nbytes < _TWO_STREAM_BYTES:
        return foreach(xs, ys)
    plain, inplace, function = pairwise
    operation = inplace if in_place else plain
    if len(xs) < 2 or not all(x.is_contiguous() for x in xs) or (
            isinstance(ys, list) and not all(y.is_contiguous() for y in ys)):
        return pair_by_pair(operation, in_place, xs, ys)
    return _on_two_streams(torch, operation, None if in_place else getattr(torch, function), xs, ys)




def _on_two_streams(torch: Any, operation: Any, into: Any, xs: list[Any], ys: Any) -> list[Any] | None:
    """``operation(x, y)`` for every pair, every other pair queued on a second stream
    of the arrays' device (see :data:`_TWO_STREAM_BYTES`); ``into(x, y, out=...)``
    writes results allocated on the current stream, in place (``into`` ``None``)
    ``operation`` writes into ``x``.

    The second stream starts after the work queued so far on the current one,
    and the current one waits for it before anything queued later: to other
    streams and to the caching allocator (which hands memory out again per
    stream) the call is work of the current stream, like one operator.
    """
    cuda = torch.cuda
    device = xs[0].device
    others = partners(xs, ys)
    outs = xs
    if into is not None:
        dtype = _result_dtype(torch, operation, xs[0], others[0])
        outs = [torch.empty_like(x, dtype=dtype) for x in xs]  # on the current stream
    index = device.index
    side = _side_stream(torch, index)
    with device_current(torch, index):  # set_stream also makes the stream's device current
        current = cuda.current_stream(index)
        side.wait_stream(current)
        try:
            cuda.set_stream(side)
            try:
                _each(operation, into, xs[1::2], others[1::2], outs[1::2])
            finally:
                cuda.set_stream(current)
            _each(operation, into, xs[0::2], others[0::2], outs[0::2])
        finally:
            current.wait_stream(side)
    return None if into is None else outs


def _each(operation: Any, into: Any, xs: list[Any], ys: list[Any], outs: list[Any]) -> None:
    """``into(x, y, out=out)`` for every triple, or ``operation(x, y)`` in place."""
    if into is None:
        for x, y in zip(xs, ys):
            operation(x, y)
    else:
        for x, y, out in zip(xs, ys, outs):
            into(x, y, out=out)


def _result_dtype(torch: Any, operation: Any, x: Any, y: Any) -> Any:
    """The dtype of ``operation(x, y)``: torch's promotion, which looks at dtypes, at
    which operands are 0-d and at the kind of a Python number (raising the
    operator's own error for operands it refuses)."""
    tensor = isinstance(y, torch.Tensor)
    kind: Any = y.dtype if tensor else type(y)
    return _promoted(torch, operation, x.dtype, x.dim() == 0, kind, tensor,
                     tensor and y.dim() == 0)


@lru_cache(maxsize=256)
def _promoted(torch: Any, operation: Any, x_dtype: Any, x_scalar: bool, y_kind: Any, y_tensor: bool,
              y_scalar: bool) -> Any:
    """:func:`_result_dtype` worked out on meta tensors, once per operator, dtypes and
    0-d-ness (on meta tensors 250-320 us, remembered 0.10 us on the 2-core CPU)."""
    meta_x = torch.empty(() if x_scalar else (1,), dtype=x_dtype, device="meta")
    meta_y = torch.empty(() if y_scalar else (1,), dtype=y_kind, device="meta") if y_tensor else y_kind(1)
    return operation(meta_x, meta_y).dtype


@lru_cache(maxsize=16)
def _side_stream(torch: Any, index: int) -> Any:
    """The second stream of CUDA device ``index`` for the large list operations (one per
    device, made on first use and kept: a stream is a device resource, not a value)."""
    return torch.cuda.Stream(torch.device("cuda", index))


@lru_cache(maxsize=16)
def list_operator(torch: Any, name: str, in_place: bool) -> Any:
    """``torch._foreach_<op>`` (``_foreach_<op>_`` in place) behind
    :func:`_list_operation`, or ``None`` where torch has none for ``name``; made
    once per operator (a ``partial`` each call would cost as much as the lookup)."""
    suffix = _FOREACH_NAMES.get(name)
    if suffix is None:
        return None
    foreach = getattr(torch, f"_foreach_{suffix}{'_' if in_place else ''}", None)
    if foreach is None:  # an older torch
        return None
    return partial(_list_operation, torch, foreach, (*OPERATORS[name], suffix), in_place)
