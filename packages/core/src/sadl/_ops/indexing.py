"""Indexing and selection: the gradient is scattered back to where the values came from.

``add_at`` (``np.add.at`` into zeros) is the adjoint of ``getitem`` and vice versa, so both are
ops and second derivatives through indexing work like any other. ``take``, ``take_along_axis``,
``sort``, ``clip`` and torch's ``gather``/``scatter`` family are sadl-layers' ops.
"""

from __future__ import annotations

import numpy as np

from sadl._records import Example, OpDef
from sadl.backends import match_key
from sadl.backends import scatter_add as _scatter_into


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


OPS = (GETITEM, ADD_AT, SETITEM, WHERE)
