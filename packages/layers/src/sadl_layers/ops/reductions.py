"""Products, moments and the running product: ``prod``, ``var``, ``std``, ``cumprod`` (they left
core, issue 24, beside core's ``sum``/``mean``/``max``/``cumsum``). The Tensor methods
(``t.prod()``, ``t.var(ddof=1)``, ``t.cumprod(0)``) call them, and ``np.prod(t)``, ``np.var(t)``,
``np.multiply.reduce(t)`` and ``np.multiply.accumulate(t)`` on Tensors reach them through the
registry. The gradient spreads back over the reduced axes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

__all__ = ["prod", "var", "std", "cumprod"]

_AXES = (
    Example((3, 4)),
    Example((3, 4), axis=1),
    Example((2, 3, 4), axis=(0, 2), keepdims=True),
    Example((2, 3, 4), axis=-1),
)


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """``axis`` as a sorted tuple of non-negative axes (None means all; a 0-d array has none)."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    return tuple(sorted(int(a) % ndim for a in axes)) if ndim else ()


def unreduce(g: Any, shape: tuple[int, ...], axis: Any, keepdims: bool) -> Any:
    """Reshape a reduction's gradient so it broadcasts against the reduced input."""
    if keepdims:
        return g
    axes = normalize_axes(axis, len(shape))
    return np.reshape(g, tuple(1 if i in axes else n for i, n in enumerate(shape)))


def reduced_count(shape: tuple[int, ...], axis: Any) -> int:
    """How many elements each output of a reduction over ``axis`` summarizes."""
    count = 1
    for a in normalize_axes(axis, len(shape)):
        count *= shape[a]
    return count


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


PROD = OpDef(
    "prod",
    _prod,
    (_prod_grad,),
    numpy_funcs=(np.prod,),
    examples=_AXES
    + (Example(np.array([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.2, 0.7, 2.0]]), axis=1),),
    singular_points=(Example(np.array([2.0, 0.0, 3.0])), Example(np.array([0.0, 0.0, 3.0]))),
)


def _var(x, *, axis=None, ddof=0, keepdims=False):
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom (NumPy's default 0)."""
    return np.var(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _var_grad(g, out, x, *, axis=None, ddof=0, keepdims=False):
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return unreduce(g, x.shape, axis, keepdims) * centered * (2.0 * _inverse_dof(x, axis, ddof))


def _inverse_dof(x, axis, ddof):
    """1 / (N - ddof), inf when N - ddof <= 0 (where the forward is inf or nan, as in NumPy)."""
    n = reduced_count(x.shape, axis) - ddof
    return 1.0 / n if n > 0 else np.inf


VAR = OpDef(
    "var",
    _var,
    (_var_grad,),
    numpy_funcs=(np.var,),
    examples=_AXES + (Example((3, 5), axis=1, ddof=1),),
)


def _std(x, *, axis=None, ddof=0, keepdims=False):
    """Standard deviation over ``axis`` with ``ddof`` delta degrees of freedom."""
    return np.std(x, axis=axis, ddof=ddof, keepdims=keepdims)


def _std_grad(g, out, x, *, axis=None, ddof=0, keepdims=False):
    # A constant slice has std 0 and centered values 0: its gradient is 0 (as in torch), not 0/0.
    safe = np.where(out == 0, 1.0, out)
    centered = x - np.mean(x, axis=axis, keepdims=True)
    return unreduce(g / safe, x.shape, axis, keepdims) * centered * _inverse_dof(x, axis, ddof)


STD = OpDef(
    "std",
    _std,
    (_std_grad,),
    numpy_funcs=(np.std,),
    examples=_AXES + (Example((3, 5), axis=1, ddof=1),),
    singular_points=(
        Example(np.full(3, 1.5)),  # a constant: std 0, gradient 0 (not 0/0)
        Example(np.array([[1.0, 1.0, 1.0], [1.0, 2.0, 4.0]]), axis=1, ddof=1),
    ),
)


def _cumprod(x, *, axis=None):
    """Running product along ``axis`` (flattened when None)."""
    return np.cumprod(x, axis=axis)


def _cumprod_grad(g, out, x, *, axis=None):
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


CUMPROD = OpDef(
    "cumprod",
    _cumprod,
    (_cumprod_grad,),
    numpy_funcs=(np.cumprod,),
    examples=(
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

INTERNAL_OPS: tuple[OpDef, ...] = ()
prod, var, std, cumprod = PROD, VAR, STD, CUMPROD
