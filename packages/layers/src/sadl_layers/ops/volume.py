"""3-D (NCDHW) convolutions and pools, composed of their 2-D ops one depth tap at a time, and
``max_unpool2d`` (a scatter of the values to their pooling indices).

A 3-D window is a 2-D window on each of its ``kd`` depth slices. ``conv3d`` therefore gathers,
for depth tap ``i``, the depth slices that tap reads (a strided slice of the padded input),
folds depth into the batch axis and runs ``conv2d`` with that tap's 2-D kernel; the taps' sums
are the 3-D output. ``conv_transpose3d`` scatters each tap's ``conv_transpose2d`` back to its
depth positions (zero insertion, then a shift). ``max_pool3d`` is the maximum over taps of
``max_pool2d`` and ``avg_pool3d`` the sum over taps of ``avg_pool2d``, divided by the depth
count: torch's divisor is a product of per-axis counts, so it separates.

All four are composites: their gradients, and second derivatives, come from the 2-D family,
which :mod:`.conv` and :mod:`.pooling` check already.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sadl
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, const, shape_of
from sadl_layers.ops._window import _out_size, ntuple, same_padding
from sadl_layers.ops.conv import conv2d, conv_transpose2d
from sadl_layers.ops.pooling import avg_pool2d, max_pool2d

__all__ = ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "max_unpool2d", "unfold"]


def _triple(value: Any, fn: str, name: str) -> tuple[int, int, int]:
    a, b, c = ntuple(value, 3, fn, name)
    return a, b, c


def _batched(fn: str, x: Any, what: str = "input") -> tuple[Any, bool]:
    """The input as (N, C, D, H, W), and whether a batch axis was added to a (C, D, H, W) input."""
    if np.ndim(x) == 4:
        return np.reshape(x, (1, *shape_of(x))), True
    if np.ndim(x) != 5:
        raise ValueError(
            f"{fn}: {what} must have shape (N, C, D, H, W) or (C, D, H, W), got {shape_of(x)}"
        )
    return x, False


def _unbatched(y: Any, added: bool) -> Any:
    return np.reshape(y, shape_of(y)[1:]) if added else y


def _conv_input(fn: str, x: Any, weight: Any, layout: str) -> tuple[Any, bool]:
    """``_batched(x)``, once input and weight are checked (floats; weight 5-D, as ``layout``)."""
    check_float(fn, "input", const(x))
    check_float(fn, "weight", const(weight))
    x, added = _batched(fn, x)
    if np.ndim(weight) != 5:
        raise ValueError(f"{fn}: weight must have shape {layout}, got {shape_of(weight)}")
    return x, added


def _stride_dilation(fn: str, stride: Any, dilation: Any) -> tuple[Any, Any]:
    """The stride and dilation triples of a convolution, checked positive."""
    s, d = _triple(stride, fn, "stride"), _triple(dilation, fn, "dilation")
    if min(*s, *d) < 1:
        raise ValueError(
            f"{fn}: stride and dilation must be positive, got {stride!r}, {dilation!r}"
        )
    return s, d


def _conv_output(fn: str, out: Any, bias: Any, added: bool) -> Any:
    """``out`` (N, C_out, D, H, W) plus ``bias`` (C_out,), unbatched again if the input was."""
    if bias is not None:
        Co = shape_of(out)[1]
        if shape_of(bias) != (Co,):
            raise ValueError(f"{fn}: bias has shape {shape_of(bias)}, expected ({Co},)")
        out = out + np.reshape(bias, (Co, 1, 1, 1))
    return _unbatched(out, added)


def _depth_taps(x: Any, taps: int, dilation: int, stride: int, count: int) -> list[Any]:
    """Per depth tap, the ``count`` depth slices it reads: (N, C, count, H, W) each.

    ``x`` is (N, C, D, H, W), already padded in depth.
    """
    return [
        x[:, :, i * dilation : i * dilation + stride * (count - 1) + 1 : stride]
        for i in range(taps)
    ]


def _fold(a: Any) -> Any:
    """(N, C, D, H, W) as (N, C * D, H, W): depth folded into the channels (for the pools)."""
    N, C, D, H, W = shape_of(a)
    return np.reshape(a, (N, C * D, H, W))


def _to_batch(a: Any) -> Any:
    """(N, C, D, H, W) as (N * D, C, H, W)."""
    N, C, D, H, W = shape_of(a)
    return np.reshape(np.moveaxis(a, 2, 1), (N * D, C, H, W))


def _from_batch(a: Any, N: int, D: int) -> Any:
    """(N * D, C, H, W) back to (N, C, D, H, W) (both given: N * D says neither when N is 0)."""
    _, C, H, W = shape_of(a)
    return np.moveaxis(np.reshape(a, (N, D, C, H, W)), 1, 2)


# ---------------------------------------------------------------------------- convolutions


def _conv3d(x, weight, bias=None, *, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation of x (N, C, D, H, W) with weight (O, C/groups, kd, kh, kw).

    ``padding`` is an int, a triple, ``"valid"`` or ``"same"`` (stride 1), as in torch.
    """
    fn = "conv3d"
    x, added = _conv_input(fn, x, weight, "(out_channels, in_channels / groups, kd, kh, kw)")
    kernel = shape_of(weight)[2:]
    s, d = _stride_dilation(fn, stride, dilation)
    before, after = same_padding(fn, padding, kernel, s, d)
    if any(before) or any(after):
        x = np.pad(x, ((0, 0), (0, 0), *zip(before, after)))
    N, _, D = shape_of(x)[:3]
    span = d[0] * (kernel[0] - 1) + 1
    if span > D:
        raise ValueError(
            f"{fn}: the kernel spans {span} depth slices (with dilation), more than the padded "
            f"input's depth {D}"
        )
    count = (D - span) // s[0] + 1
    out: Any = None
    for i, taps in enumerate(_depth_taps(x, kernel[0], d[0], s[0], count)):
        w = weight[:, :, i]
        y = conv2d(_to_batch(taps), w, None, stride=s[1:], dilation=d[1:], groups=groups)
        out = y if out is None else out + y
    return _conv_output(fn, _from_batch(out, N, count), bias, added)


conv3d: OpDef = OpDef(
    "conv3d",
    _conv3d,
    composite=True,
    examples=(
        Example((2, 2, 4, 3, 4), (3, 2, 2, 2, 3), (3,)),
        Example((1, 4, 5, 4, 4), (2, 2, 3, 2, 2), None, stride=(2, 1, 2), padding=1, groups=2),
        Example((1, 2, 5, 4, 5), (2, 2, 2, 3, 2), (2,), padding="same", dilation=(2, 1, 1)),
        Example((2, 3, 3, 4), (2, 2, 2, 2, 2), None),  # unbatched
    ),
)


def _conv_transpose3d(
    x, weight, bias=None, *, stride=1, padding=0, output_padding=0, groups=1, dilation=1
):
    """Transposed 3-D convolution of x (N, C_in, D, H, W) with weight (C_in, C_out/groups, kd,
    kh, kw): output depth (D - 1) * stride - 2 * padding + dilation * (kd - 1) +
    output_padding + 1, and likewise for height and width, as in torch.
    """
    fn = "conv_transpose3d"
    x, added = _conv_input(fn, x, weight, "(in_channels, out_channels / groups, kd, kh, kw)")
    s, d = _stride_dilation(fn, stride, dilation)
    p, op = _triple(padding, fn, "padding"), _triple(output_padding, fn, "output_padding")
    if op[0] >= s[0] and op[0] >= d[0]:
        raise ValueError(
            f"{fn}: output_padding {op} must be smaller than the stride {s} or the dilation {d} "
            "(per axis)"
        )
    N, _, D = shape_of(x)[:3]
    kd = shape_of(weight)[2]
    reach = (D - 1) * s[0] + 1  # depth positions one tap writes (zero-inserted)
    full = reach + d[0] * (kd - 1)
    size = full - 2 * p[0] + op[0]
    if size < 1:
        raise ValueError(f"{fn}: the output would be empty (depth {size}); reduce the padding")
    xs = _to_batch(x)
    out: Any = None
    for i in range(kd):
        y = conv_transpose2d(
            xs,
            weight[:, :, i],
            None,
            stride=s[1:],
            padding=p[1:],
            output_padding=op[1:],
            groups=groups,
            dilation=d[1:],
        )
        y = _from_batch(y, N, D)  # (N, Co, D, H', W')
        if s[0] > 1:  # zero insertion: each input slice, then stride - 1 zero slices
            Co, _, Hy, Wy = shape_of(y)[1:]
            y = np.pad(y[:, :, :, None], ((0, 0), (0, 0), (0, 0), (0, s[0] - 1), (0, 0), (0, 0)))
            y = np.reshape(y, (N, Co, D * s[0], Hy, Wy))[:, :, :reach]
        shift = i * d[0]
        y = np.pad(y, ((0, 0), (0, 0), (shift, full - reach - shift), (0, 0), (0, 0)))
        out = y if out is None else out + y
    if op[0] > p[0]:
        out = np.pad(out, ((0, 0), (0, 0), (0, op[0] - p[0]), (0, 0), (0, 0)))
    return _conv_output(fn, out[:, :, p[0] : p[0] + size], bias, added)


conv_transpose3d: OpDef = OpDef(
    "conv_transpose3d",
    _conv_transpose3d,
    composite=True,
    examples=(
        Example((2, 2, 2, 3, 2), (2, 3, 2, 2, 3), (3,)),
        Example((1, 2, 3, 2, 3), (2, 1, 3, 2, 2), None, stride=2, padding=1, output_padding=1),
        Example(
            (1, 4, 2, 2, 2), (4, 1, 2, 2, 2), (2,), groups=2, stride=(3, 1, 2), dilation=(2, 1, 1)
        ),
    ),
)


# ------------------------------------------------------------------------------------ pools


def _depth_geometry(fn, x, kernel_size, stride, padding, dilation, ceil_mode):
    """(k, s, p, d) triples, the output depth, and the extra depth padding after (ceil mode)."""
    k = _triple(kernel_size, fn, "kernel_size")
    s = k if stride is None else _triple(stride, fn, "stride")
    p, d = _triple(padding, fn, "padding"), _triple(dilation, fn, "dilation")
    if min(*k, *s, *d) < 1:
        raise ValueError(
            f"{fn}: kernel_size, stride and dilation must be positive, got kernel_size="
            f"{kernel_size!r}, stride={stride!r}, dilation={dilation!r}"
        )
    if any(pi > ki // 2 for pi, ki in zip(p, k)):
        raise ValueError(f"{fn}: padding {p} must be at most half the kernel size {k}")
    D = shape_of(x)[2]
    span = d[0] * (k[0] - 1) + 1
    count = _out_size(D, p[0], span, s[0], bool(ceil_mode))
    if count < 1:
        raise ValueError(
            f"{fn}: the kernel spans {span} depth slices, more than the padded input's depth "
            f"{D + 2 * p[0]}"
        )
    extra = max(0, (count - 1) * s[0] + span - (D + 2 * p[0]))
    return k, s, p, d, count, extra


def _max_pool3d(
    x, *, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False
):
    """Maximum over each kd x kh x kw window of x (N, C, D, H, W) or (C, D, H, W).

    Padding counts as -inf; with ``return_indices`` the result is ``(values, indices)``, the
    indices flat positions ``(d * H + h) * W + w`` in each input volume, as in torch.
    """
    fn = "max_pool3d"
    check_float(fn, "input", const(x))
    x, added = _batched(fn, x)
    k, s, p, d, count, extra = _depth_geometry(
        fn, x, kernel_size, stride, padding, dilation, ceil_mode
    )
    N, C, _, H, W = shape_of(x)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0] + extra), (0, 0), (0, 0)), constant_values=-np.inf)
    params = {"kernel_size": k[1:], "stride": s[1:], "padding": p[1:], "dilation": d[1:]}
    results = [
        max_pool2d(_fold(tap), ceil_mode=bool(ceil_mode), return_indices=return_indices, **params)
        for tap in _depth_taps(xp, k[0], d[0], s[0], count)
    ]
    taps = [r[0] for r in results] if return_indices else results
    stacked = np.stack(taps)  # (kd, N, C * count, Ho, Wo)
    # The FIRST tap holding the maximum takes the gradient (torch's choice on ties; within a
    # tap, max_pool2d picks the first maximum too): a gather, not np.max, which shares it.
    best = np.argmax(const(stacked), axis=0)
    values = np.take_along_axis(stacked, best[None], axis=0)[0]
    Ho, Wo = shape_of(values)[-2:]
    values = _unbatched(np.reshape(values, (N, C, count, Ho, Wo)), added)
    if not return_indices:
        return values
    xm = np.stack([const(r[1]) for r in results])
    plane = np.take_along_axis(xm, best[None], axis=0)[0]
    xpm = array_module(xm)
    depth = (xpm.arange(count) * s[0] - p[0]).reshape(1, 1, count, 1, 1)
    depth = depth + d[0] * np.reshape(best, (N, C, count, Ho, Wo))
    indices = depth * (H * W) + np.reshape(plane, (N, C, count, Ho, Wo))
    return values, _unbatched(indices.astype(np.int64), added)


max_pool3d: OpDef = OpDef(
    "max_pool3d",
    _max_pool3d,
    composite=True,
    examples=(
        Example((2, 2, 4, 4, 4), kernel_size=2),
        Example((1, 2, 5, 4, 5), kernel_size=3, stride=2, padding=1, dilation=(1, 1, 1)),
        Example((2, 5, 3, 5), kernel_size=(2, 2, 3), stride=1, ceil_mode=True),
        Example((1, 1, 5, 4, 4), kernel_size=2, ceil_mode=True, return_indices=True),
    ),
)


def _depth_counts(D, count, k, s, p, include_pad, like):
    """Per output depth, the number of depth slices torch divides by (where ``like`` lives)."""
    start = np.arange(count) * s - p
    end = np.minimum(start + k, D + p)
    if not include_pad:
        end = np.minimum(end, D)
        start = np.maximum(start, 0)
    return array_module(like).asarray(end - start, dtype=like.dtype)


def _avg_pool3d(
    x,
    *,
    kernel_size,
    stride=None,
    padding=0,
    ceil_mode=False,
    count_include_pad=True,
    divisor_override=None,
):
    """Mean over each kd x kh x kw window of x (N, C, D, H, W) or (C, D, H, W) (zero padding;
    the divisor follows ``count_include_pad`` and ``divisor_override`` as in torch).
    """
    fn = "avg_pool3d"
    check_float(fn, "input", const(x))
    if divisor_override is not None and (
        isinstance(divisor_override, bool)
        or not isinstance(divisor_override, int | np.integer)
        or divisor_override < 1
    ):
        raise ValueError(
            f"{fn}: divisor_override must be a positive integer or None, got {divisor_override!r}"
        )
    x, added = _batched(fn, x)
    k, s, p, _, count, extra = _depth_geometry(fn, x, kernel_size, stride, padding, 1, ceil_mode)
    N, C, D = shape_of(x)[:3]
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0] + extra), (0, 0), (0, 0)))
    params = {
        "kernel_size": k[1:],
        "stride": s[1:],
        "padding": p[1:],
        "ceil_mode": bool(ceil_mode),
        "count_include_pad": bool(count_include_pad),
    }
    if divisor_override is not None:
        params["divisor_override"] = 1  # window sums; the divisor comes below
    out: Any = None
    for tap in _depth_taps(xp, k[0], 1, s[0], count):
        y = avg_pool2d(_fold(tap), **params)
        out = y if out is None else out + y
    Ho, Wo = shape_of(out)[-2:]
    out = np.reshape(out, (N, C, count, Ho, Wo))
    if divisor_override is not None:
        out = out * (1.0 / divisor_override)
    else:
        counts = _depth_counts(D, count, k[0], s[0], p[0], count_include_pad, const(out))
        out = out * (1.0 / counts).reshape(count, 1, 1)
    return _unbatched(out, added)


avg_pool3d: OpDef = OpDef(
    "avg_pool3d",
    _avg_pool3d,
    composite=True,
    examples=(
        Example((2, 2, 4, 4, 4), kernel_size=2),
        Example((1, 2, 5, 4, 5), kernel_size=3, stride=2, padding=1, count_include_pad=False),
        Example((2, 5, 3, 5), kernel_size=(2, 2, 3), stride=1, ceil_mode=True, padding=1),
        Example((1, 1, 4, 4, 4), kernel_size=3, stride=1, divisor_override=5),
    ),
)


# ------------------------------------------------------------------------------- unpooling


def _max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The inverse of ``max_pool2d(..., return_indices=True)``: each value goes to its flat
    index ``h * W + w`` in a zero plane of size ``(H_in - 1) * stride - 2 * padding + kernel``
    (or ``output_size``), as torch.nn.functional.max_unpool2d.
    """
    fn = "max_unpool2d"
    check_float(fn, "input", const(input))
    idx = const(indices)
    if getattr(idx, "dtype", None) is None or idx.dtype.kind not in "iu":
        raise TypeError(f"{fn}: indices must be an integer array (from max_pool2d), got {idx!r}")
    if np.ndim(input) not in (3, 4) or shape_of(idx) != shape_of(input):
        raise ValueError(
            f"{fn}: input must have shape (N, C, H, W) or (C, H, W) and indices the same, got "
            f"{shape_of(input)} and {shape_of(idx)}"
        )
    k = ntuple(kernel_size, 2, fn, "kernel_size")
    s = k if stride is None else ntuple(stride, 2, fn, "stride")
    p = ntuple(padding, 2, fn, "padding")
    H, W = shape_of(input)[-2:]
    size = tuple((n - 1) * si - 2 * pi + ki for n, si, pi, ki in zip((H, W), s, p, k))
    if output_size is not None:
        size = tuple(int(n) for n in tuple(output_size)[-2:])
    lead = shape_of(input)[:-2]
    plane = size[0] * size[1]
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= plane):
        raise ValueError(
            f"{fn}: indices must lie in the output plane of {size[0]}x{size[1]} = {plane} "
            f"elements, got {int(idx.min())} to {int(idx.max())}; pass the output_size that "
            "max_pool2d started from"
        )
    xp = array_module(idx)
    flat = np.reshape(input, (*lead, H * W))
    out = sadl.ops.scatter(
        xp.zeros((*lead, plane), dtype=const(input).dtype),
        -1,
        np.reshape(idx, (*lead, H * W)),
        flat,
    )
    return np.reshape(out, (*lead, *size))


_POOLED = np.array([[[[5, 7], [13, 15]], [[0, 3], [9, 10]]]])  # indices max_pool2d(2) could give

max_unpool2d: OpDef = OpDef(
    "max_unpool2d",
    _max_unpool2d,
    composite=True,
    examples=(
        Example((1, 2, 2, 2), _POOLED, 2),
        Example((2, 2, 2), _POOLED[0], 2, output_size=(5, 5)),
    ),
)


def _unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """Sliding local blocks of x (N, C, H, W) as columns (N, C * kh * kw, L), as torch's
    F.unfold (im2col): a grouped ``conv2d`` with one-hot kernels, so its gradients are conv2d's.
    """
    fn = "unfold"
    check_float(fn, "input", const(input))
    x, added = (
        (np.reshape(input, (1, *shape_of(input))), True) if np.ndim(input) == 3 else (input, False)
    )
    if np.ndim(x) != 4:
        raise ValueError(
            f"{fn}: input must have shape (N, C, H, W) or (C, H, W), got {shape_of(input)}"
        )
    kh, kw = ntuple(kernel_size, 2, fn, "kernel_size")
    N, C = shape_of(x)[:2]
    xp = array_module(const(x))
    taps = xp.eye(kh * kw, dtype=const(x).dtype).reshape(kh * kw, 1, kh, kw)
    weight = xp.tile(taps, (C, 1, 1, 1))  # (C * kh * kw, 1, kh, kw): channel-major, as torch
    cols = conv2d(x, weight, None, stride=stride, padding=padding, dilation=dilation, groups=C)
    out = np.reshape(cols, (N, C * kh * kw, math.prod(shape_of(cols)[2:])))  # N may be 0
    return np.reshape(out, shape_of(out)[1:]) if added else out


unfold: OpDef = OpDef(
    "unfold",
    _unfold,
    composite=True,
    examples=(
        Example((2, 3, 4, 5), 2),
        Example((1, 2, 5, 6), kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1)),
        Example((2, 4, 4), 3, padding=1),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
