"""Shape and layout ops: the gradient undoes the rearrangement."""

from __future__ import annotations

import itertools

import numpy as np

from sadl._ops.indexing import ADD_AT
from sadl._records import Example, OpDef
from sadl.backends import array_module

_SQUARES = (Example((4, 4)), Example((2, 3, 4), k=1), Example((3, 5), k=-1))


def _reshape(x, *, shape, order="C"):
    """Same data, new ``shape`` (one entry may be -1)."""
    return np.reshape(x, shape, order=order)


RESHAPE = OpDef(
    "reshape",
    _reshape,
    (lambda g, out, x, *, shape, order="C": np.reshape(g, x.shape, order=order),),
    numpy_funcs=(np.reshape,),
    examples=(Example((3, 4), shape=(2, 6)), Example((2, 3, 4), shape=(-1, 4))),
)


def _transpose(x, *, axes=None):
    """Permute axes (reverse them when ``axes`` is None)."""
    return np.transpose(x, axes)


def _transpose_grad(g, out, x, *, axes=None):
    if axes is None:
        return np.transpose(g)
    # The inverse permutation of the axes counted from 0 (argsort of raw negative axes is not).
    return np.transpose(g, tuple(np.argsort([int(a) % max(x.ndim, 1) for a in axes])))


TRANSPOSE = OpDef(
    "transpose",
    _transpose,
    (_transpose_grad,),
    numpy_funcs=(np.transpose,),
    examples=(Example((3, 4)), Example((2, 3, 4), axes=(1, 2, 0))),
)


def _swapaxes(x, *, axis1, axis2):
    """Exchange two axes."""
    return np.swapaxes(x, axis1, axis2)


SWAPAXES = OpDef(
    "swapaxes",
    _swapaxes,
    (lambda g, out, x, *, axis1, axis2: np.swapaxes(g, axis1, axis2),),
    numpy_funcs=(np.swapaxes,),
    examples=(Example((2, 3, 4), axis1=0, axis2=2),),
)


def _moveaxis(x, *, source, destination):
    """Move axes to new positions."""
    return np.moveaxis(x, source, destination)


MOVEAXIS = OpDef(
    "moveaxis",
    _moveaxis,
    (lambda g, out, x, *, source, destination: np.moveaxis(g, destination, source),),
    numpy_funcs=(np.moveaxis,),
    examples=(
        Example((2, 3, 4), source=0, destination=-1),
        Example((2, 3, 4), source=(0, 1), destination=(2, 0)),
    ),
)


def _squeeze(x, *, axis=None):
    """Drop length-1 axes."""
    return np.squeeze(x, axis=axis)


SQUEEZE = OpDef(
    "squeeze",
    _squeeze,
    (lambda g, out, x, *, axis=None: np.reshape(g, x.shape),),
    numpy_funcs=(np.squeeze,),
    examples=(Example((3, 1, 4, 1)), Example((3, 1, 4), axis=1)),
)


def _expand_dims(x, *, axis):
    """Insert length-1 axes at ``axis``."""
    return np.expand_dims(x, axis)


EXPAND_DIMS = OpDef(
    "expand_dims",
    _expand_dims,
    (lambda g, out, x, *, axis: np.reshape(g, x.shape),),
    numpy_funcs=(np.expand_dims,),
    examples=(Example((3, 4), axis=1), Example((3,), axis=(0, 2))),
)


def _broadcast_to(x, *, shape):
    """Broadcast to ``shape`` (a read-only view)."""
    return np.broadcast_to(x, shape)


BROADCAST_TO = OpDef(
    "broadcast_to",
    _broadcast_to,
    (lambda g, out, x, *, shape: g,),
    numpy_funcs=(np.broadcast_to,),
    examples=(Example((3, 1), shape=(2, 3, 4)), Example((4,), shape=(3, 4))),
)


def _ravel(x, *, order="C"):
    """Flatten to one dimension."""
    return np.ravel(x, order=order)


RAVEL = OpDef(
    "ravel",
    _ravel,
    (lambda g, out, x, *, order="C": np.reshape(g, x.shape, order=order),),
    numpy_funcs=(np.ravel,),
    examples=(Example((3, 4)),),
)


def _concatenate(*arrays, axis=0):
    """Join arrays along an existing axis (flattened first when ``axis`` is None)."""
    return np.concatenate(arrays, axis=axis)


def _concatenate_grad(g, out, *arrays, axis=0):
    if axis is None:
        sizes = [a.size for a in arrays]
        pieces = np.split(g, np.cumsum(sizes)[:-1].tolist())
        return tuple(np.reshape(p, a.shape) for p, a in zip(pieces, arrays))
    sizes = [a.shape[axis] for a in arrays]
    return tuple(np.split(g, np.cumsum(sizes)[:-1].tolist(), axis=axis))


CONCATENATE = OpDef(
    "concatenate",
    _concatenate,
    _concatenate_grad,
    numpy_funcs=(np.concatenate,),
    examples=(
        Example((2, 3), (4, 3)),
        Example((2, 3), (2, 1), (2, 2), axis=1),
        Example((2, 3), (4,), axis=None),
    ),
)


def _stack(*arrays, axis=0):
    """Join arrays along a new axis."""
    return np.stack(arrays, axis=axis)


def _stack_grad(g, out, *arrays, axis=0):
    moved = np.moveaxis(g, axis, 0)
    return tuple(moved[i] for i in range(len(arrays)))


STACK = OpDef(
    "stack",
    _stack,
    _stack_grad,
    numpy_funcs=(np.stack,),
    examples=(Example((2, 3), (2, 3)), Example((2, 3), (2, 3), (2, 3), axis=-1)),
)


def _split(x, indices_or_sections, axis=0):
    """Split into pieces along ``axis`` (equal sections, or at the given indices)."""
    n = x.shape[axis]
    if isinstance(indices_or_sections, int | np.integer):
        sections = int(indices_or_sections)
        if sections <= 0 or n % sections:
            raise ValueError(
                f"split: axis {axis} of length {n} does not divide into {sections} equal sections"
            )
        bounds = list(range(0, n + 1, n // sections)) if n else [0] * (sections + 1)
    else:
        bounds = [0, *(min(int(i), n) for i in indices_or_sections), n]
    lead = (slice(None),) * (axis % x.ndim)
    return [x[(*lead, slice(lo, max(lo, hi)))] for lo, hi in itertools.pairwise(bounds)]


SPLIT = OpDef(
    "split",
    _split,
    numpy_funcs=(np.split,),
    composite=True,
    examples=(Example((6, 2), 3), Example((2, 7), [2, 5], axis=1)),
)


def _array_split(x, indices_or_sections, axis=0):
    """Split into nearly equal sections (or at the given indices) along ``axis``."""
    n = x.shape[axis]
    if isinstance(indices_or_sections, int | np.integer):
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("array_split: number of sections must be larger than 0")
        each, extra = divmod(n, sections)
        sizes = [each + 1] * extra + [each] * (sections - extra)
        indices_or_sections = np.cumsum(sizes)[:-1].tolist()
    return _split(x, indices_or_sections, axis=axis)


ARRAY_SPLIT = OpDef(
    "array_split",
    _array_split,
    numpy_funcs=(np.array_split,),
    composite=True,
    examples=(Example((7, 2), 3),),
)


def _flip(x, *, axis=None):
    """Reverse the order of elements along ``axis`` (all axes when None)."""
    return np.flip(x, axis=axis)


FLIP = OpDef(
    "flip",
    _flip,
    (lambda g, out, x, *, axis=None: np.flip(g, axis=axis),),
    numpy_funcs=(np.flip,),
    examples=(Example((3, 4)), Example((2, 3, 4), axis=(0, 2))),
)


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


def _copy(x):
    """A copy that owns its memory."""
    return x.copy()


COPY = OpDef(
    "copy", _copy, (lambda g, out, x: g,), numpy_funcs=(np.copy,), examples=(Example((3, 4)),)
)

OPS = (
    RESHAPE,
    TRANSPOSE,
    SWAPAXES,
    MOVEAXIS,
    SQUEEZE,
    EXPAND_DIMS,
    BROADCAST_TO,
    RAVEL,
    CONCATENATE,
    STACK,
    SPLIT,
    ARRAY_SPLIT,
    FLIP,
    ROLL,
    PAD,
    REPEAT,
    TILE,
    TRIL,
    TRIU,
    DIAGONAL,
    TRACE,
    COPY,
)
