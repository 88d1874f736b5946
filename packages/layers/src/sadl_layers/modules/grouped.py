"""GroupNorm and InstanceNorm1d/2d/3d (torch.nn names, parameters and buffers)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Parameter, Tensor

from sadl_layers.modules._base import Layer, as_tensor, check_count, param_dtype
from sadl_layers.modules.normalization import _ChannelNorm
from sadl_layers.ops import grouped as _ops

__all__ = ["GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]


class GroupNorm(Layer):
    """``GroupNorm(num_groups, num_channels, eps=1e-5, affine=True)``: normalize each group of
    channels of each sample; ``weight`` (ones) and ``bias`` (zeros) have shape
    ``(num_channels,)``, as in torch.
    """

    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        *,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        self.num_groups = check_count("GroupNorm", "num_groups", num_groups)
        self.num_channels = check_count("GroupNorm", "num_channels", num_channels)
        if self.num_channels % self.num_groups:
            raise ValueError(
                f"GroupNorm: num_groups={num_groups} must divide num_channels={num_channels}"
            )
        self.eps = float(eps)
        self.affine = bool(affine)
        dtype = param_dtype(dtype)
        C = self.num_channels
        self.weight = Parameter(np.ones(C, dtype=dtype)) if self.affine else None
        self.bias = Parameter(np.zeros(C, dtype=dtype)) if self.affine else None

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` of shape ``(N, C, ...)``."""
        x = as_tensor(x)
        if x.ndim < 2 or x.shape[1] != self.num_channels:
            raise self.fail(f"input has shape {x.shape}, expected (N, {self.num_channels}, ...)")
        out: Tensor = self.call_op(
            _ops.group_norm, x, self.num_groups, self.weight, self.bias, eps=self.eps
        )
        return out

    def extra_repr(self) -> str:
        """Groups, channels and options."""
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_ChannelNorm):
    """Instance normalization over the spatial axes; optional affine and running statistics."""

    spatial = 1

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        *,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype=dtype)

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` of shape ``(N, C, *spatial)`` (or ``(C, *spatial)``)."""
        x = as_tensor(x)
        d = self.spatial
        axes = {1: "L", 2: "H, W", 3: "D, H, W"}[d]
        if x.ndim not in (d + 1, d + 2) or x.shape[-d - 1] != self.num_features:
            C = self.num_features
            raise self.fail(
                f"input has shape {x.shape}, expected (N, {C}, {axes}) or ({C}, {axes})"
            )
        added = x.ndim == d + 1
        if added:
            x = x.reshape(1, *x.shape)
        use_input_stats = self.training or not self.track_running_stats
        # As torch's InstanceNorm: momentum=None leaves the running statistics as they are,
        # and num_batches_tracked (kept for state_dict compatibility) is not counted.
        momentum = 0.0 if self.momentum is None else self.momentum
        mean = var = None
        if self.track_running_stats:
            assert self.running_mean is not None and self.running_var is not None
            mean, var = self.running_mean.data, self.running_var.data
            if not self.training:  # copies: a later training step must not change this graph
                mean, var = mean.copy(), var.copy()
        out: Tensor = self.call_op(
            _ops.instance_norm,
            x,
            mean,
            var,
            self.weight,
            self.bias,
            use_input_stats=use_input_stats,
            momentum=momentum,
            eps=self.eps,
        )
        return out.reshape(out.shape[1:]) if added else out

    def extra_repr(self) -> str:
        """Channels and options."""
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class InstanceNorm1d(_InstanceNorm):
    """Instance norm of (N, C, L) inputs over L per sample and channel (torch.nn's)."""


class InstanceNorm2d(_InstanceNorm):
    """Instance norm of (N, C, H, W) inputs over H, W per sample and channel (torch.nn's)."""

    spatial = 2


class InstanceNorm3d(_InstanceNorm):
    """Instance norm of (N, C, D, H, W) inputs over D, H, W per sample and channel."""

    spatial = 3
