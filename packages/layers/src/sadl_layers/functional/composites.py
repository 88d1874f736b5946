"""torch.nn.functional names composed from sadl's ops: no op of their own, so each gradient (of
any order) is that of its parts. Shrinkages and thresholds, ``glu``, ``prelu``, the smooth and
Huber losses, KL divergence, cosine similarity, pairwise distance, the pixel shuffles and the
channel dropouts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sadl
from sadl import Tensor

from sadl_layers.functional._common import _legacy, _no_inplace, _reduce, _t


def _where(cond: Any, a: Any, b: Any) -> Tensor:
    return sadl.ops.where(cond, a, b)  # type: ignore[no-any-return]


def hardshrink(input: Any, lambd: float = 0.5) -> Tensor:
    """X where |x| > lambd, else 0."""
    x = _t(input)
    return _where(abs(x.data) > lambd, x, 0.0)


def softshrink(input: Any, lambd: float = 0.5) -> Tensor:
    """X - lambd above lambd, x + lambd below -lambd, else 0."""
    if lambd < 0:
        raise ValueError(f"F.softshrink: lambd must be non-negative, got {lambd}")
    x = _t(input)
    return _where(x.data > lambd, x - lambd, _where(x.data < -lambd, x + lambd, 0.0))


def tanhshrink(input: Any) -> Tensor:
    """X - tanh(x)."""
    x = _t(input)
    return x - sadl.ops.tanh(x)  # type: ignore[no-any-return]


def threshold(input: Any, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """X where x > threshold, else ``value``."""
    _no_inplace("threshold", inplace)
    x = _t(input)
    return _where(x.data > threshold, x, float(value))


def glu(input: Any, dim: int = -1) -> Tensor:
    """A * sigmoid(b) of the two halves (a, b) of ``input`` along ``dim``."""
    x = _t(input)
    n = x.shape[dim]
    if n % 2:
        raise ValueError(f"F.glu: dim {dim} must have an even size to halve, got {n}")
    a, b = np.split(x, 2, axis=dim)  # type: ignore[call-overload]
    return a * sadl.ops.sigmoid(b)  # type: ignore[no-any-return]


def prelu(input: Any, weight: Any) -> Tensor:
    """X where x > 0, else weight * x; ``weight`` has one value or one per channel (dim 1)."""
    x, w = _t(input), _t(weight)
    if w.ndim != 1 or w.shape[0] not in (1, x.shape[1] if x.ndim > 1 else 1):
        raise ValueError(
            f"F.prelu: weight must have 1 value or one per channel (dim 1 of the input of shape "
            f"{x.shape}), got shape {w.shape}"
        )
    if x.ndim > 1:
        w = w.reshape((w.shape[0],) + (1,) * (x.ndim - 2))
    return _where(x.data > 0, x, w * x)


def smooth_l1_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Tensor:
    """0.5 d**2 / beta where |d| < beta, else |d| - 0.5 beta, of d = input - target (beta 0:
    the L1 loss).
    """
    _legacy("smooth_l1_loss", size_average, reduce)
    if beta < 0:
        raise ValueError(f"F.smooth_l1_loss: beta must be non-negative, got {beta}")
    d = _t(input) - _t(target)
    if beta == 0:
        return _reduce(abs(d), reduction)
    return _reduce(_where(abs(d.data) < beta, 0.5 * d * d / beta, abs(d) - 0.5 * beta), reduction)


def huber_loss(
    input: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None
) -> Tensor:
    """0.5 d**2 where |d| < delta, else delta (|d| - 0.5 delta), of d = input - target, times
    ``weight`` (broadcast) where given.
    """
    if not delta > 0:
        raise ValueError(f"F.huber_loss: delta must be positive, got {delta}")
    d = _t(input) - _t(target)
    loss = _where(abs(d.data) < delta, 0.5 * d * d, delta * (abs(d) - 0.5 * delta))
    return _reduce(loss if weight is None else loss * weight, reduction)


def kl_div(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Tensor:
    """Target * (log(target) - input), ``input`` log-probabilities (0 where target is 0);
    ``log_target``: the target as log-probabilities. ``reduction='batchmean'`` divides the sum
    by the batch size (dim 0), the KL divergence; ``'mean'`` averages every element, as torch.
    """
    _legacy("kl_div", size_average, reduce)
    x, y = _t(input), _t(target)
    if log_target:
        loss = sadl.ops.exp(y) * (y - x)
    else:
        positive = y.data > 0
        log_y = sadl.ops.log(_where(positive, y, 1.0))
        loss = _where(positive, y * (log_y - x), 0.0)
    if reduction == "batchmean":
        return loss.sum() / (x.shape[0] if x.ndim else 1)  # type: ignore[no-any-return]
    return _reduce(loss, reduction)


def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Sum of (x1 / |x1|) * (x2 / |x2|) along ``dim`` (broadcast), each norm at least eps."""
    a: Any = _t(x1)
    b: Any = _t(x2)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    na = sadl.ops.clip(sadl.ops.norm(a, axis=dim, keepdims=True), eps, None)
    nb = sadl.ops.clip(sadl.ops.norm(b, axis=dim, keepdims=True), eps, None)
    return ((a / na) * (b / nb)).sum(dim)  # type: ignore[no-any-return]


def pairwise_distance(
    x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """The p-norm of x1 - x2 + eps along the last dim."""
    d = _t(x1) - _t(x2) + eps
    if p == 2:
        return sadl.ops.norm(d, axis=-1, keepdims=keepdim)  # type: ignore[no-any-return]
    if not p > 0:
        raise ValueError(f"F.pairwise_distance: p must be positive, got {p}")
    total = (abs(d) ** p).sum(-1, keepdims=keepdim)
    return total ** (1.0 / p)  # type: ignore[no-any-return]


def pixel_shuffle(input: Any, upscale_factor: int) -> Tensor:
    """(*, C r^2, H, W) as (*, C, H r, W r): each channel group of r^2 fills an r x r block."""
    x, r = _t(input), int(upscale_factor)
    *lead, c, h, w = x.shape
    if c % (r * r):
        raise ValueError(f"F.pixel_shuffle: channels {c} must be divisible by {r}^2")
    y: Any = x.reshape((*lead, c // (r * r), r, r, h, w))
    n = len(lead)
    y = np.transpose(y, (*range(n), n, n + 3, n + 1, n + 4, n + 2))
    return y.reshape((*lead, c // (r * r), h * r, w * r))  # type: ignore[no-any-return]


def pixel_unshuffle(input: Any, downscale_factor: int) -> Tensor:
    """(*, C, H r, W r) as (*, C r^2, H, W): the inverse of :func:`pixel_shuffle`."""
    x, r = _t(input), int(downscale_factor)
    *lead, c, h, w = x.shape
    if h % r or w % r:
        raise ValueError(f"F.pixel_unshuffle: height {h} and width {w} must be divisible by {r}")
    y: Any = x.reshape((*lead, c, h // r, r, w // r, r))
    n = len(lead)
    y = np.transpose(y, (*range(n), n, n + 2, n + 4, n + 1, n + 3))
    return y.reshape((*lead, c * r * r, h // r, w // r))  # type: ignore[no-any-return]


def _channel_dropout(
    fn: str, d: int, input: Any, p: float, training: bool, inplace: bool
) -> Tensor:
    """Zero whole channels (dim 1 of (N, C, *d spatial), dim 0 unbatched) with probability p and
    scale the rest by 1 / (1 - p), the keep-mask drawn from sadl's generator of the device.
    """
    if isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"F.{fn}: p must be a probability in [0, 1], got {p!r}")
    _no_inplace(fn, inplace)
    x = _t(input)
    if x.ndim not in (d + 1, d + 2):
        raise ValueError(
            f"F.{fn}: input must have {d + 2} dims (N, C, ...) or {d + 1} (C, ...), got {x.shape}"
        )
    if not training or p == 0.0:
        return x
    shape = x.shape[: x.ndim - d] + (1,) * d
    keep = sadl.random.generator(x.device).random(shape, dtype=np.float32) >= p
    return x * (keep / (1.0 - p) if p < 1.0 else keep * 0.0).astype(x.dtype)  # type: ignore[no-any-return]


def dropout1d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, L) with probability p (scaling the rest by 1 / (1 - p))."""
    return _channel_dropout("dropout1d", 1, input, p, training, inplace)


def dropout2d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, H, W) with probability p (scaling the rest)."""
    return _channel_dropout("dropout2d", 2, input, p, training, inplace)


def dropout3d(input: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of (N, C, D, H, W) with probability p (scaling the rest)."""
    return _channel_dropout("dropout3d", 3, input, p, training, inplace)


#: Every function defined here (the names torch.nn.functional gives them).
__all__ = [
    n
    for n, v in list(globals().items())
    if getattr(v, "__module__", None) == __name__ and not n.startswith("_")
]
