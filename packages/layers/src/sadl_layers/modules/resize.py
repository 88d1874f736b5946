"""Upsample (torch.nn's name and arguments) and its two fixed-mode forms."""

from __future__ import annotations

from typing import Any

from sadl import Tensor

from sadl_layers.modules._base import Layer, as_tensor
from sadl_layers.ops import resize as _ops

__all__ = ["Upsample", "UpsamplingNearest2d", "UpsamplingBilinear2d"]


class Upsample(Layer):
    """Resize (N, C, L), (N, C, H, W) or (N, C, D, H, W) inputs to ``size`` or by
    ``scale_factor``: :func:`~sadl_layers.ops.resize.interpolate` as a layer.

    ``mode``: ``nearest`` (default), ``nearest-exact``, ``linear`` / ``bilinear`` /
    ``trilinear`` (with ``align_corners``) or ``area``.
    """

    def __init__(
        self,
        size: Any = None,
        scale_factor: Any = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        if (size is None) == (scale_factor is None):
            raise ValueError(f"{type(self).__name__}: give exactly one of size and scale_factor")
        self.size = size
        self.scale_factor = scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Any) -> Tensor:
        """The resized input."""
        out: Tensor = self.call_op(
            _ops.interpolate,
            as_tensor(x),
            size=self.size,
            scale_factor=self.scale_factor,
            mode=self.mode,
            align_corners=self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )
        return out

    def extra_repr(self) -> str:
        """Size or scale, and mode."""
        target = (
            f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        )
        corners = "" if self.align_corners is None else f", align_corners={self.align_corners}"
        return f"{target}, mode={self.mode!r}{corners}"


class UpsamplingNearest2d(Upsample):
    """Nearest-neighbour upsampling of (N, C, H, W): ``Upsample(..., mode="nearest")``."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling of (N, C, H, W) with ``align_corners=True`` (torch's choice here)."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
