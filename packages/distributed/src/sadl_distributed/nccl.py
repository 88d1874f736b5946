"""The NCCL process group, through CuPy (``cupy.cuda.nccl``): CUDA arrays never leave the GPU.

One GPU per rank: rank r uses GPU ``local_rank % device_count`` of its machine. Rank 0 makes
NCCL's unique id and the MPI world broadcasts it (NCCL's own bootstrap then takes over). Each
collective is queued on CuPy's current stream; its :class:`Work` is a CUDA event that ``wait()``
polls, with the same liveness checks and timeout as the MPI group.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import numpy as np

from sadl_distributed.errors import DistributedError
from sadl_distributed.group import ProcessGroup, Work

__all__ = ["NcclGroup", "nccl_available"]

_UNIQUE_ID_BYTES = 128
#: NumPy dtype name -> NCCL data type constant name.
_DTYPES = {
    "int8": "NCCL_INT8",
    "uint8": "NCCL_UINT8",
    "int32": "NCCL_INT32",
    "uint32": "NCCL_UINT32",
    "int64": "NCCL_INT64",
    "uint64": "NCCL_UINT64",
    "float16": "NCCL_FLOAT16",
    "float32": "NCCL_FLOAT32",
    "float64": "NCCL_FLOAT64",
}
_OPS = {"sum": "NCCL_SUM", "prod": "NCCL_PROD", "max": "NCCL_MAX", "min": "NCCL_MIN"}


def nccl_available() -> bool:
    """Whether CuPy is installed with NCCL."""
    try:
        from cupy.cuda import nccl
    except Exception:
        return False
    return bool(getattr(nccl, "available", False))


def _module(name: str) -> ModuleType:
    return importlib.import_module(name)


def _pointer(array: Any) -> int:
    """The device address of a CuPy array's first element."""
    return int(array.data.ptr)


class NcclGroup(ProcessGroup):
    """The ranks of ``world`` (an MPI group), one GPU each, talking through NCCL.

    ``nccl`` and ``cupy`` default to the real modules; tests hand in stand-ins.
    """

    backend = "nccl"

    def __init__(self, world: ProcessGroup, *, nccl: Any = None, cupy: Any = None) -> None:
        self._nccl: Any = nccl if nccl is not None else _module("cupy.cuda.nccl")
        self._cupy: Any = cupy if cupy is not None else _module("cupy")
        nccl, cupy = self._nccl, self._cupy
        self.world = world
        self.rank, self.size = world.rank, world.size
        self.local_rank, self.local_size = world.local_rank, world.local_size
        self.timeout = world.timeout
        count = int(cupy.cuda.runtime.getDeviceCount())
        if world.local_size > count:
            raise DistributedError(
                f"{world.local_size} ranks run on this machine but it has {count} GPU(s): NCCL "
                "needs a GPU of its own for every rank (start at most one rank per GPU)"
            )
        #: The GPU this rank's NCCL communicator is bound to.
        self.device = world.local_rank % count
        uid = np.zeros(_UNIQUE_ID_BYTES, dtype=np.int64)
        if world.rank == 0:
            uid[:] = nccl.get_unique_id()
        world.broadcast(uid, 0).wait()
        with cupy.cuda.Device(self.device):
            self.comm = nccl.NcclCommunicator(self.size, tuple(int(b) for b in uid), self.rank)

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, buffer: Any, op: str) -> Work:
        """``ncclAllReduce`` in place."""
        ptr = self._address(buffer)
        dtype, nccl_op = self._dtype(buffer), self._op(op)
        return self._queue(
            lambda s: self.comm.allReduce(ptr, ptr, buffer.size, dtype, nccl_op, s),
            f"all_reduce ({op}) of {buffer.size} {buffer.dtype} on GPU {self.device}",
        )

    def broadcast(self, buffer: Any, src: int) -> Work:
        """``ncclBroadcast`` of the buffer's bytes, in place."""
        if not 0 <= src < self.size:
            raise ValueError(f"broadcast: rank {src} does not exist in a world of {self.size}")
        ptr, byte = self._address(buffer), self._nccl.NCCL_UINT8
        return self._queue(
            lambda s: self.comm.broadcast(ptr, ptr, buffer.nbytes, byte, src, s),
            f"broadcast from rank {src} of {buffer.size} {buffer.dtype} on GPU {self.device}",
        )

    def all_gather(self, buffer: Any, out: Any) -> Work:
        """``ncclAllGather`` of the buffer's bytes."""
        send, recv, byte = self._address(buffer), self._address(out), self._nccl.NCCL_UINT8
        return self._queue(
            lambda s: self.comm.allGather(send, recv, buffer.nbytes, byte, s),
            f"all_gather of {buffer.size} {buffer.dtype} on GPU {self.device}",
        )

    def reduce_scatter(self, buffer: Any, out: Any, op: str) -> Work:
        """``ncclReduceScatter``: ``out`` receives this rank's reduced chunk."""
        send, recv = self._address(buffer), self._address(out)
        dtype, nccl_op = self._dtype(buffer), self._op(op)
        return self._queue(
            lambda s: self.comm.reduceScatter(send, recv, out.size, dtype, nccl_op, s),
            f"reduce_scatter ({op}) of {buffer.size} {buffer.dtype} on GPU {self.device}",
        )

    def barrier(self) -> None:
        """Finish this rank's queued GPU work, then meet the others (over MPI)."""
        self.wait(self._cupy.cuda.get_current_stream().record(), "barrier (GPU work)")
        self.world.barrier()

    # ------------------------------------------------------------------ waiting and faults
    def test(self, handle: Any) -> bool:
        """Whether the CUDA event recorded after the collective has been reached."""
        return bool(handle.done)

    def check_peers(self, what: str) -> None:
        """The MPI world knows which ranks are alive."""
        self.world.check_peers(what)

    def failure_reported(self) -> bool:
        """Whether MPI's launcher has signalled a failed process."""
        return self.world.failure_reported()

    @property  # type: ignore[override]
    def broken(self) -> BaseException | None:
        """The MPI group's: a failed wait here ends the job at exit just the same."""
        return self.world.broken

    @broken.setter
    def broken(self, error: BaseException | None) -> None:
        self.world.broken = error

    def abort(self, code: int = 1) -> None:
        """Abort NCCL's communicator (so no kernel waits forever), then the MPI job."""
        try:
            self.comm.abort()
        finally:
            self.world.abort(code)

    def close(self) -> None:
        """Destroy the NCCL communicator."""
        self.comm.destroy()

    # ------------------------------------------------------------------ helpers
    def _queue(self, call: Any, what: str) -> Work:
        stream = self._cupy.cuda.get_current_stream()
        call(stream.ptr)
        return Work(self, stream.record(), what)

    def _address(self, array: Any) -> int:
        device = int(array.device.id)
        if device != self.device:
            raise DistributedError(
                f"rank {self.rank}: a collective got an array on GPU {device}, but this rank's "
                f"NCCL communicator uses GPU {self.device}; put the model and data on "
                f"sadl_distributed.default_device() ('cuda:{self.device}')"
            )
        return _pointer(array)

    def _dtype(self, array: Any) -> int:
        name = _DTYPES.get(array.dtype.name)
        if name is None:
            raise TypeError(
                f"NCCL cannot reduce {array.dtype} arrays; supported: {', '.join(_DTYPES)}"
            )
        return int(getattr(self._nccl, name))

    def _op(self, op: str) -> int:
        return int(getattr(self._nccl, _OPS[op]))
