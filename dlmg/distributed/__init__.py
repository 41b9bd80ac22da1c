"""dlmg across processes: SPMD on torch.distributed or MPI.

Every process runs the same program and calls the same dlmg functions in the
same order; every process knows the whole layout (its ``ranks`` say which
process holds each fragment) and holds only its own fragments' memory.
Pointwise work never communicates; :meth:`~dlmg.DistributedTensor.gather`
(an all-gather, or to one root), :func:`dlmg.scatter`,
:meth:`~dlmg.DistributedTensor.redistribute` and the reductions do, through
the engine chosen here. Without :func:`init`, dlmg runs in one process.

Examples
--------
Under ``python -m torch.distributed.run --nproc-per-node 2 prog.py``::

    import dlmg, dlmg.distributed as dd
    dd.init("torch")
    layout = dd.slab((1024, 1024), axis=0)        # one slab per process
    x = dlmg.zeros(layout=layout, dtype="float32", framework="torch")
    full = x.gather()                              # every process gets it all
"""

from __future__ import annotations

import atexit
import inspect
from typing import Any, Callable

from ..device import Device
from ..errors import CollectiveError
from ..layout import Layout
from .state import check_ranks, current, rank, set_current, world_size
from .engine import REDUCE_OPS, Engine
from .registry import engine_factory, engine_names

__all__ = [
    "init", "finalize", "rank", "world_size", "backend", "local_device", "devices", "slab",
    "current_engine", "is_initialized", "Engine", "REDUCE_OPS", "engine_names",
]

#: Seconds a collective may wait for the other processes by default.
DEFAULT_TIMEOUT = 300.0

#: State (not a cache): the devices of the processes, learnt once at ``init``.
_devices: list[tuple[Device, ...]] = []


def init(backend: str = "torch", *, timeout: float = DEFAULT_TIMEOUT, **options: Any) -> Engine:
    """Make dlmg work across the processes of a torch.distributed group or MPI communicator.

    Parameters
    ----------
    backend : {"torch", "mpi"} or a registered engine name
        ``"torch"``: the default process group when it is initialised,
        otherwise one initialised from torchrun's environment (gloo, plus NCCL
        where CUDA is present). ``"mpi"``: ``mpi4py.MPI.COMM_WORLD``.
    timeout : float
        Seconds any collective waits for the other processes before it raises
        :class:`~dlmg.errors.CollectiveError`.
    **options
        Passed to the engine's factory unchanged; each engine names its own.
        The built-in ones take ``group=`` (``backend="torch"``: a
        ``torch.distributed.ProcessGroup`` instead of the default one) and
        ``comm=`` (``backend="mpi"``: an ``mpi4py`` communicator instead of
        ``COMM_WORLD``).

    Returns
    -------
    Engine
        The engine now used by every collective.

    Raises
    ------
    CollectiveError
        When dlmg is already initialised, or the group cannot be set up.
    TypeError
        For an option the engine does not take (the message lists the ones it does).
    """
    if current() is not None:
        raise CollectiveError(f"dlmg.distributed is already initialised ({current()!r}); call finalize() first")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    factory = engine_factory(backend)
    _check_options(backend, factory, options)
    engine = factory(timeout=float(timeout), **options)
    everyone = engine.allgather_object(engine.local_device())
    set_current(engine)
    _devices[:] = [tuple(everyone)]
    return engine


def _check_options(backend: str, factory: Callable[..., Any], options: dict[str, Any]) -> None:
    """Refuse options ``factory`` does not name (unless it takes ``**kwargs``)."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature: let it answer
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return
    known = [n for n, p in params.items() if p.kind is inspect.Parameter.KEYWORD_ONLY and n != "timeout"]
    unknown = [k for k in options if k not in params or k == "timeout"]
    if unknown:
        accepted = ", ".join(f"{n}=" for n in known) or "none"
        raise TypeError(
            f"backend={backend!r} takes no option {', '.join(repr(k) for k in unknown)}; its options: {accepted}"
        )


def finalize() -> None:
    """Return to single-process dlmg (and release a process group :func:`init` created)."""
    engine = current()
    set_current(None)
    _devices.clear()
    if engine is not None:
        engine.finalize()


atexit.register(finalize)


def is_initialized() -> bool:
    """Whether :func:`init` was called (and not :func:`finalize`)."""
    return current() is not None


def current_engine() -> Engine | None:
    """The engine in use, ``None`` in single-process mode."""
    return current()


def backend() -> str | None:
    """The engine's name (``"torch"``, ``"mpi"``), ``None`` in single-process mode."""
    engine = current()
    return None if engine is None else engine.name


def local_device() -> Device:
    """This process's device: ``cuda:LOCAL_RANK`` where the engine moves GPU memory, else ``cpu``."""
    engine = current()
    return Device("cpu", 0) if engine is None else engine.local_device()


def devices() -> tuple[Device, ...]:
    """Every process's :func:`local_device`, in rank order."""
    return _devices[0] if _devices else (local_device(),)


def slab(shape: Any, axis: int = 0) -> "Any":
    """The layout with one slab per process along ``axis``, each on its process's local device.

    Fragment ``r`` belongs to rank ``r``; see :meth:`dlmg.Layout.slab` for the
    split of uneven extents.
    """
    n = world_size()
    return Layout.slab(shape, axis, devices(), ranks=tuple(range(n)))
