"""Reductions and scans: the gradient spreads back over the reduced axes.

The axis helpers first (``unreduce`` puts a reduction's gradient back in a shape that
broadcasts against its input); the other op families' rules use them too. They work on arrays
and on Tensors alike. ``prod``, ``var``, ``std`` and ``cumprod`` are sadl-layers'
(``sadl_layers.ops.reductions``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl._records import Example, OpDef


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


_AXES = (
    Example((3, 4)),
    Example((3, 4), axis=1),
    Example((2, 3, 4), axis=(0, 2), keepdims=True),
    Example((2, 3, 4), axis=-1),
)
# Two-way ties only: at a k-way tie central differences see 1/2 per element, a proper gradient
# (even split, as here and in torch) gives 1/k, and the two agree only for k = 2.
_TIES = np.array([[1.0, 3.0, 3.0], [2.0, 0.5, 2.0]])
_EXTREMES = _AXES + (Example(_TIES), Example(_TIES, axis=1), Example(_TIES, axis=0))


def _extreme_grad(g, out, x, *, axis=None, keepdims=False):
    # Ties share the gradient evenly (the derivative central differences see there).
    hit = (x == unreduce(out, x.shape, axis, keepdims)).astype(x.dtype)
    return unreduce(g, x.shape, axis, keepdims) * hit / np.sum(hit, axis=axis, keepdims=True)


def _sum(x, *, axis=None, keepdims=False):
    """Sum over ``axis``."""
    return np.sum(x, axis=axis, keepdims=keepdims)


def _sum_grad(g, out, x, *, axis=None, keepdims=False):
    return np.broadcast_to(unreduce(g, x.shape, axis, keepdims), x.shape)


SUM = OpDef("sum", _sum, (_sum_grad,), numpy_funcs=(np.sum,), examples=_AXES)


def _mean(x, *, axis=None, keepdims=False):
    """Mean over ``axis``."""
    return np.mean(x, axis=axis, keepdims=keepdims)


def _mean_grad(g, out, x, *, axis=None, keepdims=False):
    scale = 1.0 / max(reduced_count(x.shape, axis), 1)
    return np.broadcast_to(unreduce(g, x.shape, axis, keepdims) * scale, x.shape)


MEAN = OpDef("mean", _mean, (_mean_grad,), numpy_funcs=(np.mean,), examples=_AXES)


def _max(x, *, axis=None, keepdims=False):
    """Largest value over ``axis`` (values only)."""
    return np.max(x, axis=axis, keepdims=keepdims)


_TIED = (Example(np.array([1.0, 3.0, 3.0])), Example(_TIES, axis=1))
MAX = OpDef(
    "max",
    _max,
    (_extreme_grad,),
    numpy_funcs=(np.max,),
    examples=_EXTREMES,
    singular_points=_TIED,
)


def _min(x, *, axis=None, keepdims=False):
    """Smallest value over ``axis`` (values only)."""
    return np.min(x, axis=axis, keepdims=keepdims)


MIN = OpDef("min", _min, (_extreme_grad,), numpy_funcs=(np.min,), examples=_EXTREMES)
AMAX = OpDef("amax", _max, (_extreme_grad,), numpy_funcs=(np.amax,), examples=_EXTREMES)
AMIN = OpDef("amin", _min, (_extreme_grad,), numpy_funcs=(np.amin,), examples=_EXTREMES)


def _cumsum(x, *, axis=None):
    """Running sum along ``axis`` (flattened when None)."""
    return np.cumsum(x, axis=axis)


def _cumsum_grad(g, out, x, *, axis=None):
    if axis is None:
        return np.reshape(np.flip(np.cumsum(np.flip(g))), x.shape)
    return np.flip(np.cumsum(np.flip(g, axis=axis), axis=axis), axis=axis)


CUMSUM = OpDef(
    "cumsum",
    _cumsum,
    (_cumsum_grad,),
    numpy_funcs=(np.cumsum,),
    examples=(Example((5,)), Example((3, 4), axis=1), Example((3, 4), axis=0), Example((2, 3))),
)


OPS = (SUM, MEAN, MAX, MIN, AMAX, AMIN, CUMSUM)
