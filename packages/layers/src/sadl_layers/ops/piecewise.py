"""Functions defined piece by piece: the ELU family, the "hard" activations and LeakyReLU.

Each forward is one or two NumPy calls and each gradient a short NumPy expression, so the same
rule runs on arrays and, under ``create_graph=True``, on Tensors (second derivatives for free).
Where a piece's derivative is constant, the piece is picked with a mask of the input's values
(no gradient flows through a comparison). The boundaries follow torch's kernels exactly: which
side of ``x == 0`` or ``x == 3`` a gradient takes is what a parity test sees.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import const

__all__ = ["leaky_relu", "elu", "selu", "celu", "hardtanh", "hardsigmoid", "hardswish"]

#: SELU's constants (Klambauer et al., 2017), as torch spells them.
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _number(fn: str, name: str, value: Any) -> float:
    """A real number given as a Python number, a NumPy scalar or a 0-d array."""
    kind = getattr(value, "dtype", None)
    real = kind.kind in "iuf" and np.ndim(value) == 0 if kind is not None else None
    if real is None:
        real = isinstance(value, int | float) and not isinstance(value, bool)
    if not real:
        raise ValueError(f"{fn}: {name} must be a number, got {value!r}")
    return float(value)


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


# ------------------------------------------------------------------------------ ELU family
# One kernel for the three, as in torch: x > 0 -> scale * x, else
# scale * alpha * (exp(x * input_scale) - 1).


def _elu_kernel(x, alpha, scale, input_scale):
    negative = np.expm1(np.minimum(x, 0) * input_scale)
    negative *= scale * alpha
    return np.where(x > 0, x * scale, negative)


def _elu_kernel_grad(g, x, alpha, scale, input_scale):
    # The slope of the negative side, exp(x * input_scale), is taken of the input masked to
    # x < 0: the positive side never overflows, and at x == 0 (which takes the negative side's
    # first derivative, as in torch) the second derivative is 0, as in torch.
    c = const(x)
    slope = np.exp(x * (c < 0) * input_scale) * (scale * alpha * input_scale)
    return np.where(c > 0, g * scale, g * slope)


def _elu(x, *, alpha=1.0):
    """ELU: x where x > 0, else alpha * (exp(x) - 1)."""
    return _elu_kernel(x, _number("elu", "alpha", alpha), 1.0, 1.0)


elu = OpDef(
    "elu",
    _elu,
    (lambda g, out, x, *, alpha=1.0: _elu_kernel_grad(g, x, alpha, 1.0, 1.0),),
    examples=(
        Example((3, 4), domain=(-3.0, 3.0)),
        Example((2, 5), alpha=0.4, domain=(-3.0, 3.0)),
        Example(np.array([[-1000.0, -2.0, 0.5, 1000.0]]), alpha=2.0),
    ),
)


def _selu(x):
    """SELU: scale * ELU(x, alpha) with the self-normalizing constants of Klambauer et al."""
    return _elu_kernel(x, SELU_ALPHA, SELU_SCALE, 1.0)


selu = OpDef(
    "selu",
    _selu,
    (lambda g, out, x: _elu_kernel_grad(g, x, SELU_ALPHA, SELU_SCALE, 1.0),),
    examples=(Example((3, 4), domain=(-3.0, 3.0)), Example(np.array([-1000.0, -1.0, 2.0]))),
)


def _celu_alpha(alpha):
    alpha = _number("celu", "alpha", alpha)
    if alpha == 0:
        raise ValueError("celu: alpha must not be 0 (it divides the input)")
    return alpha


def _celu(x, *, alpha=1.0):
    """CELU: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    alpha = _celu_alpha(alpha)
    return _elu_kernel(x, alpha, 1.0, 1.0 / alpha)


celu = OpDef(
    "celu",
    _celu,
    (lambda g, out, x, *, alpha=1.0: _elu_kernel_grad(g, x, alpha, 1.0, 1.0 / alpha),),
    examples=(
        Example((3, 4), domain=(-3.0, 3.0)),
        Example((2, 5), alpha=2.5, domain=(-4.0, 4.0)),
        Example((2, 3), alpha=0.5, domain=(-2.0, 2.0)),
    ),
)


# ---------------------------------------------------------------------------- hard family


def _hardtanh_range(min_val, max_val):
    lo = _number("hardtanh", "min_val", min_val)
    hi = _number("hardtanh", "max_val", max_val)
    if not lo < hi:
        raise ValueError(f"hardtanh: min_val must be below max_val, got {min_val} and {max_val}")
    return lo, hi


def _hardtanh(x, *, min_val=-1.0, max_val=1.0):
    """The input clipped to [min_val, max_val] (``min_val=0, max_val=6`` is ReLU6)."""
    lo, hi = _hardtanh_range(min_val, max_val)
    return np.clip(x, lo, hi)


def _hardtanh_grad(g, out, x, *, min_val=-1.0, max_val=1.0):
    x = const(x)
    return g * ((x > min_val) & (x < max_val))


hardtanh = OpDef(
    "hardtanh",
    _hardtanh,
    (_hardtanh_grad,),
    examples=(
        Example((3, 4)),
        Example((2, 5), min_val=0.0, max_val=6.0, domain=(-3.0, 8.0)),
        Example(np.array([[-9.0, -2.0, 0.3], [2.9, 3.1, 9.0]]), min_val=-0.5, max_val=3.0),
    ),
)


def _hardsigmoid(x):
    """0 for x <= -3, 1 for x >= 3, x / 6 + 1/2 in between."""
    return np.clip(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _hardsigmoid_grad(g, out, x):
    x = const(x)
    return g * (((x > -3.0) & (x < 3.0)) * (1.0 / 6.0))


hardsigmoid = OpDef(
    "hardsigmoid",
    _hardsigmoid,
    (_hardsigmoid_grad,),
    examples=(
        Example((3, 4), domain=(-5.0, 5.0)),
        Example(np.array([[-9.0, -3.1, -2.9], [0.0, 2.9, 3.1]])),
    ),
)


def _hardswish(x):
    """The input times hardsigmoid: 0 for x <= -3, x for x >= 3, x (x + 3) / 6 between."""
    return x * np.clip(x * (1.0 / 6.0) + 0.5, 0.0, 1.0)


def _hardswish_grad(g, out, x):
    # torch: 0 up to -3, x / 3 + 1/2 strictly between, 1 from 3 on.
    c = const(x)
    middle = (c > -3.0) & (c < 3.0)
    return np.where(middle, g * (x * (1.0 / 3.0) + 0.5), g * (c >= 3.0))


hardswish = OpDef(
    "hardswish",
    _hardswish,
    (_hardswish_grad,),
    examples=(
        Example((3, 4), domain=(-5.0, 5.0)),
        Example(np.array([[-9.0, -3.1, -2.9], [0.0, 2.9, 3.1]])),
    ),
)

INTERNAL_OPS: tuple[OpDef, ...] = ()
