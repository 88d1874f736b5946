"""Torch's scatter family: values move along one axis ``dim`` as ``index`` says.

Core's ``gather(x, dim, index)[i][j] = x[index[i][j]][j]`` (for ``dim=0``) reads; the
scatters here write the other way: ``out[index[i][j]][j] (op)= src[i][j]``. ``index`` may be
smaller than ``x`` and ``src`` in every axis (torch's rule): only its own extent is used.
Signatures are torch's, ``(x, dim, index, src)``, with ``dim`` and ``index`` as constants. The
gradient of a scatter is a gather and the other way round, so second derivatives come from the
same records.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sadl
from sadl.backends import array_module, match_key
from sadl.plugins import Example, OpDef, array_of, checked_dim

_REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")


def _scatter_reduce_into(target: Any, key: Any, values: Any, ufunc: str) -> None:
    """``target[key] = ufunc(target[key], values)`` where repeated indices in ``key`` all count.

    ``ufunc`` is ``"add"``, ``"multiply"``, ``"maximum"`` or ``"minimum"`` (``np.<ufunc>.at``);
    ``key`` is a tuple of integer index arrays.
    """
    if isinstance(target, np.ndarray):
        getattr(np, ufunc).at(target, key, values)
        return
    if ufunc in ("add", "maximum", "minimum"):  # CuPy >= 12 has these ufunc.at
        getattr(array_module(target), ufunc).at(target, key, values)
        return
    _multiply_at_in_rounds(target, key, values)


def _multiply_at_in_rounds(target: Any, key: Any, values: Any) -> None:
    """``multiply.at`` for CuPy, which has none: the k-th write to each position in round k."""
    xp = array_module(target)
    positions = xp.ravel_multi_index(xp.broadcast_arrays(*key), target.shape)
    values = xp.broadcast_to(xp.asarray(values, dtype=target.dtype), positions.shape).ravel()
    positions = positions.ravel()
    order = xp.argsort(positions)
    positions, values = positions[order], values[order]
    rank = xp.arange(positions.size) - xp.searchsorted(positions, positions, side="left")
    flat = target.reshape(-1)  # a view: target is contiguous (a fresh copy in every caller)
    for k in range(int(rank.max()) + 1 if rank.size else 0):
        chosen = rank == k
        flat[positions[chosen]] *= values[chosen]


def _constant(g, out, *inputs, **params):
    """The rule of a constant input (``dim``, ``index``): no gradient."""
    return None


_UFUNC = {"sum": "add", "mean": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}


def _scatter_key(like, dim, index):
    """The fancy key that sends ``src[i][j]`` to ``out[index[i][j]][j]`` (``dim=0``)."""
    idx = match_key(array_of(index), like)
    xp = array_module(like)
    key = []
    for d, n in enumerate(idx.shape):
        if d == dim:
            key.append(idx)
        else:
            view = [1] * idx.ndim
            view[d] = n
            key.append(xp.arange(n).reshape(view))
    return tuple(key)


def _check_range(name, x, dim, index):
    idx = array_of(index)
    n = np.shape(x)[dim] if np.ndim(x) else 1
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError(
            f"{name}: index values must lie in [0, {n}) for dimension {dim} of size {n}, got "
            f"values from {int(idx.min())} to {int(idx.max())}"
        )


def _region(src, index):
    """The part of ``src`` that ``index`` covers (the leading corner of index's shape)."""
    if np.ndim(src) == 0:
        return src
    idx_shape = array_of(index).shape
    for d, (n, m) in enumerate(zip(idx_shape, np.shape(src))):
        if n > m:
            raise ValueError(f"scatter: index has size {n} in dimension {d}, larger than src's {m}")
    if tuple(idx_shape) == tuple(np.shape(src)):
        return src
    return src[tuple(slice(0, n) for n in idx_shape)]


def GATHER(*args):
    """Core's ``gather`` (the gradient of a scatter)."""
    return sadl.ops.gather(*args)


def _src_grad(g, dim, index, src):
    """The gradient of ``src``: ``g`` gathered back, zero where ``index`` does not reach."""
    if np.ndim(src) == 0:
        return None
    picked = GATHER(g, dim, index)
    if tuple(array_of(index).shape) == tuple(np.shape(src)):
        return picked
    corner = tuple(slice(0, n) for n in array_of(index).shape)
    return sadl.ops.add_at(picked, shape=tuple(np.shape(src)), key=corner)


def _unscattered(g, dim, index):
    """1 where no ``index`` entry writes, 0 where one does (an array like ``g``'s data)."""
    like = array_of(g)
    keep = array_module(like).ones(like.shape, dtype=like.dtype)
    keep[_scatter_key(like, dim, index)] = 0
    return keep


# ----------------------------------------------------------------------------------- scatter


def _scatter(x, dim, index, src, /):
    """A copy of ``x`` with ``out[index[i][j]][j] = src[i][j]`` (``dim=0``; src may be a number)."""
    dim = checked_dim("scatter", x, dim, index)
    _check_range("scatter", x, dim, index)
    out = x.copy()
    out[_scatter_key(out, dim, index)] = _region(src, index)
    return out


SCATTER = OpDef(
    "scatter",
    _scatter,
    (
        lambda g, out, x, dim, index, src: g * _unscattered(g, dim % np.ndim(x), index),
        _constant,
        _constant,
        lambda g, out, x, dim, index, src: _src_grad(g, dim % np.ndim(x), index, src),
    ),
    examples=(
        Example((3, 4), 0, np.array([[0, 1, 2, 0], [2, 0, 1, 1]]), (2, 4)),
        Example((3, 4), 1, np.array([[3], [0], [1]]), (3, 2)),
        Example((3, 4), 1, np.array([[2, 0]]), 1.5),
    ),
)


def _scatter_add(x, dim, index, src, /):
    """A copy of ``x`` with ``out[index[i][j]][j] += src[i][j]`` (repeats accumulate)."""
    dim = checked_dim("scatter_add", x, dim, index)
    _check_range("scatter_add", x, dim, index)
    out = x.copy()
    _scatter_reduce_into(out, _scatter_key(out, dim, index), _region(src, index), "add")
    return out


SCATTER_ADD = OpDef(
    "scatter_add",
    _scatter_add,
    (
        lambda g, out, x, dim, index, src: g,
        _constant,
        _constant,
        lambda g, out, x, dim, index, src: _src_grad(g, dim % np.ndim(x), index, src),
    ),
    examples=(
        Example((3, 4), 0, np.array([[0, 1, 2, 0], [0, 0, 1, 1]]), (2, 4)),
        Example((3, 4), 1, np.array([[3, 3], [0, 1]]), (2, 3)),
    ),
)


# ---------------------------------------------------------------------------- scatter_reduce


def _identity(reduce, dtype):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    if dtype.kind == "f":
        return -np.inf if reduce == "amax" else np.inf
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    if info is None:
        raise TypeError(f"scatter_reduce: cannot reduce {dtype} values")
    return info.min if reduce == "amax" else info.max


def _counts(like, key):
    """How many index entries write to each position (an array of ``like``'s shape and dtype)."""
    xp = array_module(like)
    counts = xp.zeros(like.shape, dtype=like.dtype if like.dtype.kind == "f" else np.float64)
    _scatter_reduce_into(counts, key, 1, "add")
    return counts


def _counts_of(like, dim, index, flags):
    """How many ``flags`` (a bool array of index's shape) are written to each position."""
    counts = array_module(like).zeros(like.shape, dtype=np.float64)
    key = _scatter_key(like, dim, index)
    _scatter_reduce_into(counts, key, match_key(flags, like).astype(np.float64), "add")
    return counts


def _prod_grads(g, out, x, dim, index, src, include_self, unscattered):
    # As torch: products of "all the others" are formed without dividing by zero.
    if include_self:
        x_safe = np.where(x == 0, 1, x)
        others = SCATTER_REDUCE(x_safe, dim, index, src, reduce="prod") / x_safe
        gx = g * others
    else:
        gx = g * unscattered
    if np.ndim(src) == 0:
        return gx, None, None, None
    src_part = _region(src, index)
    zero = array_of(src_part) == 0
    zeros_here = GATHER(_counts_of(array_of(g), dim, index, zero), dim, index)
    single_zero = zero & (zeros_here == 1)
    if hasattr(g, "requires_grad") and bool(np.any(zeros_here > 1)):
        raise RuntimeError(
            "scatter_reduce(reduce='prod'): double backward is not supported where two or more "
            "src values written to one position are zero (as in torch)"
        )
    others_at_zero = SCATTER_REDUCE(
        x, dim, index, np.where(single_zero, 1, src_part), reduce="prod", include_self=include_self
    )
    gsrc = np.where(
        single_zero,
        GATHER(g * others_at_zero, dim, index),
        GATHER(g * out, dim, index) / np.where(zero, 1, src_part),
    )
    if tuple(array_of(index).shape) != tuple(np.shape(src)):
        corner = tuple(slice(0, n) for n in array_of(index).shape)
        gsrc = sadl.ops.add_at(gsrc, shape=tuple(np.shape(src)), key=corner)
    return gx, None, None, gsrc


def _extreme_grads(g, out, x, dim, index, src, include_self, unscattered):
    """The gradient of amax / amin: shared evenly by the contributors equal to the result."""
    x_hit = array_of(x == out)
    if not include_self:
        x_hit = x_hit & unscattered
    hits = x_hit.astype(array_of(g).dtype)
    if np.ndim(src) == 0:
        return g / np.maximum(hits, 1) * x_hit, None, None, None
    src_hit = array_of(_region(src, index) == GATHER(out, dim, index))
    _scatter_reduce_into(hits, _scatter_key(hits, dim, index), src_hit.astype(hits.dtype), "add")
    share = g / np.maximum(hits, 1)
    gsrc = GATHER(share, dim, index) * src_hit
    if tuple(array_of(index).shape) != tuple(np.shape(src)):
        corner = tuple(slice(0, n) for n in array_of(index).shape)
        gsrc = sadl.ops.add_at(gsrc, shape=tuple(np.shape(src)), key=corner)
    return share * x_hit, None, None, gsrc


def _scatter_reduce(x, dim, index, src, /, *, reduce, include_self=True):
    """``out[index[i][j]][j]`` reduced with ``src[i][j]`` by sum, prod, mean, amax or amin.

    ``include_self=False`` leaves ``x``'s own value out wherever an index entry writes.
    """
    if reduce not in _REDUCTIONS:
        raise ValueError(f"scatter_reduce: reduce must be one of {_REDUCTIONS}, got {reduce!r}")
    dim = checked_dim("scatter_reduce", x, dim, index)
    _check_range("scatter_reduce", x, dim, index)
    out = x.copy()
    key = _scatter_key(out, dim, index)
    if not include_self:
        out[key] = _identity(reduce, out.dtype)
    _scatter_reduce_into(out, key, _region(src, index), _UFUNC[reduce])
    if reduce == "mean":
        total = _counts(out, key) + (1 if include_self else 0)
        total = np.maximum(total, 1)
        if out.dtype.kind == "f":
            out /= total.astype(out.dtype)
        else:
            out //= total.astype(out.dtype)
    return out


def _scatter_reduce_grad(g, out, x, dim, index, src, *, reduce, include_self=True):
    dim = dim % np.ndim(x)
    counts = _counts(array_of(g), _scatter_key(array_of(g), dim, index))
    unscattered = counts == 0
    if reduce == "prod":
        return _prod_grads(g, out, x, dim, index, src, include_self, unscattered)
    if reduce in ("amax", "amin"):
        return _extreme_grads(g, out, x, dim, index, src, include_self, unscattered)
    scale = 1 if reduce == "sum" else 1 / np.maximum(counts + (1 if include_self else 0), 1)
    gs = g * scale
    gx = gs if include_self else gs * unscattered
    return gx, None, None, _src_grad(gs, dim, index, src)


_REDUCE_INDEX = np.array([[0, 1, 0, 2], [1, 1, 0, 2], [2, 0, 0, 1]])
SCATTER_REDUCE = OpDef(
    "scatter_reduce",
    _scatter_reduce,
    _scatter_reduce_grad,
    examples=tuple(
        Example((3, 4), 0, _REDUCE_INDEX, (3, 4), reduce=reduce, include_self=include_self)
        for reduce in ("sum", "mean", "prod", "amax", "amin")
        for include_self in (True, False)
    )
    + (Example((3, 4), 1, np.array([[0, 0], [3, 1]]), (2, 3), reduce="mean"),),
)

__all__ = ["scatter", "scatter_add", "scatter_reduce"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
scatter, scatter_add, scatter_reduce = SCATTER, SCATTER_ADD, SCATTER_REDUCE
