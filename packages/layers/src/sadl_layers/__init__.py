"""sadl-layers: the layer library of sadl, as a plugin.

Layers (``torch.nn`` names, parameter names and shapes, so a PyTorch state_dict loads by name)
and the fused ops they are built from. Installed next to ``sadl-core`` they appear as
``sadl.nn.<Name>`` / ``sadl.<Name>`` and ``sadl.ops.<name>``; they can also be imported from
here::

    from sadl_layers import Linear, Sequential, ReLU, cross_entropy

    model = Sequential(Linear(2, 32), ReLU(), Linear(32, 3))
    loss = cross_entropy(model(x), y)      # logits (..., C), integer targets (...)
"""

from __future__ import annotations

from sadl_layers.modules import (
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    BCEWithLogitsLoss,
    CausalSelfAttention,
    Conv2d,
    CrossEntropyLoss,
    Dropout,
    Embedding,
    Flatten,
    Identity,
    L1Loss,
    LayerNorm,
    LeakyReLU,
    Linear,
    LogSoftmax,
    MaxPool2d,
    Mlp,
    ModuleDict,
    ModuleList,
    MSELoss,
    MultiHeadAttention,
    NLLLoss,
    ReLU,
    RMSNorm,
    Sequential,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from sadl_layers.ops import (
    avg_pool2d,
    batch_norm,
    binary_cross_entropy_with_logits,
    conv2d,
    cross_entropy,
    dropout,
    embedding,
    gelu,
    l1_loss,
    layer_norm,
    leaky_relu,
    linear,
    max_pool2d,
    mse_loss,
    nll_loss,
    rms_norm,
    scaled_dot_product_attention,
    silu,
)

__version__ = "0.1.0"

__all__ = [
    "GELU",
    "AvgPool2d",
    "BCEWithLogitsLoss",
    "BatchNorm1d",
    "BatchNorm2d",
    "CausalSelfAttention",
    "Conv2d",
    "CrossEntropyLoss",
    "Dropout",
    "Embedding",
    "Flatten",
    "Identity",
    "L1Loss",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "LogSoftmax",
    "MSELoss",
    "MaxPool2d",
    "Mlp",
    "ModuleDict",
    "ModuleList",
    "MultiHeadAttention",
    "NLLLoss",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "SiLU",
    "Sigmoid",
    "Softmax",
    "Tanh",
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
