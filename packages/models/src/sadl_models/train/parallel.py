"""Training on several processes: ``sadl train gpt --nproc N`` or ``mpiexec -n N sadl train gpt``.

A plain run gets :class:`SingleProcess`, which changes nothing. A run that an MPI launcher started
gets :class:`DataParallel`, through sadl-distributed (an optional dependency, the extra
``distributed`` of sadl-models): the model in ``DistributedDataParallel``, AdamW's
state sharded over the ranks, each rank its share of every batch, the logged loss and Ctrl-C
agreed on by all ranks, checkpoints written by rank 0, and log lines, the progress bar, the plot
and the sample on rank 0 only. The loop itself does not know which one it has.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import sadl_serialize
from sadl.data import windows
from sadl.plugins import install_command

from sadl_models.train.config import TrainError

__all__ = [
    "COMPILE_IN_ONE_PROCESS",
    "DataParallel",
    "SingleProcess",
    "launch",
    "launched_by_mpi",
    "setup",
]

#: Why ``--compile`` and several processes do not go together (the CLI says it before launching).
COMPILE_IN_ONE_PROCESS = (
    "--compile trains in one process: the gradient all-reduce of --nproc runs in backward "
    "hooks, Python a compiled step does not replay; drop --compile or --nproc"
)

#: Set by MPI launchers in the processes they start (MPICH and Intel MPI, Open MPI, PMIx).
_LAUNCHER_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launched_by_mpi() -> bool:
    """Whether an MPI launcher started this process."""
    return any(name in os.environ for name in _LAUNCHER_VARIABLES)


class SingleProcess:
    """One process: every method is what the loop does without parallelism."""

    rank = 0
    world_size = 1
    is_main = True

    def device(self, device: str) -> str:
        """The device this process trains on."""
        return device

    def wrap(self, model: Any) -> Any:
        """The model as the training step calls it."""
        return model

    def optimizer(self, optimizer: Any) -> Any:
        """The optimizer as the training step uses it."""
        return optimizer

    def windows(self, tokens: Any, block_size: int, batch_size: int, rng: Any) -> Any:
        """This process's batch of ``batch_size`` windows."""
        return windows(tokens, block_size, batch_size, rng=rng)

    def mean(self, value: float) -> float:
        """The mean of ``value`` over the processes."""
        return value

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` is set in any process."""
        return flag

    def save_checkpoint(self, path: Any, **parts: Any) -> None:
        """Write a checkpoint (sadl-serialize's arguments)."""
        sadl_serialize.save_checkpoint(path, **parts)


class DataParallel(SingleProcess):
    """One rank of N, through sadl-distributed; ``sadl_distributed.init()`` has run."""

    def __init__(self, dist: Any) -> None:
        self.dist = dist
        self.rank, self.world_size = dist.rank(), dist.world_size()
        self.is_main = self.rank == 0

    def device(self, device: str) -> str:
        """A CUDA run uses this rank's own GPU (``cuda:<local rank>``)."""
        return self.dist.default_device() if device.startswith("cuda") else device

    def wrap(self, model: Any) -> Any:
        """``DistributedDataParallel``: rank 0's weights, gradients averaged in backward."""
        return self.dist.DistributedDataParallel(model)

    def optimizer(self, optimizer: Any) -> Any:
        """``ShardedOptimizer``: each rank keeps its share of AdamW's state (same results)."""
        return self.dist.ShardedOptimizer(optimizer)

    def windows(self, tokens: Any, block_size: int, batch_size: int, rng: Any) -> Any:
        """This rank's share of the global batch (every rank draws it, keeps its slice)."""
        if batch_size % self.world_size:
            raise TrainError(
                f"--batch-size {batch_size} cannot be split evenly over {self.world_size} "
                f"processes; use a multiple of {self.world_size}"
            )
        return self.dist.windows(tokens, block_size, batch_size, rng)

    def mean(self, value: float) -> float:
        """The mean over the ranks (the loss of the whole global batch)."""
        return float(self.dist.all_reduce(np.array([value]), "mean")[0])

    def any(self, flag: bool) -> bool:
        """Set on any rank (so that every rank stops at the same step)."""
        return bool(self.dist.all_reduce(np.array([float(flag)]), "max")[0] > 0)

    def save_checkpoint(self, path: Any, **parts: Any) -> None:
        """Rank 0 writes (the sharded state gathered); every rank returns once it is written."""
        self.dist.save_checkpoint(path, **parts)


def setup() -> SingleProcess:
    """:class:`DataParallel` when an MPI launcher started more than one process, else single."""
    if not launched_by_mpi():
        return SingleProcess()
    dist = _distributed("this run was started by an MPI launcher (mpiexec)")
    dist.init()
    return DataParallel(dist) if dist.world_size() > 1 else SingleProcess()


def launch(nproc: int, argv: Sequence[str]) -> int:
    """Run ``sadl ARGV`` in ``nproc`` processes on this machine; the job's exit status."""
    if launched_by_mpi():
        raise TrainError(
            "--nproc starts its own processes, but this run was already started by an MPI "
            "launcher; use one or the other"
        )
    _distributed(f"--nproc {nproc}")
    from sadl_distributed.launch import run

    return run(nproc, [sys.executable, "-m", "sadl", *argv])


def _import_sadl_distributed() -> Any:
    import sadl_distributed

    return sadl_distributed


def _distributed(why: str) -> Any:
    try:
        return _import_sadl_distributed()
    except ImportError:
        raise TrainError(
            f"{why}, which needs sadl-distributed to train on several processes "
            f"({install_command('sadl-models', extra='distributed')}); "
            "without it every process would train alone"
        ) from None
