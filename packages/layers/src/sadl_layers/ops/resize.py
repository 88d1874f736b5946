"""Resizing: ``interpolate`` (nearest, nearest-exact, linear/bilinear/trilinear, area) and adaptive
average pooling, over 1, 2 or 3 spatial axes (inputs (N, C, L), (N, C, H, W), (N, C, D, H, W)).

Every mode here is SEPARABLE and LINEAR in the input: resizing is one small matrix per spatial
axis, ``out = M_h @ x @ M_w.T`` in 2-D, each row of ``M`` holding the weights torch gives the
source elements of one output element (one 1 for nearest, two lerp weights for linear, 1/count
over a window for area). So the forward is a ``tensordot`` per axis, the gradient is the same
with the transposed matrices (written in NumPy vocabulary: it runs on Tensors too, which gives
every higher derivative), and no mode needs code of its own beyond building its matrix.

The source coordinates follow torch exactly (``area_pixel_compute_source_index``, in the
input's float precision): with ``align_corners=False`` a ``scale_factor`` given by the caller is
used as is (1 / scale_factor per output step), as torch does unless
``recompute_scale_factor=True``, except on an axis whose size stays (or, 2-d nearest, doubles),
which torch's linear and 2-d nearest kernels copy (or read at ``i // 2``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sadl.backends import array_module
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float, check_real, const, shape_of

__all__ = ["interpolate", "adaptive_avg_pool1d", "adaptive_avg_pool2d"]

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "area")


def _spatial(fn: str, x: Any) -> int:
    """The number of spatial axes of an (N, C, *spatial) input (1, 2 or 3)."""
    nd = np.ndim(x)
    if nd not in (3, 4, 5):
        raise ValueError(
            f"{fn}: input must have shape (N, C, L), (N, C, H, W) or (N, C, D, H, W), got "
            f"{shape_of(x)}"
        )
    return nd - 2


def _per_axis(fn: str, name: str, value: Any, d: int, kind: type) -> tuple[Any, ...]:
    """``value`` (one number or one per spatial axis) as a d-tuple."""
    if getattr(value, "ndim", None) == 0:  # a 0-d array (a constant Tensor's data)
        value = value.item()
    items = tuple(value) if isinstance(value, tuple | list) else (value,) * d
    if len(items) != d:
        raise ValueError(f"{fn}: {name} needs {d} values (one per spatial axis), got {value!r}")
    for v in items:
        if v is None and kind is int and name == "output_size":
            continue
        if isinstance(v, bool) or not isinstance(v, int | float | np.number) or not v > 0:
            raise ValueError(f"{fn}: {name} must hold positive numbers, got {value!r}")
        if kind is int and int(v) != v:
            raise ValueError(f"{fn}: {name} must hold integers, got {value!r}")
    return tuple(None if v is None else kind(v) for v in items)


def _compute_dtype(dtype: Any) -> Any:
    """Torch computes source coordinates in float for float32/float16, double for float64."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def _nearest_matrix(n_in, n_out, scale, exact, ftype):
    """0/1 matrix: output i reads input min(floor((i [+ 0.5]) * scale), n_in - 1)."""
    step = ftype(n_in / n_out if scale is None else 1.0 / scale)
    if exact:
        src = np.floor((np.arange(n_out, dtype=ftype) + ftype(0.5)) * step)
    else:
        src = np.floor(np.arange(n_out, dtype=ftype) * step)
    src = np.minimum(src.astype(np.int64), n_in - 1)
    m = np.zeros((n_out, n_in))
    m[np.arange(n_out), src] = 1.0
    return m


def _linear_matrix(n_in, n_out, scale, align_corners, ftype):
    """Two lerp weights per output element, at torch's source coordinate."""
    dst = np.arange(n_out, dtype=ftype)
    if align_corners:
        step = ftype((n_in - 1) / (n_out - 1)) if n_out > 1 else ftype(0.0)
        src = dst * step
    else:
        step = ftype(n_in / n_out if scale is None else 1.0 / scale)
        src = np.maximum((dst + ftype(0.5)) * step - ftype(0.5), ftype(0.0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    lam = (src - i0.astype(ftype)).astype(np.float64)
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    np.add.at(m, (rows, i0), 1.0 - lam)
    np.add.at(m, (rows, i1), lam)
    return m


def _area_matrix(n_in, n_out):
    """Adaptive average pooling: output i averages inputs floor(i n/o) .. ceil((i+1) n/o) - 1."""
    m = np.zeros((n_out, n_in))
    for i in range(n_out):
        start = (i * n_in) // n_out
        stop = -(-((i + 1) * n_in) // n_out)
        m[i, start:stop] = 1.0 / (stop - start)
    return m


def _apply(x, mats):
    """The input with spatial axis k (from the end) mapped by ``mats[k]`` (None: unchanged).

    One ``tensordot`` per resized axis: NumPy vocabulary, so it runs on Tensors too.
    """
    d = len(mats)
    for k, m in enumerate(mats):
        if m is None:
            continue
        axis = np.ndim(x) - d + k
        x = np.moveaxis(np.tensordot(x, m, axes=([axis], [1])), -1, axis)
    return x


def _on_device(mats, like):
    """The host matrices as arrays of ``like``'s dtype, on its device."""
    xp = array_module(like)
    return [None if m is None else xp.asarray(m.astype(like.dtype)) for m in mats]


def _contiguous(out, x):
    return array_module(x).ascontiguousarray(out)


# ------------------------------------------------------------------------------ interpolate


def _interpolation_matrices(
    x_shape, dtype, size, scale_factor, mode, align_corners, recompute_scale_factor
):
    fn = "interpolate"
    d = len(x_shape) - 2
    if mode not in _MODES:
        raise ValueError(f"{fn}: mode must be one of {', '.join(_MODES)}, got {mode!r}")
    if mode in _LINEAR and _LINEAR[mode] != d:
        raise ValueError(
            f"{fn}: mode {mode!r} resizes {_LINEAR[mode]} spatial axes, but the input of shape "
            f"{tuple(x_shape)} has {d}; use "
            f"{next(k for k, v in _LINEAR.items() if v == d)!r}"
        )
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError(
            f"{fn}: align_corners can only be set with the interpolating modes linear, bilinear "
            f"and trilinear, not {mode!r}"
        )
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{fn}: give exactly one of size and scale_factor")
    n_in = tuple(int(n) for n in x_shape[2:])
    if size is not None:
        n_out = _per_axis(fn, "size", size, d, int)
        scales: tuple[float | None, ...] = (None,) * d
    else:
        factors = _per_axis(fn, "scale_factor", scale_factor, d, float)
        n_out = tuple(math.floor(n * s) for n, s in zip(n_in, factors))
        scales = factors
        if min(n_out) < 1:
            raise ValueError(
                f"{fn}: scale_factor {scale_factor!r} gives an empty output for spatial size {n_in}"
            )
        if recompute_scale_factor:
            scales = (None,) * d
    ftype = _compute_dtype(dtype)
    mats = []
    for a, b, s in zip(n_in, n_out, scales):
        # torch's linear kernels and its 2-d nearest one copy an axis whose size stays, and
        # its 2-d nearest one reads i // 2 where the size doubles, whatever the scale_factor
        # (its 1-d and 3-d nearest kernels use the scale: matched per kernel, as torch runs)
        copies = mode in _LINEAR or (mode == "nearest" and d == 2)
        if copies and (b == a or (mode == "nearest" and b == 2 * a)):
            s = None
        if mode == "area":
            m = _area_matrix(a, b)
        elif mode in _LINEAR:
            m = _linear_matrix(a, b, s, bool(align_corners), ftype)
        else:
            m = _nearest_matrix(a, b, s, mode == "nearest-exact", ftype)
        mats.append(None if a == b and np.array_equal(m, np.eye(a)) else m)
    return mats


def _interpolate(
    x,
    *,
    size=None,
    scale_factor=None,
    mode="nearest",
    align_corners=None,
    recompute_scale_factor=None,
):
    """Resize x (N, C, *spatial) to ``size`` or by ``scale_factor`` (torch's F.interpolate).

    ``mode``: ``nearest`` (torch's legacy rule, floor(i * in / out)), ``nearest-exact``
    (centres), ``linear`` / ``bilinear`` / ``trilinear`` (with ``align_corners``), ``area``.
    An integer ``x`` (a uint8 image) gives its own dtype, the interpolated values rounded to
    the nearest integer (torch's uint8 fixed-point arithmetic can differ from that by 1).
    """
    _spatial("interpolate", x)
    check_real("interpolate", "input", x)
    mats = _interpolation_matrices(
        shape_of(x), x.dtype, size, scale_factor, mode, align_corners, recompute_scale_factor
    )
    if x.dtype.kind == "f":
        return _contiguous(_apply(x, _on_device(mats, x)), x)
    # Integers (a uint8 image): computed in float64, rounded to the nearest value of the dtype.
    y = _apply(x.astype(np.float64), _on_device(mats, x.astype(np.float64, copy=False)))
    info = np.iinfo(x.dtype)
    return _contiguous(np.clip(np.rint(y), info.min, info.max).astype(x.dtype), x)


def _interpolate_grad(g, out, x, **params):
    x = const(x)
    mats = _interpolation_matrices(shape_of(x), x.dtype, **_full(params))
    return _apply(g, [None if m is None else m.T for m in _on_device(mats, x)])


def _full(params):
    return {
        "size": params.get("size"),
        "scale_factor": params.get("scale_factor"),
        "mode": params.get("mode", "nearest"),
        "align_corners": params.get("align_corners"),
        "recompute_scale_factor": params.get("recompute_scale_factor"),
    }


interpolate = OpDef(
    "interpolate",
    _interpolate,
    (_interpolate_grad,),
    examples=(
        Example((2, 2, 3, 4), scale_factor=2),
        Example((1, 2, 5, 4), size=(3, 7), mode="nearest-exact"),
        Example((1, 2, 3, 4), size=(5, 7), mode="bilinear"),
        Example((1, 1, 4, 5), scale_factor=(1.5, 0.7), mode="bilinear", align_corners=True),
        Example((2, 3, 5), scale_factor=2.5, mode="linear"),
        Example((1, 1, 2, 3, 3), size=(3, 2, 4), mode="trilinear"),
        Example((1, 2, 7, 6), size=(3, 4), mode="area"),
        Example((1, 1, 4), size=1, mode="linear", align_corners=True),
    ),
)


# ------------------------------------------------------------------ adaptive average pooling


def _adaptive_matrices(fn, x_shape, output_size, d):
    sizes = _per_axis(fn, "output_size", output_size, d, int)
    n_in = tuple(int(n) for n in x_shape[-d:])
    return [None if b is None or b == a else _area_matrix(a, b) for a, b in zip(n_in, sizes)]


def _check_adaptive(fn, x, d):
    check_float(fn, "input", x)
    if np.ndim(x) not in (d + 1, d + 2):
        layout = "(N, C, L) or (C, L)" if d == 1 else "(N, C, H, W) or (C, H, W)"
        raise ValueError(f"{fn}: input must have shape {layout}, got {shape_of(x)}")


def _adaptive_avg_pool2d(x, *, output_size):
    """Average pooling to a fixed ``output_size`` (int, pair, None keeps an axis): each output
    averages the input window floor(i H / Ho) .. ceil((i + 1) H / Ho), as torch's.
    """
    _check_adaptive("adaptive_avg_pool2d", x, 2)
    mats = _adaptive_matrices("adaptive_avg_pool2d", shape_of(x), output_size, 2)
    return _contiguous(_apply(x, _on_device(mats, x)), x)


def _adaptive_avg_pool1d(x, *, output_size):
    """Average pooling of x (N, C, L) or (C, L) to length ``output_size``, as torch's."""
    _check_adaptive("adaptive_avg_pool1d", x, 1)
    mats = _adaptive_matrices("adaptive_avg_pool1d", shape_of(x), output_size, 1)
    return _contiguous(_apply(x, _on_device(mats, x)), x)


def _adaptive_grad(fn, d):
    def rule(g, out, x, *, output_size):
        mats = _on_device(_adaptive_matrices(fn, shape_of(x), output_size, d), const(x))
        return _apply(g, [None if m is None else m.T for m in mats])

    return rule


adaptive_avg_pool2d = OpDef(
    "adaptive_avg_pool2d",
    _adaptive_avg_pool2d,
    (_adaptive_grad("adaptive_avg_pool2d", 2),),
    examples=(
        Example((2, 3, 5, 7), output_size=(2, 3)),
        Example((1, 2, 4, 4), output_size=1),
        Example((3, 5, 6), output_size=(None, 4)),
    ),
)
adaptive_avg_pool1d = OpDef(
    "adaptive_avg_pool1d",
    _adaptive_avg_pool1d,
    (_adaptive_grad("adaptive_avg_pool1d", 1),),
    examples=(Example((2, 3, 7), output_size=3), Example((2, 5), output_size=5)),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
