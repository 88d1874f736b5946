"""``sadl.models``: build registered models by name (``sadl.models.create("gpt", n_layer=2)``)."""

from __future__ import annotations

from typing import Any

from sadl._host import registry
from sadl._namespace import RegistryNamespace

__all__ = ["create", "default_config", "names"]


def default_config(name: str) -> dict[str, Any]:
    """The default keyword arguments of model ``name``."""
    return dict(registry().lookup("models", name).config or {})


def create(name: str, **config: Any) -> Any:
    """Build model ``name`` from its default config updated with ``config``."""
    record = registry().lookup("models", name)
    return record.factory(**{**(record.config or {}), **config})


_namespace = RegistryNamespace("models", globals(), "factory")
__getattr__ = _namespace.getattr
__dir__ = _namespace.dir
names = _namespace.names
