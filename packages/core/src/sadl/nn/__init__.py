"""``sadl.nn``: ``Module``/``Function``, ``Parameter`` and every registered layer class.

Layers come from plugins (sadl-layers registers ``Linear``, ``LayerNorm``, ...; sadl-models
registers ``GPT``). Attribute access loads the plugins on first use.
"""

from __future__ import annotations

from typing import Any

from sadl.nn.module import Function, IncompatibleKeys, Module
from sadl.tensor import Parameter

__all__ = ["Function", "IncompatibleKeys", "Module", "Parameter", "names"]


def names() -> list[str]:
    """Sorted names of every registered layer class."""
    from sadl.plugins.manager import registry

    return sorted(registry().records("layers"))


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from sadl.plugins.manager import registry

    return registry().lookup("layers", name).cls


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(names()))
