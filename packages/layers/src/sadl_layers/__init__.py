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

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

from sadl_layers import init
from sadl_layers.activation_checkpoint import checkpoint
from sadl_layers.modules import LAYERS
from sadl_layers.modules.activations import *  # noqa: F403
from sadl_layers.modules.attention import *  # noqa: F403
from sadl_layers.modules.composites import *  # noqa: F403
from sadl_layers.modules.containers import *  # noqa: F403
from sadl_layers.modules.conv import *  # noqa: F403
from sadl_layers.modules.dense import *  # noqa: F403
from sadl_layers.modules.grouped import *  # noqa: F403
from sadl_layers.modules.losses import *  # noqa: F403
from sadl_layers.modules.normalization import *  # noqa: F403
from sadl_layers.modules.pooling import *  # noqa: F403
from sadl_layers.modules.recurrent import *  # noqa: F403
from sadl_layers.modules.resize import *  # noqa: F403
from sadl_layers.modules.rotary import *  # noqa: F403
from sadl_layers.ops import OPS
from sadl_layers.ops.activations import *  # noqa: F403
from sadl_layers.ops.attention import *  # noqa: F403
from sadl_layers.ops.batchnorm import *  # noqa: F403
from sadl_layers.ops.binary import *  # noqa: F403
from sadl_layers.ops.classification import *  # noqa: F403
from sadl_layers.ops.contractions import *  # noqa: F403
from sadl_layers.ops.conv import *  # noqa: F403
from sadl_layers.ops.dense import *  # noqa: F403
from sadl_layers.ops.grouped import *  # noqa: F403
from sadl_layers.ops.layout import *  # noqa: F403
from sadl_layers.ops.losses import *  # noqa: F403
from sadl_layers.ops.normalization import *  # noqa: F403
from sadl_layers.ops.piecewise import *  # noqa: F403
from sadl_layers.ops.pooling import *  # noqa: F403
from sadl_layers.ops.recurrent import *  # noqa: F403
from sadl_layers.ops.resize import *  # noqa: F403
from sadl_layers.ops.rotary import *  # noqa: F403
from sadl_layers.ops.scatter_gather import *  # noqa: F403
from sadl_layers.ops.selection import *  # noqa: F403
from sadl_layers.ops.tensor_ops import *  # noqa: F403
from sadl_layers.ops.volume import *  # noqa: F403

try:
    __version__ = _dist_version("sadl-layers")
except PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0.0.0+unknown"

# The names of every layer class and op, as their modules list them (one list each).
__all__ = ["init", *LAYERS, *(op.name for op in OPS), "checkpoint"]
