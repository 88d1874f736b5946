"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d (torch.nn's names, parameters,
shapes and initialization), on (N, C, L) / (N, C, H, W) / (N, C, D, H, W) inputs or unbatched
ones. The (non-transposed) convolutions also take torch's ``padding="same"`` and ``"valid"``.
"""

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
from sadl_layers.ops import volume as _volume
from sadl_layers.ops._window import ntuple

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d"]

Size = int | tuple[int, ...]  #: one int for every spatial axis, or one each


def batched(layer: Layer, x: Tensor, channels: int | None, spatial: int) -> tuple[Tensor, bool]:
    """The input with a batch axis, and whether one was added (an unbatched input).

    ``spatial`` is 1 for (N, C, L) / (C, L) inputs, 2 for (N, C, H, W) / (C, H, W) and 3 for
    (N, C, D, H, W) / (C, D, H, W).
    """
    axes = {1: "L", 2: "H, W", 3: "D, H, W"}[spatial]
    c = "C" if channels is None else str(channels)
    if x.ndim not in (spatial + 1, spatial + 2) or (
        channels is not None and x.shape[-spatial - 1] != channels
    ):
        raise layer.fail(f"input has shape {x.shape}, expected (N, {c}, {axes}) or ({c}, {axes})")
    if x.ndim == spatial + 1:
        return x.reshape(1, *x.shape), True
    return x, False


class _ConvNd(Layer):
    """Channels, kernel, stride, padding, dilation, groups, weight and bias of a convolution.

    ``transposed`` layers hold their weight as (in_channels, out_channels / groups, *kernel),
    the others as (out_channels, in_channels / groups, *kernel); either way fan_in is
    ``weight.shape[1] * prod(kernel)`` and both start U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
    """

    spatial = 2  #: the spatial axes: 1 (N, C, L), 2 (N, C, H, W) or 3 (N, C, D, H, W)
    transposed = False
    op: Any  #: the functional op (sadl_layers.ops), per class
    output_padding: tuple[int, ...]  #: transposed layers only

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Size,
        stride: Size = 1,
        padding: Size | str = 0,
        dilation: Size = 1,
        groups: int = 1,
        bias: bool = True,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        self.in_channels = check_count(name, "in_channels", in_channels)
        self.out_channels = check_count(name, "out_channels", out_channels)
        self.groups = check_count(name, "groups", groups)
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ValueError(
                f"{name}: groups={groups} must divide in_channels={in_channels} and "
                f"out_channels={out_channels}"
            )
        self.kernel_size = self._size(kernel_size, "kernel_size")
        self.stride = self._size(stride, "stride")
        self.padding: Any = self._padding(padding)
        self.dilation = self._size(dilation, "dilation")
        if min(*self.kernel_size, *self.stride, *self.dilation) < 1:
            raise ValueError(
                f"{name}: kernel_size, stride and dilation must be positive, got "
                f"kernel_size={kernel_size!r}, stride={stride!r}, dilation={dilation!r}"
            )
        if self.padding == "same" and any(s != 1 for s in self.stride):
            raise ValueError(
                f"{name}: padding='same' is not supported for strided convolutions "
                f"(stride={stride!r}); pass stride=1 or a numeric padding"
            )
        if self.transposed:
            shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
        else:
            shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
        gen = resolve_generator(rng)
        bound = fan_in_bound(int(np.prod(shape[1:])))
        dtype = param_dtype(dtype)
        self.weight = init_uniform(gen, bound, shape, dtype)
        self.bias = init_uniform(gen, bound, (self.out_channels,), dtype) if bias else None

    def _size(self, value: Any, name: str) -> tuple[int, ...]:
        if self.spatial == 1:
            return (_ops.single(value, type(self).__name__, name),)
        return ntuple(value, self.spatial, type(self).__name__, name)

    def _padding(self, value: Any) -> Any:
        """Sizes, or torch's "same"/"valid" (convolutions only, as in torch)."""
        if not isinstance(value, str):
            return self._size(value, "padding")
        name = type(self).__name__
        if self.transposed:
            raise ValueError(
                f"{name}: padding must be an int or a tuple of ints, got {value!r} (torch's "
                "'same'/'valid' exist for convolutions, not transposed ones)"
            )
        if value not in ("same", "valid"):
            raise ValueError(
                f"{name}: padding must be an int, a tuple of ints, 'same' or 'valid', got {value!r}"
            )
        return value

    def _param(self, sizes: Any) -> Any:
        """A size for the op: a tuple in 2-D and 3-D, an int in 1-D, a padding string as is."""
        return sizes if self.spatial != 1 or isinstance(sizes, str) else sizes[0]

    def _options(self) -> dict[str, Any]:
        return {
            "stride": self._param(self.stride),
            "padding": self._param(self.padding),
            "dilation": self._param(self.dilation),
            "groups": self.groups,
        }

    def _convolve(self, x: Any, output_size: Any = None) -> Tensor:
        """The class's ``op`` on ``x`` with this layer's weight, bias and options; an unbatched
        input gets a batch axis for the call and loses it again. Transposed layers also pass
        the output_padding that ``output_size`` asks for (their own by default).
        """
        x, added = batched(self, as_tensor(x), self.in_channels, self.spatial)
        extra = {}
        if self.transposed:
            extra["output_padding"] = self._param(self._padding_for(x, output_size))
        out: Tensor = self.call_op(
            type(self).op, x, self.weight, self.bias, **extra, **self._options()
        )
        return out.reshape(out.shape[1:]) if added else out

    def forward(self, x: Any) -> Tensor:
        """Convolve ``x`` of shape (N, C, *spatial) or (C, *spatial): (N, C, L) in 1-D,
        (N, C, H, W) in 2-D, (N, C, D, H, W) in 3-D.
        """
        return self._convolve(x)

    def _padding_for(self, x: Tensor, output_size: Any) -> tuple[int, ...]:
        """The output_padding that gives ``output_size`` (torch's ``forward(x, output_size)``)."""
        if output_size is None:
            return self.output_padding
        d = self.spatial
        sizes = tuple(int(n) for n in np.atleast_1d(output_size))[-d:]
        if len(sizes) != d:
            raise self.fail(f"output_size must give {d} spatial sizes, got {output_size!r}")
        result = []
        for axis in range(d):
            n = x.shape[-d + axis]
            smallest = (
                (n - 1) * self.stride[axis]
                - 2 * self.padding[axis]
                + self.dilation[axis] * (self.kernel_size[axis] - 1)
                + 1
            )
            extra = sizes[axis] - smallest
            limit = max(self.stride[axis], self.dilation[axis])
            if not 0 <= extra < limit:
                raise self.fail(
                    f"output_size {sizes} is not reachable: spatial axis {axis} can be "
                    f"{smallest} to {smallest + limit - 1}"
                )
            result.append(extra)
        return tuple(result)

    def extra_repr(self) -> str:
        """Channels, kernel and options."""
        extra = ""
        if self.transposed and any(self.output_padding):
            extra = f", output_padding={self.output_padding}"
        return (
            f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
            f"stride={self.stride}, padding={self.padding}{extra}, dilation={self.dilation}, "
            f"groups={self.groups}, bias={self.bias is not None}"
        )


class Conv1d(_ConvNd):
    """1-D convolution (cross-correlation) over (N, C, L) inputs, torch's Conv1d.

    ``weight`` has shape ``(out_channels, in_channels / groups, k)`` and ``bias``
    ``(out_channels,)``.
    """

    spatial = 1
    op = _ops.conv1d


class Conv2d(_ConvNd):
    """2-D convolution (cross-correlation) with stride, padding, dilation and groups.

    ``weight`` has shape ``(out_channels, in_channels / groups, kh, kw)`` and ``bias``
    ``(out_channels,)``, both drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as in torch.
    """

    op = _ops.conv2d


class Conv3d(_ConvNd):
    """3-D convolution (cross-correlation) over (N, C, D, H, W) inputs, torch's Conv3d.

    ``weight`` has shape ``(out_channels, in_channels / groups, kd, kh, kw)`` and ``bias``
    ``(out_channels,)``.
    """

    spatial = 3
    op = _volume.conv3d


class _ConvTransposeNd(_ConvNd):
    """A transposed convolution: weight (in_channels, out_channels / groups, *kernel), and
    torch's argument order (``output_padding`` after ``padding``, ``dilation`` last).
    """

    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: Size,
        stride: Size = 1,
        padding: Size = 0,
        output_padding: Size = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: Size = 1,
        *,
        rng: np.random.Generator | int | None = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
            rng=rng, dtype=dtype,
        )  # fmt: skip
        self.output_padding = self._size(output_padding, "output_padding")

    def forward(self, x: Any, output_size: Any = None) -> Tensor:
        """Transposed convolution of ``x`` of shape (N, C, *spatial) or (C, *spatial);
        ``output_size`` (the spatial sizes) picks the output_padding that gives it.
        """
        return self._convolve(x, output_size)


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution over (N, C, L) inputs; ``weight`` is (in, out / groups, k)."""

    spatial = 1
    op = _ops.conv_transpose1d


class ConvTranspose2d(_ConvTransposeNd):
    """Transposed 2-D convolution (the gradient of Conv2d with respect to its input).

    ``weight`` has shape ``(in_channels, out_channels / groups, kh, kw)``; the output has size
    ``(H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1``.
    ``layer(x, output_size=(H', W'))`` picks the output_padding that gives that size.
    """

    op = _ops.conv_transpose2d


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution over (N, C, D, H, W) inputs; ``weight`` is
    ``(in_channels, out_channels / groups, kd, kh, kw)``, as in torch.
    """

    spatial = 3
    op = _volume.conv_transpose3d
