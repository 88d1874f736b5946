"""Normalization: layer norm, RMS norm and batch norm, each one fused op.

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
    const,
    in_float32,
    packed_empty,
    shape_of,
    unpack,
)

__all__ = ["layer_norm", "rms_norm", "batch_norm"]

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


# ------------------------------------------------------------------------------ batch norm


def _bn_view(a, ndim):
    """A per-channel (C,) array shaped (1, C, 1, ...) to broadcast against the input."""
    return np.reshape(a, (1, -1) + (1,) * (ndim - 2))


def _check_batch_norm(x, weight, bias, running_mean, running_var, training):
    check_float("batch_norm", "input", x)
    if x.ndim < 2:
        raise ValueError(
            f"batch_norm: input must have shape (N, C, ...) with a channel axis, got {shape_of(x)}"
        )
    C = x.shape[1]
    for name, p in (
        ("weight", weight),
        ("bias", bias),
        ("running_mean", running_mean),
        ("running_var", running_var),
    ):
        if p is not None and shape_of(p) != (C,):
            raise ValueError(
                f"batch_norm: {name} has shape {shape_of(p)}, expected ({C},) (one per channel "
                f"of the input of shape {shape_of(x)})"
            )
    if not training and (running_mean is None or running_var is None):
        raise ValueError(
            "batch_norm: evaluation (training=False) needs running_mean and running_var"
        )
    if training and _per_channel(x) == 1:  # none (an empty batch) is fine: nothing to normalize
        raise ValueError(
            f"batch_norm: training needs more than one value per channel, got input of shape "
            f"{shape_of(x)}"
        )


def _per_channel(x):
    """How many values each channel of an (N, C, ...) input holds (0 for an empty batch)."""
    shape = shape_of(x)
    return shape[0] * math.prod(shape[2:])


def _batch_blocks(x3):
    """``(start, stop)`` ranges of the batch axis of an (N, C, L) array in cache-sized blocks
    (one block on a device or under a tracer, as :func:`_row_blocks`).
    """
    N = x3.shape[0]
    if array_module(x3).__name__ != "numpy":
        return [(0, N)]
    step = max(1, _BLOCK_BYTES // max(x3[0].size * x3.dtype.itemsize, 1))
    return [(i, min(i + step, N)) for i in range(0, N, step)]


def _channel_sum(*blocks):
    """Per-channel sum (of the product) of (n, C, L) blocks, as a (C,) array."""
    spec = ",".join(["ncl"] * len(blocks)) + "->c"
    return np.einsum(spec, *blocks)  # a third of np.sum's time over two axes


def _centred_blocks(x3, mean, blocks):
    """Each block of ``x3`` minus the per-channel ``mean``, in one cache-sized scratch (reused:
    use a block before taking the next).
    """
    scratch = _block_scratch(x3.reshape(x3.shape[0], -1), blocks, x3[0].size)
    m = mean.reshape(-1, 1)
    for i, j in blocks:
        xc = scratch[: j - i].reshape(j - i, *x3.shape[1:])
        np.subtract(x3[i:j], m, out=xc)
        yield i, j, xc


def _batch_stats(x):
    """Per-channel mean and biased variance over every axis but the channel axis.

    Two passes over x a block of the batch at a time (the centred block in a cache-sized
    scratch), nothing full-size made. The statistics are new arrays, never updated in place
    (see :func:`_normalize_into`).
    """
    n = _per_channel(x)
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    blocks = _batch_blocks(x3)
    total = None
    for i, j in blocks:
        part = _channel_sum(x3[i:j])
        total = part if total is None else total + part
    mean = total * (1.0 / n)
    square = None
    for _, _, xc in _centred_blocks(x3, mean, blocks):
        part = _channel_sum(xc, xc)
        square = part if square is None else square + part
    return mean, square * (1.0 / n)


@in_float32
def _batch_norm(
    x,
    weight,
    bias,
    *,
    running_mean=None,
    running_var=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    """Batch normalization over every axis but the channel axis 1 (as torch's F.batch_norm).

    With ``training`` the batch statistics are used and, when given, ``running_mean`` and
    ``running_var`` are updated in place (unbiased variance), as torch does.
    """
    _check_batch_norm(x, weight, bias, running_mean, running_var, training)
    if x.size == 0:  # an empty batch: an empty result; the running statistics stay (as torch)
        return x.copy()
    if training:
        mean, var = _batch_stats(x)
        if running_mean is not None:
            n = _per_channel(x)
            m = float(momentum)
            running_mean *= 1.0 - m
            running_mean += m * mean
            running_var *= 1.0 - m
            running_var += (m * n / (n - 1)) * var
    else:
        mean, var = running_mean, running_var
    scale = 1.0 / np.sqrt(var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    out = x * _bn_view(scale.astype(x.dtype, copy=False), x.ndim)
    out += _bn_view(shift.astype(x.dtype, copy=False), x.ndim)
    return out


@in_float32
def _batch_norm_backward(g, x, weight, *, eps, has_bias):
    """The gradients of training-mode batch_norm for the upstream ``g``, packed (dx, then
    dweight when ``weight`` is given, then dbias when ``has_bias``).

    With xhat the normalized input, rstd = 1 / std per channel and a = rstd * weight:
    ``dx = g * a - xhat * a * mean(g * xhat) - a * mean(g)``, ``dweight = sum(g * xhat)``,
    ``dbias = sum(g)`` (sums and means per channel). Two passes over g and x a block of the
    batch at a time (the centred block in a cache-sized scratch): the first takes the two
    per-channel sums, the second writes dx; besides dx nothing full-size is made.
    """
    C = x.shape[1]
    n = _per_channel(x)
    shapes = [shape_of(x)] + [(C,)] * ((weight is not None) + bool(has_bias))
    packed, views = packed_empty(x, np.result_type(g, x), *shapes)
    x3 = x.reshape(x.shape[0], C, -1)
    g3 = g.reshape(x3.shape)
    gx3 = views[0].reshape(x3.shape)
    blocks = _batch_blocks(x3)
    mean, var = _batch_stats(x)
    rstd = 1.0 / np.sqrt(var + eps)
    sum_g = sum_gxc = None
    for i, j, xc in _centred_blocks(x3, mean, blocks):
        part_g, part_gxc = _channel_sum(g3[i:j]), _channel_sum(g3[i:j], xc)
        sum_g = part_g if sum_g is None else sum_g + part_g
        sum_gxc = part_gxc if sum_gxc is None else sum_gxc + part_gxc
    a = rstd if weight is None else rstd * weight
    b = (a * (rstd * rstd) * sum_gxc * (-1.0 / n)).reshape(-1, 1)
    c = (a * sum_g * (-1.0 / n)).reshape(-1, 1)
    a = a.reshape(-1, 1)
    for i, j, xc in _centred_blocks(x3, mean, blocks):
        xc *= b
        xc += c
        out = gx3[i:j]
        np.multiply(g3[i:j], a, out=out)
        out += xc
    if weight is not None:
        views[1][...] = sum_gxc * rstd
    if has_bias:
        views[-1][...] = sum_g
    return packed


def _batch_norm_backward_grad(gg, _, g, x, weight, *, eps, has_bias):
    """The gradients of ``<u, dx> + <a, dweight> + <c, dbias>`` (u, a, c packed in ``gg``).

    Layer norm's (:func:`_layer_norm_backward_grad`) with the channel's values as the group
    (means over every axis but the channel axis) and the weight constant over the group.
    """
    nd = len(shape_of(x))
    C = shape_of(x)[1]
    axes = (0, *range(2, nd))
    u, a, c = unpack(
        gg, shape_of(x), (C,) if weight is not None else None, (C,) if has_bias else None
    )

    def mean(v):
        return np.mean(v, axis=axes, keepdims=True)

    def project(v):  # rstd * (v - mean(v) - xhat * mean(v * xhat)): dx for dxhat = v
        v = v - mean(v)
        return (v - xhat * mean(v * xhat)) * rstd

    xc = x - mean(x)
    rstd = 1.0 / np.sqrt(mean(xc * xc) + eps)
    xhat = xc * rstd
    w = None if weight is None else _bn_view(weight, nd)
    h = g if w is None else g * w
    pu = project(u)  # d<u, dx>/dh (the projection is self-adjoint)
    d_g = pu if w is None else pu * w
    # d<u, dx>/dxhat at fixed rstd, then through xhat and rstd to x.
    xbar = -(mean(u * xhat) * h)
    xbar = (xbar - mean(h * xhat) * u) * rstd
    if a is not None:
        d_g = d_g + _bn_view(a, nd) * xhat
        xbar = xbar + _bn_view(a, nd) * g
    if c is not None:
        d_g = d_g + _bn_view(c, nd)
    dx = project(h)
    d_x = project(xbar) - xhat * rstd * mean(u * dx)
    d_w = None if w is None else np.sum(g * pu, axis=axes)
    return d_g, d_x, d_w


BATCH_NORM_BACKWARD: OpDef = OpDef(
    "batch_norm_backward",
    _batch_norm_backward,
    _batch_norm_backward_grad,
    examples=(
        Example((4, 3), (4, 3), (3,), eps=1e-5, has_bias=True),
        Example((2, 3, 4), (2, 3, 4), None, eps=1e-5, has_bias=False),
        Example((2, 2, 3, 3), (2, 2, 3, 3), (2,), eps=1e-3, has_bias=False),
        Example((3, 2, 2, 2), (3, 2, 2, 2), None, eps=1e-3, has_bias=True),
    ),
)


@in_float32
def _batch_norm_grad(
    g,
    out,
    x,
    weight,
    bias,
    *,
    running_mean=None,
    running_var=None,
    training=False,
    momentum=0.1,
    eps=1e-5,
):
    nd = len(shape_of(x))
    axes = (0, *range(2, nd))
    C = shape_of(x)[1]
    if _per_channel(x) == 0 or C == 0:  # an empty batch: zero gradients
        zeros = np.sum(g, axis=axes)
        return g, None if weight is None else zeros, None if bias is None else zeros
    if training:  # the batch's mean and variance depend on x too: a fused backward op
        packed = BATCH_NORM_BACKWARD(g, x, weight, eps=float(eps), has_bias=bias is not None)
        shapes = (None if p is None else (C,) for p in (weight, bias))
        return tuple(unpack(packed, shape_of(x), *shapes))
    # Evaluation: an affine map per channel, g * rstd * weight.
    dtype = const(x).dtype
    xp = array_module(x)
    mean, var = xp.asarray(running_mean, dtype=dtype), xp.asarray(running_var, dtype=dtype)
    rstd = 1.0 / np.sqrt(var + eps)
    a = rstd * weight if weight is not None else rstd
    gx = g * _bn_view(a, nd)
    sub = "abcdefgh"[:nd]
    gw = gb = None
    if weight is not None:
        xc = x - _bn_view(mean, nd)
        gw = np.einsum(f"{sub},{sub}->{sub[1]}", g, xc) * rstd
    if bias is not None:
        gb = np.einsum(f"{sub}->{sub[1]}", g)
    return gx, gw, gb


batch_norm = OpDef(
    "batch_norm",
    _batch_norm,
    _batch_norm_grad,
    examples=(
        Example((4, 3), (3,), (3,), training=True),
        Example((2, 3, 4), (3,), (3,), training=True),
        Example((2, 2, 3, 3), None, None, training=True, eps=1e-3),
        Example(
            (3, 2, 4),
            (2,),
            (2,),
            training=False,
            running_mean=np.array([0.1, -0.2]),
            running_var=np.array([0.5, 2.0]),
        ),
    ),
)

INTERNAL_OPS = (LAYER_NORM_BACKWARD, BATCH_NORM_BACKWARD)
