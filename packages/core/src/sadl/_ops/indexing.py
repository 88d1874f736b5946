"""Indexing and selection: the gradient is scattered back to where the values came from.

``add_at`` (``np.add.at`` into zeros) is the adjoint of ``getitem`` and vice versa, so both are
ops and second derivatives through indexing work like any other. Torch's ``scatter_add`` and
friends live in ``sadl._ops.scatter``.
"""

from __future__ import annotations

import numpy as np

from sadl._records import Example, OpDef
from sadl.backends import array_module, match_key
from sadl.backends import scatter_add as _scatter_into


def _along_axis_key(shape, indices, axis):
    """The fancy index that ``take_along_axis(x, indices, axis)`` reads."""
    ndim = len(shape)
    xp = array_module(indices)  # the row/column positions are made where the indices live
    key = []
    for d in range(ndim):
        if d == axis:
            key.append(indices)
        else:
            view = [1] * ndim
            view[d] = shape[d]
            key.append(xp.arange(shape[d]).reshape(view))
    return tuple(key)


def _is_basic(key) -> bool:
    """True when ``key`` selects without integer arrays, so no position can repeat."""
    parts = key if isinstance(key, tuple) else (key,)
    for k in parts:
        if isinstance(k, slice | int | np.integer) or k is None or k is Ellipsis:
            continue
        if getattr(k, "dtype", None) is not None and k.dtype == bool:
            continue
        return False
    return True


def _add_at(values, *, shape, key):
    """A zero array of ``shape`` with ``values`` added at ``key`` (repeated indices accumulate)."""
    target = np.zeros_like(values, shape=shape)
    key = match_key(key, target)
    if _is_basic(key):
        target[key] = values
    else:
        _scatter_into(target, key, values)
    return target


ADD_AT = OpDef(
    "add_at",
    _add_at,
    (lambda g, out, values, *, shape, key: g[key],),
    examples=(
        Example((4, 2), shape=(3, 2), key=(np.array([0, 2, 0, 1]),)),
        Example((2, 3), shape=(4, 5), key=(slice(1, 3), slice(0, 3))),
    ),
)


def _getitem(x, *, key):
    """``x[key]``: basic slicing, negative steps, integer arrays, boolean masks."""
    return x[match_key(key, x)]


GETITEM = OpDef(
    "getitem",
    _getitem,
    (lambda g, out, x, *, key: ADD_AT(g, shape=x.shape, key=key),),
    examples=(
        Example((4, 5), key=(slice(1, 3), slice(None, None, -2))),
        Example((4, 5), key=(np.array([0, 2, 0, 3]),)),
        Example((4, 5), key=(np.array([[1, 1], [3, 0]]), np.array([[0, 0], [4, 4]]))),
        Example((4, 5), key=(np.array([True, False, True, True]),)),
        Example((3, 4, 5), key=(Ellipsis, 2)),
        Example((3, 4), key=(None, 1, slice(None))),
    ),
)


def _setitem(x, value, *, key):
    """A copy of ``x`` with ``x[key] = value`` (what ``t[key] = value`` records on the graph)."""
    out = x.copy()
    out[key] = value
    return out


def _keep_mask(g, key):
    mask = np.ones_like(g)
    mask[key] = 0
    return mask


SETITEM = OpDef(
    "setitem",
    _setitem,
    (
        lambda g, out, x, value, *, key: g * _keep_mask(g, key),
        lambda g, out, x, value, *, key: g[key],
    ),
    examples=(
        Example((3, 4), (4,), key=1),
        Example((3, 4), (2, 2), key=(slice(1, 3), slice(0, 2))),
    ),
)


def _take(x, *, indices, axis=None):
    """Elements at ``indices`` along ``axis`` (of the flattened array when None)."""
    return np.take(x, match_key(indices, x), axis=axis)


def _take_grad(g, out, x, *, indices, axis=None):
    if axis is None:
        return np.reshape(ADD_AT(g, shape=(x.size,), key=(indices,)), x.shape)
    key = (slice(None),) * (axis % x.ndim) + (indices,)
    return ADD_AT(g, shape=x.shape, key=key)


TAKE = OpDef(
    "take",
    _take,
    (_take_grad,),
    numpy_funcs=(np.take,),
    examples=(
        Example((3, 4), indices=np.array([0, 5, 5, 11])),
        Example((3, 4), indices=np.array([[1, 1], [0, 2]]), axis=1),
        Example((3, 4), indices=np.array([2, 0, 2]), axis=0),
    ),
)


def _take_along_axis(x, *, indices, axis):
    """Pick values along ``axis`` with an index array of the same rank (torch's gather)."""
    return np.take_along_axis(x, match_key(indices, x), axis=axis)


def _take_along_axis_grad(g, out, x, *, indices, axis):
    if axis is None:
        flat = ADD_AT(g, shape=(x.size,), key=(indices,))
        return np.reshape(flat, x.shape)
    axis = axis % x.ndim
    return ADD_AT(g, shape=x.shape, key=_along_axis_key(x.shape, indices, axis))


TAKE_ALONG_AXIS = OpDef(
    "take_along_axis",
    _take_along_axis,
    (_take_along_axis_grad,),
    numpy_funcs=(np.take_along_axis,),
    examples=(
        Example((3, 4), indices=np.array([[0, 0], [3, 1], [2, 2]]), axis=1),
        Example((3, 4), indices=np.array([[0, 1, 2, 2]]), axis=0),
    ),
)


def _where(condition, x, y):
    """Elements of ``x`` where ``condition`` holds, else of ``y``."""
    return np.where(condition, x, y)


WHERE = OpDef(
    "where",
    _where,
    (
        lambda g, out, c, x, y: None,
        lambda g, out, c, x, y: g * c,
        lambda g, out, c, x, y: g * np.logical_not(c),
    ),
    numpy_funcs=(np.where,),
    examples=(
        Example(np.array([[True, False, True], [False, False, True]]), (2, 3), (2, 3)),
        Example(np.array([True, False, True]), (2, 3), (1,)),
    ),
)


def _clip(x, a_min=None, a_max=None, *, min=None, max=None):
    """Limit values to ``[a_min, a_max]`` (either bound may be None; bounds may be tensors)."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:
        raise ValueError("clip: give at least one of a_min / a_max")
    # Bounds never change the dtype (float64 bounds on float32 data stay float32).
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


def _bounds(a_min, a_max, min, max):
    return (a_min if a_min is not None else min), (a_max if a_max is not None else max)


def _clip_grad_x(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    inside = g
    if lo is not None:
        inside = inside * (x >= lo)
    if hi is not None:
        inside = inside * (x <= hi)
    return inside


def _clip_grad_min(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    below = g * (x < lo)
    return below if hi is None else below * (lo <= hi)  # lo > hi: NumPy gives hi everywhere


def _clip_grad_max(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    return g * (x > hi) if lo is None else g * np.logical_or(x > hi, lo > hi)


CLIP = OpDef(
    "clip",
    _clip,
    (_clip_grad_x, _clip_grad_min, _clip_grad_max),
    numpy_funcs=(np.clip,),
    examples=(
        Example((3, 4), -0.5, 0.5),
        Example((3, 4), None, 0.0),
        Example((3, 4), np.array([-1.0, 0.0, 0.5, -2.0])),
        Example((3, 4), (4,), (3, 1)),
        Example((3, 4), a_min=-0.5, a_max=0.5),
    ),
    singular_points=(
        Example(np.array([-0.5, 0.0, 0.5, 1.0]), -0.5, 0.5),  # at the bounds: gradient 1
        Example(np.array([0.5, 0.0]), np.array([0.5, -1.0]), np.array([1.0, 0.0])),
    ),
)


def sort_order(x, axis=-1, descending=False):
    """The stable order that sorts ``x`` along ``axis`` (flattened when None).

    Descending order keeps ties in their original order and puts NaN first, as torch does.
    An order is a constant, so a Tensor (a backward rule under create_graph) gives its array.
    """
    if hasattr(x, "requires_grad"):
        x = x.data
    if axis is None:
        x, axis = np.reshape(x, (-1,)), 0
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    reversed_order = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(reversed_order, axis=axis)


def _sort(x, *, axis=-1, descending=False):
    """Sorted copy along ``axis`` (flattened when None), largest first when ``descending``."""
    ascending = np.sort(x, axis=axis, kind="stable")
    return np.flip(ascending, axis=0 if axis is None else axis) if descending else ascending


def _sort_grad(g, out, x, *, axis=-1, descending=False):
    order = sort_order(x, axis, descending)
    if axis is None:
        return np.reshape(ADD_AT(g, shape=(x.size,), key=(order,)), x.shape)
    return ADD_AT(g, shape=x.shape, key=_along_axis_key(x.shape, order, axis % x.ndim))


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

OPS = (GETITEM, ADD_AT, SETITEM, TAKE, TAKE_ALONG_AXIS, WHERE, CLIP, SORT)
