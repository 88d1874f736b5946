"""torch.nn's layers over the functionals sadl composes from its ops
(``functional/composites.py``): shrinkages, ``Threshold``, ``GLU``, ``PReLU``, the pixel
shuffles, cosine similarity, pairwise distance, and the smooth L1, Huber and KL losses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Parameter, Tensor

from sadl_layers.functional import composites as fc
from sadl_layers.functional._common import _no_inplace
from sadl_layers.modules._base import Layer, as_tensor, param_dtype
from sadl_layers.ops._common import check_reduction

__all__ = [
    "Hardshrink",
    "Softshrink",
    "Tanhshrink",
    "Threshold",
    "GLU",
    "PReLU",
    "PixelShuffle",
    "PixelUnshuffle",
    "CosineSimilarity",
    "PairwiseDistance",
    "SmoothL1Loss",
    "HuberLoss",
    "KLDivLoss",
]


class Hardshrink(Layer):
    """x where |x| > lambd (default 0.5), else 0."""

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = float(lambd)

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return fc.hardshrink(as_tensor(x), self.lambd)


class Softshrink(Hardshrink):
    """x - lambd above lambd, x + lambd below -lambd, else 0."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return fc.softshrink(as_tensor(x), self.lambd)


class Tanhshrink(Layer):
    """x - tanh(x)."""

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return fc.tanhshrink(as_tensor(x))


class Threshold(Layer):
    """x where x > threshold, else ``value``."""

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        _no_inplace("Threshold", inplace)
        self.threshold, self.value = float(threshold), float(value)

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise."""
        return fc.threshold(as_tensor(x), self.threshold, self.value)


class GLU(Layer):
    """a * sigmoid(b) of the two halves (a, b) of the input along ``dim`` (default -1)."""

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = int(dim)

    def forward(self, x: Any) -> Tensor:
        """Gate the first half by the second."""
        return fc.glu(as_tensor(x), self.dim)


class PReLU(Layer):
    """x where x > 0, else weight * x: a learned slope, one (``num_parameters=1``) or one per
    channel (dim 1), starting at ``init`` (0.25), as torch.nn.PReLU.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, *, dtype: Any = None) -> None:
        super().__init__()
        if num_parameters < 1:
            raise ValueError(f"PReLU: num_parameters must be positive, got {num_parameters}")
        # (torch's attribute num_parameters would hide Module.num_parameters(): the weight's
        # length says it)
        self.weight = Parameter(np.full(int(num_parameters), init, dtype=param_dtype(dtype)))

    def forward(self, x: Any) -> Tensor:
        """Apply elementwise, the slope per channel."""
        return fc.prelu(as_tensor(x), self.weight)

    def extra_repr(self) -> str:
        """The number of slopes."""
        return f"num_parameters={self.weight.shape[0]}"


class PixelShuffle(Layer):
    """(*, C r^2, H, W) as (*, C, H r, W r) for ``upscale_factor`` r (sub-pixel convolution)."""

    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = int(upscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Rearrange channels into space."""
        return fc.pixel_shuffle(as_tensor(x), self.upscale_factor)


class PixelUnshuffle(Layer):
    """(*, C, H r, W r) as (*, C r^2, H, W) for ``downscale_factor`` r."""

    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = int(downscale_factor)

    def forward(self, x: Any) -> Tensor:
        """Rearrange space into channels."""
        return fc.pixel_unshuffle(as_tensor(x), self.downscale_factor)


class CosineSimilarity(Layer):
    """The cosine of the angle between x1 and x2 along ``dim`` (default 1)."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = int(dim), float(eps)

    def forward(self, x1: Any, x2: Any) -> Tensor:
        """The similarity (the inputs broadcast)."""
        return fc.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Layer):
    """The p-norm (default 2) of x1 - x2 + eps along the last dim."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = float(p), float(eps), bool(keepdim)

    def forward(self, x1: Any, x2: Any) -> Tensor:
        """The distance."""
        return fc.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


class _Loss(Layer):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction != "batchmean":
            check_reduction(type(self).__name__, reduction)
        self.reduction = reduction

    def extra_repr(self) -> str:
        """The reduction."""
        return f"reduction={self.reduction!r}"


class SmoothL1Loss(_Loss):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (d = input - target)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0) -> None:
        super().__init__(reduction)
        self.beta = float(beta)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        return fc.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) (d = input - target)."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = float(delta)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        return fc.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    """target * (log(target) - input) of log-probabilities ``input``; ``'batchmean'`` is the
    KL divergence per sample, ``log_target`` takes the target as log-probabilities.
    """

    def __init__(self, reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(reduction)
        self.log_target = bool(log_target)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        return fc.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
