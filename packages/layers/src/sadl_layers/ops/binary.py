"""Binary NumPy ufuncs beyond arithmetic: ``arctan2``, ``hypot``, ``logaddexp2`` (core has
``remainder`` and ``fmod``, the ``%`` operator's); ``np.arctan2(a, b)`` on Tensors reaches them
through the registry.
"""

from __future__ import annotations

import numpy as np
from sadl.plugins import Example, OpDef

_SHAPES = (Example((3, 4), (3, 4)), Example((3, 4), (4,)), Example((2, 1, 3), (4, 1)))
_POSITIVE = tuple(Example(*e.inputs, domain=(0.5, 2.0), **e.params) for e in _SHAPES)


def _nonzero(d):
    # At a == b == 0 the numerators below are 0 too: 0 / 1 = 0 (torch's atan2 gradient there;
    # for hypot the minimal subgradient, as norm) instead of 0 / 0 = nan.
    return np.where(d == 0, 1.0, d)


_ORIGIN = (Example(np.array([0.0, 1.0]), np.array([0.0, 2.0])),)
ARCTAN2 = OpDef(
    "arctan2",
    np.arctan2,
    (
        lambda g, out, a, b: g * b / _nonzero(a * a + b * b),
        lambda g, out, a, b: -g * a / _nonzero(a * a + b * b),
    ),
    numpy_funcs=(np.arctan2,),
    examples=_POSITIVE,
    singular_points=_ORIGIN,
)
HYPOT = OpDef(
    "hypot",
    np.hypot,
    (lambda g, out, a, b: g * a / _nonzero(out), lambda g, out, a, b: g * b / _nonzero(out)),
    numpy_funcs=(np.hypot,),
    examples=_POSITIVE,
    singular_points=_ORIGIN,
)
LOGADDEXP2 = OpDef(
    "logaddexp2",
    np.logaddexp2,
    (
        lambda g, out, a, b: g * np.exp2(a - out),
        lambda g, out, a, b: g * np.exp2(b - out),
    ),
    numpy_funcs=(np.logaddexp2,),
    examples=_SHAPES,
)

__all__ = ["arctan2", "hypot", "logaddexp2"]
INTERNAL_OPS: tuple[OpDef, ...] = ()
arctan2, hypot, logaddexp2 = ARCTAN2, HYPOT, LOGADDEXP2
