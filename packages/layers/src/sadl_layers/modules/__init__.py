"""The layer classes of sadl-layers (``torch.nn`` names, parameter names and shapes).

Each is registered through the ``register_layers`` hook (``sadl.nn.<Name>``, ``sadl.<Name>``)
and importable from ``sadl_layers``.
"""

from __future__ import annotations

from sadl_layers.modules.activations import (
    GELU,
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Tanh,
)
from sadl_layers.modules.attention import CausalSelfAttention, MultiHeadAttention
from sadl_layers.modules.containers import Mlp, ModuleDict, ModuleList, Sequential
from sadl_layers.modules.conv import AvgPool2d, Conv2d, MaxPool2d
from sadl_layers.modules.dense import Dropout, Embedding, Flatten, Identity, Linear
from sadl_layers.modules.losses import (
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
)
from sadl_layers.modules.normalization import BatchNorm1d, BatchNorm2d, LayerNorm, RMSNorm

#: Registered name -> class (``Mlp`` is ``Sequential`` under SADL's name).
LAYERS: dict[str, type] = {
    "Sequential": Sequential,
    "Mlp": Mlp,
    "ModuleList": ModuleList,
    "ModuleDict": ModuleDict,
    "Linear": Linear,
    "Embedding": Embedding,
    "LayerNorm": LayerNorm,
    "RMSNorm": RMSNorm,
    "BatchNorm1d": BatchNorm1d,
    "BatchNorm2d": BatchNorm2d,
    "Dropout": Dropout,
    "Flatten": Flatten,
    "Identity": Identity,
    "ReLU": ReLU,
    "GELU": GELU,
    "SiLU": SiLU,
    "Tanh": Tanh,
    "Sigmoid": Sigmoid,
    "Softmax": Softmax,
    "LogSoftmax": LogSoftmax,
    "LeakyReLU": LeakyReLU,
    "MultiHeadAttention": MultiHeadAttention,
    "CausalSelfAttention": CausalSelfAttention,
    "Conv2d": Conv2d,
    "MaxPool2d": MaxPool2d,
    "AvgPool2d": AvgPool2d,
    "CrossEntropyLoss": CrossEntropyLoss,
    "MSELoss": MSELoss,
    "L1Loss": L1Loss,
    "NLLLoss": NLLLoss,
    "BCEWithLogitsLoss": BCEWithLogitsLoss,
}

__all__ = [
    "GELU",
    "LAYERS",
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
]
