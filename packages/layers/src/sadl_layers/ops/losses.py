"""Regression and binary losses: MSE, L1, binary cross-entropy with logits and on
probabilities.

Every loss takes ``reduction`` = ``"mean"`` (the default), ``"sum"`` or ``"none"``. The
classification losses (softmax cross-entropy, NLL) are in :mod:`.classification`.
"""

from __future__ import annotations

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import (
    check_float,
    check_reduction,
    check_same_shape,
    const,
    in_float32,
    loss_scale,
    reduce_loss,
    shape_of,
)

__all__ = ["mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy"]

# ----------------------------------------------------------------------------- regression


def _check_pair(fn, x, y, x_name="input", y_name="target"):
    check_float(fn, x_name, x)
    check_float(fn, y_name, y)
    check_same_shape(fn, y_name, y, shape_of(x), f"the shape of {x_name}")


@in_float32(promote=True)
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


# ----------------------------------------------------------------- BCE on probabilities


def _clamped_logs(p):
    """log(p) and log(1 - p), each at least -100 (torch's clamp: finite at 0 and 1)."""
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(p), -100.0), np.maximum(np.log(1.0 - p), -100.0)


def _bce(input, target, weight=None, *, reduction="mean"):
    """Binary cross-entropy of probabilities ``input`` in [0, 1] against ``target``, as torch's
    F.binary_cross_entropy: ``-w * (t * log(p) + (1 - t) * log(1 - p))``, logs clamped at -100.
    """
    fn = "binary_cross_entropy"
    _check_pair(fn, input, target)
    check_reduction(fn, reduction)
    if input.size and not ((input >= 0).all() and (input <= 1).all()):
        raise ValueError(
            f"{fn}: input holds values outside [0, 1] (probabilities expected); for logits use "
            "binary_cross_entropy_with_logits"
        )
    log_p, log_q = _clamped_logs(input)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return reduce_loss(loss, reduction)


def _bce_scale(g, input, weight, reduction):
    scale = loss_scale(g, reduction, int(np.size(const(input))))
    return scale if weight is None else scale * weight


def _bce_grad_input(g, out, input, target, weight=None, *, reduction="mean"):
    # torch's formula: (p - t) / max(p (1 - p), 1e-12), finite at p = 0 and p = 1
    ratio = (input - target) / np.maximum(input * (1.0 - input), 1e-12)
    return ratio * _bce_scale(g, input, weight, reduction)


def _bce_grad_target(g, out, input, target, weight=None, *, reduction="mean"):
    # torch's target gradient takes the logs unclamped: +-inf where the input is 0 or 1
    with np.errstate(divide="ignore"):
        logit = np.log(1.0 - input) - np.log(input)
    return logit * _bce_scale(g, input, weight, reduction)


def _bce_grad_weight(g, out, input, target, weight=None, *, reduction="mean"):
    log_p, log_q = _clamped_logs(input)
    return -(target * log_p + (1.0 - target) * log_q) * _bce_scale(g, input, None, reduction)


binary_cross_entropy = OpDef(
    "binary_cross_entropy",
    _bce,
    (_bce_grad_input, _bce_grad_target, _bce_grad_weight),
    examples=(
        Example((3, 4), (3, 4), None, domain=(0.05, 0.95)),
        Example((2, 3), (2, 3), np.array([0.5, 2.0, 1.0]), reduction="sum", domain=(0.1, 0.9)),
        Example((2, 3), (2, 3), None, reduction="none", domain=(0.1, 0.9)),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
