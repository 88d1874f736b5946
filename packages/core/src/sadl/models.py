"""``sadl.models``: registered models by registry name or by class name.

``sadl.models.create("gpt", n_layer=2)`` builds a model from its default config;
``sadl.models.gpt`` is its factory and ``sadl.models.GPT`` (the class name users type, as in
``from transformers import GPT2Model``) is the same class.
"""

from __future__ import annotations

from typing import Any

from sadl._host import registry
from sadl._plugin_records import ModelDef

__all__ = ["create", "default_config", "names"]


def _record(name: str) -> ModelDef:
    """The model registered as ``name``, or whose factory class is called ``name``."""
    records: dict[str, ModelDef] = registry().records("models")
    found = records.get(name)
    if found is not None:
        return found
    for record in records.values():
        if isinstance(record.factory, type) and record.factory.__name__ == name:
            return record
    return registry().lookup("models", name)  # type: ignore[no-any-return]  # raises, with a hint


def default_config(name: str) -> dict[str, Any]:
    """The default keyword arguments of model ``name`` (registry name or class name)."""
    return dict(_record(name).config or {})


def create(name: str, **config: Any) -> Any:
    """Build model ``name`` (registry name or class name) from its defaults updated with config."""
    record = _record(name)
    return record.factory(**{**(record.config or {}), **config})


def names() -> list[str]:
    """Registry names and, for factories that are classes, class names."""
    records: dict[str, ModelDef] = registry().records("models")
    classes = {r.factory.__name__ for r in records.values() if isinstance(r.factory, type)}
    return sorted(set(records) | classes)


def __getattr__(name: str) -> Any:
    """``sadl.models.<name>``: the factory of a registered model (a class, for most)."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _record(name).factory


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(names()))
