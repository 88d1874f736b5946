"""Pooling layers: MaxPool1d/2d/3d, AvgPool1d/2d/3d and AdaptiveAvgPool1d/2d (torch.nn's names
and arguments, in torch's order), on (N, C, L) / (N, C, H, W) / (N, C, D, H, W) inputs or
unbatched ones.
"""

from __future__ import annotations

from typing import Any

from sadl import Tensor

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import pooling as _ops
from sadl_layers.ops import resize as _resize
from sadl_layers.ops import volume as _volume
from sadl_layers.ops._window import ntuple
from sadl_layers.ops.conv import single

__all__ = [
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "MaxUnpool2d",
    "Unfold",
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
]

IntPair = int | tuple[int, int]


class _Pool(Layer):
    """Kernel, stride (default: the kernel), padding and the input check of a pooling layer."""

    spatial = 2

    def __init__(self, kernel_size: Any, stride: Any, padding: Any) -> None:
        super().__init__()
        self.kernel_size = self._size(kernel_size, "kernel_size")
        self.stride = self.kernel_size if stride is None else self._size(stride, "stride")
        self.padding = self._size(padding, "padding")

    def _size(self, value: Any, name: str) -> Any:
        if self.spatial == 1:
            return single(value, type(self).__name__, name)
        return ntuple(value, self.spatial, type(self).__name__, name)

    def _checked(self, x: Any) -> Tensor:
        t = as_tensor(x)
        if t.ndim not in (self.spatial + 1, self.spatial + 2):
            axes = {1: "L", 2: "H, W", 3: "D, H, W"}[self.spatial]
            raise self.fail(f"input has shape {t.shape}, expected (N, C, {axes}) or (C, {axes})")
        return t


class _MaxPool(_Pool):
    op: Any

    def __init__(
        self,
        kernel_size: Any,
        stride: Any = None,
        padding: Any = 0,
        dilation: Any = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__(kernel_size, stride, padding)
        self.dilation = self._size(dilation, "dilation")
        self.return_indices = bool(return_indices)
        self.ceil_mode = bool(ceil_mode)

    def forward(self, x: Any) -> Any:
        """The pooled input; with ``return_indices``, ``(values, indices)``."""
        return self.call_op(
            type(self).op,
            self._checked(x),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            dilation=self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self) -> str:
        """Window options."""
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"dilation={self.dilation}, ceil_mode={self.ceil_mode}"
        )


class MaxPool2d(_MaxPool):
    """Maximum over each window of (N, C, H, W); the gradient goes to the first maximum (as in
    torch). ``return_indices=True`` also returns each maximum's flat index ``h * W + w``.
    """

    op = _ops.max_pool2d


class MaxPool1d(_MaxPool):
    """Maximum over each window of (N, C, L); ``return_indices=True`` also returns positions."""

    op = _ops.max_pool1d
    spatial = 1


class MaxPool3d(_MaxPool):
    """Maximum over each window of (N, C, D, H, W); ``return_indices=True`` also returns each
    maximum's flat index ``(d * H + h) * W + w``, as in torch.
    """

    op = _volume.max_pool3d
    spatial = 3


class _AvgPool(_Pool):
    """Mean over each window (zero padding; ``count_include_pad`` and ``divisor_override`` pick
    the divisor, as in torch).
    """

    op: Any

    def __init__(
        self,
        kernel_size: IntPair,
        stride: IntPair | None = None,
        padding: IntPair = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__(kernel_size, stride, padding)
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` (with or without its batch axis)."""
        # torch's AvgPool1d takes no divisor_override, and neither does its op
        divisor = {} if self.spatial == 1 else {"divisor_override": self.divisor_override}
        out: Tensor = self.call_op(
            type(self).op,
            self._checked(x),
            kernel_size=self.kernel_size,
            stride=self.stride,
            padding=self.padding,
            ceil_mode=self.ceil_mode,
            count_include_pad=self.count_include_pad,
            **divisor,
        )
        return out

    def extra_repr(self) -> str:
        """Window options."""
        return (
            f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
            f"ceil_mode={self.ceil_mode}, count_include_pad={self.count_include_pad}"
        )


class AvgPool2d(_AvgPool):
    """Mean over each window of (N, C, H, W) (zero padding; ``count_include_pad`` and
    ``divisor_override`` pick the divisor, as in torch).
    """

    op = _ops.avg_pool2d


class AvgPool3d(_AvgPool):
    """Mean over each window of (N, C, D, H, W) (zero padding; ``count_include_pad`` and
    ``divisor_override`` pick the divisor, as in torch).
    """

    op = _volume.avg_pool3d
    spatial = 3


class AvgPool1d(_AvgPool):
    """Mean over each window of (N, C, L) (zero padding; ``count_include_pad`` as in torch)."""

    op = _ops.avg_pool1d
    spatial = 1

    def __init__(
        self,
        kernel_size: int,
        stride: int | None = None,
        padding: int = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)


class MaxUnpool2d(Layer):
    """``MaxUnpool2d(kernel_size, stride=None, padding=0)``: put each value back at the index
    ``MaxPool2d(..., return_indices=True)`` gave it, zeros elsewhere, as torch.nn.MaxUnpool2d.
    """

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = ntuple(kernel_size, 2, "MaxUnpool2d", "kernel_size")
        self.stride = (
            self.kernel_size if stride is None else ntuple(stride, 2, "MaxUnpool2d", "stride")
        )
        self.padding = ntuple(padding, 2, "MaxUnpool2d", "padding")

    def forward(self, x: Any, indices: Any, output_size: Any = None) -> Tensor:
        """Unpool ``x`` of shape ``(N, C, H, W)`` (or ``(C, H, W)``) with its pooling indices."""
        out: Tensor = self.call_op(
            _volume.max_unpool2d,
            as_tensor(x),
            indices,
            self.kernel_size,
            self.stride,
            self.padding,
            output_size=output_size,
        )
        return out

    def extra_repr(self) -> str:
        """Window options."""
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class Unfold(Layer):
    """``Unfold(kernel_size, dilation=1, padding=0, stride=1)``: sliding blocks of (N, C, H, W)
    as columns (N, C * kh * kw, L), as torch.nn.Unfold (im2col).
    """

    def __init__(
        self, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
    ) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, x: Any) -> Tensor:
        """The columns of ``x``."""
        out: Tensor = self.call_op(
            _volume.unfold,
            as_tensor(x),
            self.kernel_size,
            dilation=self.dilation,
            padding=self.padding,
            stride=self.stride,
        )
        return out

    def extra_repr(self) -> str:
        """Window options."""
        return (
            f"kernel_size={self.kernel_size}, dilation={self.dilation}, padding={self.padding}, "
            f"stride={self.stride}"
        )


class AdaptiveAvgPool2d(Layer):
    """Average pooling of (N, C, H, W) to a fixed ``output_size`` (an int, a pair, None keeps
    an axis), whatever the input size: ``AdaptiveAvgPool2d(1)`` is global average pooling.
    """

    def __init__(self, output_size: int | tuple[int | None, int | None]) -> None:
        super().__init__()
        self.output_size = output_size

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` of shape ``(N, C, H, W)`` or ``(C, H, W)``."""
        out: Tensor = self.call_op(
            _resize.adaptive_avg_pool2d, as_tensor(x), output_size=self.output_size
        )
        return out

    def extra_repr(self) -> str:
        """The output size."""
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(AdaptiveAvgPool2d):
    """Average pooling of (N, C, L) to a fixed length ``output_size``."""

    def forward(self, x: Any) -> Tensor:
        """Pool ``x`` of shape ``(N, C, L)`` or ``(C, L)``."""
        out: Tensor = self.call_op(
            _resize.adaptive_avg_pool1d, as_tensor(x), output_size=self.output_size
        )
        return out
