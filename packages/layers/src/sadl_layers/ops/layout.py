"""Array layout ops NumPy users reach for beyond reshaping: ``roll``, ``pad``, ``repeat``, ``tile``,
``tril``/``triu``, ``diagonal`` and ``trace``; the gradient undoes the rearrangement.

They left core (issue 24) for sadl-layers, where padding and triangles are used; ``np.pad(t)``,
``t.roll()`` and the rest reach them through the registry.
"""

from __future__ import annotations

import numpy as np
import sadl
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

_SQUARES = (Example((4, 4)), Example((2, 3, 4), k=1), Example((3, 5), k=-1))


def ADD_AT(*args, **params):
    return sadl.ops.add_at(*args, **params)


def _roll(x, *, shift, axis=None):
    """Shift elements cyclically along ``axis``."""
    return np.roll(x, shift, axis=axis)


def _roll_grad(g, out, x, *, shift, axis=None):
    back = -np.asarray(shift)
    return np.roll(g, back.tolist() if back.ndim else int(back), axis=axis)


ROLL = OpDef(
    "roll",
    _roll,
    (_roll_grad,),
    numpy_funcs=(np.roll,),
    examples=(
        Example((5,), shift=2),
        Example((3, 4), shift=(1, -1), axis=(0, 1)),
        Example((3, 4), shift=1),
    ),
)


# NumPy's names for the modes that copy input values, and torch's names for the same.
_PAD_MODES = {
    "constant": "constant",
    "edge": "edge",
    "replicate": "edge",
    "reflect": "reflect",
    "symmetric": "symmetric",
    "wrap": "wrap",
    "circular": "wrap",
}


def _pad_mode(mode):
    if mode not in _PAD_MODES:
        raise ValueError(
            f"pad: mode={mode!r} is not supported on Tensors; use one of {sorted(_PAD_MODES)}"
        )
    return _PAD_MODES[mode]


def _pad(x, *, pad_width, mode="constant", constant_values=0):
    """Pad with a constant, the edge values, a mirror image or the other end (NumPy's modes).

    ``mode`` is ``constant``, ``edge``, ``reflect``, ``symmetric`` or ``wrap``; torch's names
    ``replicate`` and ``circular`` mean ``edge`` and ``wrap``.
    """
    numpy_mode = _pad_mode(mode)
    if numpy_mode == "constant":
        return np.pad(x, pad_width, mode="constant", constant_values=constant_values)
    if np.any(np.asarray(constant_values) != 0):
        raise ValueError(f"pad: constant_values only applies to mode='constant', not {mode!r}")
    return np.pad(x, pad_width, mode=numpy_mode)


def _pad_grad(g, out, x, *, pad_width, mode="constant", constant_values=0):
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (x.ndim, 2))
    numpy_mode = _pad_mode(mode)
    if numpy_mode == "constant":
        key = tuple(slice(int(lo), int(lo) + n) for (lo, _), n in zip(widths, x.shape))
        return g[key]
    # Each output element is a copy of one input element, chosen axis by axis: padding the
    # positions 0..n-1 the same way says which, and the gradient is added back there.
    for axis, ((lo, hi), n) in enumerate(zip(widths, x.shape)):
        if lo or hi:
            xp = array_module(g)  # the source positions are made where the gradient lives
            source = xp.pad(xp.arange(n), (int(lo), int(hi)), mode=numpy_mode)
            shape = (*g.shape[:axis], n, *g.shape[axis + 1 :])
            g = ADD_AT(g, shape=shape, key=(slice(None),) * axis + (source,))
    return g


PAD = OpDef(
    "pad",
    _pad,
    (_pad_grad,),
    numpy_funcs=(np.pad,),
    examples=(
        Example((3, 4), pad_width=1),
        Example((2, 3), pad_width=((0, 1), (2, 0))),
        *(
            Example((3, 4), pad_width=((1, 2), (2, 1)), mode=mode)
            for mode in ("edge", "reflect", "symmetric", "wrap", "replicate", "circular")
        ),
        Example((2, 3, 4), pad_width=((0, 0), (1, 1), (3, 0)), mode="reflect"),
    ),
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


REPEAT = OpDef(
    "repeat",
    _repeat,
    (_repeat_grad,),
    numpy_funcs=(np.repeat,),
    examples=(
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


TILE = OpDef(
    "tile",
    _tile,
    (_tile_grad,),
    numpy_funcs=(np.tile,),
    examples=(Example((3, 2), reps=2), Example((2, 3), reps=(2, 1, 2))),
)


def _tril(x, *, k=0):
    """Lower triangle of the last two axes (zeros above diagonal ``k``)."""
    return np.tril(x, k)


TRIL = OpDef(
    "tril",
    _tril,
    (lambda g, out, x, *, k=0: np.tril(g, k),),
    numpy_funcs=(np.tril,),
    examples=_SQUARES,
)


def _triu(x, *, k=0):
    """Upper triangle of the last two axes (zeros below diagonal ``k``)."""
    return np.triu(x, k)


TRIU = OpDef(
    "triu",
    _triu,
    (lambda g, out, x, *, k=0: np.triu(g, k),),
    numpy_funcs=(np.triu,),
    examples=_SQUARES,
)


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


DIAGONAL = OpDef(
    "diagonal",
    _diagonal,
    (_diagonal_grad,),
    numpy_funcs=(np.diagonal,),
    examples=(Example((4, 4)), Example((3, 5), offset=1), Example((2, 3, 4), axis1=1, axis2=2)),
)


def _trace(x, offset=0, axis1=0, axis2=1):
    """Sum of the diagonal."""
    return np.sum(np.diagonal(x, offset, axis1, axis2), axis=-1)


TRACE = OpDef(
    "trace",
    _trace,
    numpy_funcs=(np.trace,),
    composite=True,
    examples=(Example((4, 4)),),
)


__all__ = ["roll", "pad", "repeat", "tile", "tril", "triu", "diagonal", "trace"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
roll, pad, repeat, tile, tril, triu, diagonal, trace = (
    ROLL,
    PAD,
    REPEAT,
    TILE,
    TRIL,
    TRIU,
    DIAGONAL,
    TRACE,
)
