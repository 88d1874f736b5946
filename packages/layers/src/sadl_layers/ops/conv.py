"""2-D convolution and pooling (NCHW), each a fused op with an analytic backward.

``conv2d`` is im2col + GEMM: a read-only window view of the padded input
(``sliding_window_view``) is copied once into columns and multiplied by the weight, one GEMM per
image and group. Its two gradients are ops of their own, and the three form a closed family
(each one's gradient is another one of them), so second derivatives need no extra code:

* ``conv2d(x, w)``                      -> y
* ``conv2d_input_grad(g, w)``  = d<y, g>/dx (a transposed convolution, col2im by a small loop
  over the kh*kw kernel offsets)
* ``conv2d_weight_grad(x, g)`` = d<y, g>/dw (im2col + GEMM)

Pooling works the same way with a loop over kernel offsets: ``max_pool2d`` routes the gradient
to the first maximum of each window (torch's choice), ``avg_pool2d`` spreads it evenly; their
backward ops are linear in the gradient and come with their own adjoints.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, shape_of

__all__ = ["conv2d", "max_pool2d", "avg_pool2d"]

_window_view = np.lib.stride_tricks.sliding_window_view


def pair(value: Any, fn: str, name: str) -> tuple[int, int]:
    """An int or a pair of ints as a pair of non-negative ints."""
    if isinstance(value, int | np.integer):
        out = (int(value), int(value))
    else:
        try:
            items = tuple(int(v) for v in value)
        except TypeError:
            items = ()
        if len(items) != 2:
            raise ValueError(f"{fn}: {name} must be an int or a pair of ints, got {value!r}")
        out = (items[0], items[1])
    if min(out) < 0:
        raise ValueError(f"{fn}: {name} must be non-negative, got {value!r}")
    return out


class _Geometry:
    """Kernel, stride, padding and dilation of a 2-D sliding window, and the output size."""

    __slots__ = ("Ho", "Wo", "dh", "dw", "kh", "kw", "ph", "pw", "sh", "sw")

    def __init__(self, fn, hw, kernel, stride, padding, dilation, arg="input"):
        self.kh, self.kw = pair(kernel, fn, "kernel_size")
        self.sh, self.sw = pair(stride, fn, "stride")
        self.ph, self.pw = pair(padding, fn, "padding")
        self.dh, self.dw = pair(dilation, fn, "dilation")
        if min(self.kh, self.kw, self.sh, self.sw, self.dh, self.dw) < 1:
            raise ValueError(
                f"{fn}: kernel_size, stride and dilation must be positive, got kernel_size="
                f"{kernel!r}, stride={stride!r}, dilation={dilation!r}"
            )
        H, W = hw
        span_h = self.dh * (self.kh - 1) + 1
        span_w = self.dw * (self.kw - 1) + 1
        self.Ho = (H + 2 * self.ph - span_h) // self.sh + 1
        self.Wo = (W + 2 * self.pw - span_w) // self.sw + 1
        if self.Ho < 1 or self.Wo < 1:
            raise ValueError(
                f"{fn}: the {span_h}x{span_w} kernel (with dilation) does not fit the padded "
                f"{arg} of spatial size {H + 2 * self.ph}x{W + 2 * self.pw}"
            )

    def offsets(self):
        """(i, j, rows, cols): the strided slice of the padded input seen by kernel tap (i, j)."""
        for i in range(self.kh):
            r0 = i * self.dh
            rows = slice(r0, r0 + self.sh * (self.Ho - 1) + 1, self.sh)
            for j in range(self.kw):
                c0 = j * self.dw
                yield i, j, rows, slice(c0, c0 + self.sw * (self.Wo - 1) + 1, self.sw)

    def pad(self, x, value=0.0):
        """The input padded on its last two axes (with ``value``)."""
        if not (self.ph or self.pw):
            return x
        H, W = x.shape[-2:]
        shape = (*x.shape[:-2], H + 2 * self.ph, W + 2 * self.pw)
        padded = array_module(x).full(shape, value, dtype=x.dtype)
        padded[..., self.ph : self.ph + H, self.pw : self.pw + W] = x
        return padded

    def crop(self, padded, hw):
        """The unpadded part of a padded array."""
        H, W = hw
        return padded[..., self.ph : self.ph + H, self.pw : self.pw + W]

    def windows(self, x):
        """Read-only view (N, C, kh, kw, Ho, Wo) of the padded input's windows."""
        padded = self.pad(x)
        span = (self.dh * (self.kh - 1) + 1, self.dw * (self.kw - 1) + 1)
        win = _window_view(padded, span, axis=(-2, -1))  # (..., Hs, Ws, span_h, span_w)
        win = win[..., :: self.sh, :: self.sw, :: self.dh, :: self.dw]
        win = win[..., : self.Ho, : self.Wo, :, :]
        nd = win.ndim
        return win.transpose(*range(nd - 4), nd - 2, nd - 1, nd - 4, nd - 3)


# -------------------------------------------------------------------------------- conv2d


def _conv_setup(fn, x_shape, w_shape, stride, padding, dilation, groups):
    if len(x_shape) != 4:
        raise ValueError(f"{fn}: input must have shape (N, C, H, W), got {tuple(x_shape)}")
    if len(w_shape) != 4:
        raise ValueError(
            f"{fn}: weight must have shape (out_channels, in_channels / groups, kh, kw), got "
            f"{tuple(w_shape)}"
        )
    groups = int(groups)
    _, C, H, W = x_shape
    Co, Cg, kh, kw = w_shape
    if groups < 1 or C % groups or Co % groups:
        raise ValueError(
            f"{fn}: groups={groups} must be positive and divide in_channels={C} and "
            f"out_channels={Co}"
        )
    if Cg * groups != C:
        raise ValueError(
            f"{fn}: input has shape {tuple(x_shape)} with {C} channels, expected "
            f"(N, {Cg * groups}, H, W) for weight of shape {tuple(w_shape)} and groups={groups}"
        )
    geo = _Geometry(fn, (H, W), (kh, kw), stride, padding, dilation)
    return geo, groups


def _im2col(x, geo, groups):
    """(N, G, C/G * kh * kw, Ho * Wo) columns of x (one copy)."""
    N = x.shape[0]
    return geo.windows(x).reshape(N, groups, -1, geo.Ho * geo.Wo)


def _conv2d(x, weight, bias, *, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), plus bias."""
    check_float("conv2d", "input", x)
    check_float("conv2d", "weight", weight)
    geo, G = _conv_setup("conv2d", x.shape, weight.shape, stride, padding, dilation, groups)
    Co = weight.shape[0]
    if bias is not None and shape_of(bias) != (Co,):
        raise ValueError(f"conv2d: bias has shape {shape_of(bias)}, expected ({Co},)")
    N = x.shape[0]
    out = np.matmul(weight.reshape(G, Co // G, -1), _im2col(x, geo, G))  # (N, G, Co/G, L)
    out = out.reshape(N, Co, geo.Ho, geo.Wo)
    if bias is not None:
        out += bias.reshape(Co, 1, 1)
    return out


def _conv2d_input_grad(g, weight, *, x_shape, stride=1, padding=0, dilation=1, groups=1):
    """d<conv2d(x, w), g>/dx: the transposed convolution of g with w (col2im)."""
    geo, G = _conv_setup("conv2d", x_shape, weight.shape, stride, padding, dilation, groups)
    N, C, H, W = x_shape
    Co = weight.shape[0]
    w2 = weight.reshape(G, Co // G, -1)
    g2 = g.reshape(N, G, Co // G, geo.Ho * geo.Wo)
    cols = np.matmul(np.swapaxes(w2, -1, -2), g2)  # (N, G, K, L)
    cols = cols.reshape(N, C, geo.kh, geo.kw, geo.Ho, geo.Wo)
    gxp = array_module(cols).zeros((N, C, H + 2 * geo.ph, W + 2 * geo.pw), dtype=cols.dtype)
    for i, j, rows, cols_ in geo.offsets():
        gxp[:, :, rows, cols_] += cols[:, :, i, j]
    return geo.crop(gxp, (H, W))


def _conv2d_weight_grad(x, g, *, w_shape, stride=1, padding=0, dilation=1, groups=1):
    """d<conv2d(x, w), g>/dw: g against the im2col columns of x, summed over the batch."""
    geo, G = _conv_setup("conv2d", x.shape, w_shape, stride, padding, dilation, groups)
    N = x.shape[0]
    Co = w_shape[0]
    g2 = g.reshape(N, G, Co // G, geo.Ho * geo.Wo)
    cols = _im2col(x, geo, G)
    gw = np.matmul(g2, np.swapaxes(cols, -1, -2)).sum(axis=0)  # (G, Co/G, K)
    return gw.reshape(w_shape)


def _conv2d_grad_x(g, out, x, weight, bias, **params):
    return CONV2D_INPUT_GRAD(g, weight, x_shape=shape_of(x), **params)


def _conv2d_grad_w(g, out, x, weight, bias, **params):
    return CONV2D_WEIGHT_GRAD(x, g, w_shape=shape_of(weight), **params)


def _conv2d_grad_b(g, out, x, weight, bias, **params):
    return np.einsum("nohw->o", g)  # einsum: twice as fast as np.sum over three axes


conv2d: OpDef = OpDef(
    "conv2d",
    _conv2d,
    (_conv2d_grad_x, _conv2d_grad_w, _conv2d_grad_b),
    examples=(
        Example((2, 3, 5, 5), (4, 3, 3, 3), (4,)),
        Example((1, 2, 6, 5), (3, 2, 3, 2), None, stride=2, padding=1),
        Example((1, 2, 7, 7), (2, 2, 3, 3), (2,), dilation=2, padding=(2, 1)),
        Example((2, 4, 4, 4), (6, 2, 2, 2), (6,), groups=2, stride=(1, 2)),
        Example((1, 4, 5, 5), (4, 1, 3, 3), None, groups=4, padding=1),
    ),
)
CONV2D_INPUT_GRAD: OpDef = OpDef(
    "conv2d_input_grad",
    _conv2d_input_grad,
    (
        lambda gg, out, g, w, *, x_shape, **p: conv2d(gg, w, None, **p),
        lambda gg, out, g, w, *, x_shape, **p: CONV2D_WEIGHT_GRAD(gg, g, w_shape=shape_of(w), **p),
    ),
    examples=(
        Example((2, 4, 3, 3), (4, 3, 3, 3), x_shape=(2, 3, 5, 5)),
        Example((1, 3, 3, 3), (3, 2, 3, 2), x_shape=(1, 2, 6, 5), stride=2, padding=1),
        Example((2, 6, 3, 2), (6, 2, 2, 2), x_shape=(2, 4, 4, 4), groups=2, stride=(1, 2)),
    ),
)
CONV2D_WEIGHT_GRAD: OpDef = OpDef(
    "conv2d_weight_grad",
    _conv2d_weight_grad,
    (
        lambda gg, out, x, g, *, w_shape, **p: CONV2D_INPUT_GRAD(g, gg, x_shape=shape_of(x), **p),
        lambda gg, out, x, g, *, w_shape, **p: conv2d(x, gg, None, **p),
    ),
    examples=(
        Example((2, 3, 5, 5), (2, 4, 3, 3), w_shape=(4, 3, 3, 3)),
        Example((1, 2, 7, 7), (1, 2, 7, 5), w_shape=(2, 2, 3, 3), dilation=2, padding=(2, 1)),
        Example((2, 4, 4, 4), (2, 6, 3, 2), w_shape=(6, 2, 2, 2), groups=2, stride=(1, 2)),
    ),
)


# ----------------------------------------------------------------------------- pooling


def _pool_setup(fn, x, kernel_size, stride, padding, dilation=1):
    check_float(fn, "input", x)
    if np.ndim(x) < 3:
        raise ValueError(
            f"{fn}: input must have shape (N, C, H, W) or (C, H, W), got {shape_of(x)}"
        )
    hw = shape_of(x)[-2:]
    geo = _Geometry(
        fn, hw, kernel_size, kernel_size if stride is None else stride, padding, dilation
    )
    if geo.ph > geo.kh // 2 or geo.pw > geo.kw // 2:
        raise ValueError(
            f"{fn}: padding {(geo.ph, geo.pw)} must be at most half the kernel size "
            f"{(geo.kh, geo.kw)}"
        )
    return geo


def _window_max(padded, geo):
    """The maximum of each window of the (-inf) padded input."""
    out = None
    for _, _, rows, cols in geo.offsets():
        tap = padded[..., rows, cols]
        if out is None:
            out = tap.copy()
        else:
            np.maximum(out, tap, out=out)
    return out


def _first_max_taps(x, geo):
    """(rows, cols, hit) per kernel tap: ``hit`` marks the windows whose FIRST maximum (in
    row-major kernel order, torch's choice on ties) is that tap's element.

    ``hit`` is a buffer reused from tap to tap: use it before asking for the next one.
    """
    padded = geo.pad(x, -np.inf)
    best = _window_max(padded, geo)
    xp = array_module(x)
    hit = xp.empty(best.shape, dtype=bool)
    claimed = xp.zeros(best.shape, dtype=bool)
    for _, _, rows, cols in geo.offsets():
        np.equal(padded[..., rows, cols], best, out=hit)
        np.greater(hit, claimed, out=hit)  # a maximum not claimed by an earlier tap
        np.logical_or(claimed, hit, out=claimed)
        yield rows, cols, hit


def _max_pool2d(x, *, kernel_size, stride=None, padding=0, dilation=1):
    """Maximum over each kh x kw window (padding counts as -inf)."""
    geo = _pool_setup("max_pool2d", x, kernel_size, stride, padding, dilation)
    return _window_max(geo.pad(x, -np.inf), geo)


def _tiles(geo):
    """True when the windows are disjoint and tile the input's top-left corner.

    That is stride == kernel, no padding, no dilation: every element then belongs to at most one
    window.
    """
    return (
        (geo.sh, geo.sw) == (geo.kh, geo.kw)
        and (geo.dh, geo.dw) == (1, 1)
        and not (geo.ph or geo.pw)
    )


def _max_pool2d_backward(g, x, *, kernel_size, stride=None, padding=0, dilation=1):
    """Scatter g to the first maximum of each window of x (the gradient of max_pool2d)."""
    geo = _pool_setup("max_pool2d", x, kernel_size, stride, padding, dilation)
    H, W = shape_of(x)[-2:]
    lead = shape_of(x)[:-2]
    xp = array_module(g)
    if _tiles(geo):
        # Disjoint windows: write each tap's share straight into place, no zero-fill and no
        # read-modify-write (only the rows/columns no window covers are zeroed).
        gx = xp.empty((*lead, H, W), dtype=g.dtype)
        gx[..., geo.Ho * geo.kh :, :] = 0
        gx[..., :, geo.Wo * geo.kw :] = 0
        for rows, cols, hit in _first_max_taps(x, geo):
            np.multiply(g, hit, out=gx[..., rows, cols])
        return gx
    gxp = xp.zeros((*lead, H + 2 * geo.ph, W + 2 * geo.pw), dtype=g.dtype)
    part = xp.empty_like(g)
    for rows, cols, hit in _first_max_taps(x, geo):
        np.multiply(g, hit, out=part)
        gxp[..., rows, cols] += part
    return geo.crop(gxp, (H, W))


def _max_pool2d_gather(a, x, *, kernel_size, stride=None, padding=0, dilation=1):
    """For each window of x, the value of ``a`` (shaped like x) at the window's first maximum."""
    geo = _pool_setup("max_pool2d", x, kernel_size, stride, padding, dilation)
    ap = geo.pad(a)
    out = array_module(a).zeros((*shape_of(x)[:-2], geo.Ho, geo.Wo), dtype=a.dtype)
    for rows, cols, hit in _first_max_taps(x, geo):
        out += ap[..., rows, cols] * hit
    return out


MAX_POOL2D_BACKWARD: OpDef = OpDef(
    "max_pool2d_backward",
    _max_pool2d_backward,
    (lambda gg, out, g, x, **p: MAX_POOL2D_GATHER(gg, x, **p), lambda gg, out, g, x, **p: None),
    examples=(Example((1, 2, 2, 2), (1, 2, 4, 5), kernel_size=2),),
)
MAX_POOL2D_GATHER: OpDef = OpDef(
    "max_pool2d_gather",
    _max_pool2d_gather,
    (lambda gg, out, a, x, **p: MAX_POOL2D_BACKWARD(gg, x, **p), lambda gg, out, a, x, **p: None),
    examples=(Example((1, 2, 4, 5), (1, 2, 4, 5), kernel_size=2),),
)
max_pool2d: OpDef = OpDef(
    "max_pool2d",
    _max_pool2d,
    (lambda g, out, x, **p: MAX_POOL2D_BACKWARD(g, x, **p),),
    examples=(
        Example((2, 3, 4, 4), kernel_size=2),
        Example((1, 2, 5, 6), kernel_size=3, stride=2, padding=1),
        Example((1, 1, 6, 6), kernel_size=(2, 3), stride=(1, 2), dilation=2),
        Example((2, 5, 5), kernel_size=2, stride=1),
    ),
    # ties inside a window: the first maximum takes the gradient, as in torch
    singular_points=(Example(np.array([[[[1.0, 1.0], [0.0, 1.0]]]]), kernel_size=2),),
)


def _avg_divisor(geo, hw, count_include_pad, like):
    """The number each window sum is divided by: kh*kw, or the real elements it covers (an
    array made where ``like`` lives, with its dtype).
    """
    if count_include_pad or not (geo.ph or geo.pw):
        return 1.0 / (geo.kh * geo.kw)
    xp = array_module(like)
    ones = geo.pad(xp.ones(hw, dtype=like.dtype))
    count = xp.zeros((geo.Ho, geo.Wo), dtype=like.dtype)
    for _, _, rows, cols in geo.offsets():
        count += ones[rows, cols]
    return 1.0 / count


def _avg_pool2d(x, *, kernel_size, stride=None, padding=0, count_include_pad=True):
    """Mean over each kh x kw window (zero padding; divisor per ``count_include_pad``)."""
    geo = _pool_setup("avg_pool2d", x, kernel_size, stride, padding)
    padded = geo.pad(x)
    out = None
    for _, _, rows, cols in geo.offsets():
        tap = padded[..., rows, cols]
        out = tap.copy() if out is None else np.add(out, tap, out=out)
    out *= _avg_divisor(geo, shape_of(x)[-2:], count_include_pad, x)
    return out


def _avg_pool2d_backward(
    g, *, x_shape, kernel_size, stride=None, padding=0, count_include_pad=True
):
    """Spread g evenly over each window (the gradient of avg_pool2d, linear in g)."""
    hw = tuple(x_shape[-2:])
    geo = _Geometry(
        "avg_pool2d", hw, kernel_size, kernel_size if stride is None else stride, padding, 1
    )
    gs = g * _avg_divisor(geo, hw, count_include_pad, g)
    shape = (*x_shape[:-2], hw[0] + 2 * geo.ph, hw[1] + 2 * geo.pw)
    gxp = array_module(g).zeros(shape, dtype=g.dtype)
    for _, _, rows, cols in geo.offsets():
        gxp[..., rows, cols] += gs
    return geo.crop(gxp, hw)


AVG_POOL2D_BACKWARD: OpDef = OpDef(
    "avg_pool2d_backward",
    _avg_pool2d_backward,
    (lambda gg, out, g, *, x_shape, **p: avg_pool2d(gg, **p),),
    examples=(
        Example((1, 2, 2, 2), x_shape=(1, 2, 4, 5), kernel_size=2),
        Example(
            (1, 1, 3, 3),
            x_shape=(1, 1, 5, 5),
            kernel_size=3,
            stride=2,
            padding=1,
            count_include_pad=False,
        ),
    ),
)
avg_pool2d: OpDef = OpDef(
    "avg_pool2d",
    _avg_pool2d,
    (lambda g, out, x, **p: AVG_POOL2D_BACKWARD(g, x_shape=shape_of(x), **p),),
    examples=(
        Example((2, 3, 4, 4), kernel_size=2),
        Example((1, 2, 5, 6), kernel_size=3, stride=2, padding=1),
        Example((1, 2, 5, 6), kernel_size=3, stride=2, padding=1, count_include_pad=False),
        Example((2, 5, 5), kernel_size=(2, 3), stride=1),
    ),
)

INTERNAL_OPS = (
    CONV2D_INPUT_GRAD,
    CONV2D_WEIGHT_GRAD,
    MAX_POOL2D_BACKWARD,
    MAX_POOL2D_GATHER,
    AVG_POOL2D_BACKWARD,
)
