"""Max and average pooling over 2-D (NCHW) and 1-D (NCL) windows, with torch's options.

Each pool is a loop over the kernel taps of the window geometry (:mod:`._window`) with one
whole-array NumPy call per tap. ``max_pool2d`` routes the gradient to the FIRST maximum of each
window (torch's choice on ties); ``avg_pool2d`` spreads it evenly. Their backward ops are linear
in the gradient and come with their own adjoints, so second derivatives work.

``ceil_mode`` lets the last window hang over the bottom/right edge (it then covers fewer
elements; the average divides by what torch divides by). ``return_indices=True`` also returns,
per output element, the flat index ``h * W + w`` of its maximum in the input plane, as torch
does: ``max_pool2d`` is a composite of two ops, the values (differentiable) and the indices
(not). The 1-D pools are the 2-D ones on a height-1 view.
"""

from __future__ import annotations

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, check_real, lowest, shape_of
from sadl_layers.ops._window import Geometry
from sadl_layers.ops.conv import drop_height, single

__all__ = ["max_pool2d", "avg_pool2d", "max_pool1d", "avg_pool1d"]


def _pool_setup(fn, x_shape, kernel_size, stride, padding, dilation=1, ceil_mode=False):
    if len(x_shape) < 3:
        raise ValueError(
            f"{fn}: input must have shape (N, C, H, W) or (C, H, W), got {tuple(x_shape)}"
        )
    stride = kernel_size if stride is None else stride
    geo = Geometry(
        fn, tuple(x_shape[-2:]), kernel_size, stride, padding, dilation, ceil_mode=ceil_mode
    )
    if geo.ph > geo.kh // 2 or geo.pw > geo.kw // 2:
        raise ValueError(
            f"{fn}: padding {(geo.ph, geo.pw)} must be at most half the kernel size "
            f"{(geo.kh, geo.kw)}"
        )
    return geo


# ------------------------------------------------------------------------------- max pool


def _window_max(xp, geo):
    """The maximum of each window of the (-inf) padded input."""
    out = None
    for _, _, rows, cols in geo.offsets():
        tap = xp[..., rows, cols]
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
    xp = geo.pad(x, lowest(x.dtype))
    best = _window_max(xp, geo)
    module = array_module(x)
    hit = module.empty(best.shape, dtype=bool)
    claimed = module.zeros(best.shape, dtype=bool)
    for _, _, rows, cols in geo.offsets():
        np.equal(xp[..., rows, cols], best, out=hit)
        np.greater(hit, claimed, out=hit)  # a maximum not claimed by an earlier tap
        np.logical_or(claimed, hit, out=claimed)
        yield rows, cols, hit


def _max_geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    check_real("max_pool2d", "input", x)  # integers too (a uint8 image), as in torch
    return _pool_setup("max_pool2d", shape_of(x), kernel_size, stride, padding, dilation, ceil_mode)


def _max_pool2d_values(x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Maximum over each kh x kw window (padding counts as -inf)."""
    geo = _max_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    return _window_max(geo.pad(x, lowest(x.dtype)), geo)


def _tiles(geo):
    """True when the windows are disjoint and tile the input's top-left corner.

    That is stride == kernel, no padding (nor ceil-mode overhang), no dilation: every element
    then belongs to at most one window.
    """
    return (
        (geo.sh, geo.sw) == (geo.kh, geo.kw)
        and (geo.dh, geo.dw) == (1, 1)
        and not (geo.ph or geo.pw or geo.eh or geo.ew)
    )


def _max_pool2d_backward(g, x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """Scatter g to the first maximum of each window of x (the gradient of max_pool2d)."""
    geo = _max_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
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
    gxp = xp.zeros(geo.padded_shape(shape_of(x)), dtype=g.dtype)
    part = xp.empty_like(g)
    for rows, cols, hit in _first_max_taps(x, geo):
        np.multiply(g, hit, out=part)
        gxp[..., rows, cols] += part
    return geo.crop(gxp, (H, W))


def _max_pool2d_gather(a, x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """For each window of x, the value of ``a`` (shaped like x) at the window's first maximum."""
    geo = _max_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    ap = geo.pad(a)
    out = array_module(a).zeros((*shape_of(x)[:-2], geo.Ho, geo.Wo), dtype=a.dtype)
    for rows, cols, hit in _first_max_taps(x, geo):
        out += ap[..., rows, cols] * hit
    return out


def _max_pool2d_indices(x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False):
    """The flat index h * W + w, in its input plane, of each window's first maximum (int64)."""
    geo = _max_geometry(x, kernel_size, stride, padding, dilation, ceil_mode)
    H, W = shape_of(x)[-2:]
    xp = array_module(x)
    positions = geo.pad(xp.arange(H * W, dtype=np.int64).reshape(H, W), -1)
    out = xp.zeros((*shape_of(x)[:-2], geo.Ho, geo.Wo), dtype=np.int64)
    for rows, cols, hit in _first_max_taps(x, geo):
        xp.copyto(out, positions[rows, cols], where=hit)
    return out


_MAX_EXAMPLES = (
    Example((2, 3, 4, 4), kernel_size=2),
    Example((1, 2, 5, 6), kernel_size=3, stride=2, padding=1),
    Example((1, 1, 6, 6), kernel_size=(2, 3), stride=(1, 2), dilation=2),
    Example((2, 5, 5), kernel_size=2, stride=1),
    Example((1, 2, 5, 7), kernel_size=2, ceil_mode=True),
    Example((1, 1, 6, 5), kernel_size=3, stride=2, padding=1, ceil_mode=True),
)
MAX_POOL2D_BACKWARD: OpDef = OpDef(
    "max_pool2d_backward",
    _max_pool2d_backward,
    (lambda gg, out, g, x, **p: MAX_POOL2D_GATHER(gg, x, **p), lambda gg, out, g, x, **p: None),
    examples=(
        Example((1, 2, 2, 2), (1, 2, 4, 5), kernel_size=2),
        Example((1, 2, 3, 3), (1, 2, 5, 5), kernel_size=2, ceil_mode=True),
    ),
)
MAX_POOL2D_GATHER: OpDef = OpDef(
    "max_pool2d_gather",
    _max_pool2d_gather,
    (lambda gg, out, a, x, **p: MAX_POOL2D_BACKWARD(gg, x, **p), lambda gg, out, a, x, **p: None),
    examples=(Example((1, 2, 4, 5), (1, 2, 4, 5), kernel_size=2),),
)
MAX_POOL2D_VALUES: OpDef = OpDef(
    "max_pool2d_values",
    _max_pool2d_values,
    (lambda g, out, x, **p: MAX_POOL2D_BACKWARD(g, x, **p),),
    examples=_MAX_EXAMPLES,
)
MAX_POOL2D_INDICES: OpDef = OpDef(
    "max_pool2d_indices", _max_pool2d_indices, differentiable=False, examples=_MAX_EXAMPLES
)


def _max_pool2d(
    x,
    *,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    """Maximum over each kh x kw window of x (N, C, H, W) or (C, H, W); padding counts as -inf.

    ``x`` may be an integer array (a uint8 image): the result keeps its dtype, as in torch.

    ``stride`` defaults to the kernel size. With ``return_indices`` the result is
    ``(values, indices)``, the indices flat positions ``h * W + w`` in each input plane.
    """
    params = {
        "kernel_size": kernel_size,
        "stride": stride,
        "padding": padding,
        "dilation": dilation,
        "ceil_mode": bool(ceil_mode),
    }
    values = MAX_POOL2D_VALUES(x, **params)
    if return_indices:
        return values, MAX_POOL2D_INDICES(x, **params)
    return values


max_pool2d: OpDef = OpDef(
    "max_pool2d",
    _max_pool2d,
    composite=True,
    examples=(
        *_MAX_EXAMPLES,
        Example((1, 2, 5, 5), kernel_size=2, ceil_mode=True, return_indices=True),
    ),
    # ties inside a window: the first maximum takes the gradient, as in torch
    singular_points=(Example(np.array([[[[1.0, 1.0], [0.0, 1.0]]]]), kernel_size=2),),
)


# --------------------------------------------------------------------------- average pool


def _avg_divisor(geo, hw, count_include_pad, divisor_override, like):
    """The factor each window sum is multiplied by: 1 / (elements divided by), as torch counts
    them (``count_include_pad``: padding counts, a ceil-mode overhang never does).
    """
    if divisor_override:
        return 1.0 / divisor_override
    overhang = geo.eh or geo.ew
    if not overhang and (count_include_pad or not (geo.ph or geo.pw)):
        return 1.0 / (geo.kh * geo.kw)
    H, W = hw
    xp = array_module(like)
    counted = xp.zeros(geo.padded_shape(hw), dtype=like.dtype)
    if count_include_pad:
        counted[: H + 2 * geo.ph, : W + 2 * geo.pw] = 1
    else:
        counted[geo.ph : geo.ph + H, geo.pw : geo.pw + W] = 1
    count = xp.zeros((geo.Ho, geo.Wo), dtype=like.dtype)
    for _, _, rows, cols in geo.offsets():
        count += counted[rows, cols]
    return 1.0 / count


def _check_divisor(divisor_override):
    if divisor_override is not None and (
        isinstance(divisor_override, bool)
        or not isinstance(divisor_override, int | np.integer)
        or divisor_override < 1
    ):
        raise ValueError(
            f"avg_pool2d: divisor_override must be a positive integer or None, got "
            f"{divisor_override!r}"
        )


def _avg_pool2d(
    x,
    *,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Mean over each kh x kw window (zero padding; divisor per ``count_include_pad``)."""
    check_float("avg_pool2d", "input", x)
    _check_divisor(divisor_override)
    geo = _pool_setup("avg_pool2d", shape_of(x), kernel_size, stride, padding, 1, ceil_mode)
    xp = geo.pad(x)
    out = None
    for _, _, rows, cols in geo.offsets():
        tap = xp[..., rows, cols]
        out = tap.copy() if out is None else np.add(out, tap, out=out)
    out *= _avg_divisor(geo, shape_of(x)[-2:], count_include_pad, divisor_override, x)
    return out


def _avg_pool2d_backward(
    g,
    *,
    x_shape,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Spread g evenly over each window (the gradient of avg_pool2d, linear in g)."""
    hw = tuple(x_shape[-2:])
    geo = _pool_setup("avg_pool2d", x_shape, kernel_size, stride, padding, 1, ceil_mode)
    gs = g * _avg_divisor(geo, hw, count_include_pad, divisor_override, g)
    gxp = array_module(g).zeros(geo.padded_shape(tuple(x_shape)), dtype=g.dtype)
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
        Example((1, 1, 3, 2), x_shape=(1, 1, 5, 4), kernel_size=2, ceil_mode=True),
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
        Example((1, 2, 5, 6), kernel_size=3, stride=2, padding=1, ceil_mode=True),
        Example(
            (1, 1, 6, 5),
            kernel_size=2,
            padding=1,
            ceil_mode=True,
            count_include_pad=False,
        ),
        Example((1, 2, 4, 4), kernel_size=3, stride=1, divisor_override=4),
    ),
)


# ------------------------------------------------------------------------------------ 1-D


def _params_1d(fn, x, kernel_size, stride, padding, dilation=1):
    """The 2-D parameters of a 1-D pool, and the input as (..., 1, L)."""
    if np.ndim(x) not in (2, 3):
        raise ValueError(f"{fn}: input must have shape (N, C, L) or (C, L), got {shape_of(x)}")
    k = single(kernel_size, fn, "kernel_size")
    s = k if stride is None else single(stride, fn, "stride")
    params = {
        "kernel_size": (1, k),
        "stride": (1, s),
        "padding": (0, single(padding, fn, "padding")),
    }
    if dilation != 1:
        params["dilation"] = (1, single(dilation, fn, "dilation"))
    shape = shape_of(x)
    return params, np.reshape(x, (*shape[:-1], 1, shape[-1]))


def _max_pool1d(
    x,
    *,
    kernel_size,
    stride=None,
    padding=0,
    dilation=1,
    ceil_mode=False,
    return_indices=False,
):
    """Maximum over each window of length ``kernel_size`` of x (N, C, L) or (C, L).

    With ``return_indices`` the result is ``(values, indices)``, the indices positions in L.
    """
    params, x2 = _params_1d("max_pool1d", x, kernel_size, stride, padding, dilation)
    params["ceil_mode"] = bool(ceil_mode)
    values = drop_height(MAX_POOL2D_VALUES(x2, **params))
    if return_indices:
        return values, drop_height(MAX_POOL2D_INDICES(x2, **params))
    return values


max_pool1d: OpDef = OpDef(
    "max_pool1d",
    _max_pool1d,
    composite=True,
    examples=(
        Example((2, 3, 8), kernel_size=2),
        Example((1, 2, 9), kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True),
        Example((3, 7), kernel_size=3, return_indices=True),
    ),
)


def _avg_pool1d(x, *, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Mean over each window of length ``kernel_size`` of x (N, C, L) or (C, L)."""
    params, x2 = _params_1d("avg_pool1d", x, kernel_size, stride, padding)
    y = avg_pool2d(x2, ceil_mode=bool(ceil_mode), count_include_pad=count_include_pad, **params)
    return drop_height(y)


avg_pool1d: OpDef = OpDef(
    "avg_pool1d",
    _avg_pool1d,
    composite=True,
    examples=(
        Example((2, 3, 8), kernel_size=2),
        Example((1, 2, 9), kernel_size=3, stride=2, padding=1, count_include_pad=False),
        Example((3, 7), kernel_size=2, ceil_mode=True),
    ),
)

INTERNAL_OPS = (
    MAX_POOL2D_VALUES,
    MAX_POOL2D_INDICES,
    MAX_POOL2D_BACKWARD,
    MAX_POOL2D_GATHER,
    AVG_POOL2D_BACKWARD,
)
