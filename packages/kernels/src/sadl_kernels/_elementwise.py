"""GELU (tanh approximation) forward and backward, and the attention's softmax, as numba loops.

The GELU loops are what ``_gelu.py`` runs for the recorded ``gelu`` and ``gelu_backward`` op
applications, each in one pass over chunks of the flat arrays (on the threads sadl's policy
gives, the same chunks on any count) where sadl-layers' blocks make eight in-place ufunc calls
(fifteen for the gradient). The attention's softmax over the key axis is seven
calls (``_softmax_keys_``: bias, max, subtract, exp, sum, reciprocal, scale) and the backward's
``dS^T = P^T * ((g v^T)^T - rowsum(g * out))``, whose two in-place ufuncs after the einsum
become one pass; those kernels replace the calls by their sequence (``SOFTMAX_PATTERNS``) and
write what the calls would have left in every array, so the rest of the step reads the same
memory.

Tolerance (tested in ``tests/test_kernels_elementwise.py``): the arithmetic is NumPy's, in the same
order and dtype, except ``tanh``, a float32 rational approximation that vectorizes (within
3.5e-7 of the exact value; GELU is therefore float32 only, float64 stays with NumPy), and the
softmax's denominator, summed in float64 (its ``exp`` is still NumPy's); the backward chain
is bit for bit. GELU agrees with eager
to ``atol=rtol=1e-6`` forward and ``5e-6 * |g| + 1e-6 * |dx|`` backward (GELU' multiplies the
tanh error by up to ``|x|^3 / 10`` where tanh is near +-1); the attention's softmax to
``atol=rtol=1e-5`` in float32 and ``1e-13`` in float64.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl_kernels._jit import PER_THREAD, jit, jit_sums, prange
from sadl_kernels._match import Pattern, Step, contiguous

__all__ = ["SOFTMAX_PATTERNS"]


#: Eigen's rational approximation of tanh in float32 (``generic_fast_tanh_float``): pure
#: arithmetic, so the loops vectorize (the C library's tanhf does not); within 3.5e-7 of the
#: exact value on every float32 (NumPy's SIMD tanh: 6e-8).
_CLAMP = np.float32(7.90531110763549805)
_A = tuple(
    np.float32(a)
    for a in (
        4.89352455891786e-03,
        6.37261928875436e-04,
        1.48572235717979e-05,
        5.12229709037114e-08,
        -8.60467152213735e-11,
        2.00018790482477e-13,
        -2.76076847742355e-16,
    )
)
_B = tuple(
    np.float32(b)
    for b in (
        4.89352518554385e-03,
        2.26843463243900e-03,
        1.18534705686654e-04,
        1.19825839466702e-06,
    )
)


@jit
def _tanh32(x):  # type: ignore[no-untyped-def]
    x = min(max(x, -_CLAMP), _CLAMP)
    x2 = x * x
    p = x2 * _A[6] + _A[5]
    p = p * x2 + _A[4]
    p = p * x2 + _A[3]
    p = p * x2 + _A[2]
    p = p * x2 + _A[1]
    p = p * x2 + _A[0]
    p = p * x
    q = x2 * _B[3] + _B[2]
    q = q * x2 + _B[1]
    q = q * x2 + _B[0]
    return p / q


#: Elements of a GELU kernel's chunk: the ``prange`` runs over whole chunks (the last one
#: shorter), each an inner loop that vectorizes; the chunks are the same on any thread count.
CHUNK = 8192


@jit
def _gelu1(v, a_, c_, one, half):  # type: ignore[no-untyped-def]
    return (_tanh32((v * v * a_ + c_) * v) + one) * v * half


@jit(per_thread=PER_THREAD)
def _gelu_forward(x, out, ac, c):  # type: ignore[no-untyped-def]
    x1, o1 = x.reshape(-1), out.reshape(-1)
    n = x1.size
    a_, c_ = x1.dtype.type(ac), x1.dtype.type(c)  # (new names: parfors mishandle rebinding)
    one = x1.dtype.type(1.0)
    half = x1.dtype.type(0.5)
    for k in prange((n + CHUNK - 1) // CHUNK):
        for i in range(k * CHUNK, min(k * CHUNK + CHUNK, n)):
            o1[i] = _gelu1(x1[i], a_, c_, one, half)


@jit(per_thread=PER_THREAD)
def _gelu_backward(x, g, out, ac, c, ac3, c2):  # type: ignore[no-untyped-def]
    x1, g1, o1 = x.reshape(-1), g.reshape(-1), out.reshape(-1)
    n = x1.size
    dt = x1.dtype.type
    a_, c_, a3, c2_ = dt(ac), dt(c), dt(ac3), dt(c2)  # (new names: parfors mishandle rebinding)
    one, half = dt(1.0), dt(0.5)
    for k in prange((n + CHUNK - 1) // CHUNK):
        for i in range(k * CHUNK, min(k * CHUNK + CHUNK, n)):
            v = x1[i]
            sq = v * v
            t = _tanh32((sq * a_ + c_) * v)
            u = (sq * a3 + c2_) * v
            o1[i] = ((one - t) * u + one) * (t + one) * half * g1[i]


@jit_sums(per_thread=PER_THREAD)
def _softmax_shift(st, bias, has_bias, mx):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = st.shape
    for ah in prange(n0 * n1):  # each (batch, head) matrix on one thread
        a, h = ah // n1, ah % n1
        if has_bias:
            for k in range(nk):
                for q in range(nq):
                    st[a, h, k, q] = st[a, h, k, q] + bias[a, h, k, q]
        for q in range(nq):
            mx[a, h, 0, q] = st[a, h, 0, q]
        for k in range(1, nk):
            for q in range(nq):
                v = st[a, h, k, q]
                m = mx[a, h, 0, q]
                mx[a, h, 0, q] = v if (v > m or v != v) else m
        for k in range(nk):
            for q in range(nq):
                st[a, h, k, q] = st[a, h, k, q] - mx[a, h, 0, q]


@jit_sums(per_thread=PER_THREAD)
def _softmax_scale(st, den):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = st.shape
    for ah in prange(n0 * n1):  # each (batch, head) matrix on one thread
        a, h = ah // n1, ah % n1
        acc = np.zeros(nq)
        for k in range(nk):
            for q in range(nq):
                acc[q] += st[a, h, k, q]
        for q in range(nq):
            den[a, h, 0, q] = 1.0 / acc[q]
        for k in range(nk):
            for q in range(nq):
                st[a, h, k, q] = st[a, h, k, q] * den[a, h, 0, q]


def softmax_keys(bias, st, mx, den):  # type: ignore[no-untyped-def]
    """In place: ``st`` (lead, Tk, Tq) <- softmax over axis -2 of ``st + bias``; leaves the
    column maxima in ``mx`` and the reciprocal sums in ``den`` as the NumPy calls do.
    """
    if bias is None:
        _softmax_shift.launch(st.size, st, st, False, mx)
    else:
        _softmax_shift.launch(st.size, st, np.broadcast_to(bias, st.shape), True, mx)
    np.exp(st, out=st)  # NumPy's SIMD exp: faster than a scalar loop over the C library's
    _softmax_scale.launch(st.size, st, den)


def _softmax_check(b: dict[str, Any]) -> tuple[Any, ...] | None:
    st = b["ST"]
    if len(st.shape) != 4 or not contiguous(st) or 0 in st.shape:
        return None
    reduced = (*st.shape[:2], 1, st.shape[3])
    for v in (b["MX"], b["DEN"]):
        if v.shape != reduced or v.dtype != st.dtype or not contiguous(v):
            return None
    bias = b.get("BIAS")
    if bias is not None:
        try:
            if np.broadcast_shapes(bias.shape, st.shape) != st.shape:
                return None
        except ValueError:
            return None
        if bias.dtype != st.dtype or bias.storage is st.storage:
            return None
    if len({id(b[n].storage) for n in ("ST", "MX", "DEN")}) != 3:
        return None
    return ()


SOFTMAX = Pattern(
    "softmax",
    (
        Step("add", ("ST", "BIAS"), out="ST", optional=True),
        Step("max", ("ST",), result="MX", kwargs={"axis": -2, "keepdims": True}),
        Step("subtract", ("ST", "MX"), out="ST"),
        Step("exp", ("ST",), out="ST"),
        Step("sum", ("ST",), result="DEN", kwargs={"axis": -2, "keepdims": True}),
        Step("reciprocal", ("DEN",), out="DEN"),
        Step("multiply", ("ST", "DEN"), out="ST"),
    ),
    ("BIAS",),
    ("ST", "MX", "DEN"),
    softmax_keys,
    _softmax_check,
)


@jit(per_thread=PER_THREAD)
def _softmax_backward(e2, pt, dst):  # type: ignore[no-untyped-def]
    n0, n1, nk, nq = dst.shape
    for ah in prange(n0 * n1):
        a, h = ah // n1, ah % n1
        for k in range(nk):
            for q in range(nq):
                dst[a, h, k, q] = (dst[a, h, k, q] - e2[a, h, 0, q]) * pt[a, h, k, q]


def softmax_backward(e2, pt, dst):  # type: ignore[no-untyped-def]
    """In place: ``dst`` (lead, Tk, Tq) <- ``(dst - e2) * pt``, the attention's ``dS^T / scale``
    from ``dP^T``, the row sums ``e2 = rowsum(g * out)`` (lead, 1, Tq) and the probabilities
    ``pt``: the same two float operations per element as NumPy's, bit for bit.
    """
    _softmax_backward.launch(dst.size, e2, pt, dst)


def _softmax_backward_check(b: dict[str, Any]) -> tuple[Any, ...] | None:
    dst, e2, pt = b["DST"], b["E2"], b["PT"]
    if len(dst.shape) != 4 or not contiguous(dst) or 0 in dst.shape:
        return None
    if e2.shape != (*dst.shape[:2], 1, dst.shape[3]) or pt.shape != dst.shape:
        return None
    if len({v.dtype for v in (dst, e2, pt)}) != 1:
        return None
    if dst.storage in (e2.storage, pt.storage):
        return None
    return ()


SOFTMAX_BACKWARD = Pattern(
    "softmax_backward",
    (
        Step("subtract", ("DST", "E2"), out="DST"),
        Step("multiply", ("DST", "PT"), out="DST"),
    ),
    ("E2", "PT"),
    ("DST",),
    softmax_backward,
    _softmax_backward_check,
)

SOFTMAX_PATTERNS = (SOFTMAX, SOFTMAX_BACKWARD)
