"""Which first-party package provides which name, so a missing name can say what to install."""

from __future__ import annotations

_LAYERS = """
Sequential Mlp ModuleList ModuleDict Linear Embedding LayerNorm RMSNorm BatchNorm1d BatchNorm2d
Dropout Flatten Identity ReLU GELU SiLU Tanh Sigmoid Softmax LogSoftmax LeakyReLU
MultiHeadAttention CausalSelfAttention Conv2d MaxPool2d AvgPool2d CrossEntropyLoss MSELoss L1Loss
NLLLoss BCEWithLogitsLoss
"""
_LAYER_OPS = """
cross_entropy nll_loss mse_loss l1_loss binary_cross_entropy_with_logits gelu silu leaky_relu
layer_norm rms_norm scaled_dot_product_attention attention_qkv conv2d max_pool2d avg_pool2d
dropout linear embedding batch_norm
"""
_OPTIM = "AdamW RMSprop Adagrad Lion LRScheduler StepLR CosineWithWarmup LinearWarmup OneCycle"

KNOWN_PROVIDERS: dict[str, dict[str, str]] = {
    "layers": {**dict.fromkeys(_LAYERS.split(), "sadl-layers"), "GPT": "sadl-models"},
    "ops": dict.fromkeys(_LAYER_OPS.split(), "sadl-layers"),
    "optimizers": dict.fromkeys(_OPTIM.split(), "sadl-optim"),
    "models": {"gpt": "sadl-models", "mlp": "sadl-models"},
    "formats": {"sadl": "sadl-serialize", "safetensors": "sadl-serialize"},
}
