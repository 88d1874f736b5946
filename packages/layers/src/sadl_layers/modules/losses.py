"""Loss layers: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, BCEWithLogitsLoss.

Thin wrappers around the loss ops (see :mod:`sadl_layers.ops.losses`), called as
``loss_fn(input, target)``. Class axis LAST for the classification losses: logits ``(..., C)``,
targets ``(...)``. A float NumPy target is cast to the input's dtype, so float32 models stay in
float32 whatever dtype the data loader produced.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor
from sadl.backends import is_array, to_device

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import losses as _ops
from sadl_layers.ops._common import check_reduction

__all__ = ["CrossEntropyLoss", "MSELoss", "L1Loss", "NLLLoss", "BCEWithLogitsLoss"]


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


class CrossEntropyLoss(_Loss):
    """Softmax cross-entropy of logits ``(..., C)`` against integer class ids ``(...)``.

    ``ignore_index`` targets contribute nothing (and are left out of the mean);
    ``label_smoothing`` mixes the one-hot target with the uniform distribution.
    """

    def __init__(
        self, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"
    ) -> None:
        super().__init__(reduction)
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(
                f"CrossEntropyLoss: label_smoothing must be in [0, 1], got {label_smoothing!r}"
            )
        self.ignore_index = int(ignore_index)
        self.label_smoothing = float(label_smoothing)

    def forward(self, logits: Any, targets: Any) -> Tensor:
        """The loss of ``logits`` at ``targets``."""
        out: Tensor = self.call_op(
            _ops.cross_entropy,
            as_tensor(logits),
            targets,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            reduction=self.reduction,
        )
        return out

    def extra_repr(self) -> str:
        """Options."""
        return (
            f"ignore_index={self.ignore_index}, label_smoothing={self.label_smoothing}, "
            f"reduction={self.reduction!r}"
        )


class NLLLoss(_Loss):
    """Negative log-likelihood of log-probabilities ``(..., C)`` at integer class ids ``(...)``."""

    def __init__(self, ignore_index: int = -100, reduction: str = "mean") -> None:
        super().__init__(reduction)
        self.ignore_index = int(ignore_index)

    def forward(self, log_probs: Any, targets: Any) -> Tensor:
        """The loss of ``log_probs`` at ``targets``."""
        out: Tensor = self.call_op(
            _ops.nll_loss,
            as_tensor(log_probs),
            targets,
            ignore_index=self.ignore_index,
            reduction=self.reduction,
        )
        return out

    def extra_repr(self) -> str:
        """Options."""
        return f"ignore_index={self.ignore_index}, reduction={self.reduction!r}"


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
