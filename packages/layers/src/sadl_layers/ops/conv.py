"""Convolutions (NCHW and NCL): conv2d, its transpose, and their 1-D forms.

``conv2d`` is im2col + GEMM: a read-only window view of the padded input
(``sliding_window_view``) is copied into an unrolled matrix and multiplied by the weight. The
matrix is made a block of images at a time (:data:`COLUMN_BYTES` at most, at least one image),
never for the whole batch at once: the unrolled input of a batch of 512 28x28 images through a
5x5 convolution of 32 channels is 650 MB, a block of it stays in the cache between its copy and
its GEMM. Without groups it is made channels last when that copies longer contiguous runs
(:func:`_channels_last`): one row of kh * kw * C values per output position, from an
(N, H, W, C) copy of the input, one (n * Ho * Wo, K) @ (K, Co) GEMM a block; otherwise
channels-first columns, one GEMM per image and group. A row's dot product does not depend on
the rows beside it, so the forward and the input gradient do not depend on the block size (the
weight gradient sums the blocks' partial sums). Its two gradients are ops of their own, and the
three form a closed family (each one's gradient is another one of them), so second
derivatives need no extra code:

* ``conv2d(x, w)``                      -> y
* ``conv2d_input_grad(g, w)``  = d<y, g>/dx (a transposed convolution: at stride 1 the
  forward's im2col + GEMM on the zero-padded g with the flipped kernel, otherwise a small loop
  over the kh*kw kernel offsets)
* ``conv2d_weight_grad(x, g)`` = d<y, g>/dw (im2col + GEMM)

``conv_transpose2d`` IS ``conv2d_input_grad`` (plus a bias and torch's ``output_padding``), so its
gradients are ``conv2d`` and ``conv2d_weight_grad``: the same family, nothing new to get right.
``conv1d`` and ``conv_transpose1d`` are composites: the 2-D op on a height-1 view.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.backends import array_module, matmul
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, shape_of, summed
from sadl_layers.ops._window import Geometry, pair, same_padding

__all__ = ["conv2d", "conv_transpose2d", "conv1d", "conv_transpose1d"]


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
    geo = Geometry(fn, (H, W), (kh, kw), stride, padding, dilation, strings=True)
    return geo, groups


#: The most bytes of im2col columns made at once (a block of images; at least one image).
COLUMN_BYTES = 2 * 1024 * 1024


def _blocks(n, image_bytes):
    """Slices of the batch axis whose columns take at most :data:`COLUMN_BYTES` each."""
    per = max(1, COLUMN_BYTES // max(1, image_bytes))
    return [slice(start, min(start + per, n)) for start in range(0, max(n, 1), per)]


def _column_blocks(x, geo, groups, dtype):
    """(block, columns): the (n, G, C/G * kh * kw, Ho * Wo) columns of each block of images."""
    N, C = x.shape[:2]
    K = C // groups * geo.kh * geo.kw
    L = geo.Ho * geo.Wo
    windows = geo.windows(x)  # a view: nothing is copied until a block is reshaped
    for block in _blocks(N, C * geo.kh * geo.kw * L * np.dtype(dtype).itemsize):
        yield block, windows[block].reshape(-1, groups, K, L)


def _channels_last(C, groups, geo):
    """Whether im2col copies rows channels last (runs of kw * C contiguous values) rather than
    channels-first columns (runs of Wo): the longer runs copy faster (a 5x5 convolution of 32
    channels on 24x24 images: 2.6x).
    """
    return groups == 1 and C * (geo.kw if geo.dw == 1 else 1) > (geo.Wo if geo.sw == 1 else 1)


def _row_blocks(x, geo, dtype):
    """(block, rows): the (n * Ho * Wo, kh * kw * C) im2col rows of each block of images,
    channels last: one row per output position.
    """
    N, C = x.shape[:2]
    K, L = C * geo.kh * geo.kw, geo.Ho * geo.Wo
    windows = geo.windows_last(x)
    for block in _blocks(N, K * L * np.dtype(dtype).itemsize):
        yield block, windows[block].reshape(-1, K)


def _conv2d_last(x, weight, geo):
    """conv2d without groups through channels-last rows: (n * Ho * Wo, K) @ (K, Co) a block."""
    N, Co = x.shape[0], weight.shape[0]
    xp = array_module(x)
    w_rows = xp.ascontiguousarray(weight.transpose(2, 3, 1, 0)).reshape(-1, Co)
    out = _joined([matmul(rows, w_rows) for _, rows in _row_blocks(x, geo, x.dtype)])
    return xp.ascontiguousarray(out.reshape(N, geo.Ho, geo.Wo, Co).transpose(0, 3, 1, 2))


def _joined(parts):
    """The blocks' results as one array along the batch axis (no copy for a single block)."""
    return parts[0] if len(parts) == 1 else array_module(parts[0]).concatenate(parts, axis=0)


def _conv2d(x, weight, bias, *, stride=1, padding=0, dilation=1, groups=1):
    """2-D cross-correlation of x (N, C, H, W) with weight (O, C/groups, kh, kw), plus bias."""
    check_float("conv2d", "input", x)
    check_float("conv2d", "weight", weight)
    geo, G = _conv_setup("conv2d", x.shape, weight.shape, stride, padding, dilation, groups)
    Co = weight.shape[0]
    if bias is not None and shape_of(bias) != (Co,):
        raise ValueError(f"conv2d: bias has shape {shape_of(bias)}, expected ({Co},)")
    N, C = x.shape[:2]
    if _channels_last(C, G, geo):
        out = _conv2d_last(x, weight, geo)
    else:
        w2 = weight.reshape(G, Co // G, -1)
        out = _joined([matmul(w2, cols) for _, cols in _column_blocks(x, geo, G, x.dtype)])
        out = out.reshape(N, Co, geo.Ho, geo.Wo)  # from (N, G, Co/G, L)
    if bias is not None:
        out += bias.reshape(Co, 1, 1)
    return out


def _conv2d_input_grad(g, weight, *, x_shape, stride=1, padding=0, dilation=1, groups=1):
    """d<conv2d(x, w), g>/dx: the transposed convolution of g with w.

    At stride 1 it is a convolution (:func:`_full_correlation`). Otherwise, one kernel tap at a
    time: each tap (i, j) of the kernel adds ``w[:, :, i, j]^T @ g`` into the strided slice of the
    padded input it read: one GEMM over the whole batch (channels first, so the batch and the
    positions are one long axis) and one add per tap, kh * kw of each whatever the batch size,
    and no im2col columns at all. The taps are added in the order col2im adds them, each
    element's dot product over the output channels is the same, so the result does not depend
    on any blocking.
    """
    geo, G = _conv_setup("conv2d", x_shape, weight.shape, stride, padding, dilation, groups)
    N, C, H, W = x_shape
    Co, Cg = weight.shape[:2]
    if shape_of(g) != (N, Co, geo.Ho, geo.Wo):
        raise ValueError(
            f"conv2d_input_grad: the output gradient has shape {shape_of(g)}, expected "
            f"{(N, Co, geo.Ho, geo.Wo)} for an input of shape {tuple(x_shape)} and a weight "
            f"of shape {shape_of(weight)}"
        )
    xp = array_module(g)
    if (geo.sh, geo.sw) == (1, 1):
        full = _full_correlation(g, weight, geo, G, x_shape)
        if full is not None:
            return full
    # g as (G, Co/G, N * Ho * Wo): the output channels of a group against every position
    gt = xp.ascontiguousarray(np.swapaxes(g.reshape(N, Co, geo.Ho * geo.Wo), 0, 1))
    gt = gt.reshape(G, Co // G, N * geo.Ho * geo.Wo)
    # the weight as (kh, kw, G, C/G, Co/G): each tap's transposed matrices, contiguous
    taps = xp.ascontiguousarray(
        weight.reshape(G, Co // G, Cg, geo.kh, geo.kw).transpose(3, 4, 0, 2, 1)
    )
    dtype = np.result_type(g.dtype, weight.dtype)
    padded = geo.padded_shape(x_shape)
    gxp = xp.zeros((C, N, *padded[2:]), dtype=dtype)  # channels first, as the GEMMs give it
    L = geo.Ho * geo.Wo
    for block in _blocks(N, C * L * dtype.itemsize):  # a block of images' taps at a time
        n = block.stop - block.start
        g_block = gt[:, :, block.start * L : block.stop * L]
        for i, j, rows, cols in geo.offsets():
            part = matmul(taps[i, j], g_block).reshape(C, n, geo.Ho, geo.Wo)
            view = gxp[:, block, rows, cols]
            np.add(view, part, out=view)
    return xp.ascontiguousarray(np.swapaxes(geo.crop(gxp, (H, W)), 0, 1))


def _full_correlation(g, weight, geo, G, x_shape):
    """A stride-1 convolution's input gradient as a convolution: the zero-padded g correlated
    with the flipped kernel, its input and output channels swapped (per group). Its im2col
    GEMMs have the forward's long contraction (Co * kh * kw) where the taps' have Co alone,
    and each block's columns are made once where the taps add kh * kw strided slices of the
    whole batch. None when the padding exceeds the kernel's span (the taps handle that).
    """
    N, C, H, W = x_shape
    Co, Cg, kh, kw = weight.shape
    span_h, span_w = geo.dh * (kh - 1), geo.dw * (kw - 1)
    top, left = span_h - geo.ph, span_w - geo.pw
    bottom = span_h - geo.ph - geo.eh  # padding="same" may pad one more row after than before
    right = span_w - geo.pw - geo.ew
    if min(top, left, bottom, right) < 0:
        return None
    xp = array_module(g)
    gp = xp.zeros((N, Co, H + span_h, W + span_w), dtype=np.result_type(g.dtype, weight.dtype))
    gp[:, :, top : top + geo.Ho, left : left + geo.Wo] = g
    flipped = weight.reshape(G, Co // G, Cg, kh, kw).transpose(0, 2, 1, 3, 4)
    flipped = xp.ascontiguousarray(flipped.reshape(C, Co // G, kh, kw)[:, :, ::-1, ::-1])
    return _conv2d(gp, flipped, None, dilation=(geo.dh, geo.dw), groups=G)


#: Output positions per image up to which the weight gradient takes a block's images side by
#: side in one GEMM (beyond it, one GEMM per image is faster: its columns are cheaper to make).
SIDE_BY_SIDE = 128


def _conv2d_weight_grad(x, g, *, w_shape, stride=1, padding=0, dilation=1, groups=1):
    """d<conv2d(x, w), g>/dw: g against the im2col columns of x, summed over the batch.

    Each product is taken transposed, columns (K, L) times g's transpose (L, Co/G): the columns
    are then the untransposed operand, which OpenBLAS multiplies about a third faster than the
    other way round. On small images (at most :data:`SIDE_BY_SIDE` output positions) a block's
    columns are made side by side, (K, n * L) per group, and one GEMM sums over its images and
    positions at once (up to twice as fast as one GEMM per image and a sum after).
    """
    geo, G = _conv_setup("conv2d", x.shape, w_shape, stride, padding, dilation, groups)
    N, C = x.shape[:2]
    Co = w_shape[0]
    K, L = C // G * geo.kh * geo.kw, geo.Ho * geo.Wo
    xp = array_module(x)
    if _channels_last(C, G, geo):  # g's rows (n * L, Co) against the rows of x: (Co, K)
        g_rows = xp.ascontiguousarray(g.transpose(0, 2, 3, 1)).reshape(N * L, Co)
        gw = summed(
            matmul(np.swapaxes(g_rows[block.start * L : block.stop * L], 0, 1), rows)
            for block, rows in _row_blocks(x, geo, x.dtype)
        )
        return xp.ascontiguousarray(gw.reshape(Co, geo.kh, geo.kw, C).transpose(0, 3, 1, 2))
    g2 = g.reshape(N, G, Co // G, L)
    if L > SIDE_BY_SIDE:
        parts = [
            matmul(cols, np.swapaxes(g2[block], -1, -2)).sum(axis=0)  # (G, K, Co/G)
            for block, cols in _column_blocks(x, geo, G, x.dtype)
        ]
    else:
        # the windows as (G, C/G, kh, kw, N, Ho, Wo): a block's columns are a (K, n * L) matrix
        windows = geo.windows(x).reshape(N, G, C // G, geo.kh, geo.kw, geo.Ho, geo.Wo)
        windows = windows.transpose(1, 2, 3, 4, 0, 5, 6)
        parts = []
        for block in _blocks(N, C * geo.kh * geo.kw * L * np.dtype(x.dtype).itemsize):
            n = block.stop - block.start
            cols = windows[:, :, :, :, block].reshape(G, K, n * L)
            gt = np.swapaxes(g2[block], -1, -2).transpose(1, 0, 2, 3).reshape(G, n * L, Co // G)
            parts.append(matmul(cols, gt))  # (G, K, Co/G)
    return xp.ascontiguousarray(np.swapaxes(summed(parts), -1, -2)).reshape(w_shape)


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
        Example((1, 2, 5, 6), (2, 2, 2, 3), (2,), padding="same", dilation=(1, 2)),
        Example((1, 2, 5, 6), (2, 2, 2, 3), None, padding="valid"),
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
        Example((1, 2, 5, 6), (2, 2, 2, 3), x_shape=(1, 2, 5, 6), padding="same"),
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
        Example((1, 2, 5, 6), (1, 2, 5, 6), w_shape=(2, 2, 2, 3), padding="same"),
    ),
)


# ---------------------------------------------------------------------- conv_transpose2d


def _transpose_setup(x_shape, w_shape, stride, padding, output_padding, dilation, groups):
    """The conv2d geometry a transposed convolution inverts, and torch's output size.

    Returns ``(conv_shape, crop)``: the shape (N, C_out, H', W') whose conv2d has the input's
    spatial size, and per spatial axis None (H' is torch's size: output_padding below the
    stride) or ``(start, length)``: output_padding at or above the stride (allowed below the
    dilation) has no conv2d geometry with the padding, so that axis is computed unpadded and
    torch's output is its ``length`` rows from ``start`` (the padding), zeros past its end.
    """
    fn = "conv_transpose2d"
    if len(x_shape) != 4:
        raise ValueError(f"{fn}: input must have shape (N, C, H, W), got {tuple(x_shape)}")
    if len(w_shape) != 4:
        raise ValueError(
            f"{fn}: weight must have shape (in_channels, out_channels / groups, kh, kw), got "
            f"{tuple(w_shape)}"
        )
    N, C = x_shape[:2]
    groups = int(groups)
    if w_shape[0] != C:
        raise ValueError(
            f"{fn}: input has shape {tuple(x_shape)} with {C} channels, expected "
            f"(N, {w_shape[0]}, H, W) for weight of shape {tuple(w_shape)}"
        )
    if groups < 1 or C % groups:
        raise ValueError(f"{fn}: groups={groups} must be positive and divide in_channels={C}")
    s, p, d = (
        pair(stride, fn, "stride"),
        pair(padding, fn, "padding"),
        pair(dilation, fn, "dilation"),
    )
    op = pair(output_padding, fn, "output_padding")
    if min(*s, *d) < 1:
        raise ValueError(
            f"{fn}: stride and dilation must be positive, got {stride!r}, {dilation!r}"
        )
    k = w_shape[2:]
    size, crop = [], []
    for axis in range(2):
        if op[axis] >= s[axis] and op[axis] >= d[axis]:
            raise ValueError(
                f"{fn}: output_padding {op} must be smaller than the stride {s} or the "
                f"dilation {d} (per axis)"
            )
        full = (x_shape[2 + axis] - 1) * s[axis] + d[axis] * (k[axis] - 1) + 1
        n = full - 2 * p[axis] + op[axis]
        if n < 1:
            raise ValueError(
                f"{fn}: the output would be empty (size {n} on spatial axis {axis}); "
                "reduce the padding"
            )
        below = op[axis] < s[axis]
        size.append(n if below else full)
        crop.append(None if below else (p[axis], n))
    conv_shape = (N, w_shape[1] * groups, size[0], size[1])
    return conv_shape, tuple(crop)


def _at_axis(axis, value, other):
    """Four items for (N, C, H, W): ``value`` at spatial axis ``axis``, ``other`` elsewhere."""
    items = [other] * 4
    items[2 + axis] = value
    return items


def _cropped(out, crop):
    """Torch's transposed output from the unpadded axes of ``out`` (see ``_transpose_setup``)."""
    for axis, c in enumerate(crop):
        if c is not None:
            start, length = c
            out = out[tuple(_at_axis(axis, slice(start, start + length), slice(None)))]
            missing = length - out.shape[2 + axis]
            out = np.pad(out, _at_axis(axis, (0, missing), (0, 0))) if missing else out
    return out


def _uncropped(g, crop, conv_shape):
    """The gradient of the unpadded output from ``g``, the cropped output's (the adjoint)."""
    for axis, c in enumerate(crop):
        if c is not None:
            start, full = c[0], conv_shape[2 + axis]
            g = g[tuple(_at_axis(axis, slice(0, full - start), slice(None)))]
            g = np.pad(g, _at_axis(axis, (start, full - start - g.shape[2 + axis]), (0, 0)))
    return g


def _uncropped_padding(padding, crop):
    """The conv2d padding of the computed geometry: none on the axes computed unpadded."""
    p = pair(padding, "conv_transpose2d", "padding")
    return tuple(0 if c is not None else pi for pi, c in zip(p, crop, strict=True))


def _conv_params(stride, padding, dilation, groups):
    return {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}


def _conv_transpose2d(
    x, weight, bias, *, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """Transposed 2-D convolution of x (N, C_in, H, W) with weight (C_in, C_out/groups, kh, kw).

    The gradient of conv2d with respect to its input, as a layer (a "deconvolution"): the output
    has size (H - 1) * stride - 2 * padding + dilation * (kh - 1) + output_padding + 1.
    """
    check_float("conv_transpose2d", "input", x)
    check_float("conv_transpose2d", "weight", weight)
    conv_shape, crop = _transpose_setup(
        x.shape, weight.shape, stride, padding, output_padding, dilation, groups
    )
    params = _conv_params(stride, _uncropped_padding(padding, crop), dilation, groups)
    out = _conv2d_input_grad(x, weight, x_shape=conv_shape, **params)
    out = array_module(out).ascontiguousarray(_cropped(out, crop))
    Co = conv_shape[1]
    if bias is not None:
        if shape_of(bias) != (Co,):
            raise ValueError(f"conv_transpose2d: bias has shape {shape_of(bias)}, expected ({Co},)")
        out += bias.reshape(Co, 1, 1)
    return out


def _unpadded(g, x, weight, p):
    """The conv2d arguments of the computed geometry, and the gradient of its output."""
    conv = {k: p.get(k, v) for k, v in (("stride", 1), ("padding", 0), ("dilation", 1))}
    conv["groups"] = p.get("groups", 1)
    full = {**conv, "output_padding": p.get("output_padding", 0)}
    conv_shape, crop = _transpose_setup(shape_of(x), shape_of(weight), **full)
    if any(c is not None for c in crop):
        conv["padding"] = _uncropped_padding(conv["padding"], crop)
        g = _uncropped(g, crop, conv_shape)
    return g, conv


def _conv_transpose2d_grad_x(g, out, x, weight, bias, **p):
    g, conv = _unpadded(g, x, weight, p)
    return conv2d(g, weight, None, **conv)


def _conv_transpose2d_grad_w(g, out, x, weight, bias, **p):
    g, conv = _unpadded(g, x, weight, p)
    return CONV2D_WEIGHT_GRAD(g, x, w_shape=shape_of(weight), **conv)


conv_transpose2d: OpDef = OpDef(
    "conv_transpose2d",
    _conv_transpose2d,
    (_conv_transpose2d_grad_x, _conv_transpose2d_grad_w, _conv2d_grad_b),
    examples=(
        Example((2, 3, 3, 3), (3, 2, 3, 3), (2,)),
        Example((1, 2, 3, 4), (2, 3, 3, 2), None, stride=2, padding=1, output_padding=1),
        Example((1, 4, 3, 3), (4, 1, 2, 2), (2,), groups=2, stride=(2, 1), dilation=(1, 2)),
        Example((1, 2, 2, 3), (2, 1, 2, 2), None, stride=1, dilation=3, output_padding=(2, 1)),
        Example(  # output_padding above the stride, and padding: the rows past it reached
            (1, 2, 3, 3), (2, 2, 2, 3), (2,), dilation=(3, 2), padding=(2, 1), output_padding=(2, 1)
        ),
    ),
)


# --------------------------------------------------------------------------------- 1-D forms


def single(value: Any, fn: str, name: str) -> int:
    """An int or a one-element sequence of ints as a non-negative int (torch's 1-D sizes)."""
    if not isinstance(value, int | np.integer):
        try:
            items = tuple(int(v) for v in value)
        except TypeError:
            items = ()
        if len(items) != 1:
            raise ValueError(f"{fn}: {name} must be an int or a 1-tuple of ints, got {value!r}")
        value = items[0]
    if value < 0:
        raise ValueError(f"{fn}: {name} must be non-negative, got {value!r}")
    return int(value)


def _check_1d(fn, x, weight, weight_doc):
    if np.ndim(x) != 3:
        raise ValueError(f"{fn}: input must have shape (N, C, L), got {shape_of(x)}")
    if np.ndim(weight) != 3:
        raise ValueError(f"{fn}: weight must have shape {weight_doc}, got {shape_of(weight)}")


def _height_one(a):
    """(N, C, L) as (N, C, 1, L): arrays and Tensors."""
    shape = shape_of(a)
    return np.reshape(a, (*shape[:2], 1, shape[2]))


def drop_height(y):
    """(..., 1, L) as (..., L): the 1-D forms' results, computed in 2-D."""
    shape = shape_of(y)
    return np.reshape(y, (*shape[:-2], shape[-1]))


def _conv1d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1):
    """1-D cross-correlation of x (N, C, L) with weight (O, C/groups, k), plus bias."""
    fn = "conv1d"
    _check_1d(fn, x, weight, "(out_channels, in_channels / groups, k)")
    s, d = single(stride, fn, "stride"), single(dilation, fn, "dilation")
    before, after = same_padding(fn, padding, shape_of(weight)[2:], s, d)
    span = d * (shape_of(weight)[2] - 1) + 1
    if shape_of(x)[2] + before[0] + after[0] < span:
        raise ValueError(
            f"{fn}: the kernel spans {span} positions (with dilation), more than the padded "
            f"input's length {shape_of(x)[2] + before[0] + after[0]}"
        )
    y = conv2d(
        _height_one(x),
        _height_one(weight),
        bias,
        stride=(1, s),
        padding=padding if isinstance(padding, str) else (0, before[0]),
        dilation=(1, d),
        groups=groups,
    )
    return drop_height(y)


conv1d: OpDef = OpDef(
    "conv1d",
    _conv1d,
    composite=True,
    examples=(
        Example((2, 3, 7), (4, 3, 3), (4,)),
        Example((1, 4, 9), (2, 2, 2), None, stride=2, padding=1, dilation=2, groups=2),
        Example((1, 2, 6), (3, 2, 4), (3,), padding="same"),
    ),
)


def _conv_transpose1d(
    x, weight, bias=None, *, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """Transposed 1-D convolution of x (N, C_in, L) with weight (C_in, C_out/groups, k)."""
    fn = "conv_transpose1d"
    _check_1d(fn, x, weight, "(in_channels, out_channels / groups, k)")
    y = conv_transpose2d(
        _height_one(x),
        _height_one(weight),
        bias,
        stride=(1, single(stride, fn, "stride")),
        padding=(0, single(padding, fn, "padding")),
        output_padding=(0, single(output_padding, fn, "output_padding")),
        dilation=(1, single(dilation, fn, "dilation")),
        groups=groups,
    )
    return drop_height(y)


conv_transpose1d: OpDef = OpDef(
    "conv_transpose1d",
    _conv_transpose1d,
    composite=True,
    examples=(
        Example((2, 3, 4), (3, 2, 3), (2,)),
        Example((1, 2, 5), (2, 2, 2), None, stride=3, padding=1, output_padding=2, groups=2),
    ),
)

INTERNAL_OPS = (CONV2D_INPUT_GRAD, CONV2D_WEIGHT_GRAD)
