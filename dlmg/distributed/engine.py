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
import pickle
import threading
from collections.abc import Sequence
from typing import Any, Callable

from ..device import Device
from ..errors import CollectiveError

__all__ = ["Engine", "REDUCE_OPS", "RECORD", "INLINE", "record", "unpickle"]

#: The reduction operations of :meth:`Engine.allreduce`.
REDUCE_OPS = ("sum", "prod", "min", "max")

#: Bytes each process sends in the first, fixed-size all-gather of
#: :meth:`Engine.allgather_object`: the pickle's length (8 bytes) and its first
#: :data:`INLINE` bytes. An agreement's own object (a digest, a flag, a small vote)
#: is 35 to 60 bytes pickled, so it travels in this one all-gather; a longer one takes
#: a second all-gather of the whole pickles. A small all-gather costs its latency, not
#: its bytes, so carrying the short pickle inline costs nothing over its length alone.
RECORD = 128
INLINE = RECORD - 8
#: A length no pickle of dlmg's reaches (1 TiB): a record claiming more is no record.
_MOST = 1 << 40


def record(data: bytes) -> bytes:
    """The fixed-size record of one pickle: its length, then its first :data:`INLINE` bytes."""
    head = data[:INLINE]
    return len(data).to_bytes(8, "little") + head + bytes(INLINE - len(head))


def unpickle(engine: "Engine", what: str, records: bytes,
             rest: Callable[[list[int]], list[bytes]]) -> list[Any]:
    """Every process's object from the all-gathered ``records`` (``world_size`` of
    :data:`RECORD` bytes each), calling ``rest(lengths)`` for the whole pickles
    (in rank order) when one is longer than :data:`INLINE`.

    Every process reads the same lengths, so all of them call ``rest`` or none does.

    Raises
    ------
    CollectiveError
        When the bytes are no records of pickles: the processes run different
        sequences of collectives (the engine is marked broken).
    """
    lengths = [int.from_bytes(records[r * RECORD: r * RECORD + 8], "little") for r in range(engine.world_size)]
    try:
        if max(lengths) >= _MOST:
            raise ValueError(f"a length of {max(lengths)} bytes")
        if max(lengths) > INLINE:
            return [pickle.loads(p) for p in rest(lengths)]
        return [pickle.loads(records[r * RECORD + 8: r * RECORD + 8 + n]) for r, n in enumerate(lengths)]
    except CollectiveError:
        raise
    except Exception as exc:
        raise engine.fail(CollectiveError(
            f"{what} on rank {engine.rank} received bytes no process sent for it "
            f"({type(exc).__name__}: {exc}); the processes run different sequences of collectives"
        )) from None


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
        """Every process's picklable ``obj``, in rank order.

        The built-in engines send one fixed-size all-gather (:func:`record`) and a
        second one only when some pickle is longer than :data:`INLINE` bytes."""

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
