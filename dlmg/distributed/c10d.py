"""The torch.distributed (c10d) engine: gloo for host memory, NCCL for CUDA memory.

:func:`create` uses the default process group when it is initialised (or the
``group`` given), otherwise initialises it from torchrun's environment
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) with
``cpu:gloo,cuda:nccl`` where CUDA is present and ``gloo`` otherwise.

Buffers of any framework enter c10d as torch tensors through
``torch.from_dlpack`` (no copy) and travel as bytes, so every dtype goes
through all-gather and all-to-all; all-reduce takes the element type.
Every collective runs asynchronously and is waited for with the engine's
timeout.

The agreements (small pickled objects) travel in a gloo group of their own,
over the same ranks, apart from the data: a process that fails between the
two never has its next agreement matched with its peers' pending exchange.
For a group given to :func:`create` the side group is made by that group's
processes alone (``use_local_synchronization``), when the engine is created,
so processes outside it need not take part. A failed or timed-out wait marks the engine
:attr:`~dlmg.distributed.engine.Engine.broken`.
"""

from __future__ import annotations

import os
import pickle
from datetime import timedelta
from typing import Any, Callable, Sequence

import numpy as np

from ..device import Device
from ..errors import CollectiveError, DeviceError, FrameworkNotInstalledError
from ..registry import get_adapter
from .engine import RECORD, Engine, record, unpickle

__all__ = ["C10dEngine", "create"]

_REQUIRED_ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def _torch() -> Any:
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise FrameworkNotInstalledError(
            f"backend='torch' needs PyTorch with torch.distributed ({exc}); install it with: pip install torch"
        ) from exc

    return torch, dist


def create(*, group: Any = None, timeout: float = 300.0) -> "C10dEngine":
    """The engine over ``group`` (the default process group by default).

    Raises
    ------
    CollectiveError
        When no process group exists and torchrun's environment is missing.
    """
    torch, dist = _torch()
    if not dist.is_available():
        raise CollectiveError("torch.distributed is not available in this torch build")
    owned = False
    if not dist.is_initialized():
        if group is not None:
            raise CollectiveError("group= was given but torch.distributed has no default process group")
        missing = [k for k in _REQUIRED_ENV if k not in os.environ]
        if missing:
            raise CollectiveError(
                f"torch.distributed is not initialised and the environment lacks {', '.join(missing)}; "
                "start the program with torchrun (python -m torch.distributed.run) or call "
                "torch.distributed.init_process_group first"
            )
        cuda = torch.cuda.is_available()
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        dist.init_process_group("cpu:gloo,cuda:nccl" if cuda else "gloo", timeout=timedelta(seconds=timeout))
        owned = True
    group = group if group is not None else dist.group.WORLD
    return C10dEngine(group, timeout, owned)


class C10dEngine(Engine):
    """Collectives of one torch.distributed process group."""

    name = "torch"

    def __init__(self, group: Any, timeout: float, owned: bool) -> None:
        torch, dist = _torch()
        super().__init__(dist.get_rank(group), dist.get_world_size(group), timeout)
        self.group = group
        self._owned = owned
        self._dist = dist
        self._torch = torch
        backend = str(dist.get_backend(group))
        self._nccl = "nccl" in backend
        self._host_ok = "gloo" in backend or "mpi" in backend
        # the agreements apart from the data, over the same ranks (see the module docstring)
        if group is dist.group.WORLD:
            self._objects = dist.new_group(backend="gloo")
        else:
            self._objects = dist.new_group(ranks=dist.get_process_group_ranks(group), backend="gloo",
                                           use_local_synchronization=True)
        # the all-gather into one flat tensor (renamed all_gather_single in newer torch)
        self._all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    # -- devices ---------------------------------------------------------------
    def local_device(self) -> Device:
        if self._nccl and self._torch.cuda.is_available():
            return Device("cuda", self._torch.cuda.current_device())
        return Device("cpu", 0)

    def transport(self, device: Device) -> str:
        if device.is_host:
            return "gloo" if self._host_ok else "gloo (side group)"
        if device.kind == "cuda" and self._nccl:
            return "nccl"
        raise DeviceError(f"the torch engine's group ({self._dist.get_backend(self.group)}) cannot move memory on {device}")

    # -- buffers ---------------------------------------------------------------
    def empty(self, n: int, dtype: str, device: Device) -> tuple[Any, str]:
        return get_adapter("torch").empty((int(n),), dtype, device), "torch"

    def accepts(self, array: Any, framework: str) -> bool:
        return True  # every DLPack producer enters as a torch tensor

    def _tensor(self, buf: Any) -> Any:
        t = buf if isinstance(buf, self._torch.Tensor) else self._torch.from_dlpack(buf)
        return t.reshape(-1)

    def _bytes(self, buf: Any) -> Any:
        t = self._tensor(buf)
        if t.dtype == self._torch.bool:
            return t.view(self._torch.uint8)
        return t.view(self._torch.uint8) if t.element_size() != 1 or t.dtype != self._torch.uint8 else t

    def _wait(self, work: Any, what: str) -> None:
        try:
            if work is not None:
                work.wait(timeout=timedelta(seconds=self.timeout))
        except CollectiveError:
            raise
        except Exception as exc:  # c10d raises RuntimeError subclasses (DistBackendError...)
            raise self.fail(CollectiveError(
                f"{what} failed on rank {self.rank} of {self.world_size}: {exc}")) from exc

    def _run(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> None:
        self.check_usable(what)
        try:
            work = fn(*args, async_op=True, **kwargs)
        except Exception as exc:
            raise self.fail(CollectiveError(
                f"{what} failed on rank {self.rank} of {self.world_size}: {exc}")) from exc
        self._wait(work, what)

    def settle(self, device: Device) -> None:
        if not device.is_host:
            self._torch.cuda.current_stream().synchronize()

    # -- collectives -------------------------------------------------------------
    def allgather_object(self, obj: Any) -> list[Any]:
        torch = self._torch
        data = pickle.dumps(obj)
        send = torch.frombuffer(bytearray(record(data)), dtype=torch.uint8)
        records = torch.empty(RECORD * self.world_size, dtype=torch.uint8)
        self._run("allgather_object", self._all_gather, records, send, group=self._objects)

        def rest(lengths: list[int]) -> list[bytes]:
            longest = max(lengths)
            whole = torch.zeros(longest, dtype=torch.uint8)
            whole[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
            recv = torch.empty(longest * self.world_size, dtype=torch.uint8)
            self._run("allgather_object (long)", self._all_gather, recv, whole, group=self._objects)
            raw = recv.numpy().tobytes()
            return [raw[r * longest: r * longest + n] for r, n in enumerate(lengths)]

        return unpickle(self, "allgather_object", records.numpy().tobytes(), rest)

    def all_gather(self, send: Any, recv: Any) -> None:
        self._run("all_gather", self._all_gather, self._bytes(recv), self._bytes(send),
                  group=self.group)

    def alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any, recv_counts: Sequence[int]) -> None:
        s, r = self._tensor(send), self._tensor(recv)
        item = s.element_size()
        self._run(
            "alltoallv", self._dist.all_to_all_single, self._bytes(r), self._bytes(s),
            output_split_sizes=[int(c) * item for c in recv_counts],
            input_split_sizes=[int(c) * item for c in send_counts], group=self.group,
        )

    def start_alltoallv(self, send: Any, send_counts: Sequence[int], recv: Any,
                        recv_counts: Sequence[int]) -> Any:
        self.check_usable("alltoallv")
        s, r = self._tensor(send), self._tensor(recv)
        item = s.element_size()
        try:
            work = self._dist.all_to_all_single(
                self._bytes(r), self._bytes(s), output_split_sizes=[int(c) * item for c in recv_counts],
                input_split_sizes=[int(c) * item for c in send_counts], group=self.group, async_op=True,
            )
        except Exception as exc:
            raise self.fail(CollectiveError(
                f"alltoallv failed on rank {self.rank} of {self.world_size}: {exc}")) from exc
        return lambda: self._wait(work, "alltoallv")

    def broadcast(self, buf: Any, root: int) -> None:
        src = self._dist.get_global_rank(self.group, root)
        self._run("broadcast", self._dist.broadcast, self._bytes(buf), src, group=self.group)

    def allreduce(self, buf: Any, op: str) -> None:
        t = self._tensor(buf)
        if not self._reduces(t, op):
            self._allreduce_gathered(t, op)
            return
        ops = self._dist.ReduceOp
        table = {"sum": ops.SUM, "prod": ops.PRODUCT, "min": ops.MIN, "max": ops.MAX}
        self._run(f"allreduce ({op})", self._dist.all_reduce, t, op=table[op], group=self.group)

    def _reduces(self, t: Any, op: str) -> bool:
        """Whether c10d reduces ``t``'s dtype with ``op`` itself: gloo has no unsigned
        type but uint8, no int16 minimum or maximum and no complex product."""
        torch = self._torch
        if t.dtype in (torch.uint16, torch.uint32, torch.uint64):
            return False
        if t.dtype == torch.int16 and op in ("min", "max"):
            return False
        return not (t.is_complex() and op != "sum")

    def _allreduce_gathered(self, t: Any, op: str) -> None:
        """``op`` of every process's ``t`` as an all-gather and a reduction on the host,
        in NumPy (which reduces every integer and complex type; the buffers of a
        reduction are the size of its result, not of its input)."""
        gathered = self._torch.empty(self.world_size * t.numel(), dtype=t.dtype, device=t.device)
        self.all_gather(t.contiguous(), gathered)
        rows = gathered.cpu().numpy().reshape(self.world_size, -1)
        folds: dict[str, Callable[..., Any]] = {"sum": np.sum, "prod": np.prod, "min": np.min, "max": np.max}
        fold = folds[op]
        result = fold(rows, axis=0).astype(rows.dtype, copy=False)  # sums wrap as the dtype does
        t.copy_(self._torch.from_numpy(np.ascontiguousarray(result)).reshape(t.shape))

    def finalize(self) -> None:
        if not self._dist.is_initialized():
            return
        if self._owned:
            self._dist.destroy_process_group()
            self._owned = False
        elif self._objects is not self.group and self.broken is None:
            self._dist.destroy_process_group(self._objects)  # the side group this engine made
