"""Ops whose outputs carry no gradient: comparisons, arg-reductions, masks.

They accept tensors that require grad and return tensors that do not, as in torch. (Rounding
is different: torch differentiates it with a zero gradient, see ``sadl._ops.elementwise``.)
``isneginf``, ``isposinf``, ``signbit``, ``isclose`` and ``count_nonzero`` are sadl-layers'.
"""

from __future__ import annotations

import numpy as np

from sadl._records import Example, OpDef

_ONE = (Example((3, 4)),)
_TWO = (Example((3, 4), (4,)),)


def _nondiff(name, forward, numpy_funcs=None, examples=_ONE):
    funcs = (forward,) if numpy_funcs is None else numpy_funcs
    return OpDef(name, forward, numpy_funcs=funcs, differentiable=False, examples=examples)


def _argmax(x, *, axis=None, keepdims=False):
    """Index of the largest value along ``axis`` (of the flattened array when None)."""
    return np.argmax(x, axis=axis, keepdims=keepdims)


ARGMAX = _nondiff("argmax", _argmax, (np.argmax,))


def _argmin(x, *, axis=None, keepdims=False):
    """Index of the smallest value along ``axis`` (of the flattened array when None)."""
    return np.argmin(x, axis=axis, keepdims=keepdims)


ARGMIN = _nondiff("argmin", _argmin, (np.argmin,))


def _argsort(x, *, axis=-1, kind=None, descending=False):
    """Indices that sort ``x`` along ``axis`` (flattened when None).

    ``descending`` puts the largest first, keeps ties in their original order and NaN first,
    as torch does.
    """
    if not descending:
        return np.argsort(x, axis=axis, kind=kind)
    if axis is None:
        x, axis = np.reshape(x, (-1,)), 0
    reversed_order = np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(reversed_order, axis=axis)


ARGSORT = _nondiff("argsort", _argsort, (np.argsort,))
GREATER = _nondiff("greater", np.greater, examples=_TWO)
GREATER_EQUAL = _nondiff("greater_equal", np.greater_equal, examples=_TWO)
LESS = _nondiff("less", np.less, examples=_TWO)
LESS_EQUAL = _nondiff("less_equal", np.less_equal, examples=_TWO)
EQUAL = _nondiff("equal", np.equal, examples=_TWO)
NOT_EQUAL = _nondiff("not_equal", np.not_equal, examples=_TWO)
LOGICAL_AND = _nondiff("logical_and", np.logical_and, examples=_TWO)
LOGICAL_OR = _nondiff("logical_or", np.logical_or, examples=_TWO)
LOGICAL_XOR = _nondiff("logical_xor", np.logical_xor, examples=_TWO)
LOGICAL_NOT = _nondiff("logical_not", np.logical_not)
INVERT = _nondiff("invert", np.invert, examples=(Example(np.array([True, False])),))
ISFINITE = _nondiff("isfinite", np.isfinite)
ISNAN = _nondiff("isnan", np.isnan)
ISINF = _nondiff("isinf", np.isinf)


def _bitcast(x, *, dtype):
    """The same bytes read as ``dtype`` (torch's ``view(dtype)``; the last axis scales by the
    ratio of item sizes).
    """
    return x.view(dtype)


BITCAST = _nondiff("bitcast", _bitcast, (), examples=(Example((3, 4), dtype=np.int32),))


def _all(x, *, axis=None, keepdims=False):
    """True where every element along ``axis`` is truthy."""
    return np.all(x, axis=axis, keepdims=keepdims)


ALL = _nondiff("all", _all, (np.all,))


def _any(x, *, axis=None, keepdims=False):
    """True where some element along ``axis`` is truthy."""
    return np.any(x, axis=axis, keepdims=keepdims)


ANY = _nondiff("any", _any, (np.any,))


def _zeros_like(x, *, dtype=None, order="K", subok=True, shape=None, device=None):
    """Zeros with the shape, dtype and device of ``x``."""
    return np.zeros_like(x, dtype=dtype, shape=shape)


ZEROS_LIKE = _nondiff("zeros_like", _zeros_like, (np.zeros_like,))


def _ones_like(x, *, dtype=None, order="K", subok=True, shape=None, device=None):
    """Ones with the shape, dtype and device of ``x``."""
    return np.ones_like(x, dtype=dtype, shape=shape)


ONES_LIKE = _nondiff("ones_like", _ones_like, (np.ones_like,))


def _full_like(x, *, fill_value, dtype=None, order="K", subok=True, shape=None, device=None):
    """``fill_value`` everywhere, with the shape, dtype and device of ``x``."""
    return np.full_like(x, fill_value, dtype=dtype, shape=shape)


FULL_LIKE = _nondiff(
    "full_like", _full_like, (np.full_like,), examples=(Example((3, 4), fill_value=2.5),)
)

OPS = (
    ARGMAX,
    ARGMIN,
    ARGSORT,
    GREATER,
    GREATER_EQUAL,
    LESS,
    LESS_EQUAL,
    EQUAL,
    NOT_EQUAL,
    LOGICAL_AND,
    LOGICAL_OR,
    LOGICAL_XOR,
    LOGICAL_NOT,
    INVERT,
    ISFINITE,
    ISNAN,
    ISINF,
    BITCAST,
    ALL,
    ANY,
    ZEROS_LIKE,
    ONES_LIKE,
    FULL_LIKE,
)
