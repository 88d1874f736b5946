"""Picking values along one axis: NumPy's ``take``/``take_along_axis`` and torch's ``gather``.

``gather(x, dim, index)[i][j] = x[index[i][j]][j]`` (for ``dim=0``); ``index`` may be smaller
than ``x`` in every axis but ``dim`` (torch's rule). The gradient is an ``add_at`` back to the
picked positions, an op with its own gradient, so second derivatives come from the same records.
The scatters, which write the other way, are sadl-layers' (``sadl.ops.scatter``).
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from sadl._ops.indexing import ADD_AT
from sadl._records import Example, OpDef
from sadl.backends import array_module, match_key


def array_of(value):
    """The array inside a Tensor (rules run on Tensors under create_graph), else ``value``."""
    return value.data if hasattr(value, "requires_grad") else value


def checked_dim(name, x, dim, index):
    """``dim`` made non-negative, after checking ``index`` against ``x`` as torch does.

    What gather-like ops (``gather``, sadl-layers' ``scatter`` family) check first, published
    in ``sadl.plugins`` so each family refuses a bad index with the same words.
    """
    idx = array_of(index)
    if not hasattr(idx, "dtype") or idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: index must be an integer array, got {type(idx).__name__}")
    ndim = np.ndim(x)
    if idx.ndim != ndim:
        raise ValueError(
            f"{name}: index has {idx.ndim} dimensions, the input {ndim}; they must match"
        )
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(f"{name}: dim {dim} is out of range for {ndim} dimensions")
    dim = dim % max(ndim, 1)
    shape = np.shape(x)
    for d, (n, m) in enumerate(zip(idx.shape, shape)):
        if d != dim and n > m:
            raise ValueError(
                f"{name}: index has size {n} in dimension {d}, larger than the input's {m}; "
                "outside dim it may only be smaller (torch's rule)"
            )
    return dim


# ----------------------------------------------------------------- take, take_along_axis


@functools.cache
def _layout(forward):
    """How many inputs ``forward`` takes, and the names of its keyword-only params in order."""
    signature = inspect.signature(forward).parameters.values()
    names = tuple(p.name for p in signature if p.kind is p.KEYWORD_ONLY)
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in signature), names


class _ParamsByPosition(OpDef):
    """An op whose keyword-only params may also come by position after its inputs, in order,
    as NumPy's and torch's signatures take them: ``take(x, indices, axis)``,
    ``take_along_axis(x, indices, axis)``. They stay params (constants, never differentiated:
    a Tensor that requires grad given for one is refused), exactly as when given by name.
    """

    def __call__(self, *args, **params):
        """Apply the op, with positional arguments past the inputs bound to its params."""
        n_inputs, names = _layout(self.forward)
        extra = args[n_inputs:]
        if len(extra) > len(names):
            raise TypeError(
                f"{self.name}: takes {n_inputs + len(names)} positional arguments (the input, "
                f"then {', '.join(names)}), got {len(args)}"
            )
        for name, value in zip(names, extra):
            if name in params:
                raise TypeError(f"{self.name}: got multiple values for argument {name!r}")
            params[name] = value
        return super().__call__(*args[:n_inputs], **params)


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


def _take(x, *, indices, axis=None):
    """Elements at ``indices`` along ``axis`` (of the flattened array when None)."""
    return np.take(x, match_key(indices, x), axis=axis)


def _take_grad(g, out, x, *, indices, axis=None):
    if axis is None:
        return np.reshape(ADD_AT(g, shape=(x.size,), key=(indices,)), x.shape)
    key = (slice(None),) * (axis % x.ndim) + (indices,)
    return ADD_AT(g, shape=x.shape, key=key)


TAKE = _ParamsByPosition(
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


def take_along_axis_grad(g, out, x, *, indices, axis):
    if axis is None:
        return np.reshape(ADD_AT(g, shape=(x.size,), key=(indices,)), x.shape)
    return ADD_AT(g, shape=x.shape, key=_along_axis_key(x.shape, indices, axis % x.ndim))


TAKE_ALONG_AXIS = _ParamsByPosition(
    "take_along_axis",
    _take_along_axis,
    (take_along_axis_grad,),
    numpy_funcs=(np.take_along_axis,),
    examples=(
        Example((3, 4), indices=np.array([[0, 0], [3, 1], [2, 2]]), axis=1),
        Example((3, 4), indices=np.array([[0, 1, 2, 2]]), axis=0),
    ),
)


# ------------------------------------------------------------------------------------ gather


def _gather(x, dim, index, /):
    """``out[i][j] = x[index[i][j]][j]`` along ``dim`` (torch's gather; out has index's shape)."""
    dim = checked_dim("gather", x, dim, index)
    idx = array_of(index)
    lead = tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(idx.shape))
    if any(n != m for d, (n, m) in enumerate(zip(idx.shape, np.shape(x))) if d != dim):
        x = x[lead]
    return TAKE_ALONG_AXIS(x, indices=idx, axis=dim)


GATHER = OpDef(
    "gather",
    _gather,
    composite=True,
    examples=(
        Example((3, 4), 1, np.array([[0, 0], [3, 1], [2, 2]])),
        Example((3, 4), 0, np.array([[0, 2], [1, 1]])),
        Example((2, 3, 4), -1, np.array([[[1, 0, 3]], [[2, 2, 0]]])),
    ),
)


OPS = (TAKE, TAKE_ALONG_AXIS, GATHER)
