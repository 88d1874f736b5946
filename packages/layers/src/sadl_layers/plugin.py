"""The sadl plugin module of sadl_layers (entry point ``layers`` in the group ``sadl.plugins``).

It registers the fused ops (``sadl.ops.cross_entropy``, ``sadl.ops.conv2d``, ...) and the layer
classes (``sadl.nn.Linear``, ``sadl.Linear``, ...) through the same hooks any plugin uses.
"""

from __future__ import annotations

from collections.abc import Iterable

from sadl.plugins import LayerDef, OpDef, hookimpl, require_api

require_api("1.0")


@hookimpl
def register_ops() -> Iterable[OpDef]:
    """The public ops of :mod:`sadl_layers.ops`."""
    from sadl_layers.ops import OPS

    return OPS


@hookimpl
def register_layers() -> Iterable[LayerDef]:
    """Every layer class of :mod:`sadl_layers.modules` (``Mlp`` is ``Sequential``)."""
    from sadl_layers.modules import LAYERS
    from sadl_layers.modules.examples import EXAMPLES

    return [LayerDef(name, cls, EXAMPLES.get(name, ())) for name, cls in LAYERS.items()]
