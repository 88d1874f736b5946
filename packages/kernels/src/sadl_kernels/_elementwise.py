"""GELU (tanh approximation) forward and backward as numba loops.

The GELU loops are what ``_gelu.py`` runs for the recorded ``gelu`` and ``gelu_backward`` op
applications, each in one pass over chunks of the flat arrays (on the threads sadl's policy
gives, the same chunks on any count) where sadl-layers' blocks make eight in-place ufunc calls
(fifteen for the gradient); the softmax kernels are ``_softmax.py``'s.

Tolerance (tested in ``tests/test_kernels_elementwise.py``): the arithmetic is NumPy's, in the same
order and dtype, except ``tanh``, a float32 rational approximation that vectorizes (within
3.5e-7 of the exact value; GELU is therefore float32 only, float64 stays with NumPy). GELU
agrees with eager to ``atol=rtol=1e-6`` forward and ``5e-6 * |g| + 1e-6 * |dx|`` backward
(GELU' multiplies the tanh error by up to ``|x|^3 / 10`` where tanh is near +-1).
"""

from __future__ import annotations

import numpy as np

from sadl_kernels._jit import PER_THREAD, jit, prange

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
        start = k * CHUNK
        for j in range(min(CHUNK, n - start)):  # (a count from 0: the loop vectorizes, where
            i = start + j  # range(start, min(start + CHUNK, n)) ran 13x slower, scalar)
            o1[i] = _gelu1(x1[i], a_, c_, one, half)


@jit(per_thread=PER_THREAD)
def _gelu_backward(x, g, out, ac, c, ac3, c2):  # type: ignore[no-untyped-def]
    x1, g1, o1 = x.reshape(-1), g.reshape(-1), out.reshape(-1)
    n = x1.size
    dt = x1.dtype.type
    a_, c_, a3, c2_ = dt(ac), dt(c), dt(ac3), dt(c2)  # (new names: parfors mishandle rebinding)
    one, half = dt(1.0), dt(0.5)
    for k in prange((n + CHUNK - 1) // CHUNK):
        start = k * CHUNK
        for j in range(min(CHUNK, n - start)):  # (counted from 0, as in _gelu_forward)
            i = start + j
            v = x1[i]
            sq = v * v
            t = _tanh32((sq * a_ + c_) * v)
            u = (sq * a3 + c2_) * v
            o1[i] = ((one - t) * u + one) * (t + one) * half * g1[i]
