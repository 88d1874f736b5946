"""Checkpoints of a data-parallel run: rank 0 writes, every rank resumes.

Both functions are collectives (every rank calls them). ``save_checkpoint`` gathers a sharded
optimizer's state on rank 0, which writes one ordinary sadl-serialize checkpoint, atomically
(a crash mid-save leaves the previous file whole); the other ranks return once the file is
complete. ``load_checkpoint`` has every rank read that file (so the ranks need a shared file
system, or a copy of the file each) and restore model, optimizer, scheduler and generator, so the
run continues bit for bit as if it had not stopped. The file is the same as a single-process
checkpoint: a run can resume with another world size, or without sadl-distributed.

An error on any rank (a full disk on rank 0, a missing file on rank 3) is raised on every rank,
naming the rank, instead of leaving the others waiting.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import sadl_serialize

from sadl_distributed.collectives import gather_bytes
from sadl_distributed.ddp import DistributedDataParallel
from sadl_distributed.errors import DistributedError
from sadl_distributed.group import ProcessGroup
from sadl_distributed.world import get_group
from sadl_distributed.zero import ShardedOptimizer

__all__ = ["load_checkpoint", "save_checkpoint"]


def save_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    step: int | None = None,
    rng: np.random.Generator | None = None,
    extra: Any = None,
    group: ProcessGroup | None = None,
) -> None:
    """Write the training state to ``path`` from rank 0 (collective; see the module docstring).

    Arguments as for ``sadl_serialize.save_checkpoint``; a ``DistributedDataParallel`` model is
    saved as the module it wraps (no ``module.`` prefix), a ``ShardedOptimizer`` as the full,
    unsharded state.
    """
    g = group or get_group()
    with _raised_on_every_rank(f"saving the checkpoint {os.fspath(path)}", g):
        if isinstance(optimizer, ShardedOptimizer):
            optimizer_state = optimizer.gather_state_dict(dst=0)
        elif optimizer is not None and g.rank == 0:
            optimizer_state = optimizer.state_dict()
        else:
            optimizer_state = None
        if g.rank == 0:
            sadl_serialize.save_checkpoint(
                path,
                model=_unwrap(model),
                optimizer=optimizer_state,
                scheduler=scheduler,
                step=step,
                rng=rng,
                extra=extra,
            )


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    model: Any = None,
    optimizer: Any = None,
    scheduler: Any = None,
    rng: np.random.Generator | None = None,
    strict: bool = True,
    group: ProcessGroup | None = None,
) -> dict[str, Any]:
    """Every rank restores the state saved in ``path``; returns what it holds (see
    ``sadl_serialize.load_checkpoint``). Collective.
    """
    g = group or get_group()
    info: dict[str, Any] = {}
    with _raised_on_every_rank(f"loading the checkpoint {os.fspath(path)}", g):
        info = sadl_serialize.load_checkpoint(
            path,
            model=_unwrap(model),
            optimizer=optimizer,
            scheduler=scheduler,
            rng=rng,
            strict=strict,
        )
    return info


def _unwrap(model: Any) -> Any:
    return model.module if isinstance(model, DistributedDataParallel) else model


@contextlib.contextmanager
def _raised_on_every_rank(what: str, group: ProcessGroup) -> Iterator[None]:
    """Run the block on every rank; if it raised on any, every rank raises that error, naming
    the rank (a single process raises its own error as is). Collective.
    """
    error = ""
    try:
        yield
    except Exception as exc:
        if group.size == 1:
            raise
        error = f"{type(exc).__name__}: {exc}"
    if group.size == 1:
        return
    for r, text in enumerate(gather_bytes(error.encode(), group=group)):
        if text:
            raise DistributedError(f"rank {r} failed {what}: {text.decode()}")
