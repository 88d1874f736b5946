"""sadl_distributed: data-parallel training for sadl on MPI (mpi4py), NCCL on CUDA.

Start N processes with ``mpiexec -n N python train.py`` (or ``sadl launch --nproc N train.py``);
a plain ``python train.py`` is a world of one process and needs no MPI. In each process::

    import sadl_distributed as dist

    dist.init()
    model = dist.DistributedDataParallel(model)  # rank 0's weights everywhere
    optimizer = dist.ShardedOptimizer(AdamW(model.parameters(), lr=3e-4))  # optional
    x, y = dist.windows(tokens, block_size, batch_size, rng)  # this rank's share
    loss = ...; loss.backward(); optimizer.step()  # gradients averaged during backward

* The world: ``init``, ``rank``, ``world_size``, ``local_rank``, ``is_main_process``,
  ``barrier``, ``default_device``, ``get_group``, ``shutdown``.
* Collectives on Tensors and arrays: ``all_reduce``, ``broadcast``, ``all_gather``,
  ``reduce_scatter``, ``check_same``.
* Training: ``DistributedDataParallel``, ``ShardedOptimizer`` (ZeRO-1), ``DistributedSampler``,
  ``windows``, ``save_checkpoint`` / ``load_checkpoint``.
* Errors: ``DistributedError``, ``RankFailedError``, ``CollectiveTimeoutError``,
  ``MismatchError``.
"""

from importlib.metadata import version as _version

from sadl_distributed.checkpoint import load_checkpoint, save_checkpoint
from sadl_distributed.collectives import (
    REDUCE_OPS,
    all_gather,
    all_reduce,
    broadcast,
    check_same,
    reduce_scatter,
)
from sadl_distributed.ddp import DistributedDataParallel
from sadl_distributed.errors import (
    CollectiveTimeoutError,
    DistributedError,
    MismatchError,
    RankFailedError,
)
from sadl_distributed.group import LocalGroup, ProcessGroup, Work
from sadl_distributed.sampler import DistributedSampler, windows
from sadl_distributed.world import (
    barrier,
    default_device,
    get_group,
    init,
    is_initialized,
    is_main_process,
    local_rank,
    rank,
    shutdown,
    world_size,
)
from sadl_distributed.zero import ShardedOptimizer

__version__ = _version("sadl-distributed")

__all__ = [
    "REDUCE_OPS",
    "CollectiveTimeoutError",
    "DistributedDataParallel",
    "DistributedError",
    "DistributedSampler",
    "LocalGroup",
    "MismatchError",
    "ProcessGroup",
    "RankFailedError",
    "ShardedOptimizer",
    "Work",
    "all_gather",
    "all_reduce",
    "barrier",
    "broadcast",
    "check_same",
    "default_device",
    "get_group",
    "init",
    "is_initialized",
    "is_main_process",
    "load_checkpoint",
    "local_rank",
    "rank",
    "reduce_scatter",
    "save_checkpoint",
    "shutdown",
    "windows",
    "world_size",
]
