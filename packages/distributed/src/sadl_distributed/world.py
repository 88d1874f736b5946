"""The world: who am I (``rank``), how many are we (``world_size``), and its process group.

``init()`` reads the environment: started by an MPI launcher (``mpiexec -n 4 python train.py``,
``srun``), it joins the MPI world through mpi4py; started as a plain ``python train.py``, it is
a world of one process that needs no MPI at all (mpi4py is not even imported). Every other
function of the package calls ``init()`` itself when nobody has yet.

CUDA arrays travel through a second group over the same ranks, NCCL's, created on first use.
"""

from __future__ import annotations

import os

import sadl.cuda

from sadl_distributed.errors import DistributedError
from sadl_distributed.group import DEFAULT_TIMEOUT_S, LocalGroup, ProcessGroup

__all__ = [
    "barrier",
    "default_device",
    "device_group",
    "get_group",
    "init",
    "is_initialized",
    "is_main_process",
    "local_rank",
    "rank",
    "shutdown",
    "world_size",
]

_BACKENDS = ("auto", "mpi", "local")


class _World:
    group: ProcessGroup | None = None
    cuda: ProcessGroup | None = None  # NCCL's group over the same ranks, made on first use


_world = _World()


def init(backend: str | None = None, *, timeout: float | None = None) -> ProcessGroup:
    """Join the world of processes this one was started in; returns the world's group.

    ``backend`` is ``"auto"`` (the default): MPI when an MPI launcher started this process,
    else a world of one; ``"mpi"`` forces MPI (a plain run is then MPI's world of 1);
    ``"local"`` never uses MPI. The environment variable ``SADL_DISTRIBUTED_BACKEND`` sets the
    default. ``timeout`` (seconds, default 300 or ``SADL_DISTRIBUTED_TIMEOUT``) bounds every
    wait for the other ranks. Calling ``init`` again returns the same group.

    Under MPI with more than one rank, an exception that nobody catches on one rank prints its
    traceback (prefixed with the rank) and ends the whole job, instead of leaving the other
    ranks waiting for it forever.
    """
    chosen = backend or os.environ.get("SADL_DISTRIBUTED_BACKEND") or "auto"
    if chosen not in _BACKENDS:
        raise ValueError(f"init: unknown backend {chosen!r}; expected one of {list(_BACKENDS)}")
    group = _world.group
    if group is not None:
        if chosen not in ("auto", group.backend):
            raise DistributedError(
                f"init: already initialized with the {group.backend!r} backend; call "
                "sadl_distributed.shutdown() first to start over with another"
            )
        return group
    limit = _timeout(timeout)
    from sadl_distributed.mpi import MpiGroup, launched_by_mpi

    if chosen == "mpi" or (chosen == "auto" and launched_by_mpi()):
        group = MpiGroup(timeout=limit)
    else:
        group = LocalGroup(timeout=limit)
    _world.group = group
    return group


def _timeout(timeout: float | None) -> float:
    if timeout is None:
        text = os.environ.get("SADL_DISTRIBUTED_TIMEOUT")
        try:
            timeout = float(text) if text else DEFAULT_TIMEOUT_S
        except ValueError:
            raise ValueError(
                f"SADL_DISTRIBUTED_TIMEOUT must be a number of seconds, got {text!r}"
            ) from None
    if not timeout > 0:
        raise ValueError(f"init: timeout must be a positive number of seconds, got {timeout!r}")
    return float(timeout)


def is_initialized() -> bool:
    """Whether ``init()`` has run (explicitly or through another call of this package)."""
    return _world.group is not None


def get_group() -> ProcessGroup:
    """The world's process group (initialized on first use)."""
    return _world.group if _world.group is not None else init()


def shutdown() -> None:
    """Forget the world's group (and free its communicators); ``init()`` may be called again."""
    group, _world.group = _world.group, None
    cuda, _world.cuda = _world.cuda, None
    for g in (cuda, group):
        if g is not None:
            g.close()


def rank() -> int:
    """This process's index in the world, 0 to ``world_size() - 1``."""
    return get_group().rank


def world_size() -> int:
    """How many processes the world has."""
    return get_group().size


def local_rank() -> int:
    """This process's index among the world's processes on the same machine (picks its GPU)."""
    return get_group().local_rank


def is_main_process() -> bool:
    """True on rank 0, the rank that logs and writes files."""
    return get_group().rank == 0


def barrier() -> None:
    """Return once every rank has reached this call (bounded by the group's timeout)."""
    get_group().barrier()


def device_group(group: ProcessGroup) -> ProcessGroup:
    """The group that moves CUDA arrays between ``group``'s ranks: NCCL's, made on first use.

    Making it is a collective (rank 0 creates NCCL's id and broadcasts it), which is safe here
    because every rank runs the same collectives in the same order. Where CuPy has no NCCL,
    CUDA arrays are staged through host memory over ``group`` itself.
    """
    if group.size == 1:
        return group
    if group is not _world.group:
        raise DistributedError("CUDA collectives run on the world's group only")
    if _world.cuda is None:
        from sadl_distributed.nccl import NcclGroup, nccl_available

        _world.cuda = NcclGroup(group) if nccl_available() else group
    return _world.cuda


def default_device() -> str:
    """Where this rank should put its model and data: its own GPU, or the CPU.

    ``"cuda:<local_rank % GPUs>"`` when CUDA is usable (one GPU per rank on each machine),
    else ``"cpu"``.
    """
    count = sadl.cuda.device_count()
    return f"cuda:{local_rank() % count}" if count else "cpu"
