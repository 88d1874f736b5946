"""``sadl.models``: build registered models by name (``sadl.models.create("gpt", n_layer=2)``)."""

from __future__ import annotations

from typing import Any

__all__ = ["create", "default_config", "names"]


def names() -> list[str]:
    """Sorted names of every registered model."""
    from sadl.plugins.manager import registry

    return sorted(registry().records("models"))


def default_config(name: str) -> dict[str, Any]:
    """The default keyword arguments of model ``name``."""
    from sadl.plugins.manager import registry

    return dict(registry().lookup("models", name).config or {})


def create(name: str, **config: Any) -> Any:
    """Build model ``name`` from its default config updated with ``config``."""
    from sadl.plugins.manager import registry

    record = registry().lookup("models", name)
    return record.factory(**{**(record.config or {}), **config})


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from sadl.plugins.manager import registry

    return registry().lookup("models", name).factory


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(names()))
