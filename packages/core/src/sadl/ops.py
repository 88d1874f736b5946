"""``sadl.ops.<name>``: every registered op, core's and the plugins', as a callable.

Core's own ops are defined in ``sadl._ops`` (one file per family) and registered through the same
``register_ops`` hook as any plugin's. Attribute access loads the plugins on first use;
``dir(sadl.ops)`` lists every op name.
"""

from __future__ import annotations

from sadl._host import registry
from sadl._namespace import namespace
from sadl._records import OpDef

__all__ = ["OpDef", "get", "names"]


def get(name: str) -> OpDef:
    """The registered op called ``name`` (raises with a hint naming the package if missing).

    >>> import sadl
    >>> op = sadl.ops.get("tanh")
    >>> op(sadl.tensor([0.0]))
    Tensor([0.])
    """
    op: OpDef = registry().lookup("ops", name)
    return op


names, __getattr__, __dir__ = namespace("ops", globals(), None)
