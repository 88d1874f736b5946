"""Data helpers: minibatches, a train/validation split, random next-token windows (served as
``sadl.data.batches`` & co.).

Arrays may live on any device: the row indices are drawn on the host (from sadl's CPU generator
or ``rng``) and index the arrays where they are, as CuPy accepts NumPy index arrays.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sadl.backends import is_array
from sadl.random import resolve_generator

__all__ = ["batches", "train_val_split", "windows"]


def _length(arrays: tuple[Any, ...], where: str) -> int:
    if not arrays:
        raise ValueError(f"{where}: give at least one array")
    lengths = {len(a) for a in arrays}
    if len(lengths) != 1:
        raise ValueError(f"{where}: arrays differ in length: {sorted(lengths)}")
    return lengths.pop()


def batches(
    *arrays: Any,
    batch_size: int,
    shuffle: bool = False,
    rng: np.random.Generator | int | None = None,
    drop_last: bool = False,
) -> Iterator[tuple[Any, ...]]:
    """Yield aligned minibatches ``(a[idx], b[idx], ...)`` of ``batch_size`` rows.

    With ``shuffle`` the order is a fresh permutation from ``rng`` each call; the last smaller
    batch is kept unless ``drop_last``.
    """
    if batch_size <= 0:
        raise ValueError(f"batches: batch_size must be positive, got {batch_size}")
    n = _length(arrays, "batches")
    order = resolve_generator(rng).permutation(n) if shuffle else None
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        if order is None:
            idx: Any = slice(start, min(start + batch_size, n))
        else:
            idx = order[start : start + batch_size]
        yield tuple(a[idx] for a in arrays)


def train_val_split(
    *arrays: Any,
    val_fraction: float = 0.1,
    rng: np.random.Generator | int | None = None,
    shuffle: bool = True,
) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """Split aligned arrays into ``(train, val)`` tuples, ``val_fraction`` of the rows in val."""
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"train_val_split: val_fraction must be in (0, 1), got {val_fraction}")
    n = _length(arrays, "train_val_split")
    n_val = max(1, round(n * val_fraction))
    if n_val >= n:
        raise ValueError(f"train_val_split: {n} rows are too few for val_fraction={val_fraction}")
    order = resolve_generator(rng).permutation(n) if shuffle else np.arange(n)
    val_idx, train_idx = np.sort(order[:n_val]), np.sort(order[n_val:])
    return tuple(a[train_idx] for a in arrays), tuple(a[val_idx] for a in arrays)


def windows(
    tokens: Any,
    block_size: int,
    batch_size: int | None = None,
    rng: np.random.Generator | int | None = None,
    *,
    bs: int | None = None,
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Random next-token windows: ``x`` of shape (batch, block) and ``y`` = ``x`` shifted by one.

    ``bs`` is autodidact's spelling of ``batch_size``. ``x`` and ``y`` live where ``tokens`` does
    (int64).
    """
    if bs is not None:
        if batch_size is not None and batch_size != bs:
            raise TypeError("windows: give batch_size= or autodidact's bs=, not both")
        batch_size = bs
    if batch_size is None:
        raise TypeError("windows: missing batch_size (the number of windows to draw)")
    data = tokens.data if hasattr(tokens, "requires_grad") else tokens
    if not is_array(data):
        data = np.asarray(data)
    if data.ndim != 1:
        raise ValueError(f"windows: tokens must be one-dimensional, got shape {data.shape}")
    if block_size <= 0 or batch_size <= 0:
        raise ValueError("windows: block_size and batch_size must be positive")
    if len(data) < block_size + 1:
        raise ValueError(
            f"windows: {len(data)} tokens are too few for block_size={block_size} "
            f"(need at least {block_size + 1})"
        )
    starts = resolve_generator(rng).integers(0, len(data) - block_size, size=batch_size)
    offsets = np.arange(block_size)
    x = data[starts[:, None] + offsets]
    y = data[starts[:, None] + offsets + 1]
    return x.astype(np.int64, copy=False), y.astype(np.int64, copy=False)  # type: ignore[no-any-return]
