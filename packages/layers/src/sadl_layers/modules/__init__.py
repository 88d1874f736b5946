"""The layer classes of sadl-layers (``torch.nn`` names, parameter names and shapes).

Each module here lists its layer classes in ``__all__``; that list is the only place their names
are written. ``LAYERS`` gathers them for the ``register_layers`` hook (``sadl.nn.<Name>``,
``sadl.<Name>``), and they are importable from here and from ``sadl_layers``.
"""

from __future__ import annotations

from sadl_layers.modules import (
    activations,
    attention,
    composites,
    containers,
    conv,
    dense,
    grouped,
    losses,
    normalization,
    pooling,
    recurrent,
    resize,
    rotary,
)
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

_TABLES = (
    containers,
    dense,
    normalization,
    grouped,
    activations,
    attention,
    rotary,
    conv,
    pooling,
    resize,
    recurrent,
    losses,
    composites,
)

#: Registered name -> class (``Mlp`` is ``Sequential`` under SADL's name).
LAYERS: dict[str, type] = {
    name: getattr(table, name) for table in _TABLES for name in table.__all__
}

__all__ = ["LAYERS", *LAYERS]
