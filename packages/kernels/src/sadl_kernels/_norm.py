"""Layer norm and RMS norm, forward and backward, as numba loops over rows.

The kernels replace a recorded application of the ops registered as ``layer_norm``, ``rms_norm``
and ``layer_norm_backward`` (``sadl_kernels._ops``), whatever NumPy calls sadl-layers makes
inside (it computes block by block of rows, about a dozen calls per block). Per row, in one
pass: the row statistics (mean, 1/std), accumulated in float64 (the NumPy path sums in the
array's dtype) as four running sums added pairwise (a fixed order, no fastmath reassociation:
every compilation adds alike), then the normalized row and the affine map. The forward keeps
each row's statistics (rounded to the dtype, as the NumPy path keeps them) in a buffer of its
own; the backward of the same application reads them there (:func:`share_statistics` pairs the
two kernels) instead of recomputing them from the input, which it does only where no forward
kernel of its application ran. A float16 application runs in float32 and is cast back, as
sadl-layers (and torch) compute it.

Threads: the rows are a ``prange`` (on the threads sadl's policy gives, one below two threads'
share), each row computed alone, so the forward and the input gradient are bit for bit the
same on any thread count. The weight and bias gradients are summed per block of ``ROWS`` rows
(fixed, whatever the thread count) in float64, then the blocks' sums in block order: bit for
bit the same on any thread count too.

Tolerance (tested in ``tests/test_kernels_norm.py``): the row statistics differ from NumPy's by the
rounding of a float32 sum, so float32 results agree to ``atol=rtol=2e-5`` (about 1e-6 typical)
plus ``eps32 * |mean| / std`` for rows far from zero (one ulp of the mean in ``x - mean``; a
gradient, that fraction of its largest element); float64 to ``1e-12``. The elementwise parts
(centering, scaling, the affine map) are the same float operations in the same order as NumPy's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import Graph, OpRegion, Value, new_node
from sadl_kernels._jit import PER_THREAD, jit, prange
from sadl_kernels._match import contiguous

__all__ = ["NORM_KERNELS", "norm_backward_into", "norm_forward_into", "share_statistics"]

Array = np.ndarray[Any, Any]

#: Rows per block of the backward's weight/bias sums (their boundaries fix the bits).
ROWS = 64


@jit
def _row_stats(x, i, centered, inv, eps, stats):  # type: ignore[no-untyped-def]
    """Row ``i``'s mean (0 uncentered) and 1/std into ``stats[0, i]``, ``stats[1, i]``."""
    d = x.shape[1]
    d4 = d - d % 4
    if centered:  # four running sums (j mod 4), added pairwise: a fixed order that vectorizes
        s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0
        for j in range(0, d4, 4):
            s0 += x[i, j]
            s1 += x[i, j + 1]
            s2 += x[i, j + 2]
            s3 += x[i, j + 3]
        for j in range(d4, d):
            s0 += x[i, j]
        stats[0, i] = ((s0 + s1) + (s2 + s3)) * inv
    else:
        stats[0, i] = 0.0
    m = stats[0, i]
    q0, q1, q2, q3 = 0.0, 0.0, 0.0, 0.0
    for j in range(0, d4, 4):
        v0, v1 = float(x[i, j] - m), float(x[i, j + 1] - m)
        v2, v3 = float(x[i, j + 2] - m), float(x[i, j + 3] - m)
        q0 += v0 * v0
        q1 += v1 * v1
        q2 += v2 * v2
        q3 += v3 * v3
    for j in range(d4, d):
        v = float(x[i, j] - m)
        q0 += v * v
    stats[1, i] = 1.0 / np.sqrt(((q0 + q1) + (q2 + q3)) * inv + eps)


@jit(per_thread=PER_THREAD)
def _forward(x, w, b, stats, y, n, d, centered, affine, inv, eps):  # type: ignore[no-untyped-def]
    x2, y2, w1, b1 = x.reshape((n, d)), y.reshape((n, d)), w.reshape(w.size), b.reshape(b.size)
    for i in prange(n):
        _row_stats(x2, i, centered, inv, eps, stats)
        m = stats[0, i]
        r = stats[1, i]
        if affine == 0:
            for j in range(d):
                y2[i, j] = (x2[i, j] - m) * r
        elif affine == 1:
            for j in range(d):
                y2[i, j] = ((x2[i, j] - m) * r) * w1[j]
        else:
            for j in range(d):
                y2[i, j] = ((x2[i, j] - m) * r) * w1[j] + b1[j]


@jit(per_thread=PER_THREAD)
def _backward(g, w, x, stats, packed, sums, n, d, flags, inv, eps):  # type: ignore[no-untyped-def]
    # flags: the statistics are saved, centered, has dbias, has dweight; stats rows: mean,
    # 1/std, mean(h), mean(h * xhat) (each rounded to the dtype, as NumPy keeps them)
    saved, centered, has_db, has_dw = flags[0], flags[1], flags[2], flags[3]
    g2, x2, w1 = g.reshape((n, d)), x.reshape((n, d)), w.reshape(w.size)
    gx = packed[: n * d].reshape((n, d))
    blocks = (n + ROWS - 1) // ROWS
    d4 = d - d % 4
    for k in prange(blocks):
        for j in range(d):
            sums[0, k, j] = 0.0
            sums[1, k, j] = 0.0
        for i in range(k * ROWS, min(k * ROWS + ROWS, n)):
            if not saved:
                _row_stats(x2, i, centered, inv, eps, stats)
            m = stats[0, i]
            r = stats[1, i]
            for j in range(d):  # h = g * w into gx; the column sums of g and g * xhat
                gv = g2[i, j]
                gx[i, j] = gv * w1[j]
                sums[0, k, j] += gv
                sums[1, k, j] += float(gv) * ((x2[i, j] - m) * r)
            s0, s1, s2, s3 = 0.0, 0.0, 0.0, 0.0  # the row sums of h and h * xhat, as above
            t0, t1, t2, t3 = 0.0, 0.0, 0.0, 0.0
            for j in range(0, d4, 4):
                h0, h1, h2, h3 = gx[i, j], gx[i, j + 1], gx[i, j + 2], gx[i, j + 3]
                s0 += h0
                s1 += h1
                s2 += h2
                s3 += h3
                t0 += float(h0) * ((x2[i, j] - m) * r)
                t1 += float(h1) * ((x2[i, j + 1] - m) * r)
                t2 += float(h2) * ((x2[i, j + 2] - m) * r)
                t3 += float(h3) * ((x2[i, j + 3] - m) * r)
            for j in range(d4, d):
                s0 += gx[i, j]
                t0 += float(gx[i, j]) * ((x2[i, j] - m) * r)
            stats[2, i] = ((s0 + s1) + (s2 + s3)) * inv if centered else 0.0
            stats[3, i] = ((t0 + t1) + (t2 + t3)) * inv
            av = stats[2, i]
            bv = stats[3, i]
            for j in range(d):
                p = ((x2[i, j] - m) * r) * bv
                if centered:
                    gx[i, j] = ((gx[i, j] - p) - av) * r
                else:
                    gx[i, j] = (gx[i, j] - p) * r
    at = n * d
    if has_dw:
        for j in range(d):
            total = 0.0
            for k in range(blocks):
                total += sums[1, k, j]
            packed[at + j] = total
        at += d
    if has_db:
        for j in range(d):
            total = 0.0
            for k in range(blocks):
                total += sums[0, k, j]
            packed[at + j] = total


def _widened(*arrays: Any) -> list[Any]:
    """float16 arrays in float32 (sadl-layers computes a float16 norm so, as torch does)."""
    return [a if a.dtype != np.float16 else a.astype(np.float32) for a in arrays]


def norm_forward_into(
    x: Array, w: Array, b: Array, stats: Array, y: Array, n: int, d: int, *rest: Any
) -> None:
    """``y = norm(x) [* w] [+ b]`` over ``n`` rows of ``d``; each row's statistics in ``stats``.

    ``rest``: centered (layer norm; else RMS norm), affine (0: none, 1: ``w``, 2: ``w`` and
    ``b``; otherwise ``w``, ``b`` are placeholders), ``1 / d``, eps.
    """
    _forward.launch(n * d, x, w, b, stats, y, n, d, *rest)


def norm_backward_into(
    g: Array,
    x: Array,
    w: Array,
    stats: Array,
    packed: Array,
    sums: Array,
    n: int,
    d: int,
    *rest: Any,
) -> None:
    """``packed`` = dx, dweight (when flagged), dbias (when flagged) back to back.

    ``rest``: the flags (statistics saved in ``stats`` by the forward, centered, dbias,
    dweight), ``1 / d``, eps; ``sums`` holds the per-block weight/bias sums.
    """
    _backward.launch(n * d, g, w, x, stats, packed, sums, n, d, *rest)


def norm16_forward_into(x: Array, w: Array, b: Array, stats: Array, y: Array, *rest: Any) -> None:
    """:func:`norm_forward_into` for float16 arrays, computed on the float32 widening."""
    wide = np.empty(y.shape, np.float32)
    norm_forward_into(*_widened(x, w, b), stats, wide, *rest)
    y[...] = wide


def norm16_backward_into(
    g: Array, x: Array, w: Array, stats: Array, packed: Array, *rest: Any
) -> None:
    """:func:`norm_backward_into` for float16 arrays, computed on the float32 widening."""
    wide = np.empty(packed.shape, np.float32)
    norm_backward_into(*_widened(g, x, w), stats, wide, *rest)
    packed[...] = wide


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
    """(kernel, its arguments, the value it writes) for the region, None when it does not fit.

    The arguments carry buffers of the application's own (made here, once): the row statistics,
    the backward's per-block sums, placeholders for an absent weight or bias.
    """
    name = region.op.name
    out = region.outputs[0] if len(region.outputs) == 1 else None
    d = _width(region)
    if out is None or d is None or not region.inputs:
        return None
    x = region.inputs[0]
    eps = region.params.get("eps", 1e-5 if name == "layer_norm" else None)
    if eps is None:
        eps = float(np.finfo(x.dtype).eps)
    n = math.prod(x.shape) // d if d else 0
    wide = np.float32 if x.dtype == np.float16 else x.dtype  # the dtype the kernel computes in
    stats = np.zeros((4, n), wide)
    if name == "layer_norm_backward":
        g, x, w = (*region.inputs, None, None)[:3]
        centered = bool(region.params.get("centered", True))
        has_bias = bool(region.params.get("has_bias"))
        if not _plain(g, x, w, out) or g.shape != x.shape:
            return None
        flags = np.array([False, centered, has_bias, w is not None])
        sums = np.empty((2, (n + ROWS - 1) // ROWS, d))
        back: Callable[..., None] = norm_backward_into
        if out.dtype == np.float16:
            back = norm16_backward_into
        ones = w if w is not None else np.ones(d, wide)
        return back, (g, x, ones, stats, out, sums, n, d, flags, 1.0 / d, float(eps)), out
    x, w, b = (*region.inputs, None, None)[:3]
    if name == "rms_norm":
        b = None
    if not _plain(x, w, b, out) or out.shape != x.shape:
        return None
    affine = 0 if w is None else (1 if b is None else 2)
    dummy = np.zeros(d, wide)
    w, b = (dummy if v is None else v for v in (w, b))
    func = norm16_forward_into if out.dtype == np.float16 else norm_forward_into
    centered = name == "layer_norm"
    return func, (x, w, b, stats, out, n, d, centered, affine, 1.0 / d, float(eps)), out


def _rule_result(region: OpRegion | None) -> Value | None:
    """The forward result of the layer/RMS norm whose backward rule made ``region`` (a part of a
    ``layer_norm_backward`` application), None when it is not one.
    """
    while region is not None and region.op.name != "layer_norm_backward":
        region = region.parent
    rule = None if region is None else region.parent
    if rule is None or rule.phase != "backward" or rule.op.name not in ("layer_norm", "rms_norm"):
        return None
    found = rule.inputs[1] if len(rule.inputs) > 1 else None
    return found if type(found) is Value else None


def share_statistics(graph: Graph) -> int:
    """Point each backward norm kernel at the statistics its forward kernel keeps, where the
    two belong to one application (the backward rule's forward result is what the forward
    kernel wrote), see the same input, eps and width, and nothing between them writes the
    input. The backward then reads the forward's result too, so the forward kernel is kept
    whenever the backward is. Returns how many backward kernels share.
    """
    forwards: dict[int, tuple[int, Any]] = {}
    shared = 0
    for i, node in enumerate(graph.nodes):
        if node.func is norm_forward_into:
            forwards[id(node.args[4].storage)] = (i, node)
            continue
        if node.func is not norm_backward_into:
            continue
        result = _rule_result(node.region)
        start, forward = forwards.get(id(result.storage), (-1, None)) if result else (-1, None)
        if forward is None:
            continue
        x, fx = node.args[1], forward.args[0]
        same = fx is x and forward.args[5:8] == (node.args[6], node.args[7], node.args[8][1])
        if not same or forward.args[-1] != node.args[-1]:
            continue
        if any(v.storage is x.storage for n in graph.nodes[start + 1 : i] for v in n.writes):
            continue
        flags = node.args[8].copy()
        flags[0] = True
        args = (*node.args[:3], forward.args[3], *node.args[4:8], flags, *node.args[9:])
        reads = (*node.reads, forward.args[4])
        graph.nodes[i] = new_node(node, args=args, reads=reads)
        shared += 1
    return shared


#: The kernel for each registered op name: ``kernel(region)`` -> (function, arguments, result).
NORM_KERNELS: dict[str, Callable[[OpRegion], Any]] = {
    "layer_norm": _call,
    "rms_norm": _call,
    "layer_norm_backward": _call,
}
