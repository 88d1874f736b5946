"""GELU (tanh approximation) forward and backward as numba loops.

The GELU loops are what ``_gelu.py`` runs for the recorded ``gelu`` and ``gelu_backward`` op
applications, each in one pass where sadl-layers' blocks make eight in-place ufunc calls (fifteen
for the gradient), leaving the same scratch (the softmax kernels are ``_softmax.py``'s).

Tolerance (tested in ``tests/test_kernels_elementwise.py``): the arithmetic is NumPy's, in the same
order and dtype, except ``tanh``, a float32 rational approximation that vectorizes (within
3.5e-7 of the exact value; GELU is therefore float32 only, float64 stays with NumPy). GELU
agrees with eager to ``atol=rtol=1e-6`` forward and ``5e-6 * |g| + 1e-6 * |dx|`` backward
(GELU' multiplies the tanh error by up to ``|x|^3 / 10`` where tanh is near +-1).
"""

from __future__ import annotations

import numpy as np

from sadl_kernels._jit import jit, prange

__all__: list[str] = []


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


@jit  # serial only: its parallel=True compilation left part of ``s`` unwritten (see _jit.py)
def _gelu_forward(x, s, out, ac, c):  # type: ignore[no-untyped-def]
    x1, s1, o1 = x.reshape(-1), s.reshape(-1), out.reshape(-1)
    a_, c_ = x1.dtype.type(ac), x1.dtype.type(c)  # (new names: parfors mishandle rebinding)
    one = x1.dtype.type(1.0)
    half = x1.dtype.type(0.5)
    for i in prange(x1.size):
        v = x1[i]
        t = _tanh32((v * v * a_ + c_) * v) + one
        s1[i] = t
        o1[i] = t * v * half


@jit  # serial only, as _gelu_forward
def _gelu_backward(x, g, s1, s2, out, ac, c, ac3, c2):  # type: ignore[no-untyped-def]
    x1, g1, a1, b1, o1 = (
        x.reshape(-1),
        g.reshape(-1),
        s1.reshape(-1),
        s2.reshape(-1),
        out.reshape(-1),
    )
    dt = x1.dtype.type
    a_, c_, a3, c2_ = dt(ac), dt(c), dt(ac3), dt(c2)  # (new names: parfors mishandle rebinding)
    one, half = dt(1.0), dt(0.5)
    for i in prange(x1.size):
        v = x1[i]
        sq = v * v
        t = _tanh32((sq * a_ + c_) * v)
        u = (sq * a3 + c2_) * v
        o = ((one - t) * u + one) * (t + one) * half * g1[i]
        a1[i] = t + one
        b1[i] = u
        o1[i] = o
