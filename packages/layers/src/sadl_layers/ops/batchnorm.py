"""Batch norm as one fused op: per-channel statistics over the batch (and every axis after
the channels), its training backward a fused op of its own (``batch_norm_backward``).

The statistics are recomputed from the saved input in the backward, as the row norms of
``normalization.py`` do, block by block (``_BLOCK_BYTES`` of input at a time) so that the input
gradient is the only full-size array the backward makes.
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
    summed,
    unpack,
)
from sadl_layers.ops.normalization import _BLOCK_BYTES, _block_scratch

__all__ = ["batch_norm"]


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


def _batch_mean(x3, blocks, n):
    """Per-channel mean of an (N, C, L) array, summed a block of the batch at a time."""
    return summed(_channel_sum(x3[i:j]) for i, j in blocks) * (1.0 / n)


def _batch_stats(x):
    """Per-channel mean and biased variance over every axis but the channel axis.

    Two passes over x a block of the batch at a time (the centred block in a cache-sized
    scratch), nothing full-size made. The statistics are new arrays, never updated in place
    (see :func:`_normalize_into`).
    """
    n = _per_channel(x)
    x3 = x.reshape(x.shape[0], x.shape[1], -1)
    blocks = _batch_blocks(x3)
    mean = _batch_mean(x3, blocks, n)
    square = summed(_channel_sum(xc, xc) for _, _, xc in _centred_blocks(x3, mean, blocks))
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
    ``dbias = sum(g)`` (sums and means per channel). Three passes a block of the batch at a time
    (the centred block in a cache-sized scratch): x for the mean; x and g for the variance and
    the two per-channel sums; x and g again to write dx. Besides dx nothing full-size is made.
    """
    C = x.shape[1]
    n = _per_channel(x)
    shapes = [shape_of(x)] + [(C,)] * ((weight is not None) + bool(has_bias))
    packed, views = packed_empty(x, np.result_type(g, x), *shapes)
    x3 = x.reshape(x.shape[0], C, -1)
    g3 = g.reshape(x3.shape)
    gx3 = views[0].reshape(x3.shape)
    blocks = _batch_blocks(x3)
    mean = _batch_mean(x3, blocks, n)
    # One centred pass for the variance (as _batch_stats sums it) and the two gradient sums.
    parts = [
        (_channel_sum(xc, xc), _channel_sum(g3[i:j]), _channel_sum(g3[i:j], xc))
        for i, j, xc in _centred_blocks(x3, mean, blocks)
    ]
    square, sum_g, sum_gxc = (summed(column) for column in zip(*parts))
    rstd = 1.0 / np.sqrt(square * (1.0 / n) + eps)
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

INTERNAL_OPS = (BATCH_NORM_BACKWARD,)
