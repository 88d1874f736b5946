"""Smooth activations core does not have: GELU (exact and tanh), SiLU, Mish, softplus with
torch's ``beta``/``threshold``, log-sigmoid and softsign.

GELU and SiLU are fused: one graph node each, forward and backward evaluated block by block in
the CPU cache (see :func:`~sadl_layers.ops._common.blockwise`). The backward of each is itself an
op (``gelu_backward``, ``silu_backward``) whose own gradient is written in NumPy vocabulary, so
second and higher derivatives work while a first-order backward stays one fused pass. Mish,
softplus, log-sigmoid and softsign are short NumPy expressions, forward and backward.

Exact GELU is ``x * Phi(x)`` with Phi the normal CDF, core's ``sadl.ops.ndtr`` (NumPy has no
erf): in float32 as torch does, ``(1 + erf(x / sqrt 2)) / 2`` (within about 1e-7 absolute, at
under twice the cost of the tanh form), in float64 as ``erfc(-x / sqrt 2) / 2``, which keeps its
relative accuracy far into the negative tail.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import sadl
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import blockwise, const, in_float32

__all__ = ["gelu", "silu", "mish", "softplus_beta", "logsigmoid", "softsign"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_TANH_C = math.sqrt(2.0 / math.pi)
_TANH_A = 0.044715
_TANH_AC = _TANH_A * _TANH_C
_APPROXIMATIONS = ("none", "tanh")

_ndtr_op: list[Any] = []  # core's ndtr, looked up on first use (plugins are loaded then)


def _ndtr(x):
    """Phi(x), the standard normal CDF, as a new array (core's ``sadl.ops.ndtr``)."""
    if not _ndtr_op:
        _ndtr_op.append(sadl.ops.get("ndtr").forward)
    return _ndtr_op[0](x)


#: Elements per block of the exact GELU kernels: they call core's ndtr (an op, with a fixed cost
#: per call) once per block, so they take its own block size rather than ``BLOCK``.
_ERF_BLOCK = 65536

#: Elements per block of the tanh GELU kernels: eight NumPy calls per block, so a larger block
#: (its three or four buffers still fit a 2 MiB L2 cache in float32) halves the calls' fixed
#: cost; about 15% faster than ``BLOCK`` on a (4096, 512) float32 array, forward and backward.
_TANH_BLOCK = 65536


def normal_cdf(x):
    """Phi(x) = P(N(0, 1) <= x) of a float array (see the module docstring for the accuracy)."""
    return _ndtr(x)


# ------------------------------------------------------------------------------------ GELU


def _check_approximate(approximate):
    if approximate not in _APPROXIMATIONS:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _gelu_exact_kernel(out, x):
    np.multiply(_ndtr(x), x, out=out)


def _gelu_tanh_kernel(out, x, s):
    # 0.5 x (1 + tanh(u)) = x sigmoid(2u) = x / (1 + exp(-2u)): one exp where tanh costs twice
    # as much on CPUs without AVX-512 (NumPy's tanh has no AVX2 loop), and no cancellation
    np.multiply(x, x, out=s)
    s *= -2.0 * _TANH_AC
    s -= 2.0 * _TANH_C
    s *= x  # -2u
    np.exp(s, out=s)  # inf for x << 0 (its op ignores the overflow): x / inf = -0, GELU's limit
    s += 1.0
    np.divide(x, s, out=out)


@in_float32
def _gelu(x, *, approximate="none"):
    """GELU: x * Phi(x) (``approximate="none"``) or its tanh approximation (``"tanh"``)."""
    _check_approximate(approximate)
    if approximate == "tanh":
        with np.errstate(over="ignore"):  # exp(-2u) is inf where GELU is -0 (x < -10 in float32)
            return blockwise(_gelu_tanh_kernel, x, scratch=1, block=_TANH_BLOCK)
    return blockwise(_gelu_exact_kernel, x, scratch=0, block=_ERF_BLOCK)


def _gelu_grad_exact_kernel(out, g, x, s1):
    cdf = _ndtr(x)  # Phi(x)
    np.multiply(x, x, out=s1)
    s1 *= -0.5
    np.exp(s1, out=s1)
    s1 *= x
    s1 *= _INV_SQRT_2PI  # x * phi(x)
    np.add(cdf, s1, out=out)
    out *= g


def _gelu_grad_tanh_kernel(out, g, x, s1, s2):
    # f = x p with p = sigmoid(2u) = 1 / (1 + exp(-2u)), u = c (x + a x^3), u' = c (1 + 3 a x^2):
    # f' = p (1 + 2 x u' (1 - p)), the form of the forward (one exp, no tanh)
    np.multiply(x, x, out=s2)
    np.multiply(s2, -2.0 * _TANH_AC, out=s1)
    s1 -= 2.0 * _TANH_C
    s1 *= x  # -2u
    np.exp(s1, out=s1)
    s1 += 1.0
    np.reciprocal(s1, out=s1)  # p
    s2 *= 6.0 * _TANH_AC
    s2 += 2.0 * _TANH_C
    s2 *= x  # 2 x u'
    np.subtract(1.0, s1, out=out)
    out *= s2
    out += 1.0
    out *= s1
    out *= g


@in_float32
def _gelu_backward(g, x, *, approximate="none"):
    """The gradient of ``gelu``, g * GELU'(x) (an op, so it can be differentiated again)."""
    if approximate == "tanh":
        with np.errstate(over="ignore"):
            return blockwise(_gelu_grad_tanh_kernel, g, x, scratch=2, block=_TANH_BLOCK)
    return blockwise(_gelu_grad_exact_kernel, g, x, scratch=1, block=_ERF_BLOCK)


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


# ------------------------------------------------------------------------------------ Mish


def _sigmoid(x):
    """1 / (1 + exp(-x)) without overflow, in NumPy vocabulary (arrays and Tensors)."""
    return 0.5 * np.tanh(0.5 * x) + 0.5


def _mish(x):
    """Mish: x * tanh(softplus(x))."""
    return x * np.tanh(np.logaddexp(0.0, x))


def _mish_grad(g, out, x):
    # f' = tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x)
    t = np.tanh(np.logaddexp(0.0, x))
    return g * (t + x * _sigmoid(x) * (1.0 - t * t))


mish = OpDef(
    "mish",
    _mish,
    (_mish_grad,),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example(np.array([[-1000.0, -30.0, 0.0, 30.0, 1000.0]])),
    ),
)


# -------------------------------------------------------------------------------- softplus


def _real(name, value):
    """A real number given as a Python number, a NumPy scalar or a 0-d array."""
    kind = getattr(value, "dtype", None)
    if kind is not None:
        ok = kind.kind in "iuf" and np.ndim(value) == 0
    else:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok:
        raise ValueError(f"softplus_beta: {name} must be a number, got {value!r}")
    return float(value)


def _check_softplus(beta, threshold):
    beta, threshold = _real("beta", beta), _real("threshold", threshold)
    if not beta > 0:
        raise ValueError(f"softplus_beta: beta must be a positive number, got {beta!r}")
    return beta, threshold


def _softplus_beta(x, *, beta=1.0, threshold=20.0):
    """Torch's softplus: log(1 + exp(beta * x)) / beta, and x itself where beta * x > threshold.

    Core's ``softplus`` is the plain log(1 + exp(x)); this is the one with torch's signature
    (``torch.nn.functional.softplus(x, beta, threshold)``, the ``Softplus`` layer).
    """
    beta, threshold = _check_softplus(beta, threshold)
    z = x * beta
    return np.where(z > threshold, x, np.logaddexp(0.0, z) / beta)


def _softplus_beta_grad(g, out, x, *, beta=1.0, threshold=20.0):
    beta, threshold = _check_softplus(beta, threshold)
    linear = const(x) * beta > threshold
    return np.where(linear, g, g * _sigmoid(x * beta))


softplus_beta = OpDef(
    "softplus_beta",
    _softplus_beta,
    (_softplus_beta_grad,),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example((3, 4), beta=2.5, threshold=3.0, domain=(-3.0, 3.0)),
        Example(np.array([[-1000.0, -3.0, 0.5, 25.0, 1000.0]]), beta=0.5, threshold=10.0),
    ),
)


# ----------------------------------------------------------------------------- log-sigmoid


def _logsigmoid(x):
    """log(sigmoid(x)) = -log(1 + exp(-x)), finite for any x."""
    return -np.logaddexp(0.0, -x)


logsigmoid = OpDef(
    "logsigmoid",
    _logsigmoid,
    (lambda g, out, x: g * _sigmoid(-x),),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example(np.array([[-1000.0, -20.0, 0.0, 20.0, 1000.0]])),
    ),
)


# -------------------------------------------------------------------------------- softsign


def _softsign(x):
    """Softsign, x / (1 + |x|), as torch.nn.functional.softsign."""
    return x / (1 + np.abs(x))


def _softsign_grad(g, out, x):
    d = 1 + np.abs(x)  # 1 / (1 + |x|)^2, divided twice: the square overflows for |x| > 1e19 (f32)
    return g / d / d


softsign = OpDef(
    "softsign",
    _softsign,
    (_softsign_grad,),
    examples=(
        Example((3, 4), domain=(-4.0, 4.0)),
        Example(np.array([[-1e30, -1000.0, -0.5, 0.5, 1000.0, 1e30]])),
    ),
)

INTERNAL_OPS = (GELU_BACKWARD, SILU_BACKWARD)
