"""The op tables of sadl-layers: one ``OpDef`` record per op, forward beside backward.

Each table module lists its public ops in ``__all__``; that list is the only place their names
are written. ``OPS`` gathers them for the ``register_ops`` hook (``sadl.ops.<name>``), and they
are importable from here (``from sadl_layers.ops import cross_entropy``) and from
``sadl_layers``. Calling an op applies it: Tensors in, a Tensor on the autograd graph out;
arrays in, an array out.

``INTERNAL_OPS`` are the backward ops of the fused ops (``gelu_backward``,
``conv2d_input_grad``, ...): real ops with their own gradients, so that differentiating a
gradient works, but not registered as public names.
"""

from __future__ import annotations

from sadl.plugins import OpDef

from sadl_layers.ops import (
    _softmax,
    activations,
    attention,
    batchnorm,
    binary,
    classification,
    contractions,
    conv,
    dense,
    grouped,
    layout,
    losses,
    normalization,
    piecewise,
    pooling,
    recurrent,
    resize,
    rotary,
    scatter_gather,
    selection,
    tensor_ops,
    volume,
)
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

_TABLES = (
    classification,
    losses,
    activations,
    piecewise,
    normalization,
    batchnorm,
    grouped,
    dense,
    attention,
    rotary,
    conv,
    pooling,
    resize,
    recurrent,
    scatter_gather,
    selection,
    layout,
    binary,
    contractions,
    volume,
    tensor_ops,
    _softmax,
)

OPS: tuple[OpDef, ...] = tuple(getattr(table, name) for table in _TABLES for name in table.__all__)
INTERNAL_OPS: tuple[OpDef, ...] = tuple(op for table in _TABLES for op in table.INTERNAL_OPS)

__all__ = ["INTERNAL_OPS", "OPS", *(op.name for op in OPS)]
