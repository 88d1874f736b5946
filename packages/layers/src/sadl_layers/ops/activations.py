"""Activations core does not have: GELU (exact and tanh), SiLU, LeakyReLU.

GELU and SiLU are fused: one graph node each, forward and backward evaluated block by block in
the CPU cache (see :func:`~sadl_layers.ops._common.blockwise`). The backward of each is itself an
op (``gelu_backward``, ``silu_backward``) whose own gradient is written in NumPy vocabulary, so
second and higher derivatives work while a first-order backward stays one fused pass.

NumPy has no ``erf``. Exact GELU needs the normal CDF Phi; for float64 NumPy arrays it comes from
``math.erfc`` (exact to the last bit, one Python call per element: float64 is for checking, not
for speed), for float32/float16 from the Chebyshev fit of erfc in Numerical Recipes (relative
error below 1.2e-7 over the whole line, i.e. under float32's resolution), vectorized. On a
device (CuPy) every dtype takes the vectorized fit: a per-element Python call cannot run there,
so float64 GELU on a GPU agrees with the CPU's to about 1e-7 relative, not to the last bit.
"""

from __future__ import annotations

import math

import numpy as np
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import blockwise, const

__all__ = ["gelu", "silu", "leaky_relu"]

_SQRT_HALF = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = math.sqrt(2.0 / math.pi)
_TANH_A = 0.044715
_TANH_AC = _TANH_A * _TANH_C
_APPROXIMATIONS = ("none", "tanh")

# erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), z >= 0 (Numerical Recipes, "erfcc").
_ERFC_COEFFS = (
    0.17087277,
    -0.82215223,
    1.48851587,
    -1.13520398,
    0.27886807,
    -0.18628806,
    0.09678418,
    0.37409196,
    1.00002368,
    -1.26551223,
)
_erfc_exact = np.frompyfunc(math.erfc, 1, 1)


def _ndtr_into(out, x, z):
    """Out = Phi(x), the standard normal CDF, in place; ``z`` is a scratch buffer."""
    if x.dtype == np.float64 and isinstance(x, np.ndarray):
        out[...] = _erfc_exact(x * -_SQRT_HALF)
        out *= 0.5
        return out
    np.abs(x, out=z)
    z *= _SQRT_HALF
    t = np.multiply(z, 0.5, out=out)
    t += 1.0
    np.reciprocal(t, out=t)
    p = t * _ERFC_COEFFS[0]
    for c in _ERFC_COEFFS[1:-1]:
        p += c
        p *= t
    p += _ERFC_COEFFS[-1]
    z *= z
    p -= z
    np.exp(p, out=p)
    p *= t
    p *= 0.5  # Phi(-|x|) = erfc(|x| / sqrt 2) / 2, accurate relative to its size
    # Phi(x) = Phi(-|x|) + [x >= 0] * (1 - 2 Phi(-|x|)): no branch, and no cancellation for
    # x < 0, where Phi is tiny and must keep its relative accuracy.
    np.multiply(p, -2.0, out=z)
    z += 1.0
    np.multiply(z, x >= 0, out=z)
    np.add(p, z, out=out)
    return out


def normal_cdf(x):
    """Phi(x) = P(N(0, 1) <= x) of a float array (exact in float64, float32-accurate else)."""
    return blockwise(_ndtr_into, x, scratch=1)


# ------------------------------------------------------------------------------------ GELU


def _check_approximate(approximate):
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _gelu_exact_kernel(out, x, s):
    _ndtr_into(out, x, s)
    out *= x


def _gelu_tanh_kernel(out, x, s):
    np.multiply(x, x, out=s)
    s *= _TANH_AC
    s += _TANH_C
    s *= x
    np.tanh(s, out=s)
    s += 1.0
    np.multiply(s, x, out=out)
    out *= 0.5


def _gelu(x, *, approximate="none"):
    """GELU: x * Phi(x) (``approximate="none"``) or its tanh approximation (``"tanh"``)."""
    _check_approximate(approximate)
    kernel = _gelu_tanh_kernel if approximate == "tanh" else _gelu_exact_kernel
    return blockwise(kernel, x, scratch=1)


def _gelu_grad_exact_kernel(out, g, x, s1, s2):
    _ndtr_into(out, x, s1)  # Phi(x)
    np.multiply(x, x, out=s1)
    s1 *= -0.5
    np.exp(s1, out=s1)
    s1 *= x
    s1 *= _INV_SQRT_2PI  # x * phi(x)
    out += s1
    out *= g


def _gelu_grad_tanh_kernel(out, g, x, s1, s2):
    # f' = 0.5 (1 + t) (1 + x (1 - t) u'),  t = tanh(u), u = c (x + a x^3), u' = c (1 + 3 a x^2)
    np.multiply(x, x, out=s2)
    np.multiply(s2, _TANH_AC, out=s1)
    s1 += _TANH_C
    s1 *= x
    np.tanh(s1, out=s1)  # t
    s2 *= 3.0 * _TANH_AC
    s2 += _TANH_C
    s2 *= x  # x u'
    np.subtract(1.0, s1, out=out)
    out *= s2
    out += 1.0
    s1 += 1.0
    out *= s1
    out *= 0.5
    out *= g


def _gelu_backward(g, x, *, approximate="none"):
    """The gradient of ``gelu``, g * GELU'(x) (an op, so it can be differentiated again)."""
    kernel = _gelu_grad_tanh_kernel if approximate == "tanh" else _gelu_grad_exact_kernel
    return blockwise(kernel, g, x, scratch=2)


def _gelu_second(x, approximate):
    """GELU''(x) in NumPy vocabulary (runs on Tensors for third derivatives)."""
    if approximate == "tanh":
        x2 = x * x
        t = np.tanh(x * (_TANH_AC * x2 + _TANH_C))
        du = _TANH_C + (3.0 * _TANH_AC) * x2
        return (1.0 - t * t) * (du - x * t * du * du + (3.0 * _TANH_AC) * x2)
    return np.exp(-0.5 * x * x) * _INV_SQRT_2PI * (2.0 - x * x)


GELU_BACKWARD: OpDef = OpDef(
    "gelu_backward",
    _gelu_backward,
    (
        lambda gg, out, g, x, *, approximate="none": GELU_BACKWARD(gg, x, approximate=approximate),
        lambda gg, out, g, x, *, approximate="none": gg * g * _gelu_second(x, approximate),
    ),
    examples=(
        Example((3, 4), (3, 4), domain=(-3.0, 3.0)),
        Example((3, 4), (3, 4), approximate="tanh", domain=(-3.0, 3.0)),
    ),
)
gelu: OpDef = OpDef(
    "gelu",
    _gelu,
    (lambda g, out, x, *, approximate="none": GELU_BACKWARD(g, x, approximate=approximate),),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example((2, 3, 5), approximate="tanh", domain=(-4.0, 4.0)),
        Example(np.array([[-9.0, -3.5, 0.0, 2.5, 9.0]]), approximate="none"),
    ),
)


# ------------------------------------------------------------------------------------ SiLU


def _silu_kernel(out, x, s):
    np.multiply(x, 0.5, out=s)
    np.tanh(s, out=s)
    s *= 0.5
    s += 0.5  # sigmoid(x), stable for any x
    np.multiply(s, x, out=out)


def _silu(x):
    """SiLU (swish): x * sigmoid(x)."""
    return blockwise(_silu_kernel, x, scratch=1)


def _silu_grad_kernel(out, g, x, s1, s2):
    # f' = s (1 + x (1 - s)), s = sigmoid(x)
    np.multiply(x, 0.5, out=s1)
    np.tanh(s1, out=s1)
    s1 *= 0.5
    s1 += 0.5
    np.subtract(1.0, s1, out=out)
    out *= x
    out += 1.0
    out *= s1
    out *= g


def _silu_backward(g, x):
    """The gradient of ``silu``, g * SiLU'(x) (an op, so it can be differentiated again)."""
    return blockwise(_silu_grad_kernel, g, x, scratch=2)


def _silu_second(x):
    s = 0.5 * np.tanh(0.5 * x) + 0.5
    return s * (1.0 - s) * (2.0 + x * (1.0 - 2.0 * s))


SILU_BACKWARD: OpDef = OpDef(
    "silu_backward",
    _silu_backward,
    (
        lambda gg, out, g, x: SILU_BACKWARD(gg, x),
        lambda gg, out, g, x: gg * g * _silu_second(x),
    ),
    examples=(Example((3, 4), (3, 4), domain=(-4.0, 4.0)),),
)
silu: OpDef = OpDef(
    "silu",
    _silu,
    (lambda g, out, x: SILU_BACKWARD(g, x),),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example(np.array([[-1000.0, -20.0, 0.0, 20.0, 1000.0]])),
    ),
)


# ------------------------------------------------------------------------------- LeakyReLU


def _leaky_relu(x, *, negative_slope=0.01):
    """Leaky ReLU: x where x > 0, else negative_slope * x."""
    return np.where(x > 0, x, x * negative_slope)


def _leaky_relu_grad(g, out, x, *, negative_slope=0.01):
    return np.where(const(x) > 0, g, g * negative_slope)


leaky_relu = OpDef(
    "leaky_relu",
    _leaky_relu,
    (_leaky_relu_grad,),
    examples=(
        Example((3, 4)),
        Example((2, 5), negative_slope=0.2),
        Example((4,), negative_slope=1.5),
    ),
    singular_points=(Example(np.array([0.0, -1.0, 2.0]), negative_slope=0.1),),
)

INTERNAL_OPS = (GELU_BACKWARD, SILU_BACKWARD)
