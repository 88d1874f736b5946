"""``torch.nn.functional`` with torch's signatures, over sadl's registered ops.

Served as ``sadl.nn.functional`` (``import sadl.nn.functional as F``, ``from sadl.nn import
functional as F``). Each function is a thin translation of torch's arguments to one op's: torch's
``dim`` is the op's ``axis``, classes sit at dim 1 for the losses (the ops put them last), ``pad``
counts from the last axis backwards, ``attn_mask``/``is_causal`` are ``mask``/``causal``, and
random masks (``dropout``, ``dropout_p``) are drawn from sadl's generator of the input's device,
so ``sadl.manual_seed`` makes them reproducible. Arguments torch has deprecated
(``size_average``, ``reduce``) or that sadl has no meaning for raise instead of being ignored.
A torch name missing here says so and names sadl's nearest spelling.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import sadl
from sadl import Tensor

from sadl_layers.ops import OPS

_OWN = {op.name: op for op in OPS}

__all__ = [
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "batch_norm",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "celu",
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "cross_entropy",
    "dropout",
    "elu",
    "embedding",
    "gelu",
    "group_norm",
    "hardsigmoid",
    "hardswish",
    "hardtanh",
    "interpolate",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log_softmax",
    "logsigmoid",
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "mish",
    "mse_loss",
    "nll_loss",
    "normalize",
    "one_hot",
    "pad",
    "relu",
    "relu6",
    "rms_norm",
    "scaled_dot_product_attention",
    "selu",
    "sigmoid",
    "silu",
    "softmax",
    "softmin",
    "softplus",
    "softsign",
    "tanh",
    "unfold",
]


def _op(name: str) -> Any:
    """sadl-layers' own op ``name``, else core's (``relu``, ``softmax``, ...)."""
    return _OWN.get(name) or sadl.ops.get(name)


def _t(x: Any) -> Tensor:
    return x if isinstance(x, Tensor) else sadl.tensor(x)


def _no_inplace(fn: str, inplace: bool) -> None:
    if inplace:
        raise NotImplementedError(
            f"F.{fn}(inplace=True): sadl's activations make a new tensor; drop inplace= "
            "(the result is the same)"
        )


def _legacy(fn: str, size_average: Any, reduce: Any) -> None:
    if size_average is not None or reduce is not None:
        raise TypeError(
            f"F.{fn}: size_average= and reduce= are deprecated in torch and not accepted here; "
            "pass reduction='mean', 'sum' or 'none'"
        )


# ---------------------------------------------------------------------------- activations
def relu(input: Any, inplace: bool = False) -> Tensor:
    """max(x, 0)."""
    _no_inplace("relu", inplace)
    return _op("relu")(_t(input))  # type: ignore[no-any-return]


def relu6(input: Any, inplace: bool = False) -> Tensor:
    """min(max(x, 0), 6)."""
    _no_inplace("relu6", inplace)
    return _op("hardtanh")(_t(input), min_val=0.0, max_val=6.0)  # type: ignore[no-any-return]


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """X for x > 0, alpha * (exp(x) - 1) otherwise."""
    _no_inplace("elu", inplace)
    return _op("elu")(_t(input), alpha=alpha)  # type: ignore[no-any-return]


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    _no_inplace("celu", inplace)
    return _op("celu")(_t(input), alpha=alpha)  # type: ignore[no-any-return]


def selu(input: Any, inplace: bool = False) -> Tensor:
    """Scaled ELU with the self-normalizing constants."""
    _no_inplace("selu", inplace)
    return _op("selu")(_t(input))  # type: ignore[no-any-return]


def leaky_relu(input: Any, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """X for x > 0, negative_slope * x otherwise."""
    _no_inplace("leaky_relu", inplace)
    return _op("leaky_relu")(_t(input), negative_slope=negative_slope)  # type: ignore[no-any-return]


def hardtanh(
    input: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False
) -> Tensor:
    """X clipped to [min_val, max_val]."""
    _no_inplace("hardtanh", inplace)
    return _op("hardtanh")(_t(input), min_val=min_val, max_val=max_val)  # type: ignore[no-any-return]


def gelu(input: Any, approximate: str = "none") -> Tensor:
    """X * Phi(x) (``approximate='tanh'``: GPT-2's tanh form)."""
    return _op("gelu")(_t(input), approximate=approximate)  # type: ignore[no-any-return]


def silu(input: Any, inplace: bool = False) -> Tensor:
    """X * sigmoid(x)."""
    _no_inplace("silu", inplace)
    return _op("silu")(_t(input))  # type: ignore[no-any-return]


def mish(input: Any, inplace: bool = False) -> Tensor:
    """X * tanh(softplus(x))."""
    _no_inplace("mish", inplace)
    return _op("mish")(_t(input))  # type: ignore[no-any-return]


def sigmoid(input: Any) -> Tensor:
    """1 / (1 + exp(-x))."""
    return _t(input).sigmoid()


def tanh(input: Any) -> Tensor:
    """tanh(x)."""
    return _t(input).tanh()


def softplus(input: Any, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """log(1 + exp(beta * x)) / beta (linear above ``threshold``)."""
    return _op("softplus_beta")(_t(input), beta=beta, threshold=threshold)  # type: ignore[no-any-return]


def softsign(input: Any) -> Tensor:
    """X / (1 + |x|)."""
    return _op("softsign")(_t(input))  # type: ignore[no-any-return]


def logsigmoid(input: Any) -> Tensor:
    """log(sigmoid(x)), stable for large |x|."""
    return _op("logsigmoid")(_t(input))  # type: ignore[no-any-return]


def hardsigmoid(input: Any, inplace: bool = False) -> Tensor:
    """relu6(x + 3) / 6."""
    _no_inplace("hardsigmoid", inplace)
    return _op("hardsigmoid")(_t(input))  # type: ignore[no-any-return]


def hardswish(input: Any, inplace: bool = False) -> Tensor:
    """X * relu6(x + 3) / 6."""
    _no_inplace("hardswish", inplace)
    return _op("hardswish")(_t(input))  # type: ignore[no-any-return]


def _softmax_dim(fn: str, dim: int | None, dtype: Any, x: Any) -> tuple[Tensor, int]:
    if dim is None:
        raise TypeError(
            f"F.{fn}: pass dim= (torch's implicit dim is deprecated; sadl does not guess it)"
        )
    t = _t(x)
    return (t if dtype is None else t.astype(dtype)), dim


def softmax(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim`` (cast to ``dtype`` first when given)."""
    t, dim = _softmax_dim("softmax", dim, dtype, input)
    return t.softmax(axis=dim)


def log_softmax(
    input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None
) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    t, dim = _softmax_dim("log_softmax", dim, dtype, input)
    return t.log_softmax(axis=dim)


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:
    """softmax(-x) along ``dim``."""
    t, dim = _softmax_dim("softmin", dim, dtype, input)
    return (-t).softmax(axis=dim)


# ---------------------------------------------------------------------------- losses
def _classes_last(x: Tensor) -> Tensor:
    """Torch's (N, C, d1, ...) as the ops' (N, d1, ..., C); (N, C) and (C,) stay."""
    return x if x.ndim <= 2 else np.moveaxis(x, 1, -1)  # type: ignore[return-value]


def cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Tensor:
    """Softmax cross-entropy of logits (N, C, ...) against class ids (N, ...) or
    probabilities (N, C, ...), classes at dim 1 as in torch.
    """
    _legacy("cross_entropy", size_average, reduce)
    x, y = _t(input), _t(target)
    if y.dtype.kind == "f":
        y = _classes_last(y)
    return _op("cross_entropy")(  # type: ignore[no-any-return]
        _classes_last(x),
        y,
        weight=weight,
        ignore_index=ignore_index,
        reduction=reduction,
        label_smoothing=label_smoothing,
    )


def nll_loss(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """Negative log-likelihood of log-probabilities (N, C, ...) at class ids (N, ...)."""
    _legacy("nll_loss", size_average, reduce)
    return _op("nll_loss")(  # type: ignore[no-any-return]
        _classes_last(_t(input)),
        _t(target),
        weight=weight,
        ignore_index=ignore_index,
        reduction=reduction,
    )


def mse_loss(
    input: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Tensor:
    """Mean (or sum, or each) of squared differences."""
    _legacy("mse_loss", size_average, reduce)
    if weight is not None:
        return _reduce(_op("mse_loss")(_t(input), _t(target), reduction="none") * weight, reduction)
    return _op("mse_loss")(_t(input), _t(target), reduction=reduction)  # type: ignore[no-any-return]


def l1_loss(
    input: Any, target: Any, size_average: Any = None, reduce: Any = None, reduction: str = "mean"
) -> Tensor:
    """Mean (or sum, or each) of absolute differences."""
    _legacy("l1_loss", size_average, reduce)
    return _op("l1_loss")(_t(input), _t(target), reduction=reduction)  # type: ignore[no-any-return]


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def binary_cross_entropy(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Tensor:
    """-(y log p + (1 - y) log(1 - p)) of probabilities ``input``, optionally weighted."""
    _legacy("binary_cross_entropy", size_average, reduce)
    return _op("binary_cross_entropy")(  # type: ignore[no-any-return]
        _t(input), _t(target), weight, reduction=reduction
    )


def binary_cross_entropy_with_logits(
    input: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Tensor:
    """Binary cross-entropy of ``sigmoid(input)``, computed stably from the logits."""
    _legacy("binary_cross_entropy_with_logits", size_average, reduce)
    op = _op("binary_cross_entropy_with_logits")
    if weight is None:
        return op(_t(input), _t(target), reduction=reduction, pos_weight=pos_weight)  # type: ignore[no-any-return]
    each = op(_t(input), _t(target), reduction="none", pos_weight=pos_weight)
    return _reduce(each * weight, reduction)


# ---------------------------------------------------------------------------- normalization
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


# ---------------------------------------------------------------------------- conv, pooling
def _conv(name: str, input: Any, weight: Any, bias: Any, **params: Any) -> Tensor:
    return _op(name)(_t(input), weight, bias, **params)  # type: ignore[no-any-return]


def conv1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """1-d cross-correlation of (N, C, L) with weight (out, C / groups, k)."""
    return _conv("conv1d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def conv2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """2-d cross-correlation of (N, C, H, W) with weight (out, C / groups, kh, kw)."""
    return _conv("conv2d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def conv3d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Tensor:
    """3-d cross-correlation of (N, C, D, H, W) with weight (out, C / groups, kd, kh, kw)."""
    return _conv("conv3d", input, weight, bias, stride=stride, padding=padding,
                 dilation=dilation, groups=groups)  # fmt: skip


def _conv_transpose(name: str, input: Any, weight: Any, bias: Any, **params: Any) -> Tensor:
    if params.pop("output_padding") != 0 or params.pop("dilation") != 1:
        raise NotImplementedError(
            f"F.{name}: output_padding= and dilation= other than their defaults are not "
            f"supported; use sadl.nn.{name.replace('conv_transpose', 'ConvTranspose')}"
        )
    return _conv(name, input, weight, bias, **params)


def conv_transpose1d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 1-d convolution (weight (C, out / groups, k))."""
    return _conv_transpose("conv_transpose1d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def conv_transpose2d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 2-d convolution (weight (C, out / groups, kh, kw))."""
    return _conv_transpose("conv_transpose2d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def conv_transpose3d(
    input: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Tensor:
    """Transposed 3-d convolution (weight (C, out / groups, kd, kh, kw))."""
    return _conv_transpose("conv_transpose3d", input, weight, bias, stride=stride,
                           padding=padding, output_padding=output_padding, groups=groups,
                           dilation=dilation)  # fmt: skip


def _max_pool(
    name: str, input: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool, return_indices: bool,
) -> Any:  # fmt: skip
    return _op(name)(_t(input), kernel_size=kernel_size, stride=stride or None,
                     padding=padding, dilation=dilation, ceil_mode=ceil_mode,
                     return_indices=return_indices)  # fmt: skip


def max_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, L)."""
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, H, W); ``stride`` defaults to ``kernel_size``."""
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def max_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    """Max over windows of (N, C, D, H, W)."""
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)  # fmt: skip


def avg_pool1d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    """Mean over windows of (N, C, L)."""
    return _op("avg_pool1d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad)  # fmt: skip


def avg_pool2d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over windows of (N, C, H, W)."""
    return _op("avg_pool2d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad,
                             divisor_override=divisor_override)  # fmt: skip


def avg_pool3d(
    input: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    """Mean over windows of (N, C, D, H, W)."""
    if divisor_override is not None:
        raise NotImplementedError("F.avg_pool3d: divisor_override= is not supported")
    return _op("avg_pool3d")(_t(input), kernel_size=kernel_size, stride=stride or None,  # type: ignore[no-any-return]
                             padding=padding, ceil_mode=ceil_mode,
                             count_include_pad=count_include_pad)  # fmt: skip


def adaptive_avg_pool1d(input: Any, output_size: Any) -> Tensor:
    """Mean over windows chosen so the output has length ``output_size``."""
    return _op("adaptive_avg_pool1d")(_t(input), output_size=output_size)  # type: ignore[no-any-return]


def adaptive_avg_pool2d(input: Any, output_size: Any) -> Tensor:
    """Mean over windows chosen so the output has spatial size ``output_size``."""
    return _op("adaptive_avg_pool2d")(_t(input), output_size=output_size)  # type: ignore[no-any-return]


def unfold(
    input: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1
) -> Tensor:
    """im2col: sliding blocks of (N, C, H, W) as (N, C * kh * kw, L)."""
    return _op("unfold")(_t(input), kernel_size, dilation, padding, stride)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------- shape, encoding
def pad(
    input: Any, pad: Sequence[int], mode: str = "constant", value: float | None = None
) -> Tensor:
    """Pad the last ``len(pad) // 2`` axes: ``pad = (last_left, last_right, prev_left, ...)``."""
    x = _t(input)
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"F.pad: pad must hold pairs for at most {x.ndim} axes, got {tuple(pad)}")
    pairs = [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)]
    width = [(0, 0)] * (x.ndim - len(pairs)) + pairs[::-1]
    if any(a < 0 or b < 0 for a, b in width):
        raise NotImplementedError("F.pad: negative padding (cropping) is not supported; slice")
    if mode == "constant":
        return _op("pad")(x, pad_width=width, mode="constant", constant_values=value or 0)  # type: ignore[no-any-return]
    if value:
        raise ValueError(f"F.pad: value= applies to mode='constant' only, not {mode!r}")
    return _op("pad")(x, pad_width=width, mode=mode)  # type: ignore[no-any-return]


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with one more (last) axis of length ``num_classes``."""
    return _op("one_hot")(_t(tensor), num_classes=num_classes)  # type: ignore[no-any-return]


def interpolate(
    input: Any,
    size: Any = None,
    scale_factor: Any = None,
    mode: str = "nearest",
    align_corners: bool | None = None,
    recompute_scale_factor: bool | None = None,
    antialias: bool = False,
) -> Tensor:
    """Resize the spatial axes of (N, C, ...) to ``size`` or by ``scale_factor``."""
    if antialias:
        raise NotImplementedError("F.interpolate: antialias=True is not supported")
    return _op("interpolate")(  # type: ignore[no-any-return]
        _t(input),
        size=size,
        scale_factor=scale_factor,
        mode=mode,
        align_corners=align_corners,
        recompute_scale_factor=recompute_scale_factor,
    )


#: torch.nn.functional names sadl lacks -> what to use instead (shown by the AttributeError).
_NEAREST = {
    "kl_div": "sum(target * (log(target) - input)) with Tensor ops",
    "smooth_l1_loss": "sadl.ops.where(abs(d) < beta, 0.5 * d**2 / beta, abs(d) - 0.5 * beta)",
    "huber_loss": "sadl.ops.where on abs(input - target), as smooth_l1_loss",
    "cosine_similarity": "(F.normalize(a, dim=dim) * F.normalize(b, dim=dim)).sum(dim)",
    "fold": "sadl.ops.unfold is im2col (F.unfold); its inverse is not an op",
    "pixel_shuffle": "reshape and transpose",
    "grid_sample": "F.interpolate (regular grids only)",
    "gumbel_softmax": "F.softmax of (logits - log(-log(u))) / tau with u from sadl.rand",
    "multi_head_attention_forward": "sadl.nn.MultiHeadAttention or F.scaled_dot_product_attention",
    "dropout1d": "F.dropout",
    "dropout2d": "F.dropout on a mask of shape (N, C, 1, 1)",
    "alpha_dropout": "F.dropout",
    "local_response_norm": "F.group_norm or F.layer_norm",
    "instance_norm": "sadl.ops.instance_norm (running_mean, running_var, weight, bias, ...)",
    "prelu": "sadl.ops.where(x > 0, x, weight * x)",
    "glu": "a, b = x.split(x.shape[dim] // 2, dim); a * F.sigmoid(b)",
    "max_unpool2d": "sadl.ops.max_unpool2d",
    "adaptive_max_pool2d": "F.max_pool2d with a kernel of input size // output size",
    "ctc_loss": "(no equivalent yet)",
    "triplet_margin_loss": "compose it from Tensor ops",
    "margin_ranking_loss": "compose it from Tensor ops",
    "cosine_embedding_loss": "compose it from Tensor ops",
    "poisson_nll_loss": "exp(input) - target * input with Tensor ops",
    "gaussian_nll_loss": "0.5 * (log(var) + (input - target)**2 / var) with Tensor ops",
    "rrelu": "F.leaky_relu",
    "threshold": "sadl.ops.where(x > threshold, x, value)",
    "tanhshrink": "x - F.tanh(x)",
    "softshrink": "sadl.ops.where on abs(x) > lambd",
    "hardshrink": "sadl.ops.where on abs(x) > lambd",
    "elu_": "F.elu (sadl has no in-place activations)",
    "relu_": "F.relu (sadl has no in-place activations)",
}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    hint = _NEAREST.get(name)
    where = f"; use {hint}" if hint else "; see docs/pytorch.md for what sadl has"
    raise AttributeError(f"sadl.nn.functional has no {name!r} (torch.nn.functional.{name}){where}")
