"""The op tables of sadl-layers: one ``OpDef`` record per op, forward beside backward.

Every public op is registered through the ``register_ops`` hook (``sadl.ops.<name>``) and is
importable from here under its own name (``from sadl_layers.ops import cross_entropy``).
Calling an op applies it: Tensors in, a Tensor on the autograd graph out; arrays in, an array out.

``INTERNAL_OPS`` are the backward ops of the fused ops (``gelu_backward``,
``conv2d_input_grad``, ...): real ops with their own gradients, so that differentiating a
gradient works, but not registered as public names.
"""

from __future__ import annotations

from sadl.plugins import OpDef

from sadl_layers.ops import activations, attention, conv, dense, losses, normalization

__all__ = [
    "INTERNAL_OPS",
    "OPS",
    "avg_pool2d",
    "batch_norm",
    "binary_cross_entropy_with_logits",
    "conv2d",
    "cross_entropy",
    "dropout",
    "embedding",
    "gelu",
    "l1_loss",
    "layer_norm",
    "leaky_relu",
    "linear",
    "max_pool2d",
    "mse_loss",
    "nll_loss",
    "rms_norm",
    "scaled_dot_product_attention",
    "silu",
]

OPS: tuple[OpDef, ...] = (
    *losses.OPS,
    *activations.OPS,
    *normalization.OPS,
    *dense.OPS,
    *attention.OPS,
    *conv.OPS,
)
INTERNAL_OPS: tuple[OpDef, ...] = (
    *losses.INTERNAL_OPS,
    *activations.INTERNAL_OPS,
    *normalization.INTERNAL_OPS,
    *dense.INTERNAL_OPS,
    *attention.INTERNAL_OPS,
    *conv.INTERNAL_OPS,
)

cross_entropy = losses.CROSS_ENTROPY
nll_loss = losses.NLL_LOSS
mse_loss = losses.MSE_LOSS
l1_loss = losses.L1_LOSS
binary_cross_entropy_with_logits = losses.BCE_WITH_LOGITS
gelu = activations.GELU
silu = activations.SILU
leaky_relu = activations.LEAKY_RELU
layer_norm = normalization.LAYER_NORM
rms_norm = normalization.RMS_NORM
batch_norm = normalization.BATCH_NORM
linear = dense.LINEAR
embedding = dense.EMBEDDING
dropout = dense.DROPOUT
scaled_dot_product_attention = attention.SCALED_DOT_PRODUCT_ATTENTION
conv2d = conv.CONV2D
max_pool2d = conv.MAX_POOL2D
avg_pool2d = conv.AVG_POOL2D
