"""LayerNorm, RMSNorm, BatchNorm1d and BatchNorm2d (torch.nn names, parameters and buffers)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Parameter, Tensor

from sadl_layers.modules._base import Layer, as_tensor, check_count, param_dtype
from sadl_layers.ops import batchnorm as _bn
from sadl_layers.ops import normalization as _ops

__all__ = ["LayerNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"]


def _shape(layer: str, normalized_shape: Any) -> tuple[int, ...]:
    if isinstance(normalized_shape, int | np.integer):
        normalized_shape = (normalized_shape,)
    try:
        shape = tuple(normalized_shape)
    except TypeError:
        raise ValueError(
            f"{layer}: normalized_shape must be an int or a tuple of ints, got {normalized_shape!r}"
        ) from None
    if not shape:
        raise ValueError(f"{layer}: normalized_shape must not be empty")
    return tuple(check_count(layer, "normalized_shape", n) for n in shape)


class _Norm(Layer):
    normalized_shape: tuple[int, ...]

    def _check(self, x: Tensor) -> None:
        k = len(self.normalized_shape)
        if x.ndim < k or x.shape[x.ndim - k :] != self.normalized_shape:
            raise self.fail(
                f"input has shape {x.shape}, expected (..., "
                f"{', '.join(map(str, self.normalized_shape))})"
            )


class LayerNorm(_Norm):
    """Normalize over the trailing ``normalized_shape`` axes, then scale and shift.

    ``weight`` (ones) and ``bias`` (zeros) have shape ``normalized_shape``;
    ``elementwise_affine=False`` drops both, ``bias=False`` only the shift.
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        *,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.normalized_shape = _shape("LayerNorm", normalized_shape)
        self.eps = float(eps)
        affine = bool(elementwise_affine)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype)) if affine else None
        self.bias = (
            Parameter(np.zeros(self.normalized_shape, dtype=dtype)) if affine and bias else None
        )

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` of shape ``(..., *normalized_shape)``."""
        x = as_tensor(x)
        self._check(x)
        out: Tensor = self.call_op(
            _ops.layer_norm,
            x,
            self.weight,
            self.bias,
            eps=self.eps,
            normalized_shape=self.normalized_shape,
        )
        return out

    def extra_repr(self) -> str:
        """Shape and epsilon."""
        return f"{self.normalized_shape}, eps={self.eps}"


class RMSNorm(_Norm):
    """x / sqrt(mean(x**2) + eps) * weight over the trailing ``normalized_shape`` axes.

    ``eps=None`` uses the machine epsilon of the input's dtype (torch's default).
    """

    def __init__(
        self,
        normalized_shape: int | tuple[int, ...],
        eps: float | None = None,
        elementwise_affine: bool = True,
        *,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.normalized_shape = _shape("RMSNorm", normalized_shape)
        self.eps = None if eps is None else float(eps)
        self.weight = (
            Parameter(np.ones(self.normalized_shape, dtype=dtype)) if elementwise_affine else None
        )

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x`` of shape ``(..., *normalized_shape)``."""
        x = as_tensor(x)
        self._check(x)
        out: Tensor = self.call_op(
            _ops.rms_norm, x, self.weight, eps=self.eps, normalized_shape=self.normalized_shape
        )
        return out

    def extra_repr(self) -> str:
        """Shape and epsilon."""
        return f"{self.normalized_shape}, eps={self.eps}"


class _ChannelNorm(Layer):
    """A norm with a per-channel affine ``weight``/``bias`` and optional running statistics
    (the batch and instance norms), its options checked and its state laid out as in torch.
    """

    def __init__(
        self,
        num_features: int,
        eps: float,
        momentum: float | None,
        affine: bool,
        track_running_stats: bool,
        *,
        dtype: Any,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        name = type(self).__name__
        self.num_features = check_count(name, "num_features", num_features)
        self.eps = float(eps)
        if momentum is not None and not 0.0 <= momentum <= 1.0:
            raise ValueError(f"{name}: momentum must be in [0, 1] or None, got {momentum!r}")
        self.momentum = None if momentum is None else float(momentum)
        self.affine = bool(affine)
        self.track_running_stats = bool(track_running_stats)
        C = self.num_features
        self.weight = Parameter(np.ones(C, dtype=dtype)) if self.affine else None
        self.bias = Parameter(np.zeros(C, dtype=dtype)) if self.affine else None
        if self.track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(C, dtype=dtype)))
            self.register_buffer("running_var", Tensor(np.ones(C, dtype=dtype)))
            self.register_buffer("num_batches_tracked", Tensor(np.array(0, dtype=np.int64)))
        else:
            self.running_mean = None
            self.running_var = None
            self.num_batches_tracked = None


class _BatchNorm(_ChannelNorm):
    """Batch normalization over the channel axis 1 with running statistics."""

    _ndims: tuple[int, ...] = ()
    _expected = ""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        *,
        dtype: Any = None,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, dtype=dtype)

    def forward(self, x: Any) -> Tensor:
        """Normalize ``x``: batch statistics in training mode, running ones in evaluation."""
        x = as_tensor(x)
        if x.ndim not in self._ndims or x.shape[1] != self.num_features:
            raise self.fail(
                f"input has shape {x.shape}, expected {self._expected.format(C=self.num_features)}"
            )
        use_batch = self.training or not self.track_running_stats
        momentum = 0.0
        running_mean = running_var = None
        if self.track_running_stats:
            assert self.running_mean is not None and self.running_var is not None
            if self.training:
                assert self.num_batches_tracked is not None
                self.num_batches_tracked.data += 1
                momentum = self.momentum
                if momentum is None:  # a cumulative average: the count is read only then
                    momentum = 1.0 / int(self.num_batches_tracked.data)
                running_mean, running_var = self.running_mean.data, self.running_var.data
            else:
                # Copies: a later training step updates the buffers in place, and this graph's
                # backward must still see the statistics it used.
                running_mean = self.running_mean.data.copy()
                running_var = self.running_var.data.copy()
        out: Tensor = self.call_op(
            _bn.batch_norm,
            x,
            self.weight,
            self.bias,
            running_mean=running_mean,
            running_var=running_var,
            training=use_batch,
            momentum=momentum,
            eps=self.eps,
        )
        return out

    def extra_repr(self) -> str:
        """Channels and options."""
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
            f"affine={self.affine}, track_running_stats={self.track_running_stats}"
        )


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) inputs over all axes but C (torch.nn.BatchNorm1d)."""

    _ndims = (2, 3)
    _expected = "(N, {C}) or (N, {C}, L)"


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) inputs over all axes but C (torch.nn.BatchNorm2d)."""

    _ndims = (4,)
    _expected = "(N, {C}, H, W)"


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) inputs over all axes but C (torch.nn.BatchNorm3d)."""

    _ndims = (5,)
    _expected = "(N, {C}, D, H, W)"
