"""Ops whose outputs carry no gradient: comparisons, arg-reductions, masks.

They accept tensors that require grad and return tensors that do not, as in torch. (Rounding
is different: torch differentiates it with a zero gradient, see ``sadl._ops.elementwise``.)
The bitwise ops (``& | ^ << >>`` on integer and boolean tensors) are here too.
"""

from __future__ import annotations

import numpy as np

from sadl._ops.reductions import normalize_axes
from sadl._records import Example, OpDef
from sadl.backends import is_array

_ONE = (Example((3, 4)),)
_TWO = (Example((3, 4), (4,)),)


def _nondiff(name, forward, numpy_funcs=None, examples=_ONE):
    funcs = (forward,) if numpy_funcs is None else numpy_funcs
    return OpDef(name, forward, numpy_funcs=funcs, differentiable=False, examples=examples)


def _over_axis(numpy_func, doc):
    """``argmax``, ``all`` ...: ``numpy_func(x, axis=, keepdims=)``, named after it."""

    def forward(x, *, axis=None, keepdims=False):
        return numpy_func(x, axis=axis, keepdims=keepdims)

    name = numpy_func.__name__
    forward.__name__, forward.__qualname__, forward.__doc__ = f"_{name}", f"_{name}", doc
    return OpDef(name, forward, numpy_funcs=(numpy_func,), differentiable=False, examples=_ONE)


ARGMAX = _over_axis(
    np.argmax, "Index of the largest value along ``axis`` (of the flattened array when None)."
)


ARGMIN = _over_axis(
    np.argmin, "Index of the smallest value along ``axis`` (of the flattened array when None)."
)


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


def _bit_patterns(ufunc):
    """``ufunc`` where a Python int the integer array's dtype cannot hold, but its bits can,
    means that bit pattern: ``int32 | 0xFFFFFFFF`` is ``int32 | -1``, as in torch (NumPy raises
    OverflowError).
    """

    def forward(a, b):
        dtype = next((v.dtype for v in (a, b) if is_array(v) and v.dtype.kind in "iu"), None)
        if dtype is not None:
            top, unsigned = np.iinfo(dtype).max, np.dtype(f"u{dtype.itemsize}")
            a, b = (
                np.array(v, unsigned).view(dtype)[()]
                if type(v) is int and top < v <= np.iinfo(unsigned).max
                else v
                for v in (a, b)
            )
        return ufunc(a, b)

    forward.__doc__ = f"``np.{ufunc.__name__}`` on integers or booleans."
    return _nondiff(ufunc.__name__, forward, (ufunc,), _BITS)


_BITS = (Example(np.array([[3, 5], [12, 7]]), np.array([6, 1])),)
BITWISE_AND = _bit_patterns(np.bitwise_and)
BITWISE_OR = _bit_patterns(np.bitwise_or)
BITWISE_XOR = _bit_patterns(np.bitwise_xor)
LEFT_SHIFT = _nondiff("left_shift", np.left_shift, examples=_BITS)
RIGHT_SHIFT = _nondiff("right_shift", np.right_shift, examples=_BITS)
ISFINITE = _nondiff("isfinite", np.isfinite)
ISNAN = _nondiff("isnan", np.isnan)
ISINF = _nondiff("isinf", np.isinf)
ISNEGINF = _nondiff("isneginf", np.isneginf)
ISPOSINF = _nondiff("isposinf", np.isposinf)
SIGNBIT = _nondiff("signbit", np.signbit)


def _isclose(a, b, *, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Elementwise closeness within tolerances."""
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


ISCLOSE = _nondiff("isclose", _isclose, (np.isclose,), _TWO)


def _count_nonzero(x, *, axis=None, keepdims=False):
    """Number of nonzero elements along ``axis``."""
    counts = np.count_nonzero(x, axis=axis)  # CuPy's count_nonzero has no keepdims
    return np.expand_dims(counts, normalize_axes(axis, np.ndim(x))) if keepdims else counts


COUNT_NONZERO = _nondiff(
    "count_nonzero",
    _count_nonzero,
    (np.count_nonzero,),
    (Example((3, 4)), Example((3, 4), axis=1, keepdims=True), Example((2, 3, 4), axis=(0, 2))),
)


def _bitcast(x, *, dtype):
    """The same bytes read as ``dtype`` (torch's ``view(dtype)``; the last axis scales by the
    ratio of item sizes).
    """
    return x.view(dtype)


BITCAST = _nondiff("bitcast", _bitcast, (), examples=(Example((3, 4), dtype=np.int32),))


ALL = _over_axis(np.all, "True where every element along ``axis`` is truthy.")


ANY = _over_axis(np.any, "True where some element along ``axis`` is truthy.")


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

#: Every op defined above, in order (``sadl._ops.CORE_OPS`` registers them).
OPS = tuple(op for op in globals().values() if isinstance(op, OpDef))
