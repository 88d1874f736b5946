"""The MPI process group, on mpi4py: NumPy buffers straight into MPI, nothing pickled.

Every collective is MPI's non-blocking one (``Iallreduce``, ``Ibcast``, ``Iallgather``,
``Ireduce_scatter_block``, ``Ibarrier``); :meth:`ProcessGroup.wait` polls it, so a dead or hung
rank ends in an error that names it instead of a hang. The group works on its own duplicate of
``MPI.COMM_WORLD``, so it never mixes with MPI traffic of the user's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from sadl_distributed.errors import MismatchError
from sadl_distributed.faults import Peers, abort_on_uncaught, end_job_at_exit, machine_id
from sadl_distributed.group import DEFAULT_TIMEOUT_S, ProcessGroup, Work
from sadl_distributed.reports import register_rank

__all__ = ["LAUNCHER_VARIABLES", "MpiGroup", "launched_by_mpi", "launcher_world_size"]

#: Environment variables that MPI launchers set in the processes they start.
LAUNCHER_VARIABLES = (
    "PMI_RANK",  # MPICH and Intel MPI (hydra), Slurm's PMI2
    "PMI_SIZE",
    "PMIX_RANK",  # PMIx: Open MPI 5, Slurm --mpi=pmix
    "OMPI_COMM_WORLD_SIZE",  # Open MPI
    "MV2_COMM_WORLD_SIZE",  # MVAPICH
)
#: Where launchers say how many processes they started (to catch a mismatched mpi4py).
_SIZE_VARIABLES = ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE")


def launched_by_mpi(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether an MPI launcher (``mpiexec``, ``mpirun``, ``srun``) started this process."""
    if any(name in environ for name in LAUNCHER_VARIABLES):
        return True
    try:
        return int(environ.get("SLURM_STEP_NUM_TASKS", "1")) > 1
    except ValueError:
        return False


def launcher_world_size(environ: Mapping[str, str] = os.environ) -> int | None:
    """How many processes the launcher says it started, if it says."""
    for name in _SIZE_VARIABLES:
        text = environ.get(name, "")
        if text.isdigit():
            return int(text)
    return None


class MpiGroup(ProcessGroup):
    """Every rank of ``MPI.COMM_WORLD`` (mpi4py initializes MPI when this is first made)."""

    backend = "mpi"

    def __init__(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        import mpi4py

        # This group finalizes MPI itself, at exit (faults.end_job_at_exit): so that a rank
        # that leaves while others still wait (``sys.exit(3)``) exits, and they see it,
        # instead of waiting in MPI_Finalize for them. Too late if the program imported
        # mpi4py.MPI first.
        owns_finalize = "mpi4py.MPI" not in sys.modules
        if owns_finalize:
            mpi4py.rc.finalize = False
        from mpi4py import MPI

        self._MPI = MPI
        self.timeout = timeout
        self.comm = MPI.COMM_WORLD.Dup()
        self.rank, self.size = self.comm.Get_rank(), self.comm.Get_size()
        # MPICH needs no MPI_Finalize of a job of several ranks, and waits in it for all of them.
        skip = self.size > 1 and "MPICH" in MPI.Get_library_version()
        finalize = _finalize if owns_finalize and not skip else None
        end_job_at_exit(self.rank, self.size, lambda: self.broken, self.abort, finalize)
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
        self._peers: Peers | None = None
        expected = launcher_world_size()
        if expected is not None and expected != self.size:
            library = MPI.Get_library_version().strip().splitlines()[0]
            raise MismatchError(
                f"the launcher started {expected} processes, but MPI says this world has "
                f"{self.size}: mpi4py runs on a different MPI ({library}) than the mpiexec that "
                "started this job. Launch with the mpiexec of the MPI that mpi4py was built "
                "for (pip's mpich wheel puts it next to python), or rebuild mpi4py against "
                "your site's MPI"
            )
        local = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = local.Get_rank(), local.Get_size()
        local.Free()
        if self.size > 1:
            machine = machine_id()
            register_rank(self.rank, machine)
            me = np.array([os.getpid(), machine], dtype=np.int64)
            everyone = np.empty((self.size, 2), dtype=np.int64)
            self.all_gather(me, everyone).wait()
            self._peers = Peers(self.rank, everyone[:, 0].tolist(), everyone[:, 1].tolist())
            self._peers.watch_launcher_signal()
            abort_on_uncaught(self.rank, self.size, self.abort)

    # ------------------------------------------------------------------ collectives
    def all_reduce(self, buffer: Any, op: str) -> Work:
        """``MPI_Iallreduce`` in place."""
        request = self.comm.Iallreduce(self._MPI.IN_PLACE, buffer, self._ops[op])
        return Work(self, [request], f"all_reduce ({op}) of {buffer.size} {buffer.dtype}")

    def broadcast(self, buffer: Any, src: int) -> Work:
        """``MPI_Ibcast`` of the buffer's bytes."""
        self._check_rank(src, "broadcast")
        request = self.comm.Ibcast(_as_bytes(buffer), root=src)
        return Work(self, [request], f"broadcast from rank {src} of {buffer.size} {buffer.dtype}")

    def all_gather(self, buffer: Any, out: Any) -> Work:
        """``MPI_Iallgather`` of the buffer's bytes."""
        request = self.comm.Iallgather(_as_bytes(buffer), _as_bytes(out))
        return Work(self, [request], f"all_gather of {buffer.size} {buffer.dtype}")

    def reduce_scatter(self, buffer: Any, out: Any, op: str) -> Work:
        """``MPI_Ireduce_scatter_block``."""
        request = self.comm.Ireduce_scatter_block(buffer, out, self._ops[op])
        return Work(self, [request], f"reduce_scatter ({op}) of {buffer.size} {buffer.dtype}")

    def barrier(self) -> None:
        """``MPI_Ibarrier``, waited for."""
        self.wait([self.comm.Ibarrier()], "barrier")

    # ------------------------------------------------------------------ waiting and faults
    def test(self, handle: Any) -> bool:
        """``MPI_Testall`` (which also lets MPI make progress on the transfer)."""
        return bool(self._MPI.Request.Testall(handle))

    def check_peers(self, what: str) -> None:
        """Raise if a rank on this machine has died."""
        if self._peers is not None:
            self._peers.check(what)

    def failure_reported(self) -> bool:
        """Whether MPICH's launcher has signalled a failed process."""
        return self._peers is not None and self._peers.failure_reported

    def abort(self, code: int = 1) -> None:
        """``MPI_Abort``: the launcher ends every rank of the job."""
        self._MPI.COMM_WORLD.Abort(code)

    def close(self) -> None:
        """Free the duplicated communicator."""
        if self.comm != self._MPI.COMM_NULL:
            self.comm.Free()

    def _check_rank(self, r: int, what: str) -> None:
        if not 0 <= r < self.size:
            raise ValueError(f"{what}: rank {r} does not exist in a world of {self.size}")


def _finalize() -> None:
    from mpi4py import MPI

    if not MPI.Is_finalized():
        MPI.Finalize()


def _as_bytes(array: Any) -> Any:
    """A contiguous array's memory as bytes: data movement works for every dtype."""
    return array.reshape(-1).view(np.uint8)
