"""Layer norm and RMS norm, forward and backward, as one numba loop over each block of rows.

The kernels replace a recorded application of the ops registered as ``layer_norm``, ``rms_norm``
and ``layer_norm_backward`` (``sadl_kernels._ops``), whatever NumPy calls sadl-layers makes
inside (it computes block by block of rows, about a dozen calls per block). Per row, in one
pass: the row statistics, accumulated in float64 (the NumPy path sums in the array's dtype), then
the normalized row and the affine map; the backward recomputes the statistics from the input, as
sadl-layers' backward does. A float16 application runs in float32 and is cast back, as
sadl-layers (and torch) compute it.

Tolerance (tested in ``tests/test_kernels_norm.py``): the row statistics differ from NumPy's by the
rounding of a float32 sum, so float32 results agree to ``atol=rtol=2e-5`` (about 1e-6 typical)
plus ``eps32 * |mean| / std`` for rows far from zero (one ulp of the mean in ``x - mean``; a
gradient, that fraction of its largest element); float64 to ``1e-12``. The elementwise parts
(centering, scaling, the affine map) are the same float operations in the same order as NumPy's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import OpRegion, Value
from sadl_kernels._jit import jit_sums
from sadl_kernels._match import contiguous

__all__ = ["NORM_KERNELS", "norm_backward_into", "norm_forward_into"]


@jit_sums
def _forward(x, w, b, mean, xhat, rstd, y, centered, affine, inv, eps):  # type: ignore[no-untyped-def]
    n, d = x.shape
    for i in range(n):
        if centered:
            s = 0.0
            for j in range(d):
                s += x[i, j]
            mean[i, 0] = s * inv
            m = mean[i, 0]
            for j in range(d):
                xhat[i, j] = x[i, j] - m
        else:
            for j in range(d):
                xhat[i, j] = x[i, j]
        q = 0.0
        for j in range(d):
            v = float(xhat[i, j])
            q += v * v
        rstd[i, 0] = 1.0 / np.sqrt(q * inv + eps)
        r = rstd[i, 0]
        for j in range(d):
            xhat[i, j] = xhat[i, j] * r
        if affine == 1:
            for j in range(d):
                y[i, j] = xhat[i, j] * w[j]
        elif affine == 2:
            for j in range(d):
                y[i, j] = xhat[i, j] * w[j] + b[j]


Array = np.ndarray[Any, Any]


class _Scratch(threading.local):
    def __init__(self) -> None:
        self.arrays: dict[tuple[Any, ...], np.ndarray[Any, Any]] = {}


_SCRATCH = _Scratch()


def scratch(tag: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
    """A buffer of ``shape`` kept per thread between calls (contents undefined)."""
    key = (tag, shape, np.dtype(dtype))
    array = _SCRATCH.arrays.get(key)
    if array is None:
        array = _SCRATCH.arrays[key] = np.empty(shape, dtype)
    return array


def _widened(*arrays: Any) -> list[Any]:
    """float16 arrays in float32 (sadl-layers computes a float16 norm so, as torch does)."""
    return [a if a is None or a.dtype != np.float16 else a.astype(np.float32) for a in arrays]


def norm_forward_into(
    x: Array, w: Array | None, b: Array | None, y: Array, eps: float, d: int, centered: bool
) -> None:
    """``y = norm(x) [* w] [+ b]`` over rows of ``d`` (centered: layer norm; else RMS norm)."""
    if y.dtype == np.float16:
        wide = scratch("wide", y.shape, np.float32)
        x32, w32, b32 = _widened(x, w, b)
        norm_forward_into(x32, w32, b32, wide, eps, d, centered)
        y[...] = wide
        return
    x2, y2 = x.reshape(-1, d), y.reshape(-1, d)
    n = x2.shape[0]
    stats = scratch("stats", (2, n, 1), x.dtype)
    affine = 0 if w is None else (1 if b is None else 2)
    dummy = scratch("vec", (d,), x.dtype)
    w1 = dummy if w is None else w.reshape(-1)
    b1 = dummy if b is None else b.reshape(-1)
    # y doubles as the normalized rows: each element is read before its affine map writes it
    _forward(x2, w1, b1, stats[0], y2, stats[1], y2, centered, affine, 1.0 / d, eps)


def norm_backward_into(
    g: Array,
    x: Array,
    w: Array | None,
    packed: Array,
    eps: float,
    d: int,
    centered: bool,
    has_bias: bool,
) -> None:
    """``packed`` = dx, dweight (when ``w``), dbias (when ``has_bias``) back to back."""
    if packed.dtype == np.float16:
        wide = scratch("wide", packed.shape, np.float32)
        g32, x32, w32 = _widened(g, x, w)
        norm_backward_into(g32, x32, w32, wide, eps, d, centered, has_bias)
        packed[...] = wide
        return
    x2, g2 = x.reshape(-1, d), g.reshape(-1, d)
    n = x2.shape[0]
    dt = packed.dtype
    gx = packed[: n * d].reshape(n, d)
    at = n * d
    dweight = None
    if w is not None:
        dweight, at = packed[at : at + d], at + d
    dbias = packed[at : at + d] if has_bias else None
    stats = scratch("stats", (4, n, 1), dt)
    xhat = scratch("xhat", (n, d), dt)
    vecs = scratch("vecs", (4, d), dt)
    inv = 1.0 / d
    _forward(x2, vecs[0], vecs[0], stats[0], xhat, stats[1], xhat, centered, 0, inv, eps)
    for total in (dweight, dbias):
        if total is not None:
            total[...] = 0
    ones = vecs[0]
    ones[...] = 1
    flags = np.array([False, centered, dbias is not None, dweight is not None])
    _backward(
        g2,
        ones if w is None else w.reshape(-1),
        x2,
        stats[0],
        stats[1],
        xhat,
        gx,
        stats[2],
        stats[3],
        xhat,  # the product xhat * b: each element written after its last read of xhat
        vecs[1] if dbias is None else dbias,
        vecs[1] if dweight is None else dweight,
        vecs[2],
        vecs[3],
        flags,
        inv,
    )


@jit_sums
def _backward(g, w, x, mean, rstd, xhat, gx, a, bcol, p, dbias, dweight, db1, dw1, flags, inv):  # type: ignore[no-untyped-def]
    recompute, centered, has_db, has_dw = flags[0], flags[1], flags[2], flags[3]
    n, d = g.shape
    acc_b = np.zeros(d)
    acc_w = np.zeros(d)
    for i in range(n):
        r = rstd[i, 0]
        if recompute:
            m = mean[i, 0]
            for j in range(d):
                xhat[i, j] = (x[i, j] - m) * r
        s = 0.0
        t = 0.0
        for j in range(d):
            gv = g[i, j]
            h = gv * w[j]
            gx[i, j] = h
            s += h
            t += float(h) * xhat[i, j]
            acc_b[j] += gv
            acc_w[j] += float(gv) * xhat[i, j]
        if centered:
            a[i, 0] = s * inv
        bcol[i, 0] = t * inv
        av = a[i, 0] if centered else 0.0
        bv = bcol[i, 0]
        for j in range(d):
            p[i, j] = xhat[i, j] * bv
            if centered:
                gx[i, j] = ((gx[i, j] - p[i, j]) - av) * r
            else:
                gx[i, j] = (gx[i, j] - p[i, j]) * r
    if has_db:
        for j in range(d):
            db1[j] = acc_b[j]
            dbias[j] += db1[j]
    if has_dw:
        for j in range(d):
            dw1[j] = acc_w[j]
            dweight[j] += dw1[j]


def _plain(*values: Any) -> bool:
    vs = [v for v in values if v is not None]
    return (
        all(type(v) is Value and contiguous(v) and v.storage.device is None for v in vs)
        and len({v.dtype for v in vs}) == 1
        and vs[0].dtype in (np.float16, np.float32, np.float64)
    )


def _width(region: OpRegion) -> int | None:
    ns = region.params.get("normalized_shape")
    x = region.inputs[0]
    if ns is None:
        return x.shape[-1] if x.shape else None
    ns = (int(ns),) if isinstance(ns, int) else tuple(ns)
    return math.prod(ns) if x.shape[len(x.shape) - len(ns) :] == ns else None


def _call(region: OpRegion) -> tuple[Callable[..., None], tuple[Any, ...], Value] | None:
    """(kernel, its arguments, the value it writes) for the region, None when it does not fit."""
    name = region.op.name
    out = region.outputs[0] if len(region.outputs) == 1 else None
    d = _width(region)
    if out is None or d is None or not region.inputs:
        return None
    x = region.inputs[0]
    eps = region.params.get("eps", 1e-5 if name == "layer_norm" else None)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    if name == "layer_norm_backward":
        g, x, w = (*region.inputs, None, None)[:3]
        centered = bool(region.params.get("centered", True))
        has_bias = bool(region.params.get("has_bias"))
        if not _plain(g, x, w, out) or g.shape != x.shape:
            return None
        return norm_backward_into, (g, x, w, out, float(eps), d, centered, has_bias), out
    x, w, b = (*region.inputs, None, None)[:3]
    if name == "rms_norm":
        b = None
    if not _plain(x, w, b, out) or out.shape != x.shape:
        return None
    return norm_forward_into, (x, w, b, out, float(eps), d, name == "layer_norm"), out


#: The kernel for each registered op name: ``kernel(region)`` -> (function, arguments, result).
NORM_KERNELS: dict[str, Callable[[OpRegion], Any]] = {
    "layer_norm": _call,
    "rms_norm": _call,
    "layer_norm_backward": _call,
}
