"""Classification losses: softmax cross-entropy and negative log-likelihood, classes LAST.

``cross_entropy(logits, targets)`` takes logits of shape ``(..., C)`` and either integer class
ids of shape ``(...)`` or class probabilities of shape ``(..., C)`` (a float array like the
logits), as GPT code writes it; PyTorch puts the class axis second (``(N, C, ...)``), so move it
last to compare. ``weight`` (one per class), ``ignore_index`` (ids only) and
``label_smoothing`` follow torch, including what the mean divides by: the summed weights of the
counted targets for ids, the number of rows for probabilities.

Cross-entropy is one fused op. Whatever the options, each row's loss has the form
``s * lse - a * z[target] - b * (z . v)`` (ids) or ``s * lse - q . z`` (probabilities), with
``lse`` the log-sum-exp of the row, ``q`` the (smoothed, weighted) target distribution and
``s`` its total: one pass, finite for logits of +-1000. Its gradient ``s * softmax - q`` is an
op of its own (``cross_entropy_backward``) whose gradient is the softmax Hessian-vector
product, so second derivatives work.
"""

from __future__ import annotations

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import (
    check_class_ids,
    check_float,
    check_reduction,
    const,
    loss_scale,
    no_grad_rule,
    reduce_loss,
    shape_of,
)
from sadl_layers.ops._softmax import MASKED_LOG_SOFTMAX, MASKED_SOFTMAX

__all__ = ["cross_entropy", "nll_loss"]

_EXTREME = np.array([[1000.0, -1000.0, 0.5], [-1000.0, -999.0, 1000.0], [3.0, 3.0, -1000.0]])
_SOFT = np.array([[0.2, 0.5, 0.3], [1.0, 0.0, 0.0], [0.1, 0.1, 0.8]])


# ----------------------------------------------------------------------------- checks


def _check_logits(fn, logits):
    check_float(fn, "logits", logits)
    if logits.ndim < 1 or logits.shape[-1] < 1:
        raise ValueError(
            f"{fn}: logits must have shape (..., C) with C >= 1 classes on the last axis, "
            f"got {shape_of(logits)}"
        )


def _check_weight(fn, weight, C):
    if weight is None:
        return
    check_float(fn, "weight", weight)
    if shape_of(weight) != (C,):
        raise ValueError(
            f"{fn}: weight has shape {shape_of(weight)}, expected ({C},) (one per class)"
        )


def _is_soft(targets):
    """True for class probabilities (a float array), False for class ids."""
    dtype = getattr(targets, "dtype", None)
    return dtype is not None and dtype.kind == "f"


def _check_targets(fn, logits, targets, weight, ignore_index):
    """Checks every argument; True when ``targets`` are class probabilities."""
    _check_logits(fn, logits)
    C = logits.shape[-1]
    _check_weight(fn, weight, C)
    leading = shape_of(logits)[:-1]
    if _is_soft(targets):
        if fn == "cross_entropy" and shape_of(targets) == shape_of(logits):
            return True
        expected = f"integer array of shape {leading} (class or token ids)"
        if fn == "cross_entropy":
            expected += (
                f" or a float array of the logits' shape {shape_of(logits)} (class probabilities)"
            )
        raise TypeError(
            f"{fn}: targets must be an {expected}, got {targets.dtype} of shape {shape_of(targets)}"
        )
    check_class_ids(fn, targets, C, ignore_index, leading)
    return False


def _check_smoothing(label_smoothing):
    if not 0.0 <= float(label_smoothing) <= 1.0:
        raise ValueError(
            f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing!r}"
        )


# --------------------------------------------------------------------- the loss's terms


def _safe_ids(targets, ignore_index):
    """Flat class ids with ignored ones replaced by 0, and the validity mask (None: all valid)."""
    t = targets.reshape(-1)
    valid = t != ignore_index
    if valid.all():
        return t, None
    return np.where(valid, t, 0), valid


def _id_terms(targets, C, weight, ignore_index, eps, dtype):
    """For class ids: ``(t, a, b, s, total)``, row loss ``s * lse - a * z[t] - b * (z . v)``.

    ``v`` is ``weight`` (or all ones); ``a`` and ``b`` are numbers or per-row arrays, ``s`` a
    per-row array or None when it is 1 for every row (no weight, nothing ignored); ``total`` is
    what the mean divides by (the summed weights of the counted targets).
    """
    t, valid = _safe_ids(targets, ignore_index)
    mask = None if valid is None else valid.astype(dtype)
    if weight is None:
        if mask is None:
            return t, 1.0 - eps, eps / C, None, t.size
        return t, (1.0 - eps) * mask, (eps / C) * mask, mask, int(np.count_nonzero(valid))
    picked = weight[t] if mask is None else weight[t] * mask
    b = eps / C if mask is None else (eps / C) * mask
    a = (1.0 - eps) * picked
    return t, a, b, a + b * weight.sum(), float(picked.sum())


def _soft_q(targets, weight, eps, C):
    """The target distribution of each row, smoothed and weighted (arrays and Tensors)."""
    q = targets if not eps else targets * (1.0 - eps) + eps / C
    return q if weight is None else q * weight


# ------------------------------------------------------------------------- cross-entropy


def _cross_entropy(
    logits,
    targets,
    *,
    weight=None,
    ignore_index=-100,
    label_smoothing=0.0,
    reduction="mean",
):
    """Softmax cross-entropy of logits (..., C) against class ids (...) or probabilities
    (..., C), classes last; ``weight`` rescales each class.
    """
    soft = _check_targets("cross_entropy", logits, targets, weight, ignore_index)
    check_reduction("cross_entropy", reduction)
    _check_smoothing(label_smoothing)
    eps = float(label_smoothing)
    C = logits.shape[-1]
    # With ls = log_softmax(z) = z - lse: s * lse - a * z[t] - b * (z . v) = -a * ls[t] - b *
    # (ls . v) (s = a + b * sum(v)), and s * lse - q . z = -(q . ls).
    ls = MASKED_LOG_SOFTMAX(logits.reshape(-1, C))
    if soft:
        q = _soft_q(targets.reshape(-1, C), weight, eps, C)
        loss = array_module(ls).zeros(ls.shape[0], dtype=ls.dtype)  # in place: ls's dtype
        loss -= np.einsum("ij,ij->i", q, ls)
        total = ls.shape[0]
    else:
        t, a, b, _, total = _id_terms(targets, C, weight, ignore_index, eps, ls.dtype)
        loss = ls[array_module(ls).arange(t.size), t]
        loss *= -a  # in place: the weights' float64 does not widen the loss
        if eps:
            loss -= b * (np.einsum("ij->i", ls) if weight is None else ls @ weight)
    if reduction == "none":
        return loss.reshape(shape_of(logits)[:-1])
    return reduce_loss(loss, reduction, total)


def _mean_total(logits, targets, weight, ignore_index):
    """What a 'mean' reduction divides by (see :func:`_id_terms`)."""
    if _is_soft(targets):
        return int(np.prod(shape_of(logits)[:-1]))
    t, valid = _safe_ids(targets, ignore_index)
    if weight is None:
        return t.size if valid is None else int(np.count_nonzero(valid))
    picked = weight[t] if valid is None else weight[t] * valid
    return float(picked.sum())


def _ce_backward(
    g,
    logits,
    targets,
    *,
    weight=None,
    ignore_index=-100,
    label_smoothing=0.0,
    reduction="mean",
):
    """The gradient of cross_entropy: g * (s * softmax - q) per row, scaled for the mean."""
    C = logits.shape[-1]
    z = logits.reshape(-1, C)
    eps = float(label_smoothing)
    p = MASKED_SOFTMAX(z)
    if _is_soft(targets):
        q = _soft_q(targets.reshape(-1, C), weight, eps, C)
        p *= q.sum(axis=1)[:, None]
        p -= q
        total = z.shape[0]
    else:
        t, a, b, s, total = _id_terms(targets, C, weight, ignore_index, eps, z.dtype)
        if s is not None:
            p *= s[:, None]
        if eps:
            v = 1.0 if weight is None else weight
            p -= b * v if np.ndim(b) == 0 else b[:, None] * v
        p[array_module(p).arange(t.size), t] -= a
    scale = loss_scale(g, reduction, total)
    p *= np.reshape(scale, (-1, 1)) if reduction == "none" else scale
    return p.reshape(logits.shape)


def _row_totals(targets, logits, weight, ignore_index, eps):
    """``s`` of every row as a (..., 1) column (a Tensor when soft targets are one)."""
    C = shape_of(logits)[-1]
    lead = shape_of(logits)[:-1]
    if _is_soft(const(targets)):
        return np.sum(_soft_q(targets, weight, eps, C), axis=-1, keepdims=True)
    z = const(logits)
    _, _, _, s, _ = _id_terms(const(targets), C, weight, ignore_index, eps, z.dtype)
    if s is None:
        s = array_module(z).ones(int(np.prod(lead)), dtype=z.dtype)
    return s.reshape(*lead, 1)


def _params(params):
    return (
        params.get("weight"),
        params.get("ignore_index", -100),
        float(params.get("label_smoothing", 0.0)),
        params.get("reduction", "mean"),
    )


def _ce_backward_grad_g(gg, out, g, logits, targets, **params):
    ones = array_module(const(logits)).ones(shape_of(g), dtype=const(logits).dtype)
    d = CROSS_ENTROPY_BACKWARD(ones, logits, targets, **params)
    if params.get("reduction", "mean") == "none":
        return np.sum(gg * d, axis=-1)
    return np.sum(gg * d)


def _scale_column(g, reduction, total):
    scale = loss_scale(g, reduction, total)
    return np.expand_dims(scale, -1) if reduction == "none" else scale


def _ce_backward_grad_logits(gg, out, g, logits, targets, **params):
    weight, ignore_index, eps, reduction = _params(params)
    total = _mean_total(const(logits), const(targets), weight, ignore_index)
    s = _row_totals(targets, logits, weight, ignore_index, eps)
    p = MASKED_SOFTMAX(logits)
    return (
        _scale_column(g, reduction, total) * s * p * (gg - np.sum(gg * p, axis=-1, keepdims=True))
    )


def _ce_backward_grad_targets(gg, out, g, logits, targets, **params):
    if not _is_soft(const(targets)):
        return None
    weight, ignore_index, eps, reduction = _params(params)
    total = _mean_total(const(logits), const(targets), weight, ignore_index)
    p = MASKED_SOFTMAX(logits)
    dq = (np.sum(gg * p, axis=-1, keepdims=True) - gg) * (1.0 - eps)
    if weight is not None:
        dq = dq * weight
    return _scale_column(g, reduction, total) * dq


CROSS_ENTROPY_BACKWARD: OpDef = OpDef(
    "cross_entropy_backward",
    _ce_backward,
    (_ce_backward_grad_g, _ce_backward_grad_logits, _ce_backward_grad_targets),
    examples=(
        Example((), (4, 5), np.array([0, 3, 4, 1])),
        Example((2, 3), (2, 3, 4), np.array([[0, 3, 1], [2, -100, 3]]), reduction="none"),
        Example((), (3, 4), np.array([1, 2, 0]), label_smoothing=0.2, reduction="sum"),
        Example(
            (),
            (4, 3),
            np.array([0, 2, -100, 1]),
            weight=np.array([0.5, 2.0, 1.5]),
            label_smoothing=0.1,
        ),
        Example((), (3, 3), _SOFT, weight=np.array([0.5, 2.0, 1.5]), label_smoothing=0.2),
        Example((3,), (3, 3), _SOFT, reduction="none"),
    ),
)


def _ce_grad_logits(g, out, logits, targets, **params):
    return CROSS_ENTROPY_BACKWARD(g, logits, targets, **params)


def _ce_grad_targets(g, out, logits, targets, **params):
    """Probabilities only: d loss / d y = -(1 - eps) * weight * log_softmax(logits), scaled."""
    if not _is_soft(const(targets)):
        return None
    weight, ignore_index, eps, reduction = _params(params)
    total = _mean_total(const(logits), const(targets), weight, ignore_index)
    d = MASKED_LOG_SOFTMAX(logits) * (eps - 1.0)
    if weight is not None:
        d = d * weight
    return _scale_column(g, reduction, total) * d


cross_entropy = OpDef(
    "cross_entropy",
    _cross_entropy,
    (_ce_grad_logits, _ce_grad_targets),
    examples=(
        Example((4, 5), np.array([0, 3, 4, 1])),
        Example((2, 3, 4), np.array([[0, 3, 1], [2, 2, 3]]), reduction="sum"),
        Example((2, 3, 4), np.array([[0, 3, 1], [2, 2, 3]]), reduction="none"),
        Example((5, 3), np.array([0, -100, 2, 1, -100]), label_smoothing=0.1),
        Example((4, 6), np.array([5, 0, 7, 2]), ignore_index=7, label_smoothing=0.3),
        Example(_EXTREME, np.array([1, 2, 2])),
        Example(_EXTREME, np.array([0, 0, 1]), label_smoothing=0.2, reduction="none"),
        Example((4, 3), np.array([0, 2, 1, 2]), weight=np.array([0.5, 2.0, 1.5])),
        Example(
            (2, 3, 3),
            np.array([[0, 2, -100], [1, 1, 0]]),
            weight=np.array([0.5, 2.0, 1.5]),
            label_smoothing=0.2,
            reduction="none",
        ),
        Example((3, 3), _SOFT),
        Example(_EXTREME, _SOFT, weight=np.array([0.5, 2.0, 1.5]), label_smoothing=0.1),
        Example((2, 2, 3), np.stack([_SOFT[:2], _SOFT[1:]]), reduction="sum"),
    ),
)


# ------------------------------------------------------------------------------------ NLL


def _nll_terms(targets, weight, ignore_index, dtype):
    """Flat safe ids, per-row weight (None: 1 each) and what the mean divides by."""
    t, valid = _safe_ids(targets, ignore_index)
    if weight is None:
        w = None if valid is None else valid.astype(dtype)
        return t, w, t.size if valid is None else int(np.count_nonzero(valid))
    w = weight[t] if valid is None else weight[t] * valid
    return t, w, float(w.sum())


def _nll_loss(log_probs, targets, *, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of log-probabilities (..., C) at integer class ids (...);
    ``weight`` rescales each class (and the mean divides by the weights counted).
    """
    _check_targets("nll_loss", log_probs, targets, weight, ignore_index)
    check_reduction("nll_loss", reduction)
    C = log_probs.shape[-1]
    z = log_probs.reshape(-1, C)
    t, w, total = _nll_terms(targets, weight, ignore_index, z.dtype)
    loss = -z[array_module(z).arange(t.size), t]
    if w is not None:
        loss *= w
    if reduction == "none":
        return loss.reshape(targets.shape)
    return reduce_loss(loss, reduction, total)


def _nll_backward(g, targets, *, num_classes, weight=None, ignore_index=-100, reduction="mean"):
    """The gradient of nll_loss: -g (weighted, scaled) at each row's target class, else zero."""
    t, w, total = _nll_terms(targets, weight, ignore_index, g.dtype)
    scale = loss_scale(g, reduction, total)
    row = np.broadcast_to(-scale, targets.shape).reshape(-1)
    if w is not None:
        row = row * w
    xp = array_module(g)
    grad = xp.zeros((t.size, num_classes), dtype=g.dtype)
    grad[xp.arange(t.size), t] = row
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
        Example((), np.array([0, -100, 2, 1]), num_classes=3, weight=np.array([2.0, 0.5, 1.0])),
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
        Example((4, 3), np.array([0, -100, 2, 1]), weight=np.array([2.0, 0.5, 1.0])),
        Example(
            (2, 2, 3),
            np.array([[0, 2], [1, 1]]),
            weight=np.array([2.0, 0.5, 1.0]),
            reduction="none",
        ),
    ),
)

INTERNAL_OPS = (CROSS_ENTROPY_BACKWARD, NLL_LOSS_BACKWARD)
