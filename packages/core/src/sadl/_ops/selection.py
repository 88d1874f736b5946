"""Ops that pick elements: sort, top-k, running max/min, positions of nonzeros.

Torch returns values *and* indices from ``topk``, ``cummax`` and ``cummin``. Here the indices
come from a non-differentiable op and the values are ``take_along_axis(x, indices)``, so the
gradient goes to exactly the picked positions (as in torch) through an op that already has
first and second derivatives. Both come back as a ``(values, indices)`` named tuple.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from sadl._ops.nondifferentiable import ARGSORT
from sadl._ops.take import TAKE_ALONG_AXIS, take_along_axis_grad
from sadl._records import Example, OpDef
from sadl._tensor_base import TensorBase
from sadl.backends import array_module


class ValuesIndices(NamedTuple):
    """What ``topk``, ``cummax`` and ``cummin`` return, as torch's ``values, indices``."""

    values: Any
    indices: Any


def _axis_of(x, axis, name):
    ndim = max(np.ndim(x), 1)
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(axis, ndim, f"{name}")
    return axis % ndim


def _running_indices(x, *, axis, largest):
    """Where the running max (or min) along ``axis`` was last attained; NaN counts as extreme."""
    axis = _axis_of(x, axis, "cummax" if largest else "cummin")
    if np.ndim(x) == 0:
        return array_module(x).zeros((), dtype=np.int64)
    ufunc = np.maximum if largest else np.minimum
    running = _scan(ufunc, x, axis)
    n = x.shape[axis]
    view = [1] * x.ndim
    view[axis] = n
    positions = array_module(x).arange(n, dtype=np.int64).reshape(view)
    # x[i] equals the running extreme exactly where it sets (or ties) a new one: the latest
    # such position so far is the index, as in torch (ties take the later index).
    hit = (x == running) | np.isnan(x)
    return _scan(np.maximum, np.where(hit, positions, 0), axis)


def _scan(ufunc, x, axis):
    """``ufunc.accumulate(x, axis)``; CuPy has no accumulate for max/min: doubling steps there."""
    xp = array_module(x)
    if xp.__name__ == "numpy":  # the host (a tracer hands out a recording NumPy)
        return ufunc.accumulate(x, axis=axis)
    out = x.copy()
    n, step = x.shape[axis], 1
    while step < n:
        later = (slice(None),) * axis + (slice(step, None),)
        earlier = (slice(None),) * axis + (slice(0, n - step),)
        out[later] = ufunc(out[later], out[earlier])
        step *= 2
    return out


def _cummax_indices(x, *, axis):
    """Index of the running maximum along ``axis`` (the later one on ties)."""
    return _running_indices(x, axis=axis, largest=True)


def _cummin_indices(x, *, axis):
    """Index of the running minimum along ``axis`` (the later one on ties)."""
    return _running_indices(x, axis=axis, largest=False)


_RUNNING_EXAMPLES = (
    Example((5,), axis=0),
    Example((3, 4), axis=1),
    Example((3, 4), axis=0),
    Example(np.array([[1.0, 3.0, 2.0, 3.5], [0.5, 0.25, 0.75, 0.1]]), axis=1),
)
CUMMAX_INDICES = OpDef(
    "cummax_indices", _cummax_indices, differentiable=False, examples=_RUNNING_EXAMPLES
)
CUMMIN_INDICES = OpDef(
    "cummin_indices", _cummin_indices, differentiable=False, examples=_RUNNING_EXAMPLES
)


def _pick(x, indices, axis):
    return x * 1 if np.ndim(x) == 0 else TAKE_ALONG_AXIS(x, indices=indices, axis=axis)


def _cummax(x, *, axis):
    """Running maximum along ``axis``: ``(values, indices)``, gradient to the maxima."""
    indices = CUMMAX_INDICES(x, axis=axis)
    return ValuesIndices(_pick(x, indices, axis), indices)


def _cummin(x, *, axis):
    """Running minimum along ``axis``: ``(values, indices)``, gradient to the minima."""
    indices = CUMMIN_INDICES(x, axis=axis)
    return ValuesIndices(_pick(x, indices, axis), indices)


CUMMAX = OpDef("cummax", _cummax, composite=True, examples=_RUNNING_EXAMPLES)
CUMMIN = OpDef("cummin", _cummin, composite=True, examples=_RUNNING_EXAMPLES)


def _topk_indices(x, *, k, axis=-1, largest=True):
    """Positions of the ``k`` largest (or smallest) values along ``axis``, in sorted order."""
    axis = _axis_of(x, axis, "topk")
    n = x.shape[axis] if np.ndim(x) else 1
    if not isinstance(k, int | np.integer) or not 0 <= k <= n:
        raise ValueError(f"topk: k must be an integer in [0, {n}] for this axis, got {k!r}")
    if np.ndim(x) == 0:
        return array_module(x).zeros((), dtype=np.int64)
    order = _sort_order(x, axis, descending=largest)
    return order[(slice(None),) * axis + (slice(0, int(k)),)]


TOPK_INDICES = OpDef(
    "topk_indices",
    _topk_indices,
    differentiable=False,
    examples=(Example((3, 5), k=2), Example((4, 3), k=3, axis=0, largest=False)),
)


def _topk(x, k, axis=-1, largest=True, sorted=True):
    """The ``k`` largest (smallest) values along ``axis`` and their indices, largest first.

    Values always come sorted (``sorted=False`` is accepted for torch's signature); NaN counts
    as the largest value, and ties keep their original order.
    """
    indices = TOPK_INDICES(x, k=k, axis=axis, largest=largest)
    return ValuesIndices(_pick(x, indices, axis), indices)


TOPK = OpDef(
    "topk",
    _topk,
    composite=True,
    examples=(
        Example((3, 5), 2),
        Example((4, 3), 3, axis=0, largest=False),
        Example((2, 3, 4), 1, axis=1),
    ),
)


def _argwhere(x):
    """Indices of the nonzero elements, one row each: shape ``(count, ndim)``."""
    return np.argwhere(x)


ARGWHERE = OpDef(
    "argwhere",
    _argwhere,
    numpy_funcs=(np.argwhere,),
    differentiable=False,
    examples=(Example(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])),),
)


def _nonzero(x, *, size=None, fill_value=0):
    """Indices of the nonzero elements, one index array per axis (NumPy's ``nonzero``); with
    ``size``, exactly that many (the first ones, or padded with ``fill_value``) as JAX's.
    """
    if np.ndim(x) == 0:
        raise ValueError("nonzero: a 0-d input has no axes to index; use argwhere or atleast_1d")
    rows = ARGWHERE(x)
    if size is not None and rows.shape[0] >= size:
        rows = rows[:size]
    elif size is not None:
        rows = np.pad(rows, ((0, size - rows.shape[0]), (0, 0)), constant_values=fill_value)
    return tuple(rows[:, d] for d in range(np.ndim(x)))


NONZERO = OpDef(
    "nonzero",
    _nonzero,
    numpy_funcs=(np.nonzero,),
    composite=True,
    differentiable=False,
    examples=(
        Example(np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])),
        Example(np.array([0.0, 1.5, 0.0, 2.0]), size=4, fill_value=-1),
    ),
)


def _sort_order(x, axis=-1, descending=False):
    """The stable order that sorts ``x`` along ``axis`` (NaN first and ties in their original
    order when descending, as torch does; core's ``argsort``); a constant.
    """
    x = x.data if isinstance(x, TensorBase) else x
    return ARGSORT.forward(x, axis=axis, kind="stable", descending=descending)


def _sort(x, *, axis=-1, descending=False):
    """Sorted copy along ``axis`` (flattened when None), largest first when ``descending``."""
    ascending = np.sort(x, axis=axis, kind="stable")
    return np.flip(ascending, axis=0 if axis is None else axis) if descending else ascending


def _sort_grad(g, out, x, *, axis=-1, descending=False):
    order = _sort_order(x, axis, descending)
    return take_along_axis_grad(g, out, x, indices=order, axis=axis)


SORT = OpDef(
    "sort",
    _sort,
    (_sort_grad,),
    numpy_funcs=(np.sort,),
    examples=(
        Example((3, 4)),
        Example((3, 4), axis=0),
        Example((5,), axis=None),
        Example((3, 4), descending=True),
        Example((2, 3, 4), axis=1, descending=True),
    ),
)

OPS = (SORT, CUMMAX, CUMMIN, TOPK, ARGWHERE, NONZERO)
# The index ops are building blocks of the composites above, not registered on their own.
INTERNAL_OPS = (CUMMAX_INDICES, CUMMIN_INDICES, TOPK_INDICES)
