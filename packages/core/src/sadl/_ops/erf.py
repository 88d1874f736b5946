"""The error function family NumPy lacks: ``erf``, ``erfc``, ``erfinv`` and the normal CDF
``ndtr``, vectorised (``t.erf()``, ``sadl.ops.erf``; sadl-layers' exact GELU calls ``ndtr``).

float64 follows fdlibm's ``s_erf.c`` (Sun Microsystems, 1993: "Permission to use, copy, modify,
and distribute this software is freely granted, provided that this notice is preserved."): four
rational approximations on ``|x| < 0.84375``, ``< 1.25``, ``< 1/0.35`` and beyond, each within
1 ulp; erf beyond the first is ``1 - erfc(|x|)`` (still within 1 ulp). Here every element goes
through the one formula of its interval (index arrays pick them out, which is much cheaper than
boolean masks in NumPy).

float32 (and float16) ``erf`` takes a branch-free route for speed: ``erf(x) = tanh(x R(x^2))``
with R a (3, 3) rational fitted to ``artanh(erf(x)) / x`` (relative error 3e-9 on
``|x| <= 3.95``, where ``erf`` reaches 1 in float32), evaluated as a continued fraction: within
13 float32 ulp (8e-7 relative; 1 ulp on average), for about 1.8 times the cost of the tanh form
of GELU in an exact GELU. ``erfc`` and ``erfinv`` in float32 compute in
float64. ``erfinv`` starts from Giles' approximation ("Approximating the erfinv function", GPU
Computing Gems, 2011) and takes two Halley steps with the residual written as ``erf(t) - y`` or,
above 0.5, ``(1 - y) - erfc(t)``, so it keeps full relative accuracy up to ``y = 1 - 2**-53``.
``ndtr(x) = erfc(-x / sqrt 2) / 2`` in float64 (relative accuracy in the left tail); in float32 it
is ``(1 + erf(x / sqrt 2)) / 2`` through erf's fit with the ``1 / sqrt 2`` folded into the
coefficients: one pass fewer than erf plus the scaling, which is what exact GELU pays for.
"""

from __future__ import annotations

import math

import numpy as np

from sadl._records import Example, OpDef
from sadl.backends import array_module, value_dependent

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_BLOCK = 65536  # elements per block on the CPU: temporaries stay in the L2 cache


def _table(text):
    """Coefficients written as one string of numbers (each read as its float literal would be)."""
    return tuple(float(c) for c in text.split())


# fdlibm s_erf.c, lowest degree first.
_ERX = 8.45062911510467529297e-01
_PP = _table(
    "1.28379167095512558561e-01 -3.25042107247001499370e-01 -2.84817495755985104766e-02 "
    "-5.77027029648944159157e-03 -2.37630166566501626084e-05"
)
_QQ = _table(
    "1.0 3.97917223959155352819e-01 6.50222499887672944485e-02 5.08130628187576562776e-03 "
    "1.32494738004321644526e-04 -3.96022827877536812320e-06"
)
_PA = _table(
    "-2.36211856075265944077e-03 4.14856118683748331666e-01 -3.72207876035701323847e-01 "
    "3.18346619901161753674e-01 -1.10894694282396677476e-01 3.54783043256182359371e-02 "
    "-2.16637559486879084300e-03"
)
_QA = _table(
    "1.0 1.06420880400844228286e-01 5.40397917702171048937e-01 7.18286544141962662868e-02 "
    "1.26171219808761642112e-01 1.36370839120290507362e-02 1.19844998467991074170e-02"
)
_RA = _table(
    "-9.86494403484714822705e-03 -6.93858572707181764372e-01 -1.05586262253232909814e01 "
    "-6.23753324503260060396e01 -1.62396669462573470355e02 -1.84605092906711035994e02 "
    "-8.12874355063065934246e01 -9.81432934416914548592e00"
)
_SA = _table(
    "1.0 1.96512716674392571292e01 1.37657754143519042600e02 4.34565877475229228821e02 "
    "6.45387271733267880336e02 4.29008140027567833386e02 1.08635005541779435134e02 "
    "6.57024977031928170135e00 -6.04244152148580987438e-02"
)
_RB = _table(
    "-9.86494292470009928597e-03 -7.99283237680523006574e-01 -1.77579549177547519889e01 "
    "-1.60636384855821916062e02 -6.37566443368389627722e02 -1.02509513161107724954e03 "
    "-4.83519191608651397019e02"
)
_SB = _table(
    "1.0 3.03380607434824582924e01 3.25792512996573918826e02 1.53672958608443695994e03 "
    "3.19985821950859553908e03 2.55305040643316442583e03 4.74528541206955367215e02 "
    "-2.24409524465858183362e01"
)
# float32: erf(x) = tanh(x R(x*x)), R(s) = a + b / (s + c + d / (s + e + f / (s + g))), the
# (3, 3) rational fitted for this module to artanh(erf(x)) / x on |x| <= 3.95 (relative error
# 3.4e-9), written as a continued fraction: 9 array operations instead of 13 for P/Q. Every
# denominator stays above 2.5 for s >= 0, and R grows to a = 6.7, so erf saturates at +-1 and
# s = inf needs no special case.
_F32_CF = tuple(
    np.float32(c)
    for c in _table(
        "6.7 -356.8875310243414 66.18950515507946 -5.470408731654572 -12.07379080156743 "
        "273.8838951242516 18.712942183050888"
    )
)
# ndtr in float32: erf(x / sqrt 2) = tanh(x R'(x*x)) with R'(s) = R(s / 2) / sqrt 2, i.e. the
# coefficients above scaled as (a / sqrt 2, b sqrt 2, 2 c, 4 d, 2 e, 4 f, 2 g).
_F32_NDTR_CF = tuple(
    np.float32(float(c) * k)
    for c, k in zip(_F32_CF, (_SQRT_HALF, math.sqrt(2.0), 2.0, 4.0, 2.0, 4.0, 2.0), strict=True)
)
# Giles' single-precision erfinv, central (w < 5) and tail parts, highest degree first.
_GILES_CENTRAL = _table(
    "2.81022636e-08 3.43273939e-07 -3.5233877e-06 -4.39150654e-06 0.00021858087 -0.00125372503 "
    "-0.00417768164 0.246640727 1.50140941"
)
_GILES_TAIL = _table(
    "-0.000200214257 0.000100950558 0.00134934322 -0.00367342844 0.00573950773 -0.0076224613 "
    "0.00943887047 1.00167406 2.83297682"
)


def _poly(coeffs, t):
    """sum(c_k t**k) by Horner's rule (``coeffs`` lowest degree first)."""
    p = t * coeffs[-1] + coeffs[-2]
    for c in coeffs[-3::-1]:
        p *= t
        p += c
    return p


def _blockwise(kernel, x, dtype):
    """``kernel(flat_block, flat_out_block)`` over cache-sized blocks of ``x`` (one call off the
    CPU); flat views also keep a 0-d result an array (kernels write with ``out=``).
    """
    xp = array_module(x)
    out = xp.empty(x.shape, dtype=dtype)
    flat_in, flat_out = x.reshape(-1), out.reshape(-1)
    with np.errstate(all="ignore"):
        if xp.__name__ != "numpy" or x.size <= _BLOCK:
            kernel(flat_in, flat_out)
            return out
        for start in range(0, x.size, _BLOCK):
            kernel(flat_in[start : start + _BLOCK], flat_out[start : start + _BLOCK])
    return out


def _float_input(x, name):
    """``x`` as a float array (integers and bools become float64, as NumPy's ufuncs do)."""
    if not hasattr(x, "dtype"):
        x = np.asarray(x, dtype=np.float64)
    if x.dtype.kind == "c":
        raise TypeError(f"{name}: complex input is not supported")
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    return x


def _where(condition):
    """Flat positions where ``condition`` holds."""
    return array_module(condition).flatnonzero(condition)


_ERF_EXAMPLES = (
    Example((3, 4)),
    Example((2, 3, 4), domain=(-5.0, 5.0)),
    Example(np.array([-7.0, -1.0, -0.3, 0.0, 1e-9, 0.9, 1.3, 3.0, 6.5])),
)


def _op(name, doc, wide, narrow, grad):
    """The op ``name``: kernel ``wide`` in float64, ``narrow`` (None: ``wide``) below it."""

    def forward(x):
        x = _float_input(x, name)
        kernel, dtype = (
            (narrow, np.float32) if narrow and x.dtype != np.float64 else (wide, np.float64)
        )
        return _blockwise(kernel, x.astype(dtype, copy=False), dtype).astype(x.dtype, copy=False)

    forward.__name__, forward.__qualname__, forward.__doc__ = f"_{name}", f"_{name}", doc
    # value_dependent: picks a formula per element by interval
    return OpDef(name, value_dependent(forward), (grad,), examples=_ERF_EXAMPLES)


def _tanh_of_fraction_into(x, out, coeffs):
    """``out = tanh(x R(x*x))``, R the continued fraction with ``coeffs`` (see ``_F32_CF``)."""
    a, b, c, d, e, f, g = coeffs
    s = np.multiply(x, x, out=out)  # out holds x*x until tanh writes the result over it
    t = s + g
    for numerator, term in ((f, e), (d, c)):  # from the innermost fraction outwards
        np.divide(numerator, t, out=t)
        t += s
        t += term
    np.divide(b, t, out=t)
    t += a
    t *= x
    np.tanh(t, out=out)


def _erfc64_into(x, out):
    """Erfc by fdlibm, each element by the formula of its interval (``x`` and ``out`` flat)."""
    a = np.abs(x)
    out[...] = 1.0 - np.sign(x)  # 0 for large x, 2 for very negative x, NaN for NaN
    small = _where(a < 0.84375)
    if small.size:
        xs = x[small]
        y = _near_zero(xs)
        out[small] = np.where(xs < 0.25, 1.0 - (xs + y), 0.5 - (y + (xs - 0.5)))
    middle = _where((a >= 0.84375) & (a < 1.25))
    if middle.size:
        s = a[middle] - 1.0
        ratio = _poly(_PA, s) / _poly(_QA, s)
        out[middle] = np.where(x[middle] > 0, (1.0 - _ERX) - ratio, 1.0 + (_ERX + ratio))
    for lo, hi, r, s in ((1.25, 1 / 0.35, _RA, _SA), (1 / 0.35, 28.0, _RB, _SB)):
        tail = _where((a >= lo) & (a < hi) & ((x > 0) | (a < 6.0)))
        if tail.size:
            at = a[tail]
            inv = 1.0 / (at * at)
            # -x*x = -z*z + (z - x)(z + x) with z the top 32 bits of x: z*z is exact, so
            # exp keeps erfc's relative accuracy far into the tail.
            z = (at.view(np.uint64) & np.uint64(0xFFFFFFFF00000000)).view(np.float64)
            e = np.exp(-z * z - 0.5625) * np.exp(
                (z - at) * (z + at) + _poly(r, inv) / _poly(s, inv)
            )
            e /= at
            out[tail] = np.where(x[tail] > 0, e, 2.0 - e)


ERFC = _op(
    "erfc",
    "The complementary error function 1 - erf(x), accurate where it is tiny (large x).",
    _erfc64_into,
    None,
    lambda g, out, x: g * (-_TWO_OVER_SQRT_PI * np.exp(-x * x)),
)


def _near_zero(xs):
    """``erf(x) - x`` for ``|x| < 0.84375``: ``x P(x*x) / Q(x*x)``."""
    z = xs * xs
    return xs * (_poly(_PP, z) / _poly(_QQ, z))


def _erf64_into(x, out):
    """Erf by fdlibm: ``x + x R(x*x)`` below 0.84375, ``1 - erfc(|x|)`` beyond (flat arrays)."""
    _erfc64_into(np.abs(x), out)
    np.subtract(1.0, out, out=out)
    out *= np.sign(x)  # +-1 for large |x| and +-inf, NaN stays NaN
    small = _where(np.abs(x) < 0.84375)
    if small.size:
        xs = x[small]
        out[small] = xs + _near_zero(xs)


def _erf32_into(x, out):
    """float32 erf without branches: ``tanh(x R(x*x))``, R a continued fraction (see above)."""
    _tanh_of_fraction_into(x, out, _F32_CF)


ERF = _op(
    "erf",
    "The error function 2/sqrt(pi) * integral of exp(-t**2) from 0 to x.",
    _erf64_into,
    _erf32_into,
    lambda g, out, x: g * (_TWO_OVER_SQRT_PI * np.exp(-x * x)),
)


def _ndtr64_into(x, out):
    """float64 ndtr: ``erfc(-x / sqrt 2) / 2`` (relative accuracy in the left tail)."""
    _erfc64_into(x * -_SQRT_HALF, out)
    out *= 0.5


def _ndtr32_into(x, out):
    """float32 ndtr: ``(1 + tanh(x R'(x*x))) / 2`` (see ``_F32_NDTR_CF``)."""
    _tanh_of_fraction_into(x, out, _F32_NDTR_CF)
    out += 1.0
    out *= 0.5


NDTR = _op(
    "ndtr",
    "Phi(x), the standard normal CDF: (1 + erf(x / sqrt 2)) / 2 (torch.special.ndtr).",
    _ndtr64_into,
    _ndtr32_into,
    lambda g, out, x: g * (_INV_SQRT_2PI * np.exp(-0.5 * (x * x))),
)


def _erfinv_start(a):
    """Giles' single-precision erfinv of ``a`` in [0, 1) (relative error about 1e-7 there)."""
    w = -np.log((1.0 - a) * (1.0 + a))
    central = w < 5.0
    u = np.where(central, w - 2.5, np.sqrt(w) - 3.0)
    p = np.where(central, _GILES_CENTRAL[0], _GILES_TAIL[0])
    for c_central, c_tail in zip(_GILES_CENTRAL[1:], _GILES_TAIL[1:]):
        p = p * u + np.where(central, c_central, c_tail)
    # Far beyond float32's range the polynomial drifts: erfc(t) ~ exp(-t*t) / (t sqrt(pi))
    # gives the start there instead.
    far = w > 16.0
    if np.any(far):
        q = 1.0 - a
        t = np.sqrt(np.maximum(-np.log(q), 1.0))
        for _ in range(3):
            t = np.sqrt(np.maximum(-np.log(q * t * math.sqrt(math.pi)), 1.0))
        return np.where(far, t, p * a)
    return p * a


def _halley_step(t, a):
    """One Halley step for erf(t) = a, the residual computed without cancellation."""
    erf_t, erfc_t = (_blockwise(k, t, np.float64) for k in (_erf64_into, _erfc64_into))
    residual = np.where(a <= 0.5, erf_t - a, (1.0 - a) - erfc_t)
    slope = _TWO_OVER_SQRT_PI * np.exp(-t * t)
    step = residual / (slope + t * residual)
    return np.where(np.isfinite(step), t - step, t)


@value_dependent  # picks a formula per element by interval
def _erfinv(y):
    """The inverse of erf on [-1, 1]: erfinv(erf(x)) = x; +-inf at +-1, NaN outside."""
    y = _float_input(y, "erfinv")
    wide = y.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):
        a = np.abs(wide)
        t = _erfinv_start(a)
        for _ in range(2):
            t = _halley_step(t, a)
        t = np.where(a == 1.0, np.inf, t)
        t = np.where(a > 1.0, np.nan, t)  # and NaN stays NaN
        out = np.copysign(t, wide)
    return out.astype(y.dtype, copy=False)


ERFINV = OpDef(
    "erfinv",
    _erfinv,
    (lambda g, out, y: g * (_SQRT_PI_OVER_TWO * np.exp(out * out)),),
    examples=(
        Example((3, 4), domain=(-0.95, 0.95)),
        Example(np.array([-0.999, -0.5, 0.0, 1e-12, 0.3, 0.75, 0.9999])),
    ),
)


OPS = (ERF, ERFC, ERFINV, NDTR)
