"""Shape and layout ops: the gradient undoes the rearrangement."""

from __future__ import annotations

import itertools

import numpy as np

from sadl._records import Example, OpDef


def _numpy_op(func, forward, backward, examples, **fields):
    """The op named after NumPy's ``func``, which it implements (``np.func(t)`` dispatches here)."""
    return OpDef(func.__name__, forward, backward, numpy_funcs=(func,), examples=examples, **fields)


def _reshape(x, *, shape, order="C"):
    """Same data, new ``shape`` (one entry may be -1)."""
    return np.reshape(x, shape, order=order)


RESHAPE = _numpy_op(
    np.reshape,
    _reshape,
    (lambda g, out, x, *, shape, order="C": np.reshape(g, x.shape, order=order),),
    (Example((3, 4), shape=(2, 6)), Example((2, 3, 4), shape=(-1, 4))),
)


def _transpose(x, *, axes=None):
    """Permute axes (reverse them when ``axes`` is None)."""
    return np.transpose(x, axes)


def _transpose_grad(g, out, x, *, axes=None):
    if axes is None:
        return np.transpose(g)
    # The inverse permutation of the axes counted from 0 (argsort of raw negative axes is not).
    return np.transpose(g, tuple(np.argsort([int(a) % max(x.ndim, 1) for a in axes])))


TRANSPOSE = _numpy_op(
    np.transpose,
    _transpose,
    (_transpose_grad,),
    (Example((3, 4)), Example((2, 3, 4), axes=(1, 2, 0))),
)


def _swapaxes(x, *, axis1, axis2):
    """Exchange two axes."""
    return np.swapaxes(x, axis1, axis2)


SWAPAXES = _numpy_op(
    np.swapaxes,
    _swapaxes,
    (lambda g, out, x, *, axis1, axis2: np.swapaxes(g, axis1, axis2),),
    (Example((2, 3, 4), axis1=0, axis2=2),),
)


def _moveaxis(x, *, source, destination):
    """Move axes to new positions."""
    return np.moveaxis(x, source, destination)


MOVEAXIS = _numpy_op(
    np.moveaxis,
    _moveaxis,
    (lambda g, out, x, *, source, destination: np.moveaxis(g, destination, source),),
    (
        Example((2, 3, 4), source=0, destination=-1),
        Example((2, 3, 4), source=(0, 1), destination=(2, 0)),
    ),
)


def _squeeze(x, *, axis=None):
    """Drop length-1 axes."""
    return np.squeeze(x, axis=axis)


SQUEEZE = _numpy_op(
    np.squeeze,
    _squeeze,
    (lambda g, out, x, *, axis=None: np.reshape(g, x.shape),),
    (Example((3, 1, 4, 1)), Example((3, 1, 4), axis=1)),
)


def _expand_dims(x, *, axis):
    """Insert length-1 axes at ``axis``."""
    return np.expand_dims(x, axis)


EXPAND_DIMS = _numpy_op(
    np.expand_dims,
    _expand_dims,
    (lambda g, out, x, *, axis: np.reshape(g, x.shape),),
    (Example((3, 4), axis=1), Example((3,), axis=(0, 2))),
)


def _broadcast_to(x, *, shape):
    """Broadcast to ``shape`` (a read-only view)."""
    return np.broadcast_to(x, shape)


BROADCAST_TO = _numpy_op(
    np.broadcast_to,
    _broadcast_to,
    (lambda g, out, x, *, shape: g,),
    (Example((3, 1), shape=(2, 3, 4)), Example((4,), shape=(3, 4))),
)


def _ravel(x, *, order="C"):
    """Flatten to one dimension."""
    return np.ravel(x, order=order)


RAVEL = _numpy_op(
    np.ravel,
    _ravel,
    (lambda g, out, x, *, order="C": np.reshape(g, x.shape, order=order),),
    (Example((3, 4)),),
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


CONCATENATE = _numpy_op(
    np.concatenate,
    _concatenate,
    _concatenate_grad,
    (
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


STACK = _numpy_op(
    np.stack,
    _stack,
    _stack_grad,
    (Example((2, 3), (2, 3)), Example((2, 3), (2, 3), (2, 3), axis=-1)),
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


FLIP = _numpy_op(
    np.flip,
    _flip,
    (lambda g, out, x, *, axis=None: np.flip(g, axis=axis),),
    (Example((3, 4)), Example((2, 3, 4), axis=(0, 2))),
)


def _copy(x):
    """A copy that owns its memory."""
    return x.copy()


COPY = _numpy_op(np.copy, _copy, (lambda g, out, x: g,), (Example((3, 4)),))

#: Every op defined above, in order (``sadl._ops.CORE_OPS`` registers them).
OPS = tuple(op for op in globals().values() if isinstance(op, OpDef))
