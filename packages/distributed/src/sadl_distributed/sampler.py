"""Data for data parallelism: each rank its own share of the global batch, deterministically.

:class:`DistributedSampler` splits ``range(n)`` across ranks: every epoch one permutation from
``(seed, epoch)``, the same on every rank, and rank r takes every ``world_size``-th index from r
on. So the k-th local batches of all ranks together are exactly the k-th batch of a single
process that uses ``world_size`` times the batch size. :func:`windows` does the same for random
next-token windows of a token stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import sadl_layers.data
from sadl.random import resolve_generator

from sadl_distributed.collectives import check_same
from sadl_distributed.world import get_group

__all__ = ["DistributedSampler", "windows"]


def _rank_and_size(rank: int | None, world_size: int | None, what: str) -> tuple[int, int]:
    """The given rank and world size, or the world's; validated."""
    if (rank is None) != (world_size is None):
        raise ValueError(f"{what}: give both rank= and world_size=, or neither")
    if rank is None or world_size is None:
        group = get_group()
        return group.rank, group.size
    if not 0 <= rank < world_size:
        raise ValueError(f"{what}: rank {rank} is not in a world of {world_size}")
    return rank, world_size


class DistributedSampler:
    """This rank's indices into a dataset of ``n`` rows, one epoch at a time.

    ``DistributedSampler(n, shuffle=True, seed=0, drop_last=False)``; call ``set_epoch(e)``
    before each epoch to reshuffle. Without ``drop_last`` the permutation is padded (by
    repeating its start) to a multiple of the world size, so every rank has ``len(sampler)``
    indices; with it, the rows left over are dropped. ``rank``/``world_size`` default to the
    world's. Every rank must pass the same ``n`` (checked, which makes the constructor a
    collective: call it on every rank).
    """

    def __init__(
        self,
        n: int,
        *,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> None:
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
            raise ValueError(f"DistributedSampler: n must be a row count >= 0, got {n!r}")
        if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
            raise ValueError(f"DistributedSampler: seed must be an integer >= 0, got {seed!r}")
        checked = rank is None
        self.rank, self.world_size = _rank_and_size(rank, world_size, "DistributedSampler")
        if checked:
            check_same(int(n), "the dataset size given to DistributedSampler")
        self.n, self.shuffle, self.seed, self.drop_last = int(n), shuffle, int(seed), drop_last
        self.epoch = 0
        if drop_last:
            self.per_rank = self.n // self.world_size
        else:
            self.per_rank = -(-self.n // self.world_size)

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s permutation from now on (call it at the start of each epoch)."""
        if isinstance(epoch, bool) or not isinstance(epoch, int | np.integer) or epoch < 0:
            raise ValueError(f"set_epoch: epoch must be an integer >= 0, got {epoch!r}")
        self.epoch = int(epoch)

    def indices(self) -> np.ndarray[Any, Any]:
        """This rank's indices for the current epoch, in order."""
        if self.shuffle:
            order = np.random.default_rng([self.seed, self.epoch]).permutation(self.n)
        else:
            order = np.arange(self.n)
        total = self.per_rank * self.world_size
        if total > self.n and self.n:
            order = np.resize(order, total)  # repeats the start of the permutation
        return order[self.rank : total : self.world_size]

    def batches(
        self, *arrays: Any, batch_size: int, drop_last: bool = False
    ) -> Iterator[tuple[Any, ...]]:
        """This rank's minibatches ``(a[idx], b[idx], ...)`` of ``batch_size`` rows each.

        ``batch_size`` is the per-rank batch (the global batch is ``world_size`` times it).
        """
        if batch_size <= 0:
            raise ValueError(f"batches: batch_size must be positive, got {batch_size}")
        for a in arrays:
            if len(a) != self.n:
                raise ValueError(
                    f"batches: an array has {len(a)} rows but the sampler was made for {self.n}"
                )
        idx = self.indices()
        stop = len(idx) - len(idx) % batch_size if drop_last else len(idx)
        for start in range(0, stop, batch_size):
            chosen = idx[start : start + batch_size]
            yield tuple(a[chosen] for a in arrays)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices().tolist())

    def __len__(self) -> int:
        return self.per_rank


def windows(
    tokens: Any,
    block_size: int,
    batch_size: int,
    rng: np.random.Generator | int | None = None,
    *,
    rank: int | None = None,
    world_size: int | None = None,
    check: bool = True,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """This rank's share of a global batch of random next-token windows: ``(x, y)``.

    ``batch_size`` is the global batch (a multiple of the world size); each rank gets
    ``batch_size // world_size`` rows. Every rank draws the whole batch from ``rng`` exactly as
    ``sadl.data.windows`` does, so ``rng`` (a generator, or a seed) must be in the same state on
    every rank, and the ranks' rows together are the batch one process would draw. With
    ``check`` (default) the ranks compare a digest of the batch they drew (one small
    collective) and raise :class:`MismatchError` if they differ: different token data or
    differently seeded generators.
    """
    r, size = _rank_and_size(rank, world_size, "windows")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        raise ValueError(f"windows: batch_size must be a positive integer, got {batch_size!r}")
    if batch_size % size:
        raise ValueError(
            f"windows: the global batch_size {batch_size} cannot be split evenly over "
            f"{size} ranks; use a multiple of {size}"
        )
    x, y = sadl_layers.data.windows(tokens, block_size, batch_size, resolve_generator(rng))
    if check and rank is None and size > 1:
        check_same(x, "the batch of token windows (same token data? same seed on every rank?)")
    share = batch_size // size
    return x[r * share : (r + 1) * share], y[r * share : (r + 1) * share]
