"""Conv2d, MaxPool2d and AvgPool2d on NCHW inputs (torch.nn names, parameters and shapes)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl import Tensor

from sadl_layers.modules._base import (
    Layer,
    as_tensor,
    check_count,
    fan_in_bound,
    init_uniform,
    param_dtype,
    resolve_generator,
)
from sadl_layers.ops import conv as _ops
from sadl_layers.ops import pooling as _pool
from sadl_layers.ops._window import pair

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d"]

IntPair = int | tuple[int, int]


def _batched(layer: Layer, x: Tensor, channels: int | None) -> tuple[Tensor, bool]:
    """(N, C, H, W) input, and whether a batch axis was added to a (C, H, W) input."""
    expected = f"(N, {channels}, H, W) or ({channels}, H, W)" if channels else "(N, C, H, W)"
    if x.ndim not in (3, 4) or (channels is not None and x.shape[-3] != channels):
        raise layer.fail(f"input has shape {x.shape}, expected {expected}")
    if x.ndim == 3:
        return x.reshape(1, *x.shape), True
    return x, False


class Conv2d(Layer):
    """2-D convolution (cross-correlation) with stride, padding, dilation and groups.

    ``weight`` has shape ``(out_channels, in_channels / groups, kh, kw)`` and ``bias``
    ``(out_channels,)``, both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as in torch.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: IntPair,
        stride: IntPair = 1,
        padding: IntPair = 0,
        dilation: IntPair = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = param_dtype(dtype)
        self.in_channels = check_count("Conv2d", "in_channels", in_channels)
        self.out_channels = check_count("Conv2d", "out_channels", out_channels)
        self.groups = check_count("Conv2d", "groups", groups)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"Conv2d: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        self.kernel_size = pair(kernel_size, "Conv2d", "kernel_size")
        self.stride = pair(stride, "Conv2d", "stride")
        self.padding = pair(padding, "Conv2d", "padding")
        self.dilation = pair(dilation, "Conv2d", "dilation")
        if min(*self.kernel_size, *self.stride, *self.dilation) < 1:
            raise ValueError(
                f"Conv2d: kernel_size, stride and dilation must be positive, got "
                f"kernel_size={kernel_size!r}, stride={stride!r}, dilation={dilation!r}"
            )
        kh, kw = self.kernel_size
        fan_in = self.in_channels // self.groups * kh * kw
        gen = resolve_generator(rng)
        bound = fan_in_bound(fan_in)
        shape = (self.out_channels, self.in_channels // self.groups, kh, kw)
        self.weight = init_uniform(gen, bound, shape, dtype)
        self.bias = init_uniform(gen, bound, (self.out_channels,), dtype) if bias else None

    def forward(self, x: Any) -> Tensor:
        """Convolve ``x`` of shape ``(N, C, H, W)`` (or ``(C, H, W)``)."""
        x, added = _batched(self, as_tensor(x), self.in_channels)
        out: Tensor = self.call_op(
            _ops.conv2d,
            x,
            self.weight,
            self.bias,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            groups=self.groups,
        )
        return out.reshape(out.shape[1:]) if added else out

    def extra_repr(self) -> str:
        """Channels, kernel and options."""
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}, dilation={self.dilation}, "
            f"groups={self.groups}, bias={self.bias is not None}"
        )


class MaxPool2d(Layer):
    """Maximum over each window; the gradient goes to the first maximum (as in torch)."""

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        dilation: IntPair = 1,
    ) -> None:
        super().__init__()
        self.kernel_size = pair(kernel_size, "MaxPool2d", "kernel_size")
        self.stride = self.kernel_size if stride is None else pair(stride, "MaxPool2d", "stride")
        self.padding = pair(padding, "MaxPool2d", "padding")
        self.dilation = pair(dilation, "MaxPool2d", "dilation")

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` of shape ``(N, C, H, W)`` or ``(C, H, W)``."""
        x = as_tensor(x)
        if x.ndim not in (3, 4):
            raise self.fail(f"input has shape {x.shape}, expected (N, C, H, W) or (C, H, W)")
        out: Tensor = self.call_op(
            _pool.max_pool2d,
            x,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
        )
        return out

    def extra_repr(self) -> str:
        """Window options."""
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}"
        )


class AvgPool2d(Layer):
    """Mean over each window (zero padding; ``count_include_pad`` picks the divisor)."""

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = pair(kernel_size, "AvgPool2d", "kernel_size")
        self.stride = self.kernel_size if stride is None else pair(stride, "AvgPool2d", "stride")
        self.padding = pair(padding, "AvgPool2d", "padding")
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` of shape ``(N, C, H, W)`` or ``(C, H, W)``."""
        x = as_tensor(x)
        if x.ndim not in (3, 4):
            raise self.fail(f"input has shape {x.shape}, expected (N, C, H, W) or (C, H, W)")
        out: Tensor = self.call_op(
            _pool.avg_pool2d,
            x,
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            count_include_pad=self.count_include_pad,
        )
        return out

    def extra_repr(self) -> str:
        """Window options."""
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"count_include_pad={self.count_include_pad}"
        )
