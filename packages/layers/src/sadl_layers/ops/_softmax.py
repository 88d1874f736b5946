"""Softmax and log-softmax as ops of their own, for the fused ops that compute them inside.

The attention (``scaled_dot_product_attention``, ``attention_qkv``) and ``cross_entropy`` apply
these ops to their arrays rather than spelling the arithmetic out, so each application is
recorded as an op (``sadl.compile`` sees ``masked_softmax`` and ``softmax_backward`` by name, and
sadl-kernels replaces them whatever NumPy calls they make):

* ``masked_softmax(x, mask=None, *, axis=-1)``: ``softmax(x + mask)`` along ``axis``, with
  ``mask`` an optional additive float mask (``-inf`` blocks; it broadcasts against ``x``), as the
  attention adds its causal or user mask to the scores. Its rule calls ``softmax_backward``.
* ``masked_log_softmax(x, mask=None, *, axis=-1)``: ``log_softmax(x + mask)``, the
  cross-entropy's row terms; its rule calls ``log_softmax_backward``.
* ``softmax_backward(g, out, *, axis)`` = ``out * (g - sum(g * out, axis))`` and
  ``log_softmax_backward(g, out, *, axis)`` = ``g - exp(out) * sum(g, axis)``: the gradients for
  the upstream ``g`` given the forward's result, each with its own gradient (NumPy vocabulary),
  so higher derivatives work.

They are internal (not ``sadl.ops`` names): core's ``softmax`` and ``log_softmax`` are the public
ops. The forwards allocate their result once and work in it in place; all four stay finite for
logits of +-1000, and an axis of length 0 gives an empty result.
"""

from __future__ import annotations

import numpy as np
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import in_float32

__all__: list[str] = []

_EXTREME = np.array([[1000.0, -1000.0, 0.5], [-1000.0, -999.0, 1000.0]])
_BLOCKED = np.array([[0.0, -np.inf, 0.0], [0.0, 0.0, -np.inf]])


def _shifted(x, mask, axis):
    """A new array ``x + mask - max(x + mask)`` along ``axis`` (NaN where a row is all -inf)."""
    if mask is None:
        return x - np.max(x, axis=axis, keepdims=True)
    out = x + mask
    out -= np.max(out, axis=axis, keepdims=True)
    return out


@in_float32(promote=True)
def _masked_softmax(x, mask=None, *, axis=-1):
    """``softmax(x + mask)`` along ``axis`` (``mask``: an optional additive float mask)."""
    if x.shape[axis] == 0:
        return x + (0.0 if mask is None else mask)
    out = _shifted(x, mask, axis)
    np.exp(out, out=out)
    den = np.sum(out, axis=axis, keepdims=True)
    np.reciprocal(den, out=den)
    out *= den
    return out


@in_float32(promote=True)
def _masked_log_softmax(x, mask=None, *, axis=-1):
    """``log_softmax(x + mask)`` along ``axis``."""
    if x.shape[axis] == 0:
        return x + (0.0 if mask is None else mask)
    out = _shifted(x, mask, axis)
    lse = np.sum(np.exp(out), axis=axis, keepdims=True)
    np.log(lse, out=lse)
    out -= lse
    return out


@in_float32(promote=True)
def _softmax_backward(g, out, *, axis=-1):
    """``out * (g - sum(g * out, axis))``: d softmax for the upstream ``g``."""
    dx = g * out
    total = np.sum(dx, axis=axis, keepdims=True)
    np.subtract(g, total, out=dx)
    dx *= out
    return dx


@in_float32(promote=True)
def _log_softmax_backward(g, out, *, axis=-1):
    """``g - exp(out) * sum(g, axis)``: d log_softmax for the upstream ``g``."""
    dx = np.exp(out)
    dx *= np.sum(g, axis=axis, keepdims=True)
    np.subtract(g, dx, out=dx)
    return dx


def _softmax_backward_grads(gg, _, g, out, *, axis=-1):
    """d<gg, out * (g - s)> with ``s = sum(g * out)``: w.r.t. g, ``out * (gg - sum(gg * out))``;
    w.r.t. out, ``gg * (g - s) - g * sum(gg * out)``.
    """
    t = np.sum(gg * out, axis=axis, keepdims=True)
    s = np.sum(g * out, axis=axis, keepdims=True)
    return out * (gg - t), gg * (g - s) - g * t


def _log_softmax_backward_grads(gg, _, g, out, *, axis=-1):
    """d<gg, g - exp(out) * sum(g)>: w.r.t. g, ``gg - sum(gg * exp(out))``; w.r.t. out,
    ``-gg * exp(out) * sum(g)``.
    """
    p = np.exp(out)
    d_g = gg - np.sum(gg * p, axis=axis, keepdims=True)
    return d_g, -(gg * p) * np.sum(g, axis=axis, keepdims=True)


_ROWS = (
    Example((3, 5)),
    Example((2, 3, 4), axis=1),
    Example((2, 3, 4), axis=-2),
    Example(_EXTREME),
)
_MASKED = (
    Example((2, 3), _BLOCKED),  # a constant -inf mask: blocked entries get probability 0
    Example((2, 3, 4), (3, 4), axis=-2),  # a learned bias, broadcast
    Example((2, 2, 3), (2, 1, 3), axis=-1),
)


def _forward_grads(backward):
    """The forward op's rule: the backward op's gradient, for x and for the additive mask alike
    (the engine sums it over the axes the mask was broadcast along).
    """

    def rule(g, out, x, *mask, axis=-1):
        dx = backward(g, out, axis=axis)
        return (dx, *(None if m is None else dx for m in mask))

    return rule


SOFTMAX_BACKWARD: OpDef = OpDef(
    "softmax_backward",
    _softmax_backward,
    _softmax_backward_grads,
    examples=(
        Example((3, 4), (3, 4), domain=(0.05, 1.0)),
        Example((2, 3, 4), (2, 3, 4), axis=-2, domain=(0.05, 1.0)),
    ),
)
LOG_SOFTMAX_BACKWARD: OpDef = OpDef(
    "log_softmax_backward",
    _log_softmax_backward,
    _log_softmax_backward_grads,
    examples=(
        Example((3, 4), (3, 4), domain=(-3.0, -0.1)),
        Example((2, 3, 4), (2, 3, 4), axis=1, domain=(-3.0, -0.1)),
    ),
)
MASKED_SOFTMAX: OpDef = OpDef(
    "masked_softmax",
    _masked_softmax,
    _forward_grads(SOFTMAX_BACKWARD),
    examples=_ROWS + _MASKED,
)
MASKED_LOG_SOFTMAX: OpDef = OpDef(
    "masked_log_softmax",
    _masked_log_softmax,
    _forward_grads(LOG_SOFTMAX_BACKWARD),
    examples=_ROWS + _MASKED,
)


INTERNAL_OPS = (MASKED_SOFTMAX, MASKED_LOG_SOFTMAX, SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD)
