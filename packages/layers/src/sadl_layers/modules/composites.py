"""torch.nn's layers over the functionals sadl composes from its ops
(``functional/composites.py``): shrinkages, ``Threshold``, ``GLU``, ``PReLU``, the pixel
shuffles, cosine similarity, pairwise distance, the smooth L1, Huber and KL losses and the
channel dropouts; and over ``F.pad`` and ``reshape``: the padding layers and ``Unflatten``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Parameter, Tensor

from sadl_layers.functional import composites as fc
from sadl_layers.functional._common import _no_inplace
from sadl_layers.functional.spatial import pad
from sadl_layers.modules._base import Layer, as_tensor, param_dtype
from sadl_layers.modules.losses import _Loss

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
    "Dropout1d",
    "Dropout2d",
    "Dropout3d",
    "Unflatten",
    "ZeroPad1d",
    "ZeroPad2d",
    "ZeroPad3d",
    "ConstantPad1d",
    "ConstantPad2d",
    "ConstantPad3d",
    "ReflectionPad1d",
    "ReflectionPad2d",
    "ReflectionPad3d",
    "ReplicationPad1d",
    "ReplicationPad2d",
    "ReplicationPad3d",
    "CircularPad1d",
    "CircularPad2d",
    "CircularPad3d",
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
        # (the losses' check knows the three reductions they share; this one also has its own)
        super().__init__("mean" if reduction == "batchmean" else reduction)
        self.reduction, self.log_target = reduction, bool(log_target)

    def forward(self, input: Any, target: Any) -> Tensor:
        """The loss."""
        return fc.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _ChannelDropout(Layer):
    """Zero whole channels with probability ``p`` in training mode (scaling the rest)."""

    dims = 2

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        _no_inplace(type(self).__name__, inplace)
        if isinstance(p, bool) or not 0.0 <= p <= 1.0:
            raise ValueError(f"{type(self).__name__}: p must be a probability in [0, 1], got {p!r}")
        self.p = float(p)

    def forward(self, x: Any) -> Tensor:
        """The input with channels dropped (training) or unchanged (eval)."""
        return fc._channel_dropout(type(self).__name__, self.dims, x, self.p, self.training, False)

    def extra_repr(self) -> str:
        """The probability."""
        return f"p={self.p}"


class Dropout1d(_ChannelDropout):
    """Zero whole channels of (N, C, L) or (C, L) with probability ``p`` (training)."""

    dims = 1


class Dropout2d(_ChannelDropout):
    """Zero whole channels of (N, C, H, W) or (C, H, W) with probability ``p`` (training)."""

    dims = 2


class Dropout3d(_ChannelDropout):
    """Zero whole channels of (N, C, D, H, W) or (C, D, H, W) with probability ``p``."""

    dims = 3


class Unflatten(Layer):
    """Split axis ``dim`` into ``unflattened_size`` (the inverse of ``Flatten``)."""

    def __init__(self, dim: int, unflattened_size: tuple[int, ...] | list[int]) -> None:
        super().__init__()
        self.dim, self.unflattened_size = int(dim), tuple(int(n) for n in unflattened_size)

    def forward(self, x: Any) -> Tensor:
        """The input with axis ``dim`` split."""
        t = as_tensor(x)
        dim = self.dim % max(t.ndim, 1)
        sizes = list(self.unflattened_size)
        if sizes.count(-1) == 1:  # one size inferred, as torch
            rest = int(np.prod([n for n in sizes if n != -1]))
            sizes[sizes.index(-1)] = t.shape[dim] // rest if rest else 0
        if int(np.prod(sizes)) != t.shape[dim]:
            raise self.fail(f"axis {self.dim} of shape {t.shape} cannot become {tuple(sizes)}")
        return t.reshape(*t.shape[:dim], *sizes, *t.shape[dim + 1 :])

    def extra_repr(self) -> str:
        """The axis and its new sizes."""
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class _Pad(Layer):
    """Pad the last ``dims`` axes by ``padding`` (an int, or (left, right, top, bottom, ...)) in
    ``F.pad``'s ``mode``.
    """

    dims = 2
    mode = "constant"

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__()
        pads = (padding,) * 2 * self.dims if isinstance(padding, int) else tuple(padding)
        if len(pads) != 2 * self.dims:
            raise ValueError(
                f"{type(self).__name__}: padding must be an int or {2 * self.dims} ints, got "
                f"{padding!r}"
            )
        self.padding, self.value = tuple(int(p) for p in pads), 0.0

    def forward(self, x: Any) -> Tensor:
        """The padded input."""
        value = self.value if self.mode == "constant" else None
        return pad(as_tensor(x), self.padding, mode=self.mode, value=value)

    def extra_repr(self) -> str:
        """The padding."""
        return f"padding={self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding: int | tuple[int, ...], value: float) -> None:
        super().__init__(padding)
        self.value = float(value)

    def extra_repr(self) -> str:
        """The padding and its value."""
        return f"padding={self.padding}, value={self.value}"


class ZeroPad1d(_Pad):
    """Zeros around the last axis."""

    dims = 1


class ZeroPad2d(_Pad):
    """Zeros around the last two axes."""


class ZeroPad3d(_Pad):
    """Zeros around the last three axes."""

    dims = 3


class ConstantPad1d(_ConstantPad):
    """``value`` around the last axis."""

    dims = 1


class ConstantPad2d(_ConstantPad):
    """``value`` around the last two axes."""


class ConstantPad3d(_ConstantPad):
    """``value`` around the last three axes."""

    dims = 3


class ReflectionPad1d(_Pad):
    """The last axis mirrored at its ends (the edge not repeated)."""

    dims, mode = 1, "reflect"


class ReflectionPad2d(_Pad):
    """The last two axes mirrored at their ends (the edge not repeated)."""

    mode = "reflect"


class ReflectionPad3d(_Pad):
    """The last three axes mirrored at their ends (the edge not repeated)."""

    dims, mode = 3, "reflect"


class ReplicationPad1d(_Pad):
    """The last axis's edge values repeated."""

    dims, mode = 1, "replicate"


class ReplicationPad2d(_Pad):
    """The last two axes' edge values repeated."""

    mode = "replicate"


class ReplicationPad3d(_Pad):
    """The last three axes' edge values repeated."""

    dims, mode = 3, "replicate"


class CircularPad1d(_Pad):
    """The last axis wrapped around."""

    dims, mode = 1, "circular"


class CircularPad2d(_Pad):
    """The last two axes wrapped around."""

    mode = "circular"


class CircularPad3d(_Pad):
    """The last three axes wrapped around."""

    dims, mode = 3, "circular"
