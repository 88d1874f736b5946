"""Layout ops NumPy users reach for beyond reshaping: ``roll``, ``repeat``, ``tile``,
``tril``/``triu``, ``diagonal`` and ``trace``; the gradient undoes the rearrangement (an
``add_at`` back to where each value came from).
"""

from __future__ import annotations

import numpy as np

from sadl._ops.indexing import ADD_AT
from sadl._records import Example, OpDef
from sadl.backends import array_module


def _numpy_op(func, forward, backward, examples, **fields):
    """The op named after NumPy's ``func``, which it implements (``np.func(t)`` dispatches here)."""
    return OpDef(func.__name__, forward, backward, numpy_funcs=(func,), examples=examples, **fields)


_SQUARES = (Example((4, 4)), Example((2, 3, 4), k=1), Example((3, 5), k=-1))


def _roll(x, *, shift, axis=None):
    """Shift elements cyclically along ``axis``."""
    return np.roll(x, shift, axis=axis)


def _roll_grad(g, out, x, *, shift, axis=None):
    back = -np.asarray(shift)
    return np.roll(g, back.tolist() if back.ndim else int(back), axis=axis)


ROLL = _numpy_op(
    np.roll,
    _roll,
    (_roll_grad,),
    (Example((5,), shift=2), Example((3, 4), shift=(1, -1), axis=(0, 1)), Example((3, 4), shift=1)),
)


def _repeat(x, *, repeats, axis=None):
    """Repeat each element ``repeats`` times along ``axis`` (flattened when None)."""
    return np.repeat(x, repeats, axis=axis)


def _repeat_grad(g, out, x, *, repeats, axis=None):
    xp = array_module(g)  # the source positions are made where the gradient lives
    if axis is None or x.ndim == 0:  # a 0-d input repeats like a flattened one
        source = xp.repeat(xp.arange(x.size), repeats)
        return np.reshape(ADD_AT(g, shape=(x.size,), key=(source,)), x.shape)
    axis = axis % x.ndim
    source = xp.repeat(xp.arange(x.shape[axis]), repeats)
    key = (slice(None),) * axis + (source,)
    return ADD_AT(g, shape=x.shape, key=key)


REPEAT = _numpy_op(
    np.repeat,
    _repeat,
    (_repeat_grad,),
    (
        Example((3, 2), repeats=2),
        Example((3, 2), repeats=[1, 0, 3], axis=0),
        Example((2, 3), repeats=3, axis=1),
    ),
)


def _tile(x, *, reps):
    """Repeat the whole array ``reps`` times along each axis."""
    return np.tile(x, reps)


def _tile_grad(g, out, x, *, reps):
    reps = (reps,) if isinstance(reps, int | np.integer) else tuple(reps)
    ndim = max(len(reps), x.ndim)
    shape = (1,) * (ndim - x.ndim) + tuple(x.shape)
    reps = (1,) * (ndim - len(reps)) + reps
    split = [n for pair in zip(reps, shape) for n in pair]
    summed = np.sum(np.reshape(g, split), axis=tuple(range(0, 2 * ndim, 2)))
    return np.reshape(summed, x.shape)


TILE = _numpy_op(
    np.tile, _tile, (_tile_grad,), (Example((3, 2), reps=2), Example((2, 3), reps=(2, 1, 2)))
)


def _triangle(numpy_func, doc):
    """``tril``/``triu``: keep one triangle of the last two axes; the gradient keeps the same."""

    def forward(x, *, k=0):
        return numpy_func(x, k)

    name = numpy_func.__name__
    forward.__name__, forward.__qualname__, forward.__doc__ = f"_{name}", f"_{name}", doc
    grad = (lambda g, out, x, *, k=0: numpy_func(g, k),)
    return OpDef(name, forward, grad, numpy_funcs=(numpy_func,), examples=_SQUARES)


TRIL = _triangle(np.tril, "Lower triangle of the last two axes (zeros above diagonal ``k``).")
TRIU = _triangle(np.triu, "Upper triangle of the last two axes (zeros below diagonal ``k``).")


def _diagonal(x, *, offset=0, axis1=0, axis2=1):
    """The diagonal of two axes, moved to the end (a copy)."""
    return np.diagonal(x, offset, axis1, axis2).copy()


def _diagonal_grad(g, out, x, *, offset=0, axis1=0, axis2=1):
    # np.diagonal reads the (..., n1, n2) layout with the two axes moved last: write the
    # gradient back there, then move the axes home.
    nd = x.ndim
    a1, a2 = axis1 % nd, axis2 % nd
    rest = tuple(n for i, n in enumerate(x.shape) if i not in (a1, a2))
    length = g.shape[-1]
    xp = array_module(g)
    rows = xp.arange(length) + max(-offset, 0)
    cols = xp.arange(length) + max(offset, 0)
    placed = ADD_AT(g, shape=(*rest, x.shape[a1], x.shape[a2]), key=(Ellipsis, rows, cols))
    return np.moveaxis(placed, (-2, -1), (a1, a2))


DIAGONAL = _numpy_op(
    np.diagonal,
    _diagonal,
    (_diagonal_grad,),
    (Example((4, 4)), Example((3, 5), offset=1), Example((2, 3, 4), axis1=1, axis2=2)),
)


def _trace(x, offset=0, axis1=0, axis2=1):
    """Sum of the diagonal."""
    return np.sum(np.diagonal(x, offset, axis1, axis2), axis=-1)


TRACE = OpDef("trace", _trace, numpy_funcs=(np.trace,), composite=True, examples=(Example((4, 4)),))


OPS = (ROLL, REPEAT, TILE, TRIL, TRIU, DIAGONAL, TRACE)
