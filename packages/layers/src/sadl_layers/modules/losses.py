"""Loss layers: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss.

Thin wrappers around the loss ops (see :mod:`sadl_layers.ops.classification` and
:mod:`sadl_layers.ops.losses`), called as ``loss_fn(input, target)``. Class axis LAST for the
classification losses: logits ``(..., C)``, targets ``(...)`` (ids) or ``(..., C)``
(probabilities). A float NumPy target is cast to the input's dtype, so float32 models stay in
float32 whatever dtype the data loader produced; a class ``weight`` is kept as a buffer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import is_array, to_device

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import classification as _classification
from sadl_layers.ops import losses as _ops
from sadl_layers.ops._common import check_reduction

__all__ = ["CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCEWithLogitsLoss", "BCELoss"]


def _target_like(target: Any, x: Tensor) -> Any:
    """A float target without gradient, in the input's dtype and on its device (targets from the
    host are copied there); anything else unchanged.
    """
    if isinstance(target, Tensor):
        if target.requires_grad or target.dtype.kind != "f" or target.dtype == x.dtype:
            return target
        return target.astype(x.dtype)
    arr = to_device(target if is_array(target) else np.asarray(target), x.device)
    if arr.dtype.kind == "f" and arr.dtype != x.dtype:
        return arr.astype(x.dtype)
    return arr


class _Loss(Layer):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        check_reduction(type(self).__name__, reduction)
        self.reduction = reduction

    def extra_repr(self) -> str:
        """The reduction."""
        return f"reduction={self.reduction!r}"


class _WeightedLoss(_Loss):
    """A classification loss with an optional per-class ``weight`` buffer (as torch's)."""

    weight: Tensor | None

    def __init__(self, weight: Any, reduction: str) -> None:
        super().__init__(reduction)
        if weight is None:
            self.weight = None
        else:
            w = as_tensor(weight)
            if w.ndim != 1 or w.dtype.kind != "f":
                raise ValueError(
                    f"{type(self).__name__}: weight must be a 1-D float array (one per class), "
                    f"got {w.dtype} of shape {w.shape}"
                )
            self.register_buffer("weight", w)

    def _weight_like(self, x: Tensor) -> Any:
        """The class weights in the input's dtype (None without weights)."""
        if self.weight is None:
            return None
        w = self.weight.data
        return w if w.dtype == x.dtype else w.astype(x.dtype)


class CrossEntropyLoss(_WeightedLoss):
    """Softmax cross-entropy of logits ``(..., C)`` against integer class ids ``(...)`` or class
    probabilities ``(..., C)``.

    ``weight`` (C,) rescales each class; ``ignore_index`` targets contribute nothing (and are
    left out of the mean); ``label_smoothing`` mixes the target with the uniform distribution.
    """

    def __init__(
        self,
        weight: Any = None,
        ignore_index: int = -100,
        reduction: str = "mean",
        label_smoothing: float = 0.0,
    ) -> None:
        super().__init__(weight, reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(
                f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}"
            )
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits: Any, targets: Any) -> Tensor:
        """The loss of ``logits`` at ``targets``."""
        x = as_tensor(logits)
        out: Tensor = self.call_op(
            _classification.cross_entropy,
            x,
            _target_like(targets, x),
            weight=self._weight_like(x),
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            reduction=self.reduction,
        )
        return out

    def extra_repr(self) -> str:
        """Options."""
        weighted = ", weight=..." if self.weight is not None else ""
        return (
            f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, "
            f"reduction={self.reduction!r}{weighted}"
        )


class NLLLoss(_WeightedLoss):
    """Negative log-likelihood of log-probabilities ``(..., C)`` at integer class ids ``(...)``;
    ``weight`` (C,) rescales each class.
    """

    def __init__(
        self, weight: Any = None, ignore_index: int = -100, reduction: str = "mean"
    ) -> None:
        super().__init__(weight, reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, log_probs: Any, targets: Any) -> Tensor:
        """The loss of ``log_probs`` at ``targets``."""
        x = as_tensor(log_probs)
        out: Tensor = self.call_op(
            _classification.nll_loss,
            x,
            targets,
            weight=self._weight_like(x),
            ignore_index=self.ignore_index,
            reduction=self.reduction,
        )
        return out

    def extra_repr(self) -> str:
        """Options."""
        weighted = ", weight=..." if self.weight is not None else ""
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}{weighted}"


class MSELoss(_Loss):
    """Mean squared error between input and target of the same shape."""

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        x = as_tensor(input)
        out: Tensor = self.call_op(
            _ops.mse_loss, x, _target_like(target, x), reduction=self.reduction
        )
        return out


class L1Loss(_Loss):
    """Mean absolute error between input and target of the same shape."""

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        x = as_tensor(input)
        out: Tensor = self.call_op(
            _ops.l1_loss, x, _target_like(target, x), reduction=self.reduction
        )
        return out


class BCEWithLogitsLoss(_Loss):
    """Binary cross-entropy of sigmoid(logits) against targets in [0, 1], stable for any logit.

    ``pos_weight`` (broadcast over the last axis) weights the positive term, as in torch; it is
    kept as a buffer.
    """

    def __init__(self, reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(reduction)
        if pos_weight is None:
            self.pos_weight = None
        else:
            self.register_buffer("pos_weight", as_tensor(pos_weight))

    def forward(self, logits: Any, targets: Any) -> Tensor:
        """The loss."""
        x = as_tensor(logits)
        out: Tensor = self.call_op(
            _ops.binary_cross_entropy_with_logits,
            x,
            _target_like(targets, x),
            reduction=self.reduction,
            pos_weight=None if self.pos_weight is None else self.pos_weight.data,
        )
        return out


class BCELoss(_Loss):
    """Binary cross-entropy of probabilities in [0, 1] against targets in [0, 1], as torch's
    BCELoss (logs clamped at -100); ``weight`` (broadcast against the input) is a buffer.
    """

    def __init__(self, weight: Any = None, reduction: str = "mean") -> None:
        super().__init__(reduction)
        if weight is None:
            self.weight = None
        else:
            self.register_buffer("weight", as_tensor(weight))

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        x = as_tensor(input)
        out: Tensor = self.call_op(
            _ops.binary_cross_entropy,
            x,
            _target_like(target, x),
            None if self.weight is None else self.weight.data,
            reduction=self.reduction,
        )
        return out
