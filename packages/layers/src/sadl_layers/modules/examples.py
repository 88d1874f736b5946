"""What ``sadl check-plugins`` builds and runs for each layer of sadl-layers.

Registered with the layers (``LayerDef(name, cls, examples=...)``); ``sadl.testing.check_layer``
builds each example, runs it forward and backward and compares sampled gradients with central
differences. ``tests/test_layer_examples.py`` checks that every layer has one and passes.
"""

from __future__ import annotations

import numpy as np
from sadl.plugins import Example

__all__ = ["EXAMPLES"]

_TARGETS = np.array([0, 2, 1, 4])  # class indices for the classification losses
#: Layer name -> what ``sadl check-plugins`` builds and runs (``check_layer``): in each
#: ``Example`` the positional inputs go to forward, the keywords to the constructor.
EXAMPLES: dict[str, tuple[Example, ...]] = {
    "Sequential": (Example((2, 3)),),  # built empty: its layers are positional arguments
    "Mlp": (Example((2, 3)),),
    "ModuleList": (Example(),),  # containers without a forward pass are only built
    "ModuleDict": (Example(),),
    "Linear": (
        Example((4, 3), in_features=3, out_features=2),
        Example((2, 5, 3), in_features=3, out_features=2, bias=False),
    ),
    "Embedding": (Example(np.array([[1, 3], [0, 3]]), num_embeddings=5, embedding_dim=3),),
    "Dropout": (Example((4, 3), p=0.5),),
    "Flatten": (Example((2, 3, 4)),),
    "Identity": (Example((2, 3)),),
    "LayerNorm": (Example((2, 5), normalized_shape=5),),
    "RMSNorm": (Example((2, 5), normalized_shape=5),),
    "RotaryEmbedding": (
        Example((2, 3, 4), head_dim=4),
        Example((1, 2, 3, 6), head_dim=6, base=100.0, interleaved=True),
    ),
    "BatchNorm1d": (Example((6, 3), num_features=3),),
    "BatchNorm2d": (Example((4, 2, 3, 3), num_features=2),),
    "BatchNorm3d": (Example((2, 2, 3, 2, 3), num_features=2),),
    "GroupNorm": (Example((2, 4, 3), num_groups=2, num_channels=4),),
    "InstanceNorm1d": (Example((2, 3, 5), num_features=3, affine=True),),
    "InstanceNorm2d": (Example((3, 4, 4), num_features=3, track_running_stats=True),),
    "InstanceNorm3d": (Example((1, 2, 3, 2, 3), num_features=2, affine=True),),
    "ReLU": (Example((3, 4)),),
    "GELU": (Example((3, 4)), Example((3, 4), approximate="tanh")),
    "SiLU": (Example((3, 4)),),
    "Tanh": (Example((3, 4)),),
    "Sigmoid": (Example((3, 4)),),
    "Softmax": (Example((3, 4)),),
    "LogSoftmax": (Example((3, 4)),),
    "LeakyReLU": (Example((3, 4), negative_slope=0.1),),
    "ELU": (Example((3, 4)), Example((3, 4), alpha=0.5)),
    "SELU": (Example((3, 4)),),
    "CELU": (Example((3, 4), alpha=1.5),),
    "Mish": (Example((3, 4)),),
    "Softplus": (Example((3, 4)), Example((3, 4), beta=2.0, threshold=3.0)),
    "LogSigmoid": (Example((3, 4)),),
    "Hardtanh": (Example((3, 4)), Example((3, 4), min_val=-0.5, max_val=1.5)),
    "ReLU6": (Example((3, 4), domain=(-3.0, 9.0)),),
    "Hardsigmoid": (Example((3, 4), domain=(-5.0, 5.0)),),
    "Hardswish": (Example((3, 4), domain=(-5.0, 5.0)),),
    "Softmin": (Example((3, 4), dim=0), Example((3, 4))),
    "Softsign": (Example((3, 4), domain=(-4.0, 4.0)),),
    "Hardshrink": (Example((3, 4), lambd=0.3),),
    "Softshrink": (Example((3, 4), lambd=0.3),),
    "Tanhshrink": (Example((3, 4)),),
    "Threshold": (Example((3, 4), threshold=0.1, value=-1.0),),
    "GLU": (Example((3, 4)), Example((2, 6, 3), dim=1)),
    "PReLU": (Example((2, 3, 4)), Example((2, 3, 4), num_parameters=3)),
    "PixelShuffle": (Example((1, 8, 2, 3), upscale_factor=2),),
    "PixelUnshuffle": (Example((1, 2, 4, 6), downscale_factor=2),),
    "CosineSimilarity": (Example((3, 4), (3, 4)),),
    "PairwiseDistance": (Example((3, 4), (3, 4)),),
    "SmoothL1Loss": (Example((3, 4), (3, 4), beta=0.5),),
    "HuberLoss": (Example((3, 4), (3, 4), delta=0.5),),
    "KLDivLoss": (Example((3, 4), (3, 4), reduction="batchmean"),),
    "Dropout1d": (Example((2, 3, 4), p=0.5),),
    "Dropout2d": (Example((2, 3, 2, 2), p=0.5), Example((3, 2, 2), p=0.2)),
    "Dropout3d": (Example((2, 3, 2, 2, 2), p=0.5),),
    "Unflatten": (Example((2, 6), dim=1, unflattened_size=(2, 3)),),
    "ZeroPad1d": (Example((1, 2, 3), padding=(1, 2)),),
    "ZeroPad2d": (Example((1, 2, 3, 3), padding=1),),
    "ZeroPad3d": (Example((1, 1, 2, 2, 2), padding=1),),
    "ConstantPad1d": (Example((1, 2, 3), padding=2, value=0.5),),
    "ConstantPad2d": (Example((1, 2, 3, 3), padding=(1, 0, 2, 1), value=-1.0),),
    "ConstantPad3d": (Example((1, 1, 2, 2, 2), padding=1, value=2.0),),
    "ReflectionPad1d": (Example((1, 2, 4), padding=2),),
    "ReflectionPad2d": (Example((1, 2, 3, 4), padding=(1, 2, 2, 1)),),
    "ReflectionPad3d": (Example((1, 1, 3, 3, 3), padding=1),),
    "ReplicationPad1d": (Example((1, 2, 3), padding=2),),
    "ReplicationPad2d": (Example((1, 2, 3, 3), padding=(2, 1, 0, 3)),),
    "ReplicationPad3d": (Example((1, 1, 2, 2, 2), padding=1),),
    "CircularPad1d": (Example((1, 2, 4), padding=2),),
    "CircularPad2d": (Example((1, 2, 3, 3), padding=1),),
    "CircularPad3d": (Example((1, 1, 2, 3, 3), padding=(1, 1, 2, 0, 1, 1)),),
    "QuickGELU": (Example((3, 4), domain=(-4.0, 4.0)),),
    "MultiHeadAttention": (Example((2, 3, 4), (2, 3, 4), (2, 3, 4), embed_dim=4, num_heads=2),),
    "MultiheadAttention": (Example((3, 2, 4), (3, 2, 4), (3, 2, 4), embed_dim=4, num_heads=2),),
    "CausalSelfAttention": (Example((2, 3, 4), n_embd=4, n_head=2),),
    "Conv2d": (
        Example((1, 2, 5, 5), in_channels=2, out_channels=3, kernel_size=3, padding=1),
        Example((1, 2, 5, 5), in_channels=2, out_channels=3, kernel_size=(2, 3), padding="same"),
        Example((1, 2, 5, 5), in_channels=2, out_channels=3, kernel_size=3, padding="valid"),
    ),
    "Conv1d": (
        Example((2, 2, 6), in_channels=2, out_channels=3, kernel_size=3, padding=1),
        Example((2, 2, 6), in_channels=2, out_channels=3, kernel_size=4, padding="same"),
    ),
    "Conv3d": (
        Example((1, 2, 3, 4, 4), in_channels=2, out_channels=3, kernel_size=3, padding=1),
        Example((2, 3, 3, 4), in_channels=2, out_channels=2, kernel_size=2, padding="same"),
    ),
    "ConvTranspose3d": (
        Example((1, 2, 2, 3, 2), in_channels=2, out_channels=3, kernel_size=2, stride=2),
    ),
    "ConvTranspose1d": (
        Example((2, 2, 4), in_channels=2, out_channels=3, kernel_size=3, stride=2),
    ),
    "ConvTranspose2d": (
        Example(
            (1, 2, 3, 3),
            in_channels=2,
            out_channels=3,
            kernel_size=3,
            stride=2,
            padding=1,
            output_padding=1,
        ),
    ),
    "MaxPool1d": (Example((2, 2, 6), kernel_size=2),),
    "MaxPool2d": (
        Example((1, 2, 4, 4), kernel_size=2),
        Example((1, 2, 5, 5), kernel_size=2, ceil_mode=True, return_indices=True),
    ),
    "AvgPool1d": (Example((2, 2, 6), kernel_size=3, stride=2, ceil_mode=True),),
    "AvgPool2d": (Example((1, 2, 4, 4), kernel_size=2),),
    "MaxPool3d": (Example((1, 2, 4, 4, 4), kernel_size=2),),
    "Unfold": (Example((1, 2, 4, 5), kernel_size=(2, 3), padding=1, stride=2),),
    "MaxUnpool2d": (
        Example((1, 2, 2, 2), np.array([[[[5, 7], [13, 15]], [[0, 3], [9, 10]]]]), kernel_size=2),
    ),
    "AvgPool3d": (Example((1, 2, 4, 4, 4), kernel_size=2, stride=1),),
    "AdaptiveAvgPool1d": (Example((2, 2, 7), output_size=3),),
    "AdaptiveAvgPool2d": (Example((1, 2, 5, 4), output_size=(2, 3)),),
    "Upsample": (
        Example((1, 2, 3, 4), scale_factor=2),
        Example((1, 2, 3, 4), size=(5, 7), mode="bilinear", align_corners=True),
    ),
    "UpsamplingNearest2d": (Example((1, 2, 3, 4), scale_factor=2),),
    "UpsamplingBilinear2d": (Example((1, 2, 3, 4), size=(5, 6)),),
    "RNN": (Example((5, 2, 3), input_size=3, hidden_size=4, nonlinearity="relu"),),
    "LSTM": (
        Example((5, 2, 3), input_size=3, hidden_size=4),
        Example(
            (2, 5, 3),
            input_size=3,
            hidden_size=4,
            num_layers=2,
            bidirectional=True,
            batch_first=True,
        ),
    ),
    "GRU": (Example((5, 2, 3), input_size=3, hidden_size=4, num_layers=2),),
    "RNNCell": (Example((2, 3), input_size=3, hidden_size=4),),
    "LSTMCell": (Example((2, 3), input_size=3, hidden_size=4),),
    "GRUCell": (Example((2, 3), input_size=3, hidden_size=4),),
    "CrossEntropyLoss": (
        Example((4, 5), _TARGETS),
        Example((4, 5), _TARGETS, weight=np.array([1.0, 2.0, 0.5, 1.0, 1.5])),
        Example((4, 5), np.full((4, 5), 0.2)),  # class probabilities
    ),
    "MSELoss": (Example((4, 3), (4, 3)),),
    "L1Loss": (Example((4, 3), (4, 3)),),
    "NLLLoss": (
        Example((4, 5), _TARGETS),
        Example((4, 5), _TARGETS, weight=np.array([1.0, 2.0, 0.5, 1.0, 1.5])),
    ),
    "BCELoss": (
        Example(np.linspace(0.1, 0.9, 12).reshape(4, 3), np.linspace(0.0, 1.0, 12).reshape(4, 3)),
        Example(np.full((2, 3), 0.3), np.ones((2, 3)), weight=np.array([1.0, 2.0, 0.5])),
    ),
    "BCEWithLogitsLoss": (Example((4, 3), np.linspace(0.0, 1.0, 12).reshape(4, 3)),),
}
