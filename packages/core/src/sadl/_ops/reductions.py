"""Reductions and scans: the gradient spreads back over the reduced axes.

The axis helpers first (``unreduce`` puts a reduction's gradient back in a shape that
broadcasts against its input); the other op families' rules use them too. They work on arrays
and on Tensors alike. Moments (``var``, ``std``) of float16 and bfloat16 accumulate in float32,
as torch does, and come back in the input's dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl._records import Example, OpDef
from sadl.backends import array_module


def _numpy_op(func, forward, backward, examples, **fields):
    """The op named after NumPy's ``func``, which it implements (``np.func(t)`` dispatches here)."""
    return OpDef(func.__name__, forward, backward, numpy_funcs=(func,), examples=examples, **fields)


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
    return g if keepdims else np.reshape(g, keepdims_shape(shape, axis))


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


SUM = _numpy_op(np.sum, _sum, (_sum_grad,), _AXES)


def _mean(x, *, axis=None, keepdims=False):
    """Mean over ``axis``."""
    return np.mean(x, axis=axis, keepdims=keepdims)


def _mean_grad(g, out, x, *, axis=None, keepdims=False):
    scale = 1.0 / max(reduced_count(x.shape, axis), 1)
    return np.broadcast_to(unreduce(g, x.shape, axis, keepdims) * scale, x.shape)


MEAN = _numpy_op(np.mean, _mean, (_mean_grad,), _AXES)


def _max(x, *, axis=None, keepdims=False):
    """Largest value over ``axis`` (values only)."""
    return np.max(x, axis=axis, keepdims=keepdims)


_TIED = (Example(np.array([1.0, 3.0, 3.0])), Example(_TIES, axis=1))
MAX = _numpy_op(np.max, _max, (_extreme_grad,), _EXTREMES, singular_points=_TIED)


def _min(x, *, axis=None, keepdims=False):
    """Smallest value over ``axis`` (values only)."""
    return np.min(x, axis=axis, keepdims=keepdims)


MIN = _numpy_op(np.min, _min, (_extreme_grad,), _EXTREMES)
AMAX = _numpy_op(np.amax, _max, (_extreme_grad,), _EXTREMES)
AMIN = _numpy_op(np.amin, _min, (_extreme_grad,), _EXTREMES)


def _scan(scan, x, axis):
    """``scan(x, axis)``; a 0-d input is its own running sum or product (shape ``()``, torch's)."""
    if np.ndim(x) == 0:
        normalize_axes(axis, 0)  # axis 0 and -1 name the implicit axis; others raise
        return np.reshape(x, ()).copy()
    return scan(x, axis=axis)


def _cumsum(x, *, axis=None):
    """Running sum along ``axis`` (flattened when None)."""
    return _scan(np.cumsum, x, axis)


def _cumsum_grad(g, out, x, *, axis=None):
    if np.ndim(x) == 0:
        return g
    if axis is None:
        return np.reshape(np.flip(np.cumsum(np.flip(g))), x.shape)
    return np.flip(np.cumsum(np.flip(g, axis=axis), axis=axis), axis=axis)


CUMSUM = _numpy_op(
    np.cumsum,
    _cumsum,
    (_cumsum_grad,),
    (Example((5,)), Example((3, 4), axis=1), Example((3, 4), axis=0), Example((2, 3))),
)


def _prod(x, *, axis=None, keepdims=False):
    """Product over ``axis``."""
    return np.prod(x, axis=axis, keepdims=keepdims)


def _prod_grad(g, out, x, *, axis=None, keepdims=False):
    g = unreduce(g, x.shape, axis, keepdims)
    if not np.any(x == 0):
        return g * (unreduce(out, x.shape, axis, keepdims) / x)
    if not hasattr(x, "requires_grad"):
        # d prod / d x_i = product of the others, computed without dividing by zero.
        is_zero = x == 0
        nonzero = np.where(is_zero, 1, x)
        prod_nonzero = np.prod(nonzero, axis=axis, keepdims=True)
        zeros = np.sum(is_zero, axis=axis, keepdims=True)
        others = np.where(
            is_zero,
            np.where(zeros == 1, prod_nonzero, 0),
            np.where(zeros == 0, prod_nonzero / nonzero, 0),
        )
        return g * others
    return g * _product_of_others(x, axis)


def _product_of_others(x, axis):
    """prod_{j != i} x_j along ``axis`` as a smooth expression (for second derivatives at zeros).

    Costs n times the memory of the reduced axis, so it is used only when differentiating twice
    through a product that contains zeros.
    """
    axes = normalize_axes(axis, x.ndim)
    last = list(range(x.ndim - len(axes), x.ndim))
    moved = np.moveaxis(x, axes, last)
    flat = np.reshape(moved, (*moved.shape[: x.ndim - len(axes)], -1))
    n = flat.shape[-1]
    expanded = np.where(array_module(x).eye(n, dtype=bool), 1.0, np.expand_dims(flat, -2))
    others = np.reshape(np.prod(expanded, axis=-1), moved.shape)
    return np.moveaxis(others, last, axes)


PROD = _numpy_op(
    np.prod,
    _prod,
    (_prod_grad,),
    _AXES + (Example(np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.2, 0.7, 2.0]]), axis=1),),
    singular_points=(Example(np.array([2.0, 0.0, 3.0])), Example(np.array([0.0, 0.0, 3.0]))),
)


def _moment(fn, x, axis, ddof, keepdims):
    """``fn(x)`` (np.var or np.std), in float32 for half-precision ``x`` (whose squares overflow
    past 255), as torch accumulates; the result has ``x``'s dtype.
    """
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.itemsize < 4 and dtype.kind in "fV":  # float16, bfloat16
        return fn(x.astype(np.float32), axis=axis, ddof=ddof, keepdims=keepdims).astype(dtype)
    return fn(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _var(x, *, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (NumPy's default 0)."""
    return _moment(np.var, x, axis, ddof, keepdims)


def _var_grad(g, out, x, *, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return unreduce(g, x.shape, axis, keepdims) * centered * (2.0 * _inverse_dof(x, axis, ddof))


def _inverse_dof(x, axis, ddof):
    """1 / (N - ddof), inf when N - ddof <= 0 (where the forward is inf or nan, as in NumPy)."""
    n = reduced_count(x.shape, axis) - ddof
    return 1.0 / n if n > 0 else np.inf


VAR = _numpy_op(np.var, _var, (_var_grad,), _AXES + (Example((3, 5), axis=1, ddof=1),))


def _std(x, *, axis=None, ddof=0, keepdims=False):
    """Standard deviation over ``axis`` with ``ddof`` delta degrees of freedom."""
    return _moment(np.std, x, axis, ddof, keepdims)


def _std_grad(g, out, x, *, axis=None, ddof=0, keepdims=False):
    # A constant slice has std 0 and centered values 0: its gradient is 0 (as in torch), not 0/0.
    safe = np.where(out == 0, 1.0, out)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return unreduce(g / safe, x.shape, axis, keepdims) * centered * _inverse_dof(x, axis, ddof)


STD = _numpy_op(
    np.std,
    _std,
    (_std_grad,),
    _AXES + (Example((3, 5), axis=1, ddof=1),),
    singular_points=(
        Example(np.full(3, 1.5)),  # a constant: std 0, gradient 0 (not 0/0)
        Example(np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]]), axis=1, ddof=1),
    ),
)


def _cumprod(x, *, axis=None):
    """Running product along ``axis`` (flattened when None)."""
    return _scan(np.cumprod, x, axis)


def _cumprod_grad(g, out, x, *, axis=None):
    if np.ndim(x) == 0:
        return g
    if axis is None:
        flat = _cumprod_grad(np.reshape(g, (-1,)), out, np.reshape(x, (-1,)), axis=0)
        return np.reshape(flat, x.shape)
    if not np.any(x == 0):
        # d out_j / d x_i = out_j / x_i for j >= i, so the gradient is a reversed running sum of
        # g * out, divided by x.
        return np.flip(np.cumsum(np.flip(g * out, axis=axis), axis=axis), axis=axis) / x
    return _cumprod_grad_with_zeros(g, x, axis)


def _cumprod_grad_with_zeros(g, x, axis):
    """The cumprod gradient without dividing by x (exact where x has zeros).

    grad_i = prod_{k<i} x_k * S_i with S_i = g_i + x_{i+1} * S_{i+1}: one pass backwards along
    the axis, then the exclusive running product. Costs a Python loop over the axis' length.
    """
    moved_x = np.moveaxis(x, axis, 0)
    moved_g = np.moveaxis(g, axis, 0)
    n = moved_x.shape[0]
    suffix = [moved_g[n - 1]]
    for i in range(n - 2, -1, -1):
        suffix.append(moved_g[i] + moved_x[i + 1] * suffix[-1])
    suffix.reverse()
    before = [np.ones_like(moved_x[0])] if n else []
    for i in range(1, n):
        before.append(before[-1] * moved_x[i - 1])
    terms = [b * s for b, s in zip(before, suffix)]
    return np.moveaxis(np.stack(terms), 0, axis) if n else g


CUMPROD = _numpy_op(
    np.cumprod,
    _cumprod,
    (_cumprod_grad,),
    (
        Example((5,), domain=(0.5, 1.5)),
        Example((3, 4), axis=1, domain=(0.5, 1.5)),
        Example((2, 3), domain=(0.5, 1.5)),
        Example(np.array([[2.0, 0.0, 3.0, 0.5], [0.0, 1.5, 0.0, 2.0]]), axis=1),
    ),
    singular_points=(
        Example(np.array([2.0, 0.0, 3.0])),  # torch: [1, 8, 0]; the x-division gave nan
        Example(np.array([[2.0, 0.0, 3.0, 0.0], [0.0, 0.0, 1.5, 2.0]]), axis=1),
    ),
)

OPS = (SUM, MEAN, MAX, MIN, AMAX, AMIN, CUMSUM, PROD, VAR, STD, CUMPROD)
