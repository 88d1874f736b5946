"""Losses with torch's signatures: classes at dim 1, ``size_average``/``reduce`` refused."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor

from sadl_layers.functional._common import _legacy, _op, _reduce, _t


def _classes_last(x: Tensor) -> Tensor:
    """Torch's (N, C, d1, ...) as the ops' (N, d1, ..., C); (N, C) and (C,) stay."""
    return x if x.ndim <= 2 else np.moveaxis(x, 1, -1)  # type: ignore[return-value,type-var]


def cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Softmax cross-entropy of logits (N, C, ...) against class ids (N, ...) or
    probabilities (N, C, ...), classes at dim 1 as in torch.
    """
    _legacy("cross_entropy", size_average, reduce)
    x, y = _t(input), _t(target)
    if y.dtype.kind == "f":
        y = _classes_last(y)
    return _op("cross_entropy")(  # type: ignore[no-any-return]
        _classes_last(x),
        y,
        weight=weight,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


def nll_loss(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of log-probabilities (N, C, ...) at class ids (N, ...)."""
    _legacy("nll_loss", size_average, reduce)
    return _op("nll_loss")(  # type: ignore[no-any-return]
        _classes_last(_t(input)),
        _t(target),
        weight=weight,
        ignore_index=ignore_index,
        reduction=reduction,
    )


def mse_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Tensor:
    """Mean (or sum, or each) of squared differences."""
    _legacy("mse_loss", size_average, reduce)
    if weight is not None:
        return _reduce(_op("mse_loss")(_t(input), _t(target), reduction="none") * weight, reduction)
    return _op("mse_loss")(_t(input), _t(target), reduction=reduction)  # type: ignore[no-any-return]


def l1_loss(
    input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> Tensor:
    """Mean (or sum, or each) of absolute differences."""
    _legacy("l1_loss", size_average, reduce)
    return _op("l1_loss")(_t(input), _t(target), reduction=reduction)  # type: ignore[no-any-return]


def binary_cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) of probabilities ``input``, optionally weighted."""
    _legacy("binary_cross_entropy", size_average, reduce)
    return _op("binary_cross_entropy")(  # type: ignore[no-any-return]
        _t(input), _t(target), weight, reduction=reduction
    )


def binary_cross_entropy_with_logits(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits."""
    _legacy("binary_cross_entropy_with_logits", size_average, reduce)
    op = _op("binary_cross_entropy_with_logits")
    if weight is None:
        return op(_t(input), _t(target), reduction=reduction, pos_weight=pos_weight)  # type: ignore[no-any-return]
    each = op(_t(input), _t(target), reduction="none", pos_weight=pos_weight)
    return _reduce(each * weight, reduction)


#: Every function defined here (the names torch.nn.functional gives them).
__all__ = [
    n
    for n, v in list(globals().items())
    if getattr(v, "__module__", None) == __name__ and not n.startswith("_")
]
