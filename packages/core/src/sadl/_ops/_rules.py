"""Small helpers shared by backward rules; they work on arrays and on Tensors alike."""

from __future__ import annotations

from typing import Any

import numpy as np


def normalize_axes(axis: int | tuple[int, ...] | None, ndim: int) -> tuple[int, ...]:
    """``axis`` as a sorted tuple of non-negative axes (None means all).

    As in NumPy, a 0-d array accepts ``axis=0`` and ``axis=-1`` (its one, implicit axis).
    """
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise np.exceptions.AxisError(a, ndim)
        if ndim:
            out.append(a % ndim)
    return tuple(sorted(out))


def keepdims_shape(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    """The shape a reduction over ``axis`` has with ``keepdims=True``."""
    axes = normalize_axes(axis, len(shape))
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def unreduce(g: Any, shape: tuple[int, ...], axis: Any, keepdims: bool) -> Any:
    """Reshape a reduction's gradient so it broadcasts against the reduced input."""
    if keepdims:
        return g
    return np.reshape(g, keepdims_shape(shape, axis))


def reduced_count(shape: tuple[int, ...], axis: Any) -> int:
    """How many elements each output of a reduction over ``axis`` summarizes."""
    count = 1
    for a in normalize_axes(axis, len(shape)):
        count *= shape[a]
    return count
