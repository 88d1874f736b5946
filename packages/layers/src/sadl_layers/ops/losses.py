"""Losses: softmax cross-entropy, NLL, MSE, L1 and binary cross-entropy with logits.

Class axis LAST: ``cross_entropy(logits, targets)`` takes logits of shape ``(..., C)`` and
integer class ids of shape ``(...)``, as GPT code writes it (``logits.view(-1, C)`` is not
needed). PyTorch puts the class axis second (``(N, C, ...)``); move it last to compare.

Every loss takes ``reduction`` = ``"mean"`` (the default), ``"sum"`` or ``"none"``. Cross-entropy
is one fused op: log-sum-exp, target pick and label smoothing in one pass, finite for logits of
+-1000, and its backward (softmax minus the smoothed one-hot) is an op of its own
(``cross_entropy_backward``) whose gradient is the softmax Hessian-vector product, so
second derivatives work.
"""

from __future__ import annotations

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import (
    check_class_ids,
    check_float,
    check_reduction,
    check_same_shape,
    const,
    loss_scale,
    no_grad_rule,
    reduce_loss,
    shape_of,
)

__all__ = ["cross_entropy", "nll_loss", "mse_loss", "l1_loss", "binary_cross_entropy_with_logits"]

_EXTREME = np.array([[1000.0, -1000.0, 0.5], [-1000.0, -999.0, 1000.0], [3.0, 3.0, -1000.0]])


def _softmax_any(z):
    """Softmax over the last axis of an array or a Tensor (the shift needs no gradient)."""
    e = np.exp(z - np.max(const(z), axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


# ------------------------------------------------------------------------- cross-entropy


def _check_logits(fn, logits, targets, ignore_index):
    check_float(fn, "logits", logits)
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(
            f"{fn}: logits must have shape (..., C) with C >= 1 classes on the last axis, "
            f"got {shape_of(logits)}"
        )
    check_class_ids(fn, targets, logits.shape[-1], ignore_index, shape_of(logits)[:-1])


def _check_smoothing(label_smoothing):
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(
            f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}"
        )


def _rows(logits, targets, ignore_index):
    """(N, C) logits, (N,) safe class ids, (N,) validity mask (None when nothing is ignored)."""
    C = logits.shape[-1]
    z = logits.reshape(-1, C)
    t = targets.reshape(-1)
    valid = t != ignore_index
    if valid.all():
        return z, t, None, t.size
    return z, np.where(valid, t, 0), valid, int(np.count_nonzero(valid))


def _cross_entropy(logits, targets, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Softmax cross-entropy of logits (..., C) against integer class ids (...), classes last."""
    _check_logits("cross_entropy", logits, targets, ignore_index)
    check_reduction("cross_entropy", reduction)
    _check_smoothing(label_smoothing)
    z, t, valid, count = _rows(logits, targets, ignore_index)
    m = np.max(z, axis=1, keepdims=True)
    e = z - m
    np.exp(e, out=e)
    lse = np.log(np.einsum("ij->i", e))
    lse += m[:, 0]
    eps = float(label_smoothing)
    loss = lse
    loss -= (1.0 - eps) * np.take_along_axis(z, t[:, None], axis=1)[:, 0]
    if eps:
        loss -= eps * np.mean(z, axis=1)
    if valid is not None:
        loss *= valid
    if reduction == "none":
        return loss.reshape(targets.shape)
    return reduce_loss(loss, reduction, count)


def _ce_backward(g, logits, targets, *, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """The gradient of cross_entropy: g * (softmax - smoothed one-hot) per row, scaled."""
    z, t, valid, count = _rows(logits, targets, ignore_index)
    C = z.shape[1]
    p = z - np.max(z, axis=1, keepdims=True)
    np.exp(p, out=p)
    den = np.einsum("ij->i", p)[:, None]
    np.reciprocal(den, out=den)
    p *= den
    eps = float(label_smoothing)
    if eps:
        p -= eps / C
    p[array_module(p).arange(t.size), t] -= 1.0 - eps
    scale = loss_scale(g, reduction, count)
    if reduction == "none":
        w = np.reshape(scale, (-1,))
        if valid is not None:
            w = w * valid
        p *= w[:, None]
    else:
        p *= scale
        if valid is not None:
            p *= valid[:, None]
    return p.reshape(logits.shape)


def _row_weights(g, targets, ignore_index, reduction, count, dtype):
    """Per-row weight (..., 1) of the cross-entropy Hessian: valid * scale * g."""
    valid = (targets != ignore_index).astype(dtype)[..., None]
    scale = loss_scale(g, reduction, count)
    if reduction == "none":
        return np.expand_dims(scale, -1) * valid
    return scale * valid


def _ce_backward_grad_g(gg, out, g, logits, targets, **params):
    ones = array_module(logits).ones(shape_of(g), dtype=const(logits).dtype)
    d = CROSS_ENTROPY_BACKWARD(ones, logits, targets, **params)
    if params.get("reduction", "mean") == "none":
        return np.sum(gg * d, axis=-1)
    return np.sum(gg * d)


def _ce_backward_grad_logits(gg, out, g, logits, targets, **params):
    ignore_index = params.get("ignore_index", -100)
    reduction = params.get("reduction", "mean")
    count = int(np.count_nonzero(targets != ignore_index))
    w = _row_weights(g, targets, ignore_index, reduction, count, const(logits).dtype)
    p = _softmax_any(logits)
    return w * p * (gg - np.sum(gg * p, axis=-1, keepdims=True))


CROSS_ENTROPY_BACKWARD: OpDef = OpDef(
    "cross_entropy_backward",
    _ce_backward,
    (_ce_backward_grad_g, _ce_backward_grad_logits, no_grad_rule),
    examples=(
        Example((), (4, 5), np.array([0, 3, 4, 1])),
        Example((2, 3), (2, 3, 4), np.array([[0, 3, 1], [2, -100, 3]]), reduction="none"),
        Example((), (3, 4), np.array([1, 2, 0]), label_smoothing=0.2, reduction="sum"),
    ),
)


def _ce_grad(g, out, logits, targets, **params):
    return CROSS_ENTROPY_BACKWARD(g, logits, targets, **params)


cross_entropy = OpDef(
    "cross_entropy",
    _cross_entropy,
    (_ce_grad, no_grad_rule),
    examples=(
        Example((4, 5), np.array([0, 3, 4, 1])),
        Example((2, 3, 4), np.array([[0, 3, 1], [2, 2, 3]]), reduction="sum"),
        Example((2, 3, 4), np.array([[0, 3, 1], [2, 2, 3]]), reduction="none"),
        Example((5, 3), np.array([0, -100, 2, 1, -100]), label_smoothing=0.1),
        Example((4, 6), np.array([5, 0, 7, 2]), ignore_index=7, label_smoothing=0.3),
        Example(_EXTREME, np.array([1, 2, 2])),
        Example(_EXTREME, np.array([0, 0, 1]), label_smoothing=0.2, reduction="none"),
    ),
)


# ------------------------------------------------------------------------------------ NLL


def _nll_loss(log_probs, targets, *, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities (..., C) at integer class ids (...)."""
    _check_logits("nll_loss", log_probs, targets, ignore_index)
    check_reduction("nll_loss", reduction)
    z, t, valid, count = _rows(log_probs, targets, ignore_index)
    loss = -np.take_along_axis(z, t[:, None], axis=1)[:, 0]
    if valid is not None:
        loss *= valid
    if reduction == "none":
        return loss.reshape(targets.shape)
    return reduce_loss(loss, reduction, count)


def _nll_backward(g, targets, *, num_classes, ignore_index=-100, reduction="mean"):
    """The gradient of nll_loss: -g (scaled) at each row's target class, zero elsewhere."""
    valid = targets != ignore_index
    scale = loss_scale(g, reduction, int(np.count_nonzero(valid)))
    w = np.broadcast_to(-scale * valid, targets.shape).reshape(-1)
    xp = array_module(g)
    grad = xp.zeros((targets.size, num_classes), dtype=g.dtype)
    grad[xp.arange(targets.size), np.where(valid, targets, 0).reshape(-1)] = w
    return grad.reshape(*targets.shape, num_classes)


#: nll_loss is linear in its input, so the gradient of its backward (w.r.t. g) is nll_loss.
NLL_LOSS_BACKWARD: OpDef = OpDef(
    "nll_loss_backward",
    _nll_backward,
    (lambda gg, out, g, targets, *, num_classes, **p: nll_loss(gg, targets, **p), no_grad_rule),
    examples=(
        Example((), np.array([0, 3, 4, 1]), num_classes=5),
        Example((2, 3), np.array([[0, 3, 1], [2, -100, 3]]), num_classes=4, reduction="none"),
        Example((), np.array([0, -100, 2, 1, 1]), num_classes=3, reduction="sum"),
    ),
)


def _nll_grad(g, out, log_probs, targets, **params):
    return NLL_LOSS_BACKWARD(g, targets, num_classes=shape_of(log_probs)[-1], **params)


nll_loss: OpDef = OpDef(
    "nll_loss",
    _nll_loss,
    (_nll_grad, no_grad_rule),
    examples=(
        Example((4, 5), np.array([0, 3, 4, 1])),
        Example((2, 3, 4), np.array([[0, 3, 1], [2, -100, 3]]), reduction="none"),
        Example((5, 3), np.array([0, -100, 2, 1, 1]), reduction="sum"),
    ),
)


# ----------------------------------------------------------------------------- regression


def _check_pair(fn, x, y, x_name="input", y_name="target"):
    check_float(fn, x_name, x)
    check_float(fn, y_name, y)
    check_same_shape(fn, y_name, y, shape_of(x), f"the shape of {x_name}")


def _mse_loss(input, target, *, reduction="mean"):
    """Mean squared error between input and target (same shapes)."""
    _check_pair("mse_loss", input, target)
    check_reduction("mse_loss", reduction)
    d = input - target
    d *= d
    return reduce_loss(d, reduction)


def _mse_grad_input(g, out, input, target, *, reduction="mean"):
    return (input - target) * (2.0 * loss_scale(g, reduction, int(np.size(const(input)))))


def _mse_grad_target(g, out, input, target, *, reduction="mean"):
    return (target - input) * (2.0 * loss_scale(g, reduction, int(np.size(const(input)))))


mse_loss = OpDef(
    "mse_loss",
    _mse_loss,
    (_mse_grad_input, _mse_grad_target),
    examples=(
        Example((3, 4), (3, 4)),
        Example((2, 3), (2, 3), reduction="sum"),
        Example((2, 3), (2, 3), reduction="none"),
    ),
)


def _l1_loss(input, target, *, reduction="mean"):
    """Mean absolute error between input and target (same shapes)."""
    _check_pair("l1_loss", input, target)
    check_reduction("l1_loss", reduction)
    d = input - target
    np.abs(d, out=d)
    return reduce_loss(d, reduction)


def _l1_grad_input(g, out, input, target, *, reduction="mean"):
    return np.sign(const(input) - const(target)) * loss_scale(
        g, reduction, int(np.size(const(input)))
    )


def _l1_grad_target(g, out, input, target, *, reduction="mean"):
    return np.sign(const(target) - const(input)) * loss_scale(
        g, reduction, int(np.size(const(input)))
    )


l1_loss = OpDef(
    "l1_loss",
    _l1_loss,
    (_l1_grad_input, _l1_grad_target),
    examples=(
        Example((3, 4), (3, 4)),
        Example((2, 3), (2, 3), reduction="sum"),
        Example((2, 3), (2, 3), reduction="none"),
    ),
    singular_points=(Example(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0])),),
)


# -------------------------------------------------------------------- BCE with logits


def _softplus_neg(x):
    """log(1 + exp(-x)), stable for any x (arrays and Tensors)."""
    return np.logaddexp(0.0, -x)


def _pos_weight(pos_weight, x):
    return array_module(x).asarray(pos_weight, dtype=const(x).dtype)  # a host weight moves


def _bce_with_logits(logits, targets, *, reduction="mean", pos_weight=None):
    """Binary cross-entropy of sigmoid(logits) against targets in [0, 1], stable for any logit."""
    _check_pair("binary_cross_entropy_with_logits", logits, targets, "logits", "targets")
    check_reduction("binary_cross_entropy_with_logits", reduction)
    sp = _softplus_neg(logits)
    if pos_weight is None:
        loss = (1.0 - targets) * logits
        loss += sp
    else:
        c = 1.0 + (_pos_weight(pos_weight, logits) - 1.0) * targets
        loss = (1.0 - targets) * logits + c * sp
    return reduce_loss(loss, reduction)


def _bce_grad_logits(g, out, logits, targets, *, reduction="mean", pos_weight=None):
    scale = loss_scale(g, reduction, int(np.size(const(logits))))
    sig = 0.5 * np.tanh(0.5 * logits) + 0.5
    if pos_weight is None:
        return (sig - targets) * scale
    c = 1.0 + (_pos_weight(pos_weight, logits) - 1.0) * targets
    return ((1.0 - targets) - c * (1.0 - sig)) * scale


def _bce_grad_targets(g, out, logits, targets, *, reduction="mean", pos_weight=None):
    scale = loss_scale(g, reduction, int(np.size(const(logits))))
    if pos_weight is None:
        return -logits * scale
    return ((_pos_weight(pos_weight, logits) - 1.0) * _softplus_neg(logits) - logits) * scale


binary_cross_entropy_with_logits = OpDef(
    "binary_cross_entropy_with_logits",
    _bce_with_logits,
    (_bce_grad_logits, _bce_grad_targets),
    examples=(
        Example((3, 4), (3, 4), domain=(-3.0, 3.0)),
        Example((2, 3), (2, 3), reduction="none"),
        Example((2, 3), (2, 3), reduction="sum", pos_weight=np.array([0.5, 2.0, 3.0])),
        Example(
            np.array([[1000.0, -1000.0], [-1000.0, 1000.0]]), np.array([[0.0, 1.0], [0.3, 1.0]])
        ),
    ),
)

INTERNAL_OPS = (CROSS_ENTROPY_BACKWARD, NLL_LOSS_BACKWARD)
