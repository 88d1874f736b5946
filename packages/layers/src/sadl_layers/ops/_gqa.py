"""Grouped-query attention for ``scaled_dot_product_attention(..., enable_gqa=True)``.

torch's ``enable_gqa`` lets k and v carry fewer heads than q (axis -3): query head ``h`` reads
key/value head ``h // (Hq // Hkv)``. Instead of repeating k and v, q is viewed as
``(..., Hkv, G, Tq, d)`` and k, v as ``(..., Hkv, 1, Tk, d)``: the attention's own broadcasting
over leading axes then pairs each group of G query heads with its key/value head, with no copy.
Masks with a head axis are viewed alike. The gradients of k and v come back summed over G.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sadl_layers.ops._common import shape_of

_FN = "scaled_dot_product_attention"


def groups(q: Any, k: Any, v: Any) -> int:
    """G = Hq / Hkv (1 when q and k have as many heads); a clear error when it does not divide."""
    if np.ndim(q) < 3 or np.ndim(k) < 3 or np.ndim(v) < 3:
        raise ValueError(
            f"{_FN}: enable_gqa needs q, k and v with a head axis (..., H, T, d), got "
            f"{shape_of(q)}, {shape_of(k)}, {shape_of(v)}"
        )
    hq, hk, hv = shape_of(q)[-3], shape_of(k)[-3], shape_of(v)[-3]
    if hk != hv or hq % hk:
        raise ValueError(
            f"{_FN}: enable_gqa needs k and v with the same number of heads dividing q's: q has "
            f"{hq} heads, k {hk}, v {hv}"
        )
    return hq // hk


def _split_heads(a: Any, g: int) -> Any:
    s = shape_of(a)
    return np.reshape(a, (*s[:-3], s[-3] // g, g, *s[-2:]))


def _one_group(a: Any) -> Any:
    s = shape_of(a)
    return np.reshape(a, (*s[:-3], s[-3], 1, *s[-2:]))


def _mask_view(m: Any, g: int, hq: int) -> Any:
    if m is None or np.ndim(m) < 3:
        return m
    s = shape_of(m)
    if s[-3] == hq:
        return _split_heads(m, g)
    return np.reshape(m, (*s[:-3], 1, s[-3], *s[-2:]))  # a head axis of 1 broadcasts


def views(q: Any, k: Any, v: Any, params: dict[str, Any]) -> tuple[Any, Any, Any, dict[str, Any]]:
    """q, k, v and the mask params as the grouped views (params without ``enable_gqa``)."""
    g = groups(q, k, v)
    hq = shape_of(q)[-3]
    rest = {key: val for key, val in params.items() if key != "enable_gqa"}
    for key in ("mask", "dropout_mask"):
        if rest.get(key) is not None:
            rest[key] = _mask_view(rest[key], g, hq)
    return _split_heads(q, g), _one_group(k), _one_group(v), rest


def merge(a: Any, like: Any) -> Any:
    """An output (or dq) of the grouped view back in the layout of ``like`` (..., Hq, T, d)."""
    s = shape_of(a)
    return np.reshape(a, (*s[:-4], s[-4] * s[-3], *s[-2:]))


def merge_view(a: Any, grouped_q: Any) -> Any:
    """An array shaped like the output, (..., Hq, Tq, dv), as the grouped view of ``grouped_q``."""
    s, g = shape_of(a), shape_of(grouped_q)[-3]
    return np.reshape(a, (*s[:-3], s[-3] // g, g, *s[-2:]))


def merge_kv(a: Any) -> Any:
    """Dk or dv of the grouped view summed over the G query heads of each key/value head."""
    return np.sum(a, axis=-3)
