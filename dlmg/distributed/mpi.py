"""The MPI engine, through mpi4py (any MPI; ``mpiexec -n N python prog.py``).

Buffers travel as bytes (``MPI.BYTE``), so every dtype goes through all-gather
and all-to-all(v); all-reduce uses the MPI type of the element. Every
collective is started non-blocking (``Iallgather``, ``Ialltoallv``...) and
polled until it completes or the engine's timeout passes, so no wait is
unbounded.

CUDA memory goes to MPI directly only when the library says it is CUDA-aware
(the MPI 4.1 info key ``mpi_memory_alloc_kinds`` lists ``cuda``); otherwise
messages of CUDA tensors are staged through pinned host memory, and
:meth:`MpiEngine.transport` says so.
"""

from __future__ import annotations

import pickle
from typing import Any, Sequence

import numpy as np

from ..device import Device
from ..errors import CollectiveError
from ._timing import wait_until
from .engine import Engine
from ..errors import FrameworkNotInstalledError
from ..registry import get_adapter

__all__ = ["MpiEngine", "create"]


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise FrameworkNotInstalledError(
            f"backend='mpi' needs mpi4py and an MPI library ({exc}); install them with: pip install mpi4py mpich"
        ) from exc
    return MPI


def create(*, group: Any = None, comm: Any = None, timeout: float = 300.0) -> "MpiEngine":
    """The engine over ``comm`` (``MPI.COMM_WORLD`` by default)."""
    if group is not None:
        raise TypeError("backend='mpi' takes comm= (an mpi4py communicator), not group=")
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
        self._MPI = _mpi()
        self.cuda_aware = cuda_aware(comm)
        self._gpu = _local_gpu()

    # -- devices ---------------------------------------------------------------
    def local_device(self) -> Device:
        return self._gpu if self._gpu is not None else Device("cpu", 0)

    def transport(self, device: Device) -> str:
        if device.is_host or self.cuda_aware:
            return "mpi"
        return "mpi, staged through host memory"

    # -- buffers -----------------------------------------------------------------
    def empty(self, n: int, dtype: str, device: Device) -> tuple[Any, str]:
        if device.is_host:
            name = "numpy" if _numpy_carries(dtype) else "torch"
            return get_adapter(name).empty((int(n),), dtype, device), name
        if self.cuda_aware:
            return get_adapter("torch").empty((int(n),), dtype, device), "torch"
        import torch

        return torch.empty(int(n), dtype=_torch_dtype(dtype), pin_memory=True), "torch"  # staging

    def accepts(self, array: Any, framework: str) -> bool:
        if framework == "numpy":
            return True
        if framework == "torch":
            return array.device.type == "cpu" or self.cuda_aware
        return False

    def _buffer(self, buf: Any) -> Any:
        """A byte buffer object MPI takes, over ``buf``'s memory."""
        if isinstance(buf, np.ndarray):
            return buf.reshape(-1).view(np.uint8)
        module = type(buf).__module__.partition(".")[0]
        if module == "torch":
            import torch

            t = buf.reshape(-1).view(torch.uint8)
            return t.numpy() if t.device.type == "cpu" else t
        return np.from_dlpack(buf).reshape(-1).view(np.uint8)

    def _wait(self, request: Any, what: str) -> None:
        wait_until(request.Test, self.timeout, f"MPI {what}", self.rank)

    # -- collectives ------------------------------------------------------------
    def allgather_object(self, obj: Any) -> list[Any]:
        MPI = self._MPI
        data = np.frombuffer(pickle.dumps(obj), dtype=np.uint8)
        sizes = np.empty(self.world_size, dtype=np.int64)
        self._wait(self.comm.Iallgather([np.array([data.size], dtype=np.int64), MPI.INT64_T],
                                        [sizes, MPI.INT64_T]), "allgather (sizes)")
        displs = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        recv = np.empty(int(sizes.sum()), dtype=np.uint8)
        self._wait(self.comm.Iallgatherv([data, MPI.BYTE], [recv, (sizes, displs), MPI.BYTE]), "allgatherv")
        return [pickle.loads(recv[d: d + n].tobytes()) for d, n in zip(displs, sizes)]

    def all_gather(self, send: Any, recv: Any) -> None:
        MPI = self._MPI
        self._wait(self.comm.Iallgather([self._buffer(send), MPI.BYTE], [self._buffer(recv), MPI.BYTE]), "allgather")

    def alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any, recv_counts: Sequence[int]) -> None:
        self.start_alltoallv(send, send_counts, recv, recv_counts)()

    def start_alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any,
                        recv_counts: Sequence[int]) -> Any:
        MPI = self._MPI
        s, r = self._buffer(send), self._buffer(recv)
        item = _itemsize(send)
        sc = np.asarray(send_counts, dtype=np.int64) * item
        rc = np.asarray(recv_counts, dtype=np.int64) * item
        sd = np.concatenate(([0], np.cumsum(sc)[:-1]))
        rd = np.concatenate(([0], np.cumsum(rc)[:-1]))
        request = self.comm.Ialltoallv([s, (sc, sd), MPI.BYTE], [r, (rc, rd), MPI.BYTE])
        return lambda: self._wait(request, "alltoallv")

    def broadcast(self, buf: Any, root: int) -> None:
        self._wait(self.comm.Ibcast([self._buffer(buf), self._MPI.BYTE], root=root), "bcast")

    def allreduce(self, buf: Any, op: str) -> None:
        MPI = self._MPI
        table = {"sum": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN, "max": MPI.MAX}
        arr = buf if isinstance(buf, np.ndarray) else np.from_dlpack(buf)
        if not arr.flags.writeable:
            raise CollectiveError("allreduce needs a writable buffer")
        self._wait(self.comm.Iallreduce(MPI.IN_PLACE, [arr.reshape(-1), MPI._typedict[arr.dtype.char]], table[op]),
                   f"allreduce ({op})")


def _itemsize(buf: Any) -> int:
    if isinstance(buf, np.ndarray):
        return buf.itemsize
    size = getattr(buf, "element_size", None)
    return int(size()) if callable(size) else int(buf.itemsize)


def _numpy_carries(dtype: str) -> bool:
    return dtype not in ("bfloat16",) and not dtype.startswith("float8")


def _torch_dtype(dtype: str) -> Any:
    import torch

    return getattr(torch, dtype)


def _local_gpu() -> Device | None:
    """``cuda:LOCAL_RANK`` where torch sees a GPU, else ``None`` (torch is asked only if imported)."""
    import os
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    local = os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK") or os.environ.get("MPI_LOCALRANKID") or "0"
    return Device("cuda", int(local) % torch.cuda.device_count())
