"""Predicates beyond core's comparisons, ``isfinite``, ``isnan`` and ``isinf``: ``isneginf``,
``isposinf``, ``signbit``, ``isclose``, ``count_nonzero`` (they left core, issue 24). Their outputs
carry no gradient; ``np.isclose(a, b)`` on Tensors reaches them through the registry.
"""

from __future__ import annotations

import numpy as np
from sadl.plugins import Example, OpDef

from sadl_layers.ops.reductions import normalize_axes

__all__ = ["isneginf", "isposinf", "signbit", "isclose", "count_nonzero"]


_ONE = (Example((3, 4)),)


def _predicate(name, forward, numpy_func=None, examples=_ONE):
    funcs = (numpy_func or forward,)
    return OpDef(name, forward, numpy_funcs=funcs, differentiable=False, examples=examples)


def _isclose(a, b, *, rtol=1e-5, atol=1e-8, equal_nan=False):
    """Elementwise closeness within tolerances."""
    return np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def _count_nonzero(x, *, axis=None, keepdims=False):
    """Number of nonzero elements along ``axis``."""
    counts = np.count_nonzero(x, axis=axis)  # CuPy's count_nonzero has no keepdims
    return np.expand_dims(counts, normalize_axes(axis, np.ndim(x))) if keepdims else counts


isneginf = _predicate("isneginf", np.isneginf)
isposinf = _predicate("isposinf", np.isposinf)
signbit = _predicate("signbit", np.signbit)
isclose = _predicate("isclose", _isclose, np.isclose, (Example((3, 4), (4,)),))
count_nonzero = _predicate(
    "count_nonzero",
    _count_nonzero,
    np.count_nonzero,
    (Example((3, 4)), Example((3, 4), axis=1, keepdims=True), Example((2, 3, 4), axis=(0, 2))),
)
INTERNAL_OPS: tuple[OpDef, ...] = ()
