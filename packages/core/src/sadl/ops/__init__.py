"""``sadl.ops.<name>``: every registered op, core's and the plugins', as a callable.

Core's own ops are defined in the modules of this package (one file per family) and registered
through the same ``register_ops`` hook as any plugin's. Attribute access loads the plugins on
first use; ``dir(sadl.ops)`` lists every op name.
"""

from __future__ import annotations

from typing import Any

from sadl.plugins.namespace import RegistryNamespace
from sadl.plugins.records import OpDef

__all__ = ["OpDef", "get", "names"]


def get(name: str) -> OpDef:
    """The registered op called ``name`` (raises with a hint naming the package if missing)."""
    from sadl.plugins.manager import registry

    op: OpDef = registry().lookup("ops", name)
    return op


_SUBMODULES = frozenset(
    {
        "activations",
        "arithmetic",
        "elementwise",
        "indexing",
        "linalg",
        "nondifferentiable",
        "reductions",
        "shapes",
        "special",
        "_rules",
    }
)


_namespace = RegistryNamespace("ops", globals(), None)
names = _namespace.names
__dir__ = _namespace.dir


def __getattr__(name: str) -> Any:
    # A submodule not yet imported must reach the import system, not the registry.
    if name in _SUBMODULES:
        raise AttributeError(name)
    return _namespace.getattr(name)
