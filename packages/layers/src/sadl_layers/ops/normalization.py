"""Normalization: layer norm and RMS norm, each one fused op (batch norm: ``batchnorm.py``).

The statistics (mean, 1/std) are cheap to recompute, so the backward recomputes them from the
saved input instead of keeping extra arrays alive. Each backward computes every gradient in one
pass over shared temporaries; on arrays it works in place, on Tensors (``create_graph=True``) the
same formulas run in NumPy vocabulary, which is what makes second derivatives work.
"""

from __future__ import annotations

import math

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import (
    check_float,
    in_float32,
    packed_empty,
    shape_of,
    unpack,
)

__all__ = ["layer_norm", "rms_norm"]

# ------------------------------------------------------------------------------ layer norm


def _norm_shape(fn, x, weight, bias, normalized_shape):
    """The trailing shape that is normalized, checked against x, weight and bias."""
    if normalized_shape is not None:
        ns = (
            (int(normalized_shape),)
            if isinstance(normalized_shape, int | np.integer)
            else tuple(map(int, normalized_shape))
        )
    elif weight is not None:
        ns = shape_of(weight)
    elif bias is not None:
        ns = shape_of(bias)
    else:
        ns = shape_of(x)[-1:]
    check_float(fn, "input", x)
    k = len(ns)
    if k == 0 or x.ndim < k or shape_of(x)[x.ndim - k :] != ns:
        raise ValueError(
            f"{fn}: input has shape {shape_of(x)}, expected (..., {', '.join(map(str, ns))}) "
            f"(normalized_shape={ns})"
        )
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and shape_of(p) != ns:
            raise ValueError(f"{fn}: {name} has shape {shape_of(p)}, expected {ns}")
    return ns, math.prod(ns)


def _row_dot(a, b):
    """Row-wise dot products of two (N, D) arrays, as an (N, 1) column."""
    return np.einsum("ij,ij->i", a, b)[:, None]


def _row_mean(a):
    """Row means of an (N, D) array as an (N, 1) column.

    A GEMV with a column of ones: several times faster than ``np.mean(axis=1)`` on short rows,
    and faster than ``einsum``.
    """
    col = a @ array_module(a).ones((a.shape[1], 1), dtype=a.dtype)
    col *= 1.0 / a.shape[1]
    return col


#: Bytes of input rows per block: a block and its temporaries stay in the L2 cache, so a norm
#: reads each full-size array from memory once instead of once per NumPy call.
_BLOCK_BYTES = 1 << 18


def _row_blocks(x2):
    """``(start, stop)`` ranges of the rows of ``x2`` in cache-sized blocks (one on a device)."""
    rows, width = x2.shape
    if array_module(x2).__name__ != "numpy":  # a tracer hands out a recording NumPy
        return [(0, rows)]  # a GPU wants few large kernels, not a Python loop
    step = max(1, _BLOCK_BYTES // max(width * x2.dtype.itemsize, 1))
    return [(i, min(i + step, rows)) for i in range(0, rows, step)]


def _normalize_into(x2, eps, centered, xhat):
    """One block of :func:`_normalized_rows` written into ``xhat``; returns the block's rstd.

    The row statistics are new (small) arrays rather than scratch: under ``sadl.compile`` the
    backward's recomputation of them then reads the forward's (``shared_recomputation`` shares
    only arrays nothing has overwritten since), and only xhat itself is computed again.
    """
    if centered:
        np.subtract(x2, _row_mean(x2), out=xhat)
    else:
        xhat[...] = x2
    rstd = _row_dot(xhat, xhat)
    rstd *= 1.0 / x2.shape[1]
    rstd += eps
    np.sqrt(rstd, out=rstd)
    np.reciprocal(rstd, out=rstd)
    xhat *= rstd
    return rstd


def _block_scratch(x2, blocks, width):
    """A scratch array of ``width`` columns as tall as the tallest of ``blocks``."""
    rows = max([j - i for i, j in blocks], default=0)
    return array_module(x2).empty((rows, width), dtype=x2.dtype)


def _normalized_rows(x2, eps, centered=True, weight=None, bias=None):
    """``(x2 - row mean) * rstd``, then ``* weight + bias`` when given, as a new array.

    ``rstd = 1 / sqrt(row var + eps)``; ``centered=False`` skips the mean (RMS norm: rstd =
    1 / sqrt(mean(x2**2) + eps)). Computed block by block of rows (each row on its own, so the
    blocks change nothing) with the normalized block in a cache-sized scratch: the pass reads
    ``x2`` once and writes the output once, nothing else full-size.
    """
    xp = array_module(x2)
    out = xp.empty(x2.shape, dtype=x2.dtype)
    blocks = _row_blocks(x2)
    affine = weight is not None or bias is not None
    xhat = _block_scratch(x2, blocks, x2.shape[1]) if affine else None
    for i, j in blocks:
        block = out[i:j] if xhat is None else xhat[: j - i]
        _normalize_into(x2[i:j], eps, centered, block)
        if xhat is not None:
            _affine_into(block, weight, bias, out[i:j])
    return out


def _affine_into(xhat, weight, bias, out):
    """``out = xhat * weight + bias`` (either may be None) for one block."""
    if weight is None:
        np.add(xhat, bias, out=out)
        return
    np.multiply(xhat, weight, out=out)
    if bias is not None:
        out += bias


@in_float32
def _layer_norm(x, weight, bias, *, eps=1e-5, normalized_shape=None):
    """(x - mean) / sqrt(var + eps) * weight + bias over the trailing normalized axes."""
    _, D = _norm_shape("layer_norm", x, weight, bias, normalized_shape)
    w = None if weight is None else weight.reshape(-1)
    b = None if bias is None else bias.reshape(-1)
    return _normalized_rows(x.reshape(-1, D), eps, True, w, b).reshape(x.shape)


@in_float32
def _layer_norm_backward(g, x, weight, *, eps, normalized_shape, has_bias, centered=True):
    """The gradients of layer_norm (or, uncentered, rms_norm) for the upstream ``g``.

    Returns dx, dweight (when ``weight`` is given) and dbias (when ``has_bias``) back to back in
    one flat array, computed in one pass over shared temporaries. With xhat the normalized rows,
    rstd = 1 / std and h = g * weight: ``dx = rstd * (h - mean(h) - xhat * mean(h * xhat))``
    (without the ``mean(h)`` term when uncentered), ``dweight = sum(g * xhat)`` and
    ``dbias = sum(g)`` over the rows.
    """
    ns, D = _norm_shape("layer_norm_backward", x, weight, None, normalized_shape)
    if shape_of(g) != shape_of(x):
        raise ValueError(
            f"layer_norm_backward: g has shape {shape_of(g)}, expected the input's {shape_of(x)}"
        )
    shapes = (shape_of(x), ns if weight is not None else None, ns if has_bias else None)
    packed, views = packed_empty(x, np.result_type(g, x), *[s for s in shapes if s is not None])
    gx = views[0].reshape(-1, D)
    g2 = g.reshape(-1, D)
    x2 = x.reshape(-1, D)
    w = None if weight is None else weight.reshape(-1)
    dweight = None if weight is None else views[1].reshape(-1)
    dbias = views[-1].reshape(-1) if has_bias else None
    for total in (dweight, dbias):
        if total is not None:
            total[...] = 0
    # One pass of row blocks: each block's xhat is recomputed from x into a cache-sized scratch
    # and every use of it (dweight, dx) follows while it is there; x, g and dx each cross
    # memory once.
    blocks = _row_blocks(x2)
    xhat = _block_scratch(x2, blocks, D)
    # xhat's scratch is written exactly as the forward's is (so a compiled step can share the
    # row statistics, see _normalize_into); the product xhat * b goes to a second scratch.
    product = _block_scratch(x2, blocks, D)
    ones = array_module(g2).ones(xhat.shape[0], dtype=g2.dtype)  # dbias: sum(g) as a GEMV
    for i, j in blocks:
        n = j - i
        xb, gin, gb = xhat[:n], g2[i:j], gx[i:j]
        rb = _normalize_into(x2[i:j], eps, centered, xb)
        if dbias is not None:  # sum(axis=0) would add row by row, several times slower
            dbias += ones[:n] @ gin
        if dweight is not None:
            dweight += np.einsum("ij,ij->j", gin, xb)  # CuPy's einsum has no out=
        if w is None:
            gb[...] = gin
        else:
            np.multiply(gin, w, out=gb)
        a = _row_mean(gb) if centered else None
        b = _row_dot(gb, xb)
        b *= 1.0 / D
        pb = product[:n]
        np.multiply(xb, b, out=pb)
        gb -= pb
        if a is not None:
            gb -= a
        gb *= rb
    return packed


def _project(v, xhat, rstd, centered):
    """Per row, ``rstd * (v - mean(v) - xhat * mean(v * xhat))``: the norm's dx for dxhat = v."""
    if centered:
        v = v - np.mean(v, axis=1, keepdims=True)
    return (v - xhat * np.mean(v * xhat, axis=1, keepdims=True)) * rstd


def _layer_norm_backward_grad(
    gg, _, g, x, weight, *, eps, normalized_shape, has_bias, centered=True
):
    """The gradients of ``<u, dx> + <a, dweight> + <c, dbias>`` (u, a, c packed in ``gg``)."""
    ns = tuple(normalized_shape)
    D = math.prod(ns)
    u, a, c = unpack(gg, shape_of(x), ns if weight is not None else None, ns if has_bias else None)
    x2, g2, u2 = np.reshape(x, (-1, D)), np.reshape(g, (-1, D)), np.reshape(u, (-1, D))
    xc = x2 - np.mean(x2, axis=1, keepdims=True) if centered else x2
    rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=1, keepdims=True) + eps)
    xhat = xc * rstd
    w = None if weight is None else np.reshape(weight, (1, D))
    h = g2 if w is None else g2 * w
    pu = _project(u2, xhat, rstd, centered)  # d<u, dx>/dh (the projection is self-adjoint)
    d_g = pu if w is None else pu * w
    # d<u, dx>/dxhat at fixed rstd, then through xhat and rstd to x.
    xbar = -(np.mean(u2 * xhat, axis=1, keepdims=True) * h)
    xbar = (xbar - np.mean(h * xhat, axis=1, keepdims=True) * u2) * rstd
    if a is not None:
        d_g = d_g + np.reshape(a, (1, D)) * xhat
        xbar = xbar + np.reshape(a, (1, D)) * g2
    if c is not None:
        d_g = d_g + np.reshape(c, (1, D))
    dx = _project(h, xhat, rstd, centered)
    d_x = _project(xbar, xhat, rstd, centered)
    d_x = d_x - xhat * rstd * np.mean(u2 * dx, axis=1, keepdims=True)
    d_w = None if w is None else np.reshape(np.sum(g2 * pu, axis=0), ns)
    return np.reshape(d_g, shape_of(x)), np.reshape(d_x, shape_of(x)), d_w


LAYER_NORM_BACKWARD: OpDef = OpDef(
    "layer_norm_backward",
    _layer_norm_backward,
    _layer_norm_backward_grad,
    examples=(
        Example((3, 5), (3, 5), (5,), eps=1e-5, normalized_shape=(5,), has_bias=True),
        Example((2, 3, 4), (2, 3, 4), None, eps=1e-5, normalized_shape=(4,), has_bias=False),
        Example((2, 3, 4), (2, 3, 4), (3, 4), eps=1e-3, normalized_shape=(3, 4), has_bias=False),
        Example((2, 4), (2, 4), None, eps=1e-5, normalized_shape=(4,), has_bias=True),
        Example(
            (3, 5), (3, 5), (5,), eps=1e-6, normalized_shape=(5,), has_bias=False, centered=False
        ),
        Example(
            (2, 3, 4),
            (2, 3, 4),
            None,
            eps=1e-3,
            normalized_shape=(3, 4),
            has_bias=False,
            centered=False,
        ),
    ),
)


def _layer_norm_grad(g, out, x, weight, bias, *, eps=1e-5, normalized_shape=None):
    ns, _ = _norm_shape("layer_norm", x, weight, bias, normalized_shape)
    packed = LAYER_NORM_BACKWARD(
        g, x, weight, eps=eps, normalized_shape=ns, has_bias=bias is not None
    )
    return tuple(unpack(packed, shape_of(x), *[None if p is None else ns for p in (weight, bias)]))


layer_norm: OpDef = OpDef(
    "layer_norm",
    _layer_norm,
    _layer_norm_grad,
    examples=(
        Example((3, 5), (5,), (5,)),
        Example((2, 3, 4), (4,), None),
        Example((2, 3, 4), None, None),
        Example((2, 3, 4), (3, 4), (3, 4)),
        Example((2, 4), None, None, normalized_shape=(4,), eps=1e-3),
    ),
    singular_points=(Example(np.ones((2, 3)), (3,), (3,)),),  # constant rows: variance 0
)


# -------------------------------------------------------------------------------- RMS norm


def _rms_eps(x, eps):
    return float(np.finfo(x.dtype).eps) if eps is None else float(eps)


@in_float32
def _rms_norm(x, weight, *, eps=None, normalized_shape=None):
    """RMS normalization: x / sqrt(mean(x**2) + eps) * weight over the trailing axes.

    ``eps=None`` uses the machine epsilon of x's dtype (torch's default).
    """
    _, D = _norm_shape("rms_norm", x, weight, None, normalized_shape)
    w = None if weight is None else weight.reshape(-1)
    return _normalized_rows(x.reshape(-1, D), _rms_eps(x, eps), False, w).reshape(x.shape)


def _rms_norm_grad(g, out, x, weight, *, eps=None, normalized_shape=None):
    ns, _ = _norm_shape("rms_norm", x, weight, None, normalized_shape)
    packed = LAYER_NORM_BACKWARD(
        g,
        x,
        weight,
        eps=_rms_eps(x, eps),
        normalized_shape=ns,
        has_bias=False,
        centered=False,
    )
    return tuple(unpack(packed, shape_of(x), None if weight is None else ns))


rms_norm: OpDef = OpDef(
    "rms_norm",
    _rms_norm,
    _rms_norm_grad,
    examples=(
        Example((3, 5), (5,)),
        Example((2, 3, 4), None, eps=1e-6),
        Example((2, 3, 4), (3, 4)),
    ),
    singular_points=(Example(np.zeros((2, 3)), (3,), eps=1e-6),),  # zero rows
)


INTERNAL_OPS = (LAYER_NORM_BACKWARD,)
