"""Softmax and log-softmax, forward and backward, as kernels for their recorded op applications.

The ops are found by their registered names (``sadl_kernels._ops``): sadl-layers'
``masked_softmax`` (the attention's, over the key axis, with its causal or user mask; the
cross-entropy's gradient), ``masked_log_softmax`` (the cross-entropy's row terms),
``softmax_backward`` and ``log_softmax_backward``, and core's ``softmax`` and ``log_softmax``
(forward; their backward rules stay NumPy), whatever NumPy calls the ops make inside. Each
application becomes one kernel call that writes the op's result from its inputs.

The reduced axis is the third of a 4-D view ``(A, B, N, Q)`` of the arrays (the attention's
``(batch, heads, keys, queries)`` as it is; any other shape reshaped around the axis), each
``(a, b)`` matrix on one thread (``prange``), so the results are bit for bit the same on any
thread count. The arithmetic is the op's, in the same order and dtype, except the sums over the
axis, accumulated in float64 (NumPy sums in the array's dtype), and log-softmax's ``exp`` and
``log`` inside the sum, taken in float64; the softmax's ``exp`` is NumPy's (its SIMD loop is
faster than a scalar one). The innermost axis reduced (cross-entropy's classes: ``Q`` is 1) runs
kernels over ``(rows, N)`` instead, whose loops vectorize; there log-softmax's ``exp`` is NumPy's
too, in the dtype. Tolerance to eager (tested in ``tests/test_kernels_softmax.py``):
``atol = rtol = 1e-5`` in float32, ``1e-13`` in float64.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from sadl_kernels._api import OpRegion, Value
from sadl_kernels._jit import PER_THREAD, jit, jit_sums, prange
from sadl_kernels._match import contiguous

__all__ = ["SOFTMAX_KERNELS", "softmax_backward_into", "softmax_into"]

Array = np.ndarray[Any, Any]


@jit(per_thread=PER_THREAD)
def _shift(x, m, has_mask, out):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = out.shape
    for ah in prange(n0 * n1):  # each (a, b) matrix on one thread
        a, b = ah // n1, ah % n1
        for k in range(nk):
            for q in range(nq):
                out[a, b, k, q] = x[a, b, k, q] + m[a, b, k, q] if has_mask else x[a, b, k, q]
        mx = out[a, b, 0].copy()
        for k in range(1, nk):
            for q in range(nq):
                v = out[a, b, k, q]
                w = mx[q]
                mx[q] = v if (v > w or v != v) else w  # np.max: a NaN wins
        for k in range(nk):
            for q in range(nq):
                out[a, b, k, q] = out[a, b, k, q] - mx[q]


@jit_sums(per_thread=PER_THREAD)
def _scale(out):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = out.shape
    for ah in prange(n0 * n1):
        a, b = ah // n1, ah % n1
        acc = np.zeros(nq)
        for k in range(nk):
            for q in range(nq):
                acc[q] += out[a, b, k, q]
        den = out[a, b, 0].copy()
        for q in range(nq):
            den[q] = 1.0 / acc[q]  # rounded to the dtype, as NumPy's reciprocal is
        for k in range(nk):
            for q in range(nq):
                out[a, b, k, q] = out[a, b, k, q] * den[q]


@jit_sums(per_thread=PER_THREAD)
def _subtract_lse(out):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = out.shape
    for ah in prange(n0 * n1):
        a, b = ah // n1, ah % n1
        acc = np.zeros(nq)
        for k in range(nk):
            for q in range(nq):
                acc[q] += np.exp(float(out[a, b, k, q]))
        lse = out[a, b, 0].copy()
        for q in range(nq):
            lse[q] = np.log(acc[q])
        for k in range(nk):
            for q in range(nq):
                out[a, b, k, q] = out[a, b, k, q] - lse[q]


@jit_sums(per_thread=PER_THREAD)
def _softmax_grad(g, p, dx, log):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = dx.shape
    for ah in prange(n0 * n1):
        a, b = ah // n1, ah % n1
        acc = np.zeros(nq)
        for k in range(nk):
            for q in range(nq):
                acc[q] += g[a, b, k, q] if log else g[a, b, k, q] * p[a, b, k, q]
        s = dx[a, b, 0].copy()
        for q in range(nq):
            s[q] = acc[q]
        for k in range(nk):
            for q in range(nq):
                if log:  # g - exp(out) * sum(g)
                    dx[a, b, k, q] = g[a, b, k, q] - np.exp(p[a, b, k, q]) * s[q]
                else:  # out * (g - sum(g * out))
                    dx[a, b, k, q] = (g[a, b, k, q] - s[q]) * p[a, b, k, q]


# The innermost axis reduced (cross-entropy's classes): a 4-D view's Q is 1 and its loops over
# (k, q) ran scalar, 5-10x slower than NumPy; these take (rows, N) with N contiguous, one row
# per prange iteration, the operations of the loops above in the same order, except that
# log-softmax's exp (forward and backward) is NumPy's, in the dtype, before the loop.


@jit(per_thread=PER_THREAD)
def _shift_rows(x, m, has_mask, out):  # type: ignore[no-untyped-def]
    rows, nk = out.shape
    for r in prange(rows):
        if has_mask:
            for k in range(nk):
                out[r, k] = x[r, k] + m[r, k]
        else:
            for k in range(nk):
                out[r, k] = x[r, k]
        mx = out[r, 0]
        for k in range(1, nk):
            v = out[r, k]
            mx = v if (v > mx or v != v) else mx  # np.max: a NaN wins
        for k in range(nk):
            out[r, k] = out[r, k] - mx


@jit_sums(per_thread=PER_THREAD)
def _scale_rows(out):  # type: ignore[no-untyped-def]
    rows, nk = out.shape
    dt = out.dtype.type
    for r in prange(rows):
        acc = 0.0
        for k in range(nk):
            acc += out[r, k]
        den = dt(1.0 / acc)  # rounded to the dtype, as NumPy's reciprocal is
        for k in range(nk):
            out[r, k] = out[r, k] * den


@jit_sums(per_thread=PER_THREAD)
def _subtract_lse_rows(out, e):  # type: ignore[no-untyped-def]
    rows, nk = out.shape
    dt = out.dtype.type
    for r in prange(rows):
        acc = 0.0
        for k in range(nk):
            acc += float(e[r, k])  # e = exp(out), NumPy's (a scalar exp per element: 2x slower)
        lse = dt(np.log(acc))
        for k in range(nk):
            out[r, k] = out[r, k] - lse


@jit_sums(per_thread=PER_THREAD)
def _softmax_grad_rows(g, p, dx, log):  # type: ignore[no-untyped-def]
    # log: p holds exp(out), NumPy's
    rows, nk = dx.shape
    dt = dx.dtype.type
    for r in prange(rows):
        acc = 0.0
        if log:
            for k in range(nk):
                acc += g[r, k]
        else:
            for k in range(nk):
                acc += g[r, k] * p[r, k]
        s = dt(acc)
        if log:  # g - exp(out) * sum(g)
            for k in range(nk):
                dx[r, k] = g[r, k] - p[r, k] * s
        else:  # out * (g - sum(g * out))
            for k in range(nk):
                dx[r, k] = (g[r, k] - s) * p[r, k]


def _rows(a: Array) -> Array:
    """A 4-D view ``(A, B, N, 1)`` as ``(A * B, N)`` (a view for the contiguous arrays)."""
    return a.reshape(a.shape[0] * a.shape[1], a.shape[2])


def _as4(a: Array, axis: int, shape: tuple[int, ...]) -> Array:
    """``a`` (broadcast to ``shape``) as ``(A, B, N, Q)`` with ``axis`` third (a view where the
    layout allows: a 4-D array reduced over its third axis, or a contiguous one).
    """
    if a.shape != shape:
        a = np.broadcast_to(a, shape)
    if len(shape) == 4 and axis == 2:
        return a
    lead, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1 :])
    return a.reshape(1, lead, shape[axis], inner)


def softmax_into(x: Array, mask: Array | None, out: Array, axis: int, log: bool) -> None:
    """``out = softmax(x + mask)`` (``log``: log-softmax) along ``axis`` (normalized)."""
    o = _as4(out.reshape(x.shape), axis, x.shape)
    m = o if mask is None else _as4(mask, axis, x.shape)
    if o.shape[3] == 1:  # the innermost axis
        o2 = _rows(o)
        m2 = o2 if mask is None else _rows(m)
        _shift_rows.launch(o.size, _rows(_as4(x, axis, x.shape)), m2, mask is not None, o2)
        if log:
            _subtract_lse_rows.launch(o.size, o2, np.exp(o2))
        else:
            np.exp(o2, out=o2)
            _scale_rows.launch(o.size, o2)
        return
    _shift.launch(o.size, _as4(x, axis, x.shape), m, mask is not None, o)
    if log:
        _subtract_lse.launch(o.size, o)
    else:
        np.exp(o, out=o)
        _scale.launch(o.size, o)


def softmax_backward_into(g: Array, p: Array, out: Array, axis: int, log: bool) -> None:
    """``out = p * (g - sum(g * p))`` (``log``: ``g - exp(p) * sum(g)``) along ``axis``."""
    o = _as4(out.reshape(g.shape), axis, g.shape)
    g4, p4 = _as4(g, axis, g.shape), _as4(p, axis, g.shape)
    if o.shape[3] == 1:  # the innermost axis
        p2 = np.exp(_rows(p4)) if log else _rows(p4)
        _softmax_grad_rows.launch(o.size, _rows(g4), p2, _rows(o), log)
        return
    _softmax_grad.launch(o.size, g4, p4, o, log)


def _plain(v: Any, dtype: Any, shape: tuple[int, ...] | None = None) -> bool:
    return (
        type(v) is Value
        and v.dtype == dtype
        and v.storage.device is None
        and (shape is None or (contiguous(v) and v.shape == shape))
    )


def _call(region: OpRegion) -> tuple[Callable[..., None], tuple[Any, ...], Value] | None:
    """(kernel, its arguments, the value it writes), None for an application left to NumPy."""
    name = region.op.name
    if len(region.outputs) != 1 or region.outputs[0] is None or not region.inputs:
        return None
    out = region.outputs[0]
    x = region.inputs[0]
    if type(x) is not Value or x.dtype not in (np.float32, np.float64) or not x.shape:
        return None
    axis = region.params.get("axis", -1)
    if type(axis) is not int or not -len(x.shape) <= axis < len(x.shape):
        return None
    axis %= len(x.shape)
    if x.shape[axis] == 0 or 0 in x.shape or not _plain(out, x.dtype, x.shape):
        return None
    log = "log_softmax" in name
    if name.endswith("_backward"):
        if len(region.inputs) != 2 or not _plain(region.inputs[1], x.dtype, x.shape):
            return None
        if not contiguous(x):
            return None
        return softmax_backward_into, (x, region.inputs[1], out, axis, log), out
    mask = region.inputs[1] if len(region.inputs) > 1 else None
    if mask is not None:
        if not _plain(mask, x.dtype) or mask.storage is out.storage:
            return None
        try:
            if np.broadcast_shapes(mask.shape, x.shape) != x.shape:
                return None
        except ValueError:
            return None
    if not contiguous(x):
        return None
    return softmax_into, (x, mask, out, axis, log), out


#: The kernel for each registered op name (see ``sadl_kernels._ops.OP_KERNELS``).
SOFTMAX_KERNELS: dict[str, Callable[[OpRegion], Any]] = {
    name: _call
    for name in (
        "masked_softmax",
        "softmax",
        "softmax_backward",
        "masked_log_softmax",
        "log_softmax",
        "log_softmax_backward",
    )
}
