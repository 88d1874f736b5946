"""Activations and normalizers that NumPy lacks, written to stay finite for logits of +-1000."""

from __future__ import annotations

import numpy as np

from sadl._ops.reductions import unreduce
from sadl._records import Example, OpDef

_EXTREME = np.array([[1000.0, -1000.0, 0.5], [-1000.0, -999.0, 1000.0]])
_ROWS = (Example((3, 5)), Example((2, 3, 4), axis=1), Example(_EXTREME))


def _sigmoid(x):
    """Logistic sigmoid 1 / (1 + exp(-x)), stable for any x."""
    # tanh saturates instead of overflowing, and costs one transcendental per element.
    return 0.5 * np.tanh(0.5 * x) + 0.5


SIGMOID = OpDef(
    "sigmoid",
    _sigmoid,
    (lambda g, out, x: g * out * (1 - out),),
    examples=(Example((3, 4)), Example(_EXTREME)),
)


def _relu(x):
    """max(x, 0)."""
    return np.maximum(x, 0)


RELU = OpDef(
    "relu",
    _relu,
    (lambda g, out, x: g * (x > 0),),
    examples=(Example((3, 4)),),
    singular_points=(Example(np.array([0.0, -1.5, 2.0])),),
)


def _softmax(x, *, axis=-1):
    """exp(x) / sum(exp(x)) along ``axis``, shifted by the max for stability."""
    if x.size == 0:  # an empty input (a batch of none): np.max would have no identity
        return x.copy()
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def _softmax_grad(g, out, x, *, axis=-1):
    return out * (g - np.sum(g * out, axis=axis, keepdims=True))


SOFTMAX = OpDef("softmax", _softmax, (_softmax_grad,), examples=_ROWS)


def _log_softmax(x, *, axis=-1):
    """X - logsumexp(x) along ``axis``, stable for any x."""
    if x.size == 0:  # as in softmax
        return x.copy()
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _log_softmax_grad(g, out, x, *, axis=-1):
    return g - np.exp(out) * np.sum(g, axis=axis, keepdims=True)


LOG_SOFTMAX = OpDef("log_softmax", _log_softmax, (_log_softmax_grad,), examples=_ROWS)


def _logsumexp(x, *, axis=None, keepdims=False):
    """log(sum(exp(x))) over ``axis``, stable for any x."""
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _logsumexp_grad(g, out, x, *, axis=None, keepdims=False):
    return unreduce(g, x.shape, axis, keepdims) * np.exp(x - unreduce(out, x.shape, axis, keepdims))


LOGSUMEXP = OpDef(
    "logsumexp",
    _logsumexp,
    (_logsumexp_grad,),
    examples=(
        Example((3, 5)),
        Example((2, 3, 4), axis=(0, 2), keepdims=True),
        Example(_EXTREME, axis=-1),
    ),
)


def _softplus(x):
    """log(1 + exp(x)), stable for any x."""
    return np.logaddexp(0, x)


SOFTPLUS = OpDef(
    "softplus",
    _softplus,
    (lambda g, out, x: g * _sigmoid(x),),
    examples=(Example((3, 4)), Example(_EXTREME)),
)

OPS = (SIGMOID, RELU, SOFTMAX, LOG_SOFTMAX, LOGSUMEXP, SOFTPLUS)
