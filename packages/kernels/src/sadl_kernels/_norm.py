"""Layer norm and RMS norm, forward and backward, as one numba loop over each block of rows.

sadl-layers computes a norm block by block of rows (``_normalize_into`` and the backward's loop),
about a dozen NumPy calls per block: a GEMV for the row mean, an einsum for the variance, five
in-place ufuncs for ``1/sqrt``, the affine map. The kernels do the same per row in one pass,
with the row sums accumulated in float64 (the NumPy path sums in the array's dtype), and write
every array the calls would have left behind (the mean, the 1/std column, the normalized rows,
the scratch products), so later calls that read them see the same contents.

Tolerance (tested in ``tests/test_kernels_norm.py``): the row statistics differ from NumPy's by the
rounding of a float32 sum, so float32 results agree to ``atol=rtol=2e-5`` (about 1e-6 typical)
plus ``eps32 * |mean| / std`` for rows far from zero (one ulp of the mean in ``x - mean``; a
gradient, that fraction of its largest element); float64 to ``1e-12``. The elementwise parts
(centering, scaling, the affine map) are the same float operations in the same order as NumPy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl_kernels._jit import jit_sums, prange
from sadl_kernels._match import Cap, Lit, Pattern, Step, contiguous, disjoint

__all__ = ["PATTERNS", "layer_norm_backward", "layer_norm_forward"]


@jit_sums  # one thread for now: its parallel compilation measured 250x slower (2 threads)
def _forward(x, w, b, mean, xhat, rstd, y, centered, affine, inv, eps):  # type: ignore[no-untyped-def]
    n, d = x.shape
    for i in prange(n):  # rows on threads, each row's sums in order on one
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


def layer_norm_forward(x, ones, w, b, mean, xhat, var, rstd, y, centered, inv, eps):  # type: ignore[no-untyped-def]
    """The forward block: writes ``mean`` (centered), ``xhat``, ``rstd`` (a view of ``var``)
    and ``y`` (``xhat * w [+ b]`` when ``w`` is given), from ``x`` of shape (rows, D).
    """
    affine = 0 if w is None else (1 if b is None else 2)
    dummy = xhat[0] if xhat.shape[0] else np.empty(xhat.shape[1], xhat.dtype)
    _forward.launch(
        x.size,
        x,
        dummy if w is None else w,
        dummy if b is None else b,
        rstd if mean is None else mean,
        xhat,
        rstd,
        xhat if y is None else y,
        centered,
        affine,
        inv,
        eps,
    )


@jit_sums  # one thread for now: its parallel compilation measured 3x slower (2 threads)
def _backward(g, w, x, mean, rstd, xhat, gx, a, bcol, p, dbias, dweight, db1, dw1, flags, inv):  # type: ignore[no-untyped-def]
    recompute, centered, has_db, has_dw = flags[0], flags[1], flags[2], flags[3]
    split = flags[4]  # the column sums in a pass of their own (on threads: rows are split)
    n, d = g.shape
    acc_b = np.empty(d)
    acc_w = np.empty(d)
    for j in range(d):  # (a loop, not np.zeros: numba would make that a parallel region too)
        acc_b[j] = 0.0
        acc_w[j] = 0.0
    for i in prange(n):  # rows on threads, each row's sums in order on one
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
            if not split:
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
    if split and (has_db or has_dw):  # by slices of columns, each over the rows in order
        for c in prange((d + _COLUMNS - 1) // _COLUMNS):
            lo = c * _COLUMNS
            for i in range(n):
                for k in range(min(d, lo + _COLUMNS) - lo):  # (this form vectorizes)
                    gv = g[i, lo + k]
                    acc_b[lo + k] += gv
                    acc_w[lo + k] += float(gv) * xhat[i, lo + k]
    if has_db:
        for j in range(d):
            db1[j] = acc_b[j]
            dbias[j] += db1[j]
    if has_dw:
        for j in range(d):
            dw1[j] = acc_w[j]
            dweight[j] += dw1[j]


#: Columns of a slice of the backward's column sums on threads.
_COLUMNS = 32


def layer_norm_backward(  # type: ignore[no-untyped-def]
    g, w, x, mean, rstd, ones_r, ones, dbias, dweight, gx, xhat, a, bvec, bcol, p, db1, dw1, inv
):
    """The backward block: ``gx`` (dx), and ``dbias``/``dweight`` accumulated, as
    sadl-layers' ``_layer_norm_backward`` computes them for one block.
    """
    d = g.shape[1]
    spare = np.empty((g.shape[0], 1), g.dtype) if a is None else a
    vec = np.empty(d, g.dtype)
    split = _backward.threads(g.size) > 1  # the same count the launch gets
    flags = np.array([x is not None, a is not None, dbias is not None, dweight is not None, split])
    _backward.launch(
        g.size,
        g,
        w,
        g if x is None else x,
        spare if mean is None else mean,
        rstd,
        xhat,
        gx,
        spare,
        bcol,
        p,
        vec if dbias is None else dbias,
        vec if dweight is None else dweight,
        vec if db1 is None else db1,
        vec if dw1 is None else dw1,
        flags,
        inv,
    )


def _rows(v: Any, n: int, d: int) -> bool:
    return v is not None and v.shape == (n, d) and contiguous(v)


def _column(v: Any, n: int) -> bool:
    return v is not None and v.shape == (n, 1)


def _vector(v: Any, d: int) -> bool:
    return v is None or (v.shape == (d,) and contiguous(v))


def _ones(v: Any, shape: tuple[int, ...]) -> bool:
    array = getattr(v, "array", None)
    return v is not None and v.shape == shape and array is not None and bool(np.all(array == 1))


def _forward_check(b: dict[str, Any]) -> tuple[Any, ...] | None:
    x, xhat = b["X"], b["XH"]
    if len(x.shape) != 2:
        return None
    n, d = x.shape
    centered = "MEAN" in b
    inv = 1.0 / d
    if not (_rows(x, n, d) and _rows(xhat, n, d) and _column(b["RSTD"], n)):
        return None
    if b["VAR"].shape != (n,) or b["RSTD"].storage is not b["VAR"].storage:
        return None
    if b["inv2"] != inv or (centered and (b["inv1"] != inv or not _column(b["MEAN"], n))):
        return None
    if centered and not _ones(b["ONES"], (d, 1)):
        return None
    y = b.get("Y")
    if ("W" in b) != (y is not None) or ("B" in b and "W" not in b):
        return None
    if y is not None and not (_rows(y, n, d) and _vector(b["W"], d) and _vector(b.get("B"), d)):
        return None
    outs = (xhat, b["VAR"], b.get("MEAN"), y)
    if not all(disjoint(i, *outs) for i in (x, b.get("W"), b.get("B"))):
        return None
    if len({v.dtype for v in (x, xhat, b["VAR"], b.get("W"), b.get("B"), y) if v is not None}) != 1:
        return None
    return (centered, inv, b["eps"])


_FORWARD_TAIL = (
    Step("einsum", (Lit("ij,ij->i"), "XH", "XH"), result="VAR"),
    Step("multiply", ("RSTD", Cap("inv2")), out="RSTD"),
    Step("add", ("RSTD", Cap("eps")), out="RSTD"),
    Step("sqrt", ("RSTD",), out="RSTD"),
    Step("reciprocal", ("RSTD",), out="RSTD"),
    Step("multiply", ("XH", "RSTD"), out="XH"),
    Step("multiply", ("XH", "W"), out="Y", optional=True),
    Step("add", ("Y", "B"), out="Y", optional=True),
)

_FORWARD_READS = ("X", "ONES", "W", "B")
_FORWARD_PROVIDES = ("MEAN", "XH", "VAR", "RSTD", "Y")

LAYER_NORM_FORWARD = Pattern(
    "layer_norm",
    (
        Step("matmul", ("X", "ONES"), result="MEAN"),
        Step("multiply", ("MEAN", Cap("inv1")), out="MEAN"),
        Step("subtract", ("X", "MEAN"), out="XH"),
        *_FORWARD_TAIL,
    ),
    _FORWARD_READS,
    _FORWARD_PROVIDES,
    layer_norm_forward,
    _forward_check,
)

RMS_NORM_FORWARD = Pattern(
    "layer_norm",
    (Step("__setitem__", ("XH", Lit(Ellipsis), "X")), *_FORWARD_TAIL),
    _FORWARD_READS,
    _FORWARD_PROVIDES,
    layer_norm_forward,
    _forward_check,
)


def _backward_check(b: dict[str, Any]) -> tuple[Any, ...] | None:
    pairs = ((0, 1), (2, 3), (4, 5), (7, 8), (7, 13))
    if any((f"#{i}" in b) != (f"#{j}" in b) for i, j in pairs):
        return None  # an optional call without its partner: not sadl-layers' sequence
    g, xhat = b["G"], b["XH"]
    if len(g.shape) != 2:
        return None
    n, d = g.shape
    inv = 1.0 / d
    if not (_rows(g, n, d) and _rows(xhat, n, d) and _rows(b["GX"], n, d) and _rows(b["P"], n, d)):
        return None
    if not (_column(b["RSTD"], n) and _column(b["BB"], n) and b["BV"].shape == (n,)):
        return None
    if b["BB"].storage is not b["BV"].storage or b["inv2"] != inv or not _vector(b["W"], d):
        return None
    if ("X" in b) != ("MEAN" in b) or (
        "X" in b and not (_rows(b["X"], n, d) and _column(b["MEAN"], n))
    ):
        return None
    if ("A" in b) != ("ONES" in b) or ("A" in b and (b["inv1"] != inv or not _column(b["A"], n))):
        return None
    if "ONES" in b and not _ones(b["ONES"], (d, 1)):
        return None
    if ("DBIAS" in b) != ("DB1" in b) or ("DWEIGHT" in b) != ("DW1" in b):
        return None
    if "DB1" in b and not (_ones(b["ONESR"], (n,)) and _vector(b["DBIAS"], d)):
        return None
    if "DW1" in b and not _vector(b["DWEIGHT"], d):
        return None
    outs = (b["GX"], b["P"], b["BV"], b.get("A"), b.get("DBIAS"), b.get("DWEIGHT"))
    ins = (g, b["W"], b.get("X"), b.get("MEAN"), b["RSTD"])
    if not disjoint(xhat, *outs) or not all(disjoint(i, xhat, *outs) for i in ins):
        return None
    if len({v.dtype for v in (g, xhat, *outs, b["W"]) if v is not None}) != 1:
        return None
    return (inv,)


LAYER_NORM_BACKWARD = Pattern(
    "layer_norm",
    (
        Step("subtract", ("X", "MEAN"), out="XH", optional=True),
        Step("multiply", ("XH", "RSTD"), out="XH", optional=True),
        Step("matmul", ("ONESR", "G"), result="DB1", optional=True),
        Step("add", ("DBIAS", "DB1"), out="DBIAS", optional=True),
        Step("einsum", (Lit("ij,ij->j"), "G", "XH"), result="DW1", optional=True),
        Step("add", ("DWEIGHT", "DW1"), out="DWEIGHT", optional=True),
        Step("multiply", ("G", "W"), out="GX"),
        Step("matmul", ("GX", "ONES"), result="A", optional=True),
        Step("multiply", ("A", Cap("inv1")), out="A", optional=True),
        Step("einsum", (Lit("ij,ij->i"), "GX", "XH"), result="BV"),
        Step("multiply", ("BB", Cap("inv2")), out="BB"),
        Step("multiply", ("XH", "BB"), out="P"),
        Step("subtract", ("GX", "P"), out="GX"),
        Step("subtract", ("GX", "A"), out="GX", optional=True),
        Step("multiply", ("GX", "RSTD"), out="GX"),
    ),
    ("G", "W", "X", "MEAN", "RSTD", "ONESR", "ONES"),
    ("DBIAS", "DWEIGHT", "GX", "XH", "A", "BV", "BB", "P", "DB1", "DW1"),
    layer_norm_backward,
    _backward_check,
)

PATTERNS = (LAYER_NORM_FORWARD, RMS_NORM_FORWARD, LAYER_NORM_BACKWARD)
