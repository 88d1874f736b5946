"""Elementwise math: one line of forward, one line of gradient, per op.

Rounding (``sign floor ceil trunc rint round floor_divide``) is piecewise constant: as in torch
its gradient is zero (no error), and its result requires grad like any other op's.
"""

from __future__ import annotations

import math

import numpy as np

from sadl._records import Example, OpDef

_ANY = (Example((3, 4)), Example((2, 3, 2)))
_POSITIVE = tuple(Example(*e.inputs, domain=(0.5, 2.0)) for e in _ANY)
_UNIT = tuple(Example(*e.inputs, domain=(-0.9, 0.9)) for e in _ANY)
_LN2 = math.log(2.0)
_LN10 = math.log(10.0)


def _unary(name, forward, rule, examples=_ANY, numpy_func=None, singular_points=()):
    """A one-input op; ``rule(g, out, x)`` is the gradient of the input."""
    func = forward if numpy_func is None else numpy_func
    return OpDef(
        name,
        forward,
        (rule,),
        numpy_funcs=(func,),
        examples=examples,
        singular_points=singular_points,
    )


NEGATIVE = _unary("negative", np.negative, lambda g, out, x: -g)
POSITIVE = _unary("positive", np.positive, lambda g, out, x: g)
ABSOLUTE = _unary(
    "absolute",
    np.absolute,
    lambda g, out, x: g * np.sign(x),
    singular_points=(Example(np.array([0.0, -1.5, 2.0])),),
)
EXP = _unary("exp", np.exp, lambda g, out, x: g * out)
EXP2 = _unary("exp2", np.exp2, lambda g, out, x: g * out * _LN2)
EXPM1 = _unary("expm1", np.expm1, lambda g, out, x: g * (out + 1))
LOG = _unary("log", np.log, lambda g, out, x: g / x, _POSITIVE)
LOG2 = _unary("log2", np.log2, lambda g, out, x: g / (x * _LN2), _POSITIVE)
LOG10 = _unary("log10", np.log10, lambda g, out, x: g / (x * _LN10), _POSITIVE)
LOG1P = _unary("log1p", np.log1p, lambda g, out, x: g / (x + 1), _POSITIVE)
SQRT = _unary("sqrt", np.sqrt, lambda g, out, x: g * 0.5 / out, _POSITIVE)
CBRT = _unary("cbrt", np.cbrt, lambda g, out, x: g / (3 * out * out), _POSITIVE)
SQUARE = _unary("square", np.square, lambda g, out, x: g * 2 * x)
RECIPROCAL = _unary("reciprocal", np.reciprocal, lambda g, out, x: -g * out * out, _POSITIVE)
SIN = _unary("sin", np.sin, lambda g, out, x: g * np.cos(x))
COS = _unary("cos", np.cos, lambda g, out, x: -g * np.sin(x))
TAN = _unary("tan", np.tan, lambda g, out, x: g * (1 + out * out), _UNIT)
ARCSIN = _unary("arcsin", np.arcsin, lambda g, out, x: g / np.sqrt(1 - x * x), _UNIT)
ARCCOS = _unary("arccos", np.arccos, lambda g, out, x: -g / np.sqrt(1 - x * x), _UNIT)
ARCTAN = _unary("arctan", np.arctan, lambda g, out, x: g / (1 + x * x))
SINH = _unary("sinh", np.sinh, lambda g, out, x: g * np.cosh(x))
COSH = _unary("cosh", np.cosh, lambda g, out, x: g * np.sinh(x))
TANH = _unary("tanh", np.tanh, lambda g, out, x: g * (1 - out * out))
ARCSINH = _unary("arcsinh", np.arcsinh, lambda g, out, x: g / np.sqrt(x * x + 1))
ARCCOSH = _unary(
    "arccosh",
    np.arccosh,
    lambda g, out, x: g / np.sqrt(x * x - 1),
    tuple(Example(*e.inputs, domain=(1.5, 3.0)) for e in _ANY),
)
ARCTANH = _unary("arctanh", np.arctanh, lambda g, out, x: g / (1 - x * x), _UNIT)
DEG2RAD = _unary("deg2rad", np.deg2rad, lambda g, out, x: g * (math.pi / 180))
RAD2DEG = _unary("rad2deg", np.rad2deg, lambda g, out, x: g * (180 / math.pi))


def _zero_gradient(g, out, *inputs, **params):
    """The gradient of a piecewise-constant op: zero (where it exists; torch's convention)."""
    return np.zeros_like(g)


def _round(x, *, decimals=0):
    """Round to ``decimals`` places (half to even)."""
    return np.round(x, decimals)


def _piecewise_constant(name, forward, numpy_funcs=None, examples=_ANY, inputs=1):
    funcs = (forward,) if numpy_funcs is None else numpy_funcs
    rules = (_zero_gradient,) * inputs
    return OpDef(name, forward, rules, numpy_funcs=funcs, examples=examples)


SIGN = _piecewise_constant("sign", np.sign)
FLOOR = _piecewise_constant("floor", np.floor)
CEIL = _piecewise_constant("ceil", np.ceil)
TRUNC = _piecewise_constant("trunc", np.trunc, (np.trunc, np.fix))
RINT = _piecewise_constant("rint", np.rint)
ROUND = _piecewise_constant(
    "round", _round, (np.round, *((np.around,) if np.around is not np.round else ()))
)
FLOOR_DIVIDE = _piecewise_constant(
    "floor_divide", np.floor_divide, examples=(Example((3, 4), (4,), domain=(0.5, 2.0)),), inputs=2
)

# ------------------------------------------------------------------------------------- clip


def _clip(x, a_min=None, a_max=None, *, min=None, max=None):
    """Limit values to ``[a_min, a_max]`` (either bound may be None; bounds may be tensors)."""
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:
        raise ValueError("clip: give at least one of a_min / a_max")
    # Bounds never change the dtype (float64 bounds on float32 data stay float32).
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


def _bounds(a_min, a_max, min, max):
    return (a_min if a_min is not None else min), (a_max if a_max is not None else max)


def _clip_grad_x(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    inside = g
    if lo is not None:
        inside = inside * (x >= lo)
    if hi is not None:
        inside = inside * (x <= hi)
    return inside


def _clip_grad_min(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    below = g * (x < lo)
    return below if hi is None else below * (lo <= hi)  # lo > hi: NumPy gives hi everywhere


def _clip_grad_max(g, out, x, a_min=None, a_max=None, *, min=None, max=None):
    lo, hi = _bounds(a_min, a_max, min, max)
    return g * (x > hi) if lo is None else g * np.logical_or(x > hi, lo > hi)


CLIP = OpDef(
    "clip",
    _clip,
    (_clip_grad_x, _clip_grad_min, _clip_grad_max),
    numpy_funcs=(np.clip,),
    examples=(
        Example((3, 4), -0.5, 0.5),
        Example((3, 4), None, 0.0),
        Example((3, 4), np.array([-1.0, 0.0, 0.5, -2.0])),
        Example((3, 4), (4,), (3, 1)),
        Example((3, 4), a_min=-0.5, a_max=0.5),
    ),
    singular_points=(
        Example(np.array([-0.5, 0.0, 0.5, 1.0]), -0.5, 0.5),  # at the bounds: gradient 1
        Example(np.array([0.5, 0.0]), np.array([0.5, -1.0]), np.array([1.0, 0.0])),
    ),
)

#: Every op defined above, in order (``sadl._ops.CORE_OPS`` registers them).
OPS = tuple(op for op in globals().values() if isinstance(op, OpDef))
