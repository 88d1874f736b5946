"""Convolutions, pooling, padding, resizing and encodings with torch's signatures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sadl import Tensor

from sadl_layers.functional._common import _op, _t


def _conv(name: str, input: Any, weight: Any, bias: Any, **params: Any) -> Tensor:
    return _op(name)(_t(input), weight, bias, **params)  # type: ignore[no-any-return]


def conv1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-d cross-correlation of (N, C, L) with weight (out, C / groups, k)."""
    return _conv("conv1d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def conv2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-d cross-correlation of (N, C, H, W) with weight (out, C / groups, kh, kw)."""
    return _conv("conv2d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def conv3d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-d cross-correlation of (N, C, D, H, W) with weight (out, C / groups, kd, kh, kw)."""
    return _conv("conv3d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def conv_transpose1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 1-d convolution (weight (C, out / groups, k))."""
    return _conv("conv_transpose1d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def conv_transpose2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 2-d convolution (weight (C, out / groups, kh, kw))."""
    return _conv("conv_transpose2d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def conv_transpose3d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 3-d convolution (weight (C, out / groups, kd, kh, kw))."""
    return _conv("conv_transpose3d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def _max_pool(
    name: str, input: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool, return_indices: bool,
) -> Any:  # fmt: skip
    return _op(name)(_t(input), kernel_size=kernel_size, stride=stride or None,
                     padding=padding, dilation=dilation, ceil_mode=ceil_mode,
                     return_indices=return_indices)  # fmt: skip


def max_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, L)."""
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, H, W); ``stride`` defaults to ``kernel_size``."""
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, D, H, W)."""
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def avg_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over windows of (N, C, L)."""
    return _op("avg_pool1d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad)  # fmt: skip


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over windows of (N, C, H, W)."""
    return _op("avg_pool2d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad,
                             divisor_override=divisor_override)  # fmt: skip


def avg_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over windows of (N, C, D, H, W)."""
    return _op("avg_pool3d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad,
                             divisor_override=divisor_override)  # fmt: skip


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Tensor:
    """Mean over windows chosen so the output has length ``output_size``."""
    return _op("adaptive_avg_pool1d")(_t(input), output_size=output_size)  # type: ignore[no-any-return]


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Tensor:
    """Mean over windows chosen so the output has spatial size ``output_size``."""
    return _op("adaptive_avg_pool2d")(_t(input), output_size=output_size)  # type: ignore[no-any-return]


def unfold(
    input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """im2col: sliding blocks of (N, C, H, W) as (N, C * kh * kw, L)."""
    return _op("unfold")(_t(input), kernel_size, dilation, padding, stride)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- shape, encoding
def pad(
    input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """Pad the last ``len(pad) // 2`` axes: ``pad = (last_left, last_right, prev_left, ...)``."""
    x = _t(input)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"F.pad: pad must hold pairs for at most {x.ndim} axes, got {tuple(pad)}")
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)]
    width = [(0, 0)] * (x.ndim - len(pairs)) + pairs[::-1]
    if any(a < 0 or b < 0 for a, b in width):
        raise NotImplementedError("F.pad: negative padding (cropping) is not supported; slice")
    if mode == "constant":
        return _op("pad")(x, pad_width=width, mode="constant", constant_values=value or 0)  # type: ignore[no-any-return]
    if value:
        raise ValueError(f"F.pad: value= applies to mode='constant' only, not {mode!r}")
    return _op("pad")(x, pad_width=width, mode=mode)  # type: ignore[no-any-return]


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with one more (last) axis of length ``num_classes``."""
    return _op("one_hot")(_t(tensor), num_classes=num_classes)  # type: ignore[no-any-return]


def interpolate(
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial axes of (N, C, ...) to ``size`` or by ``scale_factor``."""
    if antialias:
        raise NotImplementedError("F.interpolate: antialias=True is not supported")
    return _op("interpolate")(  # type: ignore[no-any-return]
        _t(input),
        size=size,
        scale_factor=scale_factor,
        mode=mode,
        align_corners=align_corners,
        recompute_scale_factor=recompute_scale_factor,
    )


#: torch.nn.functional names sadl lacks -> what to use instead (shown by the AttributeError).


#: Every function defined here (the names torch.nn.functional gives them).
__all__ = [
    n
    for n, v in list(globals().items())
    if getattr(v, "__module__", None) == __name__ and not n.startswith("_")
]
