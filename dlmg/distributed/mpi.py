"""The MPI engine, through mpi4py (any MPI; ``mpiexec -n N python prog.py``).

Buffers travel as bytes (``MPI.BYTE``), so every dtype goes through all-gather
and all-to-all(v); all-reduce uses the MPI type of the element. Every
collective is started non-blocking (``Iallgather``, ``Ialltoallv``...) and
polled until it completes or the engine's timeout passes, so no wait is
unbounded.

The engine talks on two duplicates of the communicator it is given: one for
the agreements (small pickled objects), one for the data. A process that fails
between the two therefore never has its next agreement matched with its peers'
pending exchange (MPI matches collectives by order on a communicator). A
request still pending when its wait runs out is freed, the engine refuses
further collectives (:attr:`~dlmg.distributed.engine.Engine.broken`), and
:meth:`MpiEngine.finalize` frees both duplicates, so ``MPI.Finalize`` finds no
pending reference on the communicators it owns. After a failed collective a peer may
be dead or still waiting in it, and ``MPI_Finalize`` at exit would wait for it
forever: finalizing a broken engine waits a bounded time for every peer to finalize
too (a non-blocking barrier), and where one does not come, the process ends the job
with ``MPI_Abort`` when it exits (exit status 1), so no survivor hangs.

CUDA memory goes to MPI directly only when the library says it is CUDA-aware
(the MPI 4.1 info key ``mpi_memory_alloc_kinds`` lists ``cuda``); otherwise
each message of CUDA memory is staged through host memory by the framework
that owns it, through the adapter contract (CuPy memory through CuPy, torch
memory through torch), and :meth:`MpiEngine.transport` says so. Host memory of
any framework travels as it is: MPI reads and writes its bytes in place.
"""

from __future__ import annotations

import ctypes
import os
import pickle
from typing import Any, Callable, Sequence

import numpy as np

from ..adapters import carries, in_use
from ..device import Device
from ..dtypes import info
from ..errors import CollectiveError, DeviceError, FrameworkNotInstalledError
from ..registry import adapter_for, adapter_names, get_adapter
from ._timing import wait_until
from .engine import RECORD, Engine, record, unpickle

__all__ = ["MpiEngine", "create"]


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise FrameworkNotInstalledError(
            f"backend='mpi' needs mpi4py and an MPI library ({exc}); install them with: pip install mpi4py mpich"
        ) from exc
    return MPI


def create(*, comm: Any = None, timeout: float = 300.0) -> "MpiEngine":
    """The engine over ``comm`` (``MPI.COMM_WORLD`` by default)."""
    MPI = _mpi()
    return MpiEngine(MPI.COMM_WORLD if comm is None else comm, timeout)


def cuda_aware(comm: Any) -> bool:
    """Whether the MPI library takes CUDA memory (its ``mpi_memory_alloc_kinds`` lists cuda)."""
    try:
        info = comm.Get_info()
        kinds = info.Get("mpi_memory_alloc_kinds") or ""
        info.Free()
    except Exception:  # an MPI older than 4.1 cannot tell
        return False
    return "cuda" in kinds.lower()


class MpiEngine(Engine):
    """Collectives of one MPI communicator."""

    name = "mpi"

    def __init__(self, comm: Any, timeout: float) -> None:
        super().__init__(comm.Get_rank(), comm.Get_size(), timeout)
        self.comm = comm
        self._data = comm.Dup()  # the exchanges
        self._objects = comm.Dup()  # the agreements
        self._MPI = _mpi()
        self.cuda_aware = cuda_aware(comm)
        self._gpu = _local_gpu()

    # -- devices ---------------------------------------------------------------
    def local_device(self) -> Device:
        if self._gpu is None:  # a framework imported after init may bring the GPU
            self._gpu = _local_gpu()
        return self._gpu if self._gpu is not None else Device("cpu", 0)

    def transport(self, device: Device) -> str:
        if device.is_host or self.cuda_aware:
            return "mpi"
        return "mpi, staged through host memory"

    # -- buffers -----------------------------------------------------------------
    def empty(self, n: int, dtype: str, device: Device) -> tuple[Any, str]:
        adapter = _holder(device, dtype)
        return adapter.empty((int(n),), dtype, device), adapter.name

    def accepts(self, array: Any, framework: str) -> bool:
        if framework == "numpy":
            return True
        try:
            device = get_adapter(framework).device_of(array)
        except Exception:  # a framework dlmg cannot ask: let the copy engine stage it
            return False
        return device.is_host or self.cuda_aware

    def _buffer(self, buf: Any) -> tuple[Any, Callable[[], None]]:
        """``(what MPI takes, what to run once the operation completed)`` for ``buf``.

        Host memory is viewed as bytes in place; CUDA memory goes as it is to a
        CUDA-aware MPI, otherwise through a host copy made (and, for a buffer
        that receives, written back) by the buffer's own framework.
        """
        if isinstance(buf, np.ndarray):
            return buf.reshape(-1).view(np.uint8), _nothing
        adapter = adapter_for(buf)
        device = adapter.device_of(buf)
        if device.is_host:
            return _host_bytes(adapter, buf), _nothing
        if self.cuda_aware:
            return buf, _nothing
        host, host_adapter = _to_host(adapter, buf)

        def back() -> None:
            adapter.copy_into(buf, adapter.to_device(host, device))
            adapter.synchronize(device)

        return _host_bytes(host_adapter, host), back

    def _wait(self, request: Any, what: str) -> None:
        def release() -> None:
            try:
                request.Free()
            except Exception:  # an MPI that refuses to free it: the engine is broken either way
                pass

        try:
            wait_until(request.Test, self.timeout, f"MPI {what}", self.rank, release)
        except CollectiveError as exc:
            raise self.fail(exc) from None

    def _start(self, what: str) -> Any:
        """The data communicator, after checking the engine is still usable."""
        self.check_usable(f"MPI {what}")
        return self._data

    # -- collectives ------------------------------------------------------------
    def allgather_object(self, obj: Any) -> list[Any]:
        MPI = self._MPI
        self.check_usable("MPI allgather of objects")
        data = pickle.dumps(obj)
        send = np.frombuffer(record(data), dtype=np.uint8)
        records = np.empty(RECORD * self.world_size, dtype=np.uint8)
        self._wait(self._objects.Iallgather([send, MPI.BYTE], [records, MPI.BYTE]), "allgather of objects")

        def rest(lengths: list[int]) -> list[bytes]:
            sizes = np.asarray(lengths, dtype=np.int64)
            displs = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            recv = np.empty(int(sizes.sum()), dtype=np.uint8)
            self._wait(self._objects.Iallgatherv([np.frombuffer(data, dtype=np.uint8), MPI.BYTE],
                                                 [recv, (sizes, displs), MPI.BYTE]), "allgatherv of objects")
            return [recv[d: d + n].tobytes() for d, n in zip(displs, sizes)]

        return unpickle(self, "MPI allgather of objects", records.tobytes(), rest)

    def all_gather(self, send: Any, recv: Any) -> None:
        MPI = self._MPI
        (s, _), (r, back) = self._buffer(send), self._buffer(recv)
        self._wait(self._start("allgather").Iallgather([s, MPI.BYTE], [r, MPI.BYTE]), "allgather")
        back()

    def alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any, recv_counts: Sequence[int]) -> None:
        self.start_alltoallv(send, send_counts, recv, recv_counts)()

    def start_alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any,
                        recv_counts: Sequence[int]) -> Any:
        MPI = self._MPI
        (s, _), (r, back) = self._buffer(send), self._buffer(recv)
        item = _itemsize(send)
        sc = np.asarray(send_counts, dtype=np.int64) * item
        rc = np.asarray(recv_counts, dtype=np.int64) * item
        sd = np.concatenate(([0], np.cumsum(sc)[:-1]))
        rd = np.concatenate(([0], np.cumsum(rc)[:-1]))
        request = self._start("alltoallv").Ialltoallv([s, (sc, sd), MPI.BYTE], [r, (rc, rd), MPI.BYTE])

        def wait() -> None:
            self._wait(request, "alltoallv")
            back()

        return wait

    def broadcast(self, buf: Any, root: int) -> None:
        b, back = self._buffer(buf)
        self._wait(self._start("bcast").Ibcast([b, self._MPI.BYTE], root=root), "bcast")
        back()

    def allreduce(self, buf: Any, op: str) -> None:
        MPI = self._MPI
        table = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
        arr = buf if isinstance(buf, np.ndarray) else np.from_dlpack(buf)
        if not arr.flags.writeable:
            raise CollectiveError("allreduce needs a writable buffer")
        self._wait(self._start("allreduce").Iallreduce(MPI.IN_PLACE, [arr.reshape(-1), MPI._typedict[arr.dtype.char]], table[op]),
                   f"allreduce ({op})")

    def finalize(self) -> None:
        if self._MPI.Is_finalized():
            return
        if self.broken is not None and not self._peers_arrive():
            # A peer is gone or stuck: MPI_Finalize at exit would wait for it forever.
            # mpi4py then ends the job with MPI_Abort instead (as ``python -m mpi4py``
            # does after an uncaught exception).
            abort_at_exit = getattr(self._MPI, "_set_abort_status", None)
            if abort_at_exit is not None:
                abort_at_exit(1)
        for comm in (self._data, self._objects):
            try:
                comm.Free()
            except Exception:  # finalized already, or MPI refuses: nothing left to release
                pass


    def _peers_arrive(self) -> bool:
        """Whether every peer reaches finalize within :data:`FINALIZE_WAIT` timeouts: a
        non-blocking barrier on the communicator the engine was given (its own collectives
        run on duplicates, so no pending exchange can match it)."""
        request = self.comm.Ibarrier()
        try:
            wait_until(request.Test, FINALIZE_WAIT * self.timeout, "finalize", self.rank)
        except CollectiveError:
            return False
        return True


#: How many collective timeouts a broken engine's finalize waits for its peers: a late
#: peer first runs into its own timeout in the collective that failed, then arrives.
FINALIZE_WAIT = 4


def _nothing() -> None:
    pass


def _itemsize(buf: Any) -> int:
    if isinstance(buf, np.ndarray):
        return buf.itemsize
    return info(adapter_for(buf).dtype_of(buf)).itemsize


def _holder(device: Device, dtype: str) -> Any:
    """The adapter that allocates message buffers of ``dtype`` on ``device``: NumPy on the
    host where it carries the dtype, else the first framework in use that reaches the
    device and carries it (a CuPy-only program gets CuPy buffers, never torch ones)."""
    if device.is_host and carries(get_adapter("numpy"), dtype):
        return get_adapter("numpy")
    for name in adapter_names():
        try:
            adapter = get_adapter(name)
        except Exception:  # a broken third-party adapter: not a candidate
            continue
        if in_use(adapter) and adapter.supports(device) and carries(adapter, dtype):
            return adapter
    raise DeviceError(f"the MPI engine found no framework in use that holds {dtype} on {device}")


def _host_bytes(adapter: Any, buf: Any) -> np.ndarray:
    """The bytes of a contiguous host array of any framework, viewed in place."""
    n = int(np.prod(adapter.shape_of(buf), dtype=np.int64)) * info(adapter.dtype_of(buf)).itemsize
    if n == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer(memoryview((ctypes.c_uint8 * n).from_address(adapter.data_ptr(buf))), dtype=np.uint8)


def _to_host(adapter: Any, buf: Any) -> tuple[Any, Any]:
    """A host copy of CUDA ``buf`` made by its own framework, and that copy's adapter:
    the framework's own host array, or a NumPy one for a framework without host
    arrays (whose ``to_device`` takes NumPy arrays back)."""
    host = Device("cpu", 0)
    if adapter.supports(host):
        moved = adapter.to_device(buf, host)
        adapter.synchronize(adapter.device_of(buf))
        return moved, adapter
    return np.from_dlpack(buf, device="cpu", copy=True), get_adapter("numpy")


#: A CUDA ordinal no machine has.
_NO_SUCH_GPU = 1 << 20


def _local_gpu() -> Device | None:
    """``cuda:LOCAL_RANK`` where a framework in use sees a GPU, else ``None`` (nothing is imported)."""
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or os.environ.get("MPI_LOCALRANKID") or "0"
    for name in adapter_names():
        try:
            adapter = get_adapter(name)
        except Exception:  # a broken third-party adapter
            continue
        if not in_use(adapter) or adapter.supports(Device("cuda", _NO_SUCH_GPU)):
            continue  # (an adapter that takes any device, such as the DLPack one, counts no GPU)
        count = 0
        while adapter.supports(Device("cuda", count)):
            count += 1
        if count:
            return Device("cuda", int(local) % count)
    return None
