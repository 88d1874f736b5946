"""The geometry of a 2-D sliding window, shared by convolution and pooling.

Kernel size, stride, padding and dilation give the output size; a window is visited as one
strided slice of the padded input per kernel tap (:meth:`Geometry.offsets`), so convolution,
col2im and pooling are small loops over kh * kw taps of whole-array NumPy calls. 1-D ops reuse
all of it with a kernel of height 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from sadl.backends import array_module

__all__ = ["Geometry", "ntuple", "pair", "same_padding"]

_COUNT = {
    1: "an int or a 1-tuple of ints",
    2: "an int or a pair of ints",
    3: "an int or a triple of ints",
}


def ntuple(value: Any, n: int, fn: str, name: str) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints as ``n`` non-negative ints."""
    if isinstance(value, int | np.integer):
        out = (int(value),) * n
    else:
        try:
            items = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            items = ()
        if len(items) != n:
            raise ValueError(f"{fn}: {name} must be {_COUNT[n]}, got {value!r}")
        out = items
    if min(out) < 0:
        raise ValueError(f"{fn}: {name} must be non-negative, got {value!r}")
    return out


def pair(value: Any, fn: str, name: str) -> tuple[int, int]:
    """An int or a pair of ints as a pair of non-negative ints."""
    a, b = ntuple(value, 2, fn, name)
    return a, b


def same_padding(
    fn: str, padding: Any, kernel: tuple[int, ...], stride: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A convolution's ``padding`` as (before, after) per spatial axis; torch's strings too.

    ``"valid"`` is no padding; ``"same"`` (stride 1 only, as in torch) pads ``dilation *
    (kernel - 1)`` in total per axis, the odd one on the after side, as torch does.
    """
    n = len(kernel)
    if not isinstance(padding, str):
        p = ntuple(padding, n, fn, "padding")
        return p, p
    if padding == "valid":
        return (0,) * n, (0,) * n
    if padding != "same":
        raise ValueError(f"{fn}: padding must be {_COUNT[n]}, 'same' or 'valid', got {padding!r}")
    if any(s != 1 for s in ntuple(stride, n, fn, "stride")):
        raise ValueError(
            f"{fn}: padding='same' is not supported for strided convolutions (stride={stride!r}); "
            "pass stride=1 or a numeric padding"
        )
    total = [d * (k - 1) for d, k in zip(ntuple(dilation, n, fn, "dilation"), kernel)]
    return tuple(t // 2 for t in total), tuple(t - t // 2 for t in total)


def _out_size(n: int, pad: int, span: int, stride: int, ceil_mode: bool) -> int:
    """Torch's output length: floor (or ceil) of the window count, and with ``ceil_mode`` the
    last window must start inside the input or its left padding.
    """
    room = n + 2 * pad - span
    if room < 0:
        return 0
    if not ceil_mode:
        return room // stride + 1
    out = -(-room // stride) + 1
    if (out - 1) * stride >= n + pad:
        out -= 1
    return out


class Geometry:
    """Kernel, stride, padding and dilation of a 2-D sliding window, and the output size.

    With ``ceil_mode`` (pooling) the last window may hang over the bottom/right edge:
    ``eh``/``ew`` extra rows/columns of padding make room for it.
    """

    __slots__ = ("Ho", "Wo", "dh", "dw", "eh", "ew", "kh", "kw", "ph", "pw", "sh", "sw")

    def __init__(
        self,
        fn: str,
        hw: tuple[int, int],
        kernel: Any,
        stride: Any,
        padding: Any,
        dilation: Any,
        arg: str = "input",
        ceil_mode: bool = False,
        strings: bool = False,
    ) -> None:
        self.kh, self.kw = pair(kernel, fn, "kernel_size")
        self.sh, self.sw = pair(stride, fn, "stride")
        # A convolution's padding="same" may pad one more row/column after than before: that
        # row/column is the overhang (eh, ew) that ceil_mode pooling has too.
        if strings:
            (self.ph, self.pw), after = same_padding(
                fn, padding, (self.kh, self.kw), stride, dilation
            )
        else:
            self.ph, self.pw = after = pair(padding, fn, "padding")
        self.dh, self.dw = pair(dilation, fn, "dilation")
        if min(self.kh, self.kw, self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError(
                f"{fn}: kernel_size, stride and dilation must be positive, got kernel_size="
                f"{kernel!r}, stride={stride!r}, dilation={dilation!r}"
            )
        H, W = hw
        span_h = self.dh * (self.kh - 1) + 1
        span_w = self.dw * (self.kw - 1) + 1
        self.Ho = _out_size(H + after[0] - self.ph, self.ph, span_h, self.sh, ceil_mode)
        self.Wo = _out_size(W + after[1] - self.pw, self.pw, span_w, self.sw, ceil_mode)
        if self.Ho < 1 or self.Wo < 1:
            raise ValueError(
                f"{fn}: the {span_h}x{span_w} kernel (with dilation) does not fit the padded "
                f"{arg} of spatial size {H + 2 * self.ph}x{W + 2 * self.pw}"
            )
        self.eh = max(0, (self.Ho - 1) * self.sh + span_h - (H + 2 * self.ph))
        self.ew = max(0, (self.Wo - 1) * self.sw + span_w - (W + 2 * self.pw))

    def offsets(self) -> Iterator[tuple[int, int, slice, slice]]:
        """(i, j, rows, cols): the strided slice of the padded input seen by kernel tap (i, j)."""
        for i in range(self.kh):
            r0 = i * self.dh
            rows = slice(r0, r0 + self.sh * (self.Ho - 1) + 1, self.sh)
            for j in range(self.kw):
                c0 = j * self.dw
                yield i, j, rows, slice(c0, c0 + self.sw * (self.Wo - 1) + 1, self.sw)

    def padded_shape(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """The shape of an array of ``shape`` once padded on its last two axes."""
        H, W = shape[-2:]
        return (*shape[:-2], H + 2 * self.ph + self.eh, W + 2 * self.pw + self.ew)

    def pad(self, x: Any, value: float = 0.0) -> Any:
        """The input padded on its last two axes (with ``value``)."""
        if not (self.ph or self.pw or self.eh or self.ew):
            return x
        H, W = x.shape[-2:]
        xp = array_module(x).full(self.padded_shape(x.shape), value, dtype=x.dtype)
        xp[..., self.ph : self.ph + H, self.pw : self.pw + W] = x
        return xp

    def crop(self, xp: Any, hw: tuple[int, int]) -> Any:
        """The unpadded part of a padded array."""
        H, W = hw
        return xp[..., self.ph : self.ph + H, self.pw : self.pw + W]

    def windows_last(self, x: Any) -> Any:
        """Read-only view (N, Ho, Wo, kh, kw, C) of the windows of ``x`` (N, C, H, W), padded
        and copied channels last (N, H, W, C) first: a window's row of kw * C values (without
        dilation) is then contiguous, where the channels-first view's runs are Wo long.
        """
        N, C, H, W = x.shape
        Hp, Wp = self.padded_shape(x.shape)[2:]
        xp = array_module(x)
        if (Hp, Wp) == (H, W):
            hwc = xp.ascontiguousarray(x.transpose(0, 2, 3, 1))
        else:
            hwc = xp.zeros((N, Hp, Wp, C), dtype=x.dtype)
            hwc[:, self.ph : self.ph + H, self.pw : self.pw + W] = x.transpose(0, 2, 3, 1)
        # (N, C, Ho, Wo, kh, kw) over the channels-last memory, then the channels last
        return self._slide(hwc.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 4, 5, 1)

    def windows(self, x: Any) -> Any:
        """Read-only view (N, C, kh, kw, Ho, Wo) of the padded input's windows."""
        win = self._slide(self.pad(x))
        nd = win.ndim
        return win.transpose(*range(nd - 4), nd - 2, nd - 1, nd - 4, nd - 3)

    def _slide(self, padded: Any) -> Any:
        """Read-only view (..., Ho, Wo, kh, kw) of the windows of an already padded array."""
        span = (self.dh * (self.kh - 1) + 1, self.dw * (self.kw - 1) + 1)
        window_view = array_module(padded).lib.stride_tricks.sliding_window_view
        win = window_view(padded, span, axis=(-2, -1))  # (..., Hs, Ws, span_h, span_w)
        win = win[..., :: self.sh, :: self.sw, :: self.dh, :: self.dw]
        return win[..., : self.Ho, : self.Wo, :, :]
