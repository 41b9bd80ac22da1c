"""The interface every communication engine implements.

An :class:`Engine` is one group of processes that run the same program
(SPMD) and the few collectives dlmg needs from it: gathering small Python
objects (the agreement before every collective), all-gather of equal-sized
buffers, all-to-all(v), broadcast and all-reduce. Buffers are contiguous 1-D
arrays that the engine itself allocated (:meth:`Engine.empty`), so the engine
knows how to hand them to its transport; counts are in elements.

Every wait is bounded by the engine's ``timeout``; an engine raises
:class:`~dlmg.errors.CollectiveError` (naming the rank where it can) when a
collective fails or does not complete in time.

What is specific to one engine (torch.distributed, MPI) lives in that
engine's module; dlmg's collectives speak only this interface.
"""

from __future__ import annotations

import abc
import threading
from collections.abc import Sequence
from typing import Any, Callable

from ..device import Device
from ..errors import CollectiveError

__all__ = ["Engine", "REDUCE_OPS"]

#: The reduction operations of :meth:`Engine.allreduce`.
REDUCE_OPS = ("sum", "prod", "min", "max")


class Engine(abc.ABC):
    """A group of processes and the collectives dlmg runs on it.

    Attributes
    ----------
    name : str
        The engine's registered name (``"torch"``, ``"mpi"``).
    rank : int
        This process's rank in the group.
    world_size : int
        The number of processes.
    timeout : float
        Seconds any collective may wait before it raises.
    lock : threading.RLock
        Held for the whole of each of dlmg's collectives
        (:func:`~dlmg.distributed.agree.exclusive`): one at a time per process.
    broken : str or None
        Why the engine refuses further collectives: set when a wait ran out or a
        peer failed inside the transport, after which the communicator's state is
        unknown (messages of the failed collective may still be in flight).
    """

    name: str = ""

    def __init__(self, rank: int, world_size: int, timeout: float) -> None:
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.timeout = float(timeout)
        self.lock = threading.RLock()
        self.broken: str | None = None

    def check_usable(self, what: str) -> None:
        """Raise :class:`~dlmg.errors.CollectiveError` when the engine is ``broken``."""
        if self.broken is not None:
            raise CollectiveError(
                f"{what}: rank {self.rank} cannot run collectives any more: an earlier one failed in the "
                f"transport ({self.broken}); call dlmg.distributed.finalize() and init() again"
            )

    def fail(self, error: CollectiveError) -> CollectiveError:
        """Mark the engine ``broken`` by ``error`` (a transport failure) and return it."""
        if self.broken is None:
            self.broken = str(error)[:300]
        return error

    # -- where this process computes --------------------------------------
    @abc.abstractmethod
    def local_device(self) -> Device:
        """The device this process works on (``cuda:LOCAL_RANK`` with a GPU, else ``cpu``)."""

    @abc.abstractmethod
    def transport(self, device: Device) -> str:
        """How buffers on ``device`` travel, for plans and docs (``"gloo"``, ``"nccl"``,
        ``"mpi"``, ``"mpi, staged through host memory"``)."""

    # -- buffers -----------------------------------------------------------
    @abc.abstractmethod
    def empty(self, n: int, dtype: str, device: Device) -> tuple[Any, str]:
        """A contiguous 1-D buffer of ``n`` elements the engine can communicate.

        Returns
        -------
        tuple
            ``(array, framework)``: the array and the name of its framework (a
            viewable one: the copy engine writes into it and reads from it).
        """

    def accepts(self, array: Any, framework: str) -> bool:
        """Whether ``array`` (contiguous, 1-D) can be communicated as it is, without staging."""
        return False

    # -- collectives ---------------------------------------------------------
    @abc.abstractmethod
    def allgather_object(self, obj: Any) -> list[Any]:
        """Every process's picklable ``obj``, in rank order."""

    @abc.abstractmethod
    def all_gather(self, send: Any, recv: Any) -> None:
        """``recv[r * n:(r + 1) * n] = send of rank r`` (``n`` elements each)."""

    @abc.abstractmethod
    def alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any, recv_counts: Sequence[int]) -> None:
        """Every process sends ``send_counts[r]`` consecutive elements of ``send`` to rank ``r``
        and receives ``recv_counts[r]`` from it, in rank order: one message per pair."""

    def start_alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any,
                        recv_counts: Sequence[int]) -> Callable[[], None]:
        """Start :meth:`alltoallv`; returns the function that waits for it (bounded by the
        timeout). Engines that can overlap it with local work override this; by
        default it runs at once."""
        self.alltoallv(send, send_counts, recv, recv_counts)
        return lambda: None

    @abc.abstractmethod
    def broadcast(self, buf: Any, root: int) -> None:
        """Rank ``root``'s ``buf`` into everyone's ``buf``."""

    @abc.abstractmethod
    def allreduce(self, buf: Any, op: str) -> None:
        """Element-wise ``op`` (see :data:`REDUCE_OPS`) of every process's ``buf``, in place."""

    def settle(self, device: Device) -> None:
        """Wait until received data on ``device`` is readable by any framework (CUDA streams)."""

    def barrier(self) -> None:
        """Wait until every process arrives (bounded by ``timeout``)."""
        self.allgather_object(None)

    def finalize(self) -> None:
        """Release what :func:`dlmg.distributed.init` set up (a no-op for borrowed groups)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} rank {self.rank} of {self.world_size}>"
