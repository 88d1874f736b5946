"""Normalization, ``linear``, ``embedding``, dropout and attention with torch's signatures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sadl
from sadl import Tensor

from sadl_layers.functional._common import _no_inplace, _op, _t


def _shape(normalized_shape: int | Sequence[int]) -> tuple[int, ...]:
    if isinstance(normalized_shape, int | np.integer):
        return (int(normalized_shape),)
    return tuple(int(n) for n in normalized_shape)


def layer_norm(
    input: Any,
    normalized_shape: int | Sequence[int],
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize over the trailing ``normalized_shape`` axes, then scale and shift."""
    return _op("layer_norm")(  # type: ignore[no-any-return]
        _t(input), weight, bias, eps=eps, normalized_shape=_shape(normalized_shape)
    )


def rms_norm(
    input: Any,
    normalized_shape: int | Sequence[int],
    weight: Any = None,
    eps: float | None = None,
) -> Tensor:
    """X / sqrt(mean(x**2) + eps) over the trailing axes, then scale."""
    return _op("rms_norm")(  # type: ignore[no-any-return]
        _t(input), weight, eps=eps, normalized_shape=_shape(normalized_shape)
    )


def group_norm(
    input: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5
) -> Tensor:
    """Normalize each group of channels (dim 1) of each sample, then scale and shift."""
    return _op("group_norm")(_t(input), num_groups, weight, bias, eps=eps)  # type: ignore[no-any-return]


def batch_norm(
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Tensor:
    """Normalize each channel (dim 1) by batch statistics (training) or the running ones."""
    return _op("batch_norm")(  # type: ignore[no-any-return]
        _t(input),
        weight,
        bias,
        running_mean=running_mean,
        running_var=running_var,
        training=training,
        momentum=momentum,
        eps=eps,
    )


def normalize(
    input: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None
) -> Tensor:
    """X / max(||x||_p along dim, eps)."""
    if out is not None:
        raise TypeError("F.normalize: out= is not supported; use the returned tensor")
    return _op("normalize")(_t(input), p, dim, eps)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- dense, dropout
def linear(input: Any, weight: Any, bias: Any = None) -> Tensor:
    """X @ weight.T + bias (weight of shape (out, in), as torch's)."""
    return _op("linear")(_t(input), weight, bias)  # type: ignore[no-any-return]


def embedding(
    input: Any,
    weight: Any,
    padding_idx: int | None = None,
    max_norm: float | None = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """Rows of ``weight`` picked by the integer ``input`` (torch's argument order)."""
    if max_norm is not None or scale_grad_by_freq:
        raise NotImplementedError(
            "F.embedding: max_norm= and scale_grad_by_freq= are not supported; renormalize "
            "the weight yourself under sadl.no_grad()"
        )
    # sparse=True only changes the gradient's storage in torch; the values are the same.
    ids = input.data if isinstance(input, Tensor) else np.asarray(input)
    return _op("embedding")(weight, ids, padding_idx=padding_idx)  # type: ignore[no-any-return]


def _keep(x: Tensor, p: float) -> Any:
    """A keep-mask of ``x``'s shape (True with probability 1 - p), from sadl's generator."""
    return sadl.random.generator(x.device).random(x.shape, dtype=np.float32) >= p


def _check_p(fn: str, p: float) -> None:
    if isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"F.{fn}: p must be a probability in [0, 1], got {p!r}")


def dropout(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero elements with probability ``p`` and scale the rest by 1 / (1 - p) (when training)."""
    _check_p("dropout", p)
    _no_inplace("dropout", inplace)
    x = _t(input)
    if not training or p == 0.0:
        return x
    return _op("dropout")(x, p=float(p), mask=_keep(x, p))  # type: ignore[no-any-return]


def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(q k^T * scale + mask) v; ``attn_mask`` boolean (True = attend) or additive.

    Dropout on the attention probabilities (``dropout_p``) applies whenever it is given, as in
    torch: pass ``dropout_p=0.0`` in evaluation.
    """
    _check_p("scaled_dot_product_attention", dropout_p)
    if is_causal and attn_mask is not None:
        raise ValueError(
            "F.scaled_dot_product_attention: pass attn_mask= or is_causal=True, not both (as torch)"
        )
    q, k, v = _t(query), _t(key), _t(value)
    dmask = None
    if dropout_p > 0.0:
        shape = (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), q.shape[-2], k.shape[-2])
        keep = sadl.random.generator(q.device).random(shape, dtype=np.float32) >= dropout_p
        dmask = keep.astype(q.dtype) * (1.0 / (1.0 - dropout_p) if dropout_p < 1.0 else 0.0)
    return _op("scaled_dot_product_attention")(  # type: ignore[no-any-return]
        q,
        k,
        v,
        attn_mask,
        causal=is_causal,
        scale=scale,
        dropout_mask=dmask,
        enable_gqa=enable_gqa,
    )


#: Every function defined here (the names torch.nn.functional gives them).
__all__ = [
    n
    for n, v in list(globals().items())
    if getattr(v, "__module__", None) == __name__ and not n.startswith("_")
]
