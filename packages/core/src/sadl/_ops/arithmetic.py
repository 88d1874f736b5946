"""Binary arithmetic: forward and the gradient for each input, one record per op.

Each rule returns the gradient at the broadcast output shape; the engine sums it down to the
input's shape. Rules are tuples with one function per input, so the engine only computes the
gradients it needs (a constant operand costs nothing).
"""

from __future__ import annotations

import numpy as np

from sadl._records import Example, OpDef

_SHAPES = (Example((3, 4), (3, 4)), Example((3, 4), (4,)), Example((2, 1, 3), (4, 1)))
_POSITIVE = tuple(Example(*e.inputs, domain=(0.5, 2.0), **e.params) for e in _SHAPES)


def _maximum_share(g, a, b):
    # Ties split the gradient evenly, which is what central differences measure there.
    return g * (a > b) + (g * 0.5) * (a == b)


def _ufunc(ufunc, backward, examples, **fields):
    """The op that is the ufunc itself: its name, its forward and the NumPy call it serves."""
    return OpDef(ufunc.__name__, ufunc, backward, numpy_funcs=(ufunc,), examples=examples, **fields)


ADD = _ufunc(np.add, (lambda g, out, a, b: g, lambda g, out, a, b: g), _SHAPES)
SUBTRACT = _ufunc(np.subtract, (lambda g, out, a, b: g, lambda g, out, a, b: -g), _SHAPES)
MULTIPLY = _ufunc(np.multiply, (lambda g, out, a, b: g * b, lambda g, out, a, b: g * a), _SHAPES)
DIVIDE = _ufunc(
    np.divide, (lambda g, out, a, b: g / b, lambda g, out, a, b: -g * out / b), _POSITIVE
)
# np.true_divide *is* np.divide; the name is kept so code written against either reads the same.
TRUE_DIVIDE = OpDef(
    "true_divide",
    np.true_divide,
    DIVIDE.backward,
    examples=_POSITIVE,
    doc="Alias of divide (NumPy's true_divide).",
)


def _div(a, b, *, rounding_mode=None):
    """``a / b``, rounded toward zero (``"trunc"``) or down (``"floor"``) if asked (torch's div).

    Rounded quotients are piecewise constant: their gradient is zero, as in torch.
    """
    if rounding_mode is None:
        return np.true_divide(a, b)
    if rounding_mode == "floor":
        return np.floor_divide(a, b)
    if rounding_mode != "trunc":
        raise ValueError(
            f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}"
        )
    if np.result_type(a, b).kind in "iu":
        # Integer division rounds down; step back up where the exact quotient was negative.
        q = np.floor_divide(a, b)
        return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))
    return np.trunc(np.true_divide(a, b))


def _div_grad_a(g, out, a, b, *, rounding_mode=None):
    return g / b if rounding_mode is None else np.zeros_like(g)


def _div_grad_b(g, out, a, b, *, rounding_mode=None):
    return -g * out / b if rounding_mode is None else np.zeros_like(g)


DIV = OpDef(
    "div",
    _div,
    (_div_grad_a, _div_grad_b),
    examples=_POSITIVE
    + tuple(
        Example((3, 4), (4,), domain=(0.5, 3.0), rounding_mode=mode) for mode in ("trunc", "floor")
    ),
)


def _power_grad_base(g, out, a, b):
    # The derivative of a**0 is 0 everywhere (torch agrees), also where b * a**(b - 1) is
    # 0 * inf (a == 0 or a == ±inf). Taking a**1 there keeps it finite to any order.
    if np.ndim(b) == 0 and not hasattr(b, "requires_grad"):
        return g * b * a ** (b - 1) if b != 0 else g * 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        return g * np.where(b == 0, 0.0, b * a ** np.where(b == 0, 1.0, b - 1))


def _power_grad_exponent(g, out, a, b):
    with np.errstate(divide="ignore", invalid="ignore"):
        # d(a**b)/db = a**b * log(a); at a == 0 the limit is 0 for b >= 0 and inf * log(0) =
        # -inf for b < 0, as in torch.
        flat = (a == 0) & (b >= 0)
        return g * np.where(flat, 0.0 * out, out * np.log(np.where(flat, 1.0, a)))


POWER = _ufunc(
    np.power,
    (_power_grad_base, _power_grad_exponent),
    _POSITIVE + (Example((3, 4), 3.0, domain=(-2, 2)), Example((3, 4), 0.0)),
    singular_points=(
        Example(np.array([0.0, 1.5]), 0.0),  # x ** 0 at 0
        Example(np.array([0.0, 1.5]), np.array([0.0, 0.0])),  # x ** x at 0
        Example(np.array([0.0, 0.0, 0.0]), np.array([1.0, 2.0, 3.0])),  # base 0
    ),
)
_TIE = Example(np.array([1.0, 2.0, 3.0]), np.array([1.0, 0.0, 3.0]))


def _to_larger_a(g, out, a, b):
    return _maximum_share(g, a, b)


def _to_larger_b(g, out, a, b):
    return _maximum_share(g, b, a)


MAXIMUM = _ufunc(
    np.maximum, (_to_larger_a, _to_larger_b), _SHAPES + (_TIE,), singular_points=(_TIE,)
)
MINIMUM = _ufunc(
    np.minimum, (_to_larger_b, _to_larger_a), _SHAPES + (_TIE,), singular_points=(_TIE,)
)


LOGADDEXP = _ufunc(
    np.logaddexp,
    (lambda g, out, a, b: g * np.exp(a - out), lambda g, out, a, b: g * np.exp(b - out)),
    _SHAPES + (Example(np.array([1000.0, -1000.0]), np.array([999.0, -1000.0])),),
)
_MODULO = (Example((3, 4), np.full((3, 4), 0.7)),)
REMAINDER = _ufunc(
    np.remainder, (lambda g, out, a, b: g, lambda g, out, a, b: -g * np.floor(a / b)), _MODULO
)
FMOD = _ufunc(np.fmod, (lambda g, out, a, b: g, lambda g, out, a, b: -g * np.trunc(a / b)), _MODULO)
#: Every op defined above, in order (``sadl._ops.CORE_OPS`` registers them).
OPS = tuple(op for op in globals().values() if isinstance(op, OpDef))
