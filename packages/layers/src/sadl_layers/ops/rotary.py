"""Rotary position embedding (RoPE): each pair of features of a query or key is turned by an
angle that grows with its position.

``rotary_embedding(x, cos, sin)`` is ``x * cos + rotate(x) * sin`` with ``cos``/``sin`` of the
full feature width (broadcast against ``x``, typically ``(T, D)`` for ``x`` of ``(..., T, D)``).
Two conventions pair the features differently:

* ``interleaved=False`` (Hugging Face's "rotate half"): feature ``i`` pairs with ``i + D/2``;
  ``rotate(x) = concat(-x[D/2:], x[:D/2])`` and the tables are ``concat(f, f)``.
* ``interleaved=True`` (llama.cpp, GGUF, Meta's original code): feature ``2i`` pairs with
  ``2i + 1``; ``rotate(x)[2i] = -x[2i+1]``, ``rotate(x)[2i+1] = x[2i]`` and the tables repeat
  each frequency twice (``f0 f0 f1 f1 ...``).

``rotate`` is a linear map with ``R^T = -R``, so the gradient of ``x`` is
``g * cos - rotate(g * sin)``; the tables get ``g * x`` and ``g * rotate(x)``. The rule is
written in NumPy vocabulary, so it runs on arrays and on Tensors (higher derivatives).
:func:`rotary_tables` builds the tables from a head width and a base (``rope_theta``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sadl.plugins import Example, OpDef

from sadl_layers.ops._common import check_float

__all__ = ["rotary_embedding"]

INTERNAL_OPS: tuple[OpDef, ...] = ()
_FN = "rotary_embedding"


def _rotate(x: Any, interleaved: bool) -> Any:
    """``R x``: each feature pair (a, b) becomes (-b, a)."""
    d = x.shape[-1]
    if interleaved:
        pairs = np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1)
        return pairs.reshape(*x.shape[:-1], d)
    return np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)


def _check(x: Any, cos: Any, sin: Any) -> None:
    for name, value in (("x", x), ("cos", cos), ("sin", sin)):
        check_float(_FN, name, value)
    d = x.shape[-1]
    if d % 2:
        raise ValueError(f"{_FN}: the feature axis of x must be even, got {d}")
    if tuple(cos.shape) != tuple(sin.shape) or cos.shape[-1] != d:
        raise ValueError(
            f"{_FN}: cos and sin must have the same shape, ending in x's feature width {d}; got "
            f"cos {tuple(cos.shape)}, sin {tuple(sin.shape)}"
        )


def _rotary(x, cos, sin, *, interleaved=False):
    _check(x, cos, sin)
    return x * cos + _rotate(x, bool(interleaved)) * sin


def _rotary_grad(g, out, x, cos, sin, *, interleaved=False):
    interleaved = bool(interleaved)
    dx = g * cos - _rotate(g * sin, interleaved)  # R^T = -R
    return dx, g * x, g * _rotate(x, interleaved)


def rotary_tables(
    head_dim: int, positions: Any, base: float = 10000.0, *, interleaved: bool = False
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """``(cos, sin)`` of shape ``(len(positions), head_dim)`` in float64 for the given positions.

    The frequencies are ``base ** (-2i / head_dim)`` for ``i < head_dim / 2``, laid out for the
    convention (``f f`` halves, or each repeated twice when ``interleaved``).
    """
    if head_dim % 2:
        raise ValueError(f"rotary_tables: head_dim must be even, got {head_dim}")
    inv = 1.0 / (float(base) ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim))
    angles = np.asarray(positions, dtype=np.float64)[:, None] * inv[None, :]
    full = np.repeat(angles, 2, axis=-1) if interleaved else np.concatenate([angles] * 2, -1)
    return np.cos(full), np.sin(full)


_COS, _SIN = rotary_tables(4, np.arange(3), base=10.0)
_COS_I, _SIN_I = rotary_tables(4, np.arange(3), base=10.0, interleaved=True)

rotary_embedding: OpDef = OpDef(
    _FN,
    _rotary,
    _rotary_grad,
    doc="x * cos + rotate(x) * sin: rotary position embedding (rotate-half or interleaved pairs).",
    examples=(
        Example((2, 2, 3, 4), _COS, _SIN),
        Example((2, 3, 4), _COS_I, _SIN_I, interleaved=True),
        Example((2, 3, 4), (3, 4), (3, 4)),  # the tables as inputs too (their gradients)
        Example((1, 3, 4), (3, 4), (3, 4), interleaved=True),
    ),
)
